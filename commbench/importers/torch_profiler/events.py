"""A profiler trace's events, and the small readers both import paths share: numbers in ns,
dtypes, rank lists, a call's group, "event N (name at ts)" for messages. No torch."""

from __future__ import annotations

from dataclasses import dataclass

from commbench.importers.common import fail
from commbench.results.trace import ITEMSIZES, Group

# c10 ScalarType names (record_param_comms "dtype") and C++ type names (recorded shapes'
# "Input type") -> torch's dtype names, as the trace format spells them.
DTYPES = {
    "Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16",
    "Int": "int32", "Long": "int64", "Short": "int16", "Char": "int8", "Byte": "uint8",
    "Bool": "bool", "ComplexFloat": "complex64", "Float8_e4m3fn": "float8_e4m3",
    "Float8_e5m2": "float8_e5m2",
    "float": "float32", "double": "float64", "c10::Half": "float16",
    "c10::BFloat16": "bfloat16", "int": "int32", "long int": "int64", "long": "int64",
    "short int": "int16", "signed char": "int8", "unsigned char": "uint8", "bool": "bool",
    "c10::complex<float>": "complex64", "c10::Float8_e4m3fn": "float8_e4m3",
    "c10::Float8_e5m2": "float8_e5m2",
}


@dataclass
class Event:
    """One complete ("ph": "X") event of the trace."""

    index: int  # position in traceEvents, for messages
    name: str
    ts_us: float
    dur_us: float
    tid: object
    args: dict

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us


def load_events(raw: list, source: str) -> list[Event]:
    events = []
    for index, event in enumerate(raw):
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        try:
            ts, dur = float(event["ts"]), float(event.get("dur", 0))
        except (KeyError, TypeError, ValueError):
            raise fail(source, None, f"event {index} ({event.get('name')!r}): no numeric ts "
                       "and dur") from None
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        events.append(Event(index, str(event.get("name", "")), ts, dur,
                             event.get("tid"), args))
    events.sort(key=lambda e: (e.ts_us, e.index))
    return events


def ns(us: float) -> int:
    return round(us * 1000)


def where(event: Event) -> str:
    return f"event {event.index} ({event.name} at ts {event.ts_us:.3f})"


def int_arg(event: Event, key: str, source: str) -> int:
    value = event.args.get(key)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise fail(source, None, f"{where(event)}: {key!r} is {value!r}, not a whole "
                   "number") from None


def dtype_of(name: object, event: Event, source: str) -> str:
    dtype = DTYPES.get(str(name))
    if dtype is None or dtype not in ITEMSIZES:
        raise fail(source, None, f"{where(event)}: dtype {name!r} is not one commbench knows")
    return dtype


def int_list(value: object) -> list[int] | None:
    """[1, 2], "[1, 2]", "" -> list; a list cut with '...' (long groups) -> None."""
    if value is None:
        return []
    if isinstance(value, list):
        items = value
    else:
        text = str(value).strip().strip("[]")
        if "..." in text:
            return None
        items = [item for item in text.split(",") if item.strip()]
    try:
        return [int(item) for item in items]
    except (TypeError, ValueError):
        return None


def group_of(event: Event, groups: dict[str, Group], info: dict, source: str) -> str:
    """The call's group, added to ``groups`` when the header did not list it."""
    args = event.args
    name = str(args.get("Process Group Name", "0"))
    if name in groups:
        return name
    ranks = int_list(args.get("Process Group Ranks"))
    if not ranks and "Group size" in args:
        start = int(args.get("Global rank start", 0))
        stride = int(args.get("Global rank stride", 1)) or 1
        ranks = list(range(start, start + stride * int(args["Group size"]), stride))
    if not ranks:
        raise fail(source, None, f"{where(event)}: group {name!r} has no ranks in the trace")
    groups[name] = Group(name=name, ranks=tuple(ranks), backend=str(info.get("backend", "")),
                         desc=str(args.get("Process Group Description", "")))
    return name


def to_global(group: Group, group_rank: int | None) -> int | None:
    if group_rank is None or not 0 <= group_rank < len(group.ranks):
        return group_rank
    return group.ranks[group_rank]
