"""nccl-tests' JSON output (``-J``): format 1 from 2.17.3, 2 adds the ``*_per_iter`` objects at
2.19.2, 3 adds the skipped iterations at 2.19.6 (util.cu's hand-written writer).

One object: ``args`` (the command line: the binary, ``-a``), ``env`` (the environment, as
``NAME=value`` strings: alltoallv_perf's pattern is set there), ``nccl_version``, ``config`` (with
``devices``), ``results`` (one per size: ``root`` as a padded string, ``out_of_place`` /
``in_place`` with ``time`` or ``cpu_time``, ``alg_bw``, ``bus_bw``, ``nwrong`` = null when
unchecked), the trailer objects. The writer's quirks: booleans are the strings "true"/"false",
NaN is the string "nan", infinities are bare (not JSON), and before 2.17.9 two keys are
misspelled: ``average_bus_bandwidith`` / ``bandwidith``. The file is one line, so errors name
the entry (``results[3].in_place``) rather than a line.

With ``-I 1`` each half has a ``*_per_iter`` object (util.cu's writePerIterReport): its
statistics, ``times_us`` (every iteration, the slowest process's time; the first
``skipped_iterations`` (-K) are warm-up) and, with several processes,
``per_process_max_times_us``. The kept iterations become the row's samples, and its per-call
columns (p95, CV, spikes, stragglers: core.percall) come from them.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np

from commbench.core.percall import call_stats
from commbench.importers.common import Timing, fail
from commbench.importers.nccl_tests.model import (
    AVERAGE,
    HALF_NAMES,
    Half,
    Result,
    Section,
    nccl_version,
    usable,
)

KNOWN_VERSION = 3


def _load_json(text: str, source: str):
    """json.loads, but nccl-tests writes infinities bare (``%lf``): quote them where the parser
    stops on one, never inside a string."""
    for _ in range(10_000):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            bare = re.match(r"-?(inf|nan)\b", text[error.pos:], re.IGNORECASE)
            if not bare:
                raise fail(source, error.lineno, f"not valid JSON ({error.msg}, column "
                                                 f"{error.colno}): a run cut short?") from None
            text = text[: error.pos] + f'"{bare.group(0)}"' + text[error.pos + bare.end():]
    raise fail(source, None, "not valid JSON")


def read_json(text: str, source: str) -> tuple[list[Section], dict]:
    document = _load_json(text, source)
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        raise fail(source, None, "not nccl-tests -J output (no 'results' list)")
    version = document.get("version")
    meta: dict = {"format": "json", "json_version": version,
                  "start_time_local": document.get("start_time"),
                  "end_time_local": document.get("end_time")}
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise fail(source, None, "'config' is not an object")
    args = [str(a) for a in document.get("args") or []]
    section = Section(line=1, program=args[0] if args else "", program_line=1)
    section.nccl = nccl_version(_json_int(document.get("nccl_version"), source, "nccl_version"))
    section.iters = _json_int(config.get("iterations"), source, "config.iterations")
    section.agg_iters = _json_int(config.get("aggregated_iterations", 1), source,
                                  "config.aggregated_iterations") or 1
    section.validation = _json_int(config.get("validation"), source, "config.validation")
    section.graph = _json_int(config.get("graph"), source, "config.graph")
    section.rank_time = AVERAGE.get(_option(args, "-a", "--average", 1), "avg")
    for index, device in enumerate(config.get("devices") or []):
        if not isinstance(device, dict):
            raise fail(source, None, f"config.devices[{index}] is not an object")
        section.ranks.append({
            "rank": _json_int(device.get("rank"), source, f"config.devices[{index}].rank"),
            "group": _json_int(device.get("group"), source, f"config.devices[{index}].group"),
            "pid": device.get("pid"), "host": str(device.get("hostname", "")),
            "device": device.get("device"), "bus_id": device.get("device_hex"),
            "gpu": device.get("device_info"),
        })
    if isinstance(document.get("env"), list):  # "NAME=value" strings, as the tool saw them
        section.env_known = True
        section.env = dict(str(e).split("=", 1) for e in document["env"] if "=" in str(e))
    meta["blocking"] = _json_bool(config.get("blocking_collectives", False), source,
                                  "config.blocking_collectives")
    if isinstance(version, int) and version > KNOWN_VERSION:
        section.notes.append(f"JSON format {version} is newer than the {KNOWN_VERSION} this "
                             "importer was written for: read as that one")
    for index, result in enumerate(document["results"]):
        section.results.append(_json_result(result, index, source, section))
    bandwidth = document.get("average_bus_bandwidth", document.get("average_bus_bandwidith"))
    if isinstance(bandwidth, dict):
        value = bandwidth.get("bandwidth", bandwidth.get("bandwidith"))
        section.avg_busbw = _json_number(value, source, "average_bus_bandwidth") if (
            value is not None) else None
    bounds = document.get("out_of_bounds")
    if isinstance(bounds, dict) and bounds.get("count") is not None:
        section.out_of_bounds = _json_int(bounds.get("count"), source, "out_of_bounds.count")
    if isinstance(document.get("errors"), list) and document["errors"]:
        meta["tool_errors"] = [str(e) for e in document["errors"]]
    return [section], meta


def _option(args: list[str], short: str, long: str, default: int) -> int:
    """An integer option of the recorded command line (``-a 2``, ``-a2``, ``--average=2``)."""
    value = None
    for index, arg in enumerate(args):
        if arg in (short, long) and index + 1 < len(args):
            value = args[index + 1]
        elif arg.startswith(long + "="):
            value = arg.split("=", 1)[1]
        elif arg.startswith(short) and len(arg) > len(short) and not arg.startswith("--"):
            value = arg[len(short):]
    try:
        return int(value, 0) if value is not None else default
    except ValueError:
        return default


def _json_result(result, index: int, source: str, section: Section) -> Result:
    where = f"results[{index}]"
    if not isinstance(result, dict):
        raise fail(source, None, f"{where} is not an object")
    for key in ("size", "count", "type", "redop", "root"):
        if key not in result:
            raise fail(source, None, f"{where} has no {key!r}")
    halves = []
    for key, inplace in (("out_of_place", False), ("in_place", True)):
        body = result.get(key)
        if body is None:
            continue  # nccl-tests writes null for a half it did not run
        if not isinstance(body, dict):
            raise fail(source, None, f"{where}.{key} is not an object")
        time_key = "cpu_time" if "cpu_time" in body else "time"
        if time_key == "cpu_time":
            section.timer = "host-cputime"  # -C 1
        if time_key not in body:
            raise fail(source, None, f"{where}.{key} has no 'time'")
        time_us = _json_number(body[time_key], source, f"{where}.{key}.{time_key}")
        if time_us < 0:
            raise fail(source, None, f"{where}.{key}.{time_key} is {time_us}, below 0")
        wrong = body.get("nwrong")
        wrong = None if wrong is None else _json_number(wrong, source, f"{where}.{key}.nwrong")
        wrong = None if wrong is None or math.isnan(wrong) else int(wrong)
        timing = Timing(time_us=time_us)
        per_iter = result.get(f"{key}_per_iter")
        if not usable(time_us):
            timing = None
            section.notes.append(f"{where}: the {HALF_NAMES[inplace]} time is "
                                 f"{body[time_key]}: skipped")
        elif isinstance(per_iter, dict):
            timing = _json_per_iter(per_iter, time_us, source, f"{where}.{key}_per_iter")
        halves.append(Half(inplace=inplace, timing=timing, wrong=wrong))
    root_text = str(result["root"]).strip()
    try:
        root = int(root_text)
    except ValueError:
        raise fail(source, None, f"{where}.root {result['root']!r} is not a rank") from None
    return Result(
        line=None,
        where=where,
        size=_json_int(result["size"], source, f"{where}.size"),
        count=_json_int(result["count"], source, f"{where}.count"),
        type_name=str(result["type"]),
        redop=str(result["redop"]),
        root=root,
        halves=halves,
    )


def _json_per_iter(body: dict, time_us: float, source: str, where: str) -> Timing:
    def number(key):
        """A statistic, or None where absent or not finite (nccl-tests writes "nan")."""
        if key not in body:
            return None
        value = _json_number(body[key], source, f"{where}.{key}")
        return value if math.isfinite(value) else None

    times = [_json_number(t, source, f"{where}.times_us") for t in body.get("times_us") or []]
    skipped = _json_int(body.get("skipped_iterations", 0), source, f"{where}.skipped_iterations")
    kept = [t for t in times[skipped:] if math.isfinite(t)]
    p10 = p90 = None
    per_call: dict = {}
    if kept:
        p10, p90 = (float(v) for v in np.percentile(kept, [10, 90]))
        stats = call_stats(kept, _per_process(body, len(times), skipped, source, where))
        per_call = stats.as_columns()
        # What the tool printed, where it did (its p95 is nearest-rank, as its p99)
        for column, key in (("lat_us_p95", "p95_us"), ("cv_pct", "cv_pct")):
            if number(key) is not None:
                per_call[column] = number(key)
    return Timing(time_us=time_us, min_us=number("min_us"), max_us=number("max_us"),
                  p10_us=p10, p90_us=p90, p99_us=number("p99_us"), std_us=number("stdev_us"),
                  tail="call", samples_us=kept, per_call=per_call)


def _per_process(body: dict, iterations: int, skipped: int, source: str,
                 where: str) -> np.ndarray | None:
    """``per_process_max_times_us`` (2.19.2+, several processes): each process's time of each
    iteration (the slowest of its GPUs), the skipped ones left out; None where absent. Only
    durations: the process with the longest iteration stands in for the one the others
    waited for (core.percall), and rows are processes, which are ranks with -g 1."""
    rows = body.get("per_process_max_times_us")
    if not isinstance(rows, list) or not rows:
        return None
    values = []
    for index, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != iterations:
            raise fail(source, None, f"{where}.per_process_max_times_us[{index}] is not a "
                                     f"list of {iterations} times")
        values.append([_json_number(t, source, f"{where}.per_process_max_times_us[{index}]")
                       for t in row[skipped:]])
    return np.asarray(values, dtype=np.float64)


def _json_number(value, source: str, where: str) -> float:
    """A JSON number, or the strings nccl-tests writes for NaN and infinities."""
    if isinstance(value, bool):
        raise fail(source, None, f"{where} is {value!r}, not a number")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)  # "nan", "inf", "-inf"
        except ValueError:
            pass
    raise fail(source, None, f"{where} is {value!r}, not a number")


def _json_int(value, source: str, where: str) -> int:
    if value is None:
        return 0
    number = _json_number(value, source, where)
    if not math.isfinite(number) or number != int(number):
        raise fail(source, None, f"{where} is {value!r}, not a whole number")
    return int(number)


def _json_bool(value, source: str, where: str) -> bool:
    """nccl-tests writes booleans as the strings "true" and "false"."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, (int, float)):
        return bool(value)
    raise fail(source, None, f"{where} is {value!r}, not true or false")
