"""``commbench compare`` of two locate runs: per-entity and per-link levels before and after,
and what each verdict became (repaired, still bad, new). ``compare`` hands over when every
folder it is given is a locate run."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from commbench.core.errors import EXIT_FINDING, EXIT_OK, UsageError


def is_locate_run(path: str) -> bool:
    folder = Path(path)
    return (folder / "pairs.jsonl").is_file() and (folder / "entities.csv").is_file()


def _load(path: str) -> dict:
    import csv

    from commbench.commands.locate import read_pairs
    from commbench.results import read_meta

    folder = Path(path)
    meta = read_meta(folder)
    names = [e["name"] for e in meta.get("entities", [])]
    with open(folder / "entities.csv") as handle:
        verdicts = {row["entity"]: row["verdict"] for row in csv.DictReader(handle)}
    return {"records": read_pairs(folder), "names": names, "verdicts": verdicts,
            "level": (meta.get("entities") or [{}])[0].get("kind", "?")}


def run_locate_compare(paths: list[str], json_rows: bool, fail_on_regression: bool) -> int:
    from commbench.compare.locate import compare
    from commbench.output.locate import compare_lines

    if len(paths) != 2:
        raise UsageError("compare of locate runs takes two folders: BEFORE AFTER")
    before, after = (_load(p) for p in paths)
    if before["level"] != after["level"]:
        raise UsageError(f"{paths[0]} is at {before['level']} level and {paths[1]} at "
                         f"{after['level']}: their entities cannot be paired")
    rows = compare(before, after)
    if json_rows:
        for row in rows:
            print(json.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                              for k, v in row.items()}))
    else:
        for line in compare_lines(rows, paths):
            print(line)
    worse = [r for r in rows if r["change"] in ("new", "still bad")]
    if worse:
        print(f"warning: {len(worse)} entit(ies) or link(s) bad in {paths[1]}: "
              + ", ".join(f"{r['entity']} ({r['change']})" for r in worse), file=sys.stderr)
    return EXIT_FINDING if worse and fail_on_regression else EXIT_OK
