"""Run folders for the history tests, made from the stored fixture run ``tests/fixtures/base``
(2 gloo ranks, allreduce and allgather at 8 B - 1 MiB): its rows with every latency scaled,
under a chosen name, start time and status, as a nightly job would leave them."""

from __future__ import annotations

import csv
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
BASE = FIXTURES / "base"
LATENCY_FIELDS = ("lat_us_p50", "lat_us_min", "lat_us_mean", "lat_us_p90", "lat_us_p99",
                  "lat_us_max", "lat_us_ci_lo", "lat_us_ci_hi", "lat_us_p10")
FIRST_NIGHT = datetime(2026, 11, 1, 2, 0, tzinfo=timezone.utc)


def night(number: int) -> str:
    return (FIRST_NIGHT + timedelta(days=number)).isoformat(timespec="seconds")


def make_run(root: Path, name: str, start: str, scale: float = 1.0, status: str = "complete",
             hosts: tuple[str, ...] = ("ci-runner",), ops: tuple[str, ...] | None = None,
             sizes: tuple[int, ...] | None = None) -> Path:
    """A sweep run folder: base's rows, latencies x scale, bandwidths / scale."""
    folder = Path(root) / name
    folder.mkdir(parents=True)
    rows = []
    for line in (BASE / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        if (ops and row["op"] not in ops) or (sizes and row["size_bytes"] not in sizes):
            continue
        for field in LATENCY_FIELDS:
            row[field] *= scale
        row["samples_us"] = [value * scale for value in row.get("samples_us", [])]
        row["busbw_gbps"] /= scale
        row["algbw_gbps"] /= scale
        rows.append(row)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    meta = json.loads((BASE / "run.json").read_text())
    meta.update(name=name, status=status, start_time=start, hosts=list(hosts),
                error=None if status == "complete" else "rank 1 died")
    (folder / "run.json").write_text(json.dumps(meta, indent=2))
    return folder


def make_locate_run(root: Path, name: str, start: str, ratios: dict[str, float],
                    status: str = "complete") -> Path:
    """A locate run folder as commands/locate.py leaves it: run.json, pairs.jsonl, entities.csv."""
    folder = Path(root) / name
    folder.mkdir(parents=True)
    meta = {"format_version": "1.2", "name": name, "command": "locate", "status": status,
            "start_time": start, "world_size": len(ratios), "hosts": sorted(ratios),
            "backends": ["gloo"], "config": {"level": "node"},
            "versions": {"torch": "2.13.0+cpu", "commbench": "0.1.0"}}
    (folder / "run.json").write_text(json.dumps(meta))
    (folder / "pairs.jsonl").write_text(json.dumps({"round": 0, "a": 0, "b": 1}) + "\n")
    with (folder / "entities.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["entity", "kind", "host", "ranks", "partners", "busbw_ratio", "busbw_z",
                         "lat_ratio", "lat_z", "votes", "confirmed", "verdict"])
        for rank, (entity, ratio) in enumerate(sorted(ratios.items())):
            writer.writerow([entity, "node", entity, rank, len(ratios) - 1, ratio, 0.0,
                             1.0, 0.0, "0/3", "", "ok" if ratio > 0.8 else "bad"])
    return folder


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


# --routing as run.json's config holds it (a measured run writes the parsed Routing as an
# object; an option not given is null, the default routing: uniform).
ROUTING_OPTIONS = {
    "uniform": None,
    "zipf:1.2": {"kind": "zipf", "exponent": 1.2, "hot": 0, "share": 0.0, "path": "",
                 "matrix": []},
}


def make_alltoallv_run(root: Path, name: str, start: str, routing: str, split_id: str,
                       imbalance: float, scale: float = 1.0,
                       sizes: tuple[int, ...] | None = None) -> Path:
    """An alltoallv run folder as `commbench alltoallv --routing ROUTING` leaves it: base's
    allgather rows (latencies x scale) as dispatch rows naming the split matrix ``split_id``,
    and run.json's config holding the routing among the op's options."""
    folder = make_run(root, name, start, scale, ops=("allgather",), sizes=sizes)
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    for row in rows:
        row.update(op="alltoallv", pattern="dispatch", inplace=False, rank_time="max",
                   split_id=split_id, imbalance=imbalance,
                   max_rank_bytes=round(row["size_bytes"] * imbalance))
        row["busbw_gbps"] = row["algbw_gbps"] * imbalance / 2  # n = 2: (n-1)/n = 1/2
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    meta = json.loads((folder / "run.json").read_text())
    meta["command_line"] = ["commbench", "alltoallv", "--routing", routing]
    meta["config"] = {"dtype": "float32", "op_options": [
        ["routing", ROUTING_OPTIONS[routing]], ["experts", 8], ["topk", 2], ["tokens", 4096],
        ["hidden", None], ["combine", False], ["routing_seed", 0]]}
    (folder / "run.json").write_text(json.dumps(meta, indent=2))
    (folder / f"splits-{split_id}.csv").write_text(
        f"# alltoallv split weights {split_id}: --routing {routing}, 2 ranks\n")
    return folder
