"""Run folders derived from the stored fixtures (tests/fixtures) for the gate's tests: every
time, interval and raw sample scaled by a factor, under a new name and start time."""

import json
from pathlib import Path

FIXTURES = Path(__file__).parents[2] / "fixtures"


def scaled_run(folder: Path, name: str, factor: float, base: str = "base",
               start: str = "2026-11-30T00:00:00+00:00", meta: dict | None = None) -> str:
    source = FIXTURES / base
    rows = [json.loads(line) for line in (source / "results.jsonl").read_text().splitlines()]

    def change(row: dict) -> dict:
        times = {k: v * factor for k, v in row.items() if k.startswith("lat_us_")}
        return {**row, **times, "algbw_gbps": row["algbw_gbps"] / factor,
                "busbw_gbps": row["busbw_gbps"] / factor,
                "samples_us": [v * factor for v in row["samples_us"]]}

    target = folder / name
    target.mkdir(parents=True)
    (target / "results.jsonl").write_text("".join(json.dumps(change(r)) + "\n" for r in rows))
    found = json.loads((source / "run.json").read_text())
    (target / "run.json").write_text(json.dumps({**found, "name": name, "start_time": start,
                                                 **(meta or {})}))
    return str(target)
