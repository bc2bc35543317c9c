"""Results: the row schema, the run folder (JSONL streamed row by row, CSV, run.json, summary,
plots) and loading them back. Nothing here imports torch, so compare and report stay light."""
