"""The run folder and its formats: the row schema, results.jsonl / results.csv / run.json, the
one loader. Nothing here imports torch, so compare, report and the analysis commands stay light.
"""

from commbench.results.folder import (
    BANDWIDTH_PNG,
    CSV,
    JSONL,
    LATENCY_PNG,
    RUN_JSON,
    SUMMARY,
    NotASweep,
    Run,
    RunWriter,
    create,
    finalize,
    folder_kind,
    load_run,
    meta_value,
    now,
    read_meta,
    read_rows,
    rows_frame,
    run_id,
)

__all__ = [
    "BANDWIDTH_PNG",
    "CSV",
    "JSONL",
    "LATENCY_PNG",
    "RUN_JSON",
    "SUMMARY",
    "NotASweep",
    "Run",
    "RunWriter",
    "create",
    "finalize",
    "folder_kind",
    "load_run",
    "meta_value",
    "now",
    "read_meta",
    "read_rows",
    "rows_frame",
    "run_id",
]
