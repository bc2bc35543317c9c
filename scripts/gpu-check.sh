#!/usr/bin/env bash
# The GPU checks, in one call, on a machine with CUDA and no network (about 5 minutes).
# It has torch, typer, pandas, matplotlib and rich; commbench is installed without dependencies.
#   bash scripts/gpu-check.sh [OUT]     (OUT: where logs and results go; default results/gpu)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-results/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
status=0

echo "== environment"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
$PY -m pip install --quiet --no-deps --no-build-isolation -e . >"$OUT/pip.log" 2>&1 \
  || { echo "pip install failed, using PYTHONPATH"; export PYTHONPATH=$PWD; }

echo "== commbench doctor (nccl)"
timeout 120 $PY -m commbench doctor --nproc 1 --backend nccl || status=1

echo "== GPU tests"
if $PY -c "import pytest" 2>/dev/null; then
  timeout 300 $PY -m pytest -q -m gpu tests/gpu -p no:cacheprovider -o addopts="" 2>&1 \
    | tee "$OUT/pytest.log" | tail -n 15
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  echo "pytest is not installed here: the CLI runs below cover the same paths"
fi

echo "== NCCL sweep 8 B - 1 GiB (1 rank), every op checked"
timeout 240 $PY -m commbench run --ops allreduce,allgather,reduce-scatter,alltoall,broadcast \
  --backend nccl --nproc 1 --sizes 8-1G --min-time 0.1 --out "$OUT" --name nccl-sweep --quiet \
  >"$OUT/nccl-sweep.log" 2>&1 || { status=1; tail -n 5 "$OUT/nccl-sweep.log"; }

echo "== CUDA graphs and host-clock timing, allreduce 8 B - 1 GiB"
timeout 120 $PY -m commbench allreduce --backend nccl --nproc 1 --sizes 8-1G --min-time 0.1 \
  --cuda-graph --out "$OUT" --name nccl-graph --quiet >"$OUT/nccl-graph.log" 2>&1 || status=1
timeout 120 $PY -m commbench allreduce --backend nccl --nproc 1 --sizes 8-1G --min-time 0.1 \
  --host-timer --out "$OUT" --name nccl-host --quiet >"$OUT/nccl-host.log" 2>&1 || status=1

echo "== gloo with CUDA tensors, 2 ranks sharing the GPU"
timeout 120 $PY -m commbench run --ops allreduce,broadcast --backend gloo --device cuda \
  --nproc 2 --sizes 8-64M --min-time 0.1 --out "$OUT" --name gloo-cuda --quiet \
  >"$OUT/gloo-cuda.log" 2>&1 || { status=1; tail -n 5 "$OUT/gloo-cuda.log"; }

echo "== compact table (median us; busbw GB/s)"
$PY - "$OUT" <<'PY'
import json, sys
from pathlib import Path
from commbench.sizes import format_size
runs = ["nccl-sweep", "nccl-graph", "nccl-host", "gloo-cuda"]
rows = {}
for run in runs:
    path = Path(sys.argv[1]) / run / "results.jsonl"
    if not path.exists():
        print(f"{run}: no results"); continue
    for line in path.read_text().splitlines():
        r = json.loads(line)
        rows.setdefault((r["op"], r["size_bytes"]), {})[run] = r
print(f"{'op':<15}{'size':>6}" + "".join(f"{run:>22}" for run in runs))
for (op, size), by_run in sorted(rows.items()):
    if size not in (8, 1 << 10, 1 << 16, 1 << 20, 16 << 20, 64 << 20, 1 << 30):
        continue
    cells = [f"{by_run[r]['lat_us_p50']:>10.1f} {by_run[r]['busbw_gbps']:>9.2f}{'!' if by_run[r]['wrong'] else ' '}"
             if r in by_run else f"{'-':>22}" for r in runs]
    print(f"{op:<15}{format_size(size):>6}" + "".join(f"{c:>22}" for c in cells))
wrong = sum(r["wrong"] for by_run in rows.values() for r in by_run.values())
print(f"wrong elements: {wrong}")
sys.exit(1 if wrong else 0)
PY
[ $? -eq 0 ] || status=1
echo "== gpu-check: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
