#!/usr/bin/env bash
# The GPU checks, in one call, on one CUDA machine without network (about 5 minutes, at most 8).
# It needs torch with CUDA, typer, rich, pandas, matplotlib and psutil (the GPU image has them);
# commbench itself is installed without dependencies. Every check can fail:
#   - 2 gloo ranks sharing the GPU, results validated, and the same run with a fault injected
#     into torch.distributed, which must be caught (exit 1, #wrong > 0 on every row);
#   - CUDA-graph replay validated like eager calls (out-of-place ops start from zeros, so a graph
#     that replays nothing is caught), with the no-op fault as the proof;
#   - CUDA events against the host clock on an op that moves real data (allgather copies);
#   - an NCCL sweep 8 B - 1 GiB of every op, every element checked; the GPU test suite;
#   - record a DDP job on NCCL (its buckets, NCCL's per-call kernel times) and replay it;
#   - doctor with NCCL and no --nproc (one rank per GPU), each rank's GPU known by UUID or full
#     PCI address, NCCL ranks set to abort a hung communicator rather than the process.
#   bash scripts/gpu-check.sh [OUT]     (OUT: logs and result folders; default results/gpu)
# Exits non-zero when any check fails; the last screen is the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-results/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
VERDICT="$OUT/verdict.txt"
: >"$VERDICT"

record() {  # record NAME STATUS DETAIL
  printf '%-44s %-5s %s\n' "$1" "$2" "$3" | tee -a "$VERDICT"
}

run() {  # run NAME EXPECTED_RC LOG -- command...
  local name=$1 expected=$2 log=$3
  shift 4
  timeout 300 "$@" >"$OUT/$log.log" 2>&1
  local rc=$?
  if [ "$rc" -eq "$expected" ]; then
    record "$name" PASS "exit $rc"
  else
    record "$name" FAIL "exit $rc, expected $expected (see $OUT/$log.log)"
    tail -n 5 "$OUT/$log.log"
  fi
}

echo "== environment"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
$PY -m pip install --quiet --no-deps --no-build-isolation -e . >"$OUT/pip.log" 2>&1 \
  || { echo "pip install failed, using PYTHONPATH"; export PYTHONPATH=$PWD; }
CB="$PY -m commbench"
RES="--out $OUT --force --quiet"

echo "== checks"
run "doctor with nccl" 0 doctor -- $CB doctor --nproc 1 --backend nccl
run "doctor with nccl, one rank per GPU" 0 doctor-default -- $CB doctor --backend nccl
run "gloo x2 on one GPU, validated" 0 gloo-cuda -- \
  $CB run --ops allreduce,broadcast --backend gloo --device cuda --nproc 2 \
  --sizes 8,1M,64M --op max --min-time 0.2 --json $RES --name gloo-cuda
COMMBENCH_FAULT=shift run "gloo x2 on one GPU, fault caught" 1 gloo-cuda-fault -- \
  $CB run --ops allreduce,broadcast --backend gloo --device cuda --nproc 2 \
  --sizes 8,1M,64M --op max --iters 5 --json $RES --name gloo-cuda-fault
run "nccl sweep 8-1G, every op validated" 0 nccl-sweep -- \
  $CB run --ops allreduce,allgather,reduce-scatter,alltoall,broadcast,reduce,gather,scatter \
  --backend nccl --nproc 1 --sizes 8-1G --min-time 0.05 --json $RES --name nccl-sweep
run "cuda graphs, replay validated" 0 nccl-graph -- \
  $CB run --ops allgather,reduce-scatter,alltoall,allreduce,barrier --backend nccl --nproc 1 \
  --sizes 8,1M,256M --cuda-graph --iters 40 --json $RES --name nccl-graph
COMMBENCH_FAULT=noop run "cuda graphs, empty replay caught" 1 nccl-graph-fault -- \
  $CB run --ops allgather,alltoall --backend nccl --nproc 1 --sizes 1M --cuda-graph \
  --iters 10 --json $RES --name nccl-graph-fault
run "gloo x3 on one GPU, avg at an odd world" 0 gloo-avg -- \
  $CB allreduce --backend gloo --device cuda --nproc 3 --op avg --dtype float32 \
  --sizes 8,1M --min-time 0.1 --json $RES --name gloo-avg
GPUS=$($PY -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
if [ "${GPUS:-0}" -ge 3 ]; then  # NCCL needs a GPU per rank: a pair beside an idle rank
  run "nccl p2p unidir beside an idle rank" 0 nccl-idle-p2p -- \
    $CB p2p --pattern unidir --backend nccl --nproc 3 --sizes 8,1M --min-time 0.1 \
    --timeout 60 --json $RES --name nccl-idle-p2p
  run "nccl avg at 3 ranks (premultiplied)" 0 nccl-avg -- \
    $CB allreduce --backend nccl --nproc 3 --op avg --dtype float16 --sizes 8,1M \
    --min-time 0.1 --json $RES --name nccl-avg
else
  record "nccl p2p beside an idle rank, avg at 3" SKIP "needs 3 GPUs ($GPUS here)"
fi
run "allgather timed by cuda events" 0 nccl-events -- \
  $CB allgather --backend nccl --nproc 1 --sizes 64M,1G --min-time 0.5 --no-check --json \
  $RES --name nccl-events
run "allgather timed by the host clock" 0 nccl-host -- \
  $CB allgather --backend nccl --nproc 1 --sizes 64M,1G --min-time 0.5 --no-check --json \
  --host-timer $RES --name nccl-host
run "record a DDP job on nccl" 0 nccl-record -- \
  $CB record --force --out "$OUT/trace-nccl" -- $PY -m torch.distributed.run \
  --nproc-per-node "${GPUS:-1}" examples/ddp_mlp.py --backend nccl --steps 4 \
  --facts "$OUT/ddp-facts.json"
run "replay the recorded DDP step on nccl" 0 nccl-replay -- \
  $CB replay "$OUT/trace-nccl" --backend nccl --json --out "$OUT" --force --name nccl-replay
if $PY -c "import pytest" 2>/dev/null; then
  run "GPU test suite (tests/gpu)" 0 pytest -- \
    $PY -m pytest -q -m gpu tests/gpu -p no:cacheprovider -o addopts=""
else
  record "GPU test suite (tests/gpu)" SKIP "pytest is not installed here"
fi

echo "== numbers"
$PY - "$OUT" "$VERDICT" <<'PY'
import json
import sys
from pathlib import Path

out, verdict = Path(sys.argv[1]), Path(sys.argv[2])
failed = []


def rows(name):
    path = out / name / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def record(name, ok, detail):
    line = f"{name:<44} {'PASS' if ok else 'FAIL':<5} {detail}"
    print(line)
    with verdict.open("a") as handle:
        handle.write(line + "\n")
    if not ok:
        failed.append(name)


clean = rows("gloo-cuda") + rows("nccl-sweep") + rows("nccl-graph")
data = [r for r in clean if r["size_bytes"]]
record("validated rows: no wrong element", bool(data) and all(r["wrong"] == 0 for r in data),
       f"{len(data)} rows, {sum(r['wrong'] for r in data)} wrong")
# One NCCL rank on one GPU: a reduction's result is its own input, which the rows say.
ONE_RANK = "partial: one rank, whose result is its own input"
record("validated rows: validation full (or one-rank partial)",
       bool(data) and all(r["validation"] == "full" or (r["world_size"] == 1 and
                                                        r["validation"] == ONE_RANK)
                          for r in data),
       ", ".join(sorted({r["validation"] for r in data})))
record("gloo x2 rows: validation full", all(r["validation"] == "full" for r in rows("gloo-cuda"))
       and bool(rows("gloo-cuda")), f"{len(rows('gloo-cuda'))} rows")
for name in ("gloo-cuda-fault", "nccl-graph-fault"):
    broken = [r for r in rows(name) if r["size_bytes"]]
    record(f"{name}: every row caught", bool(broken) and all(r["wrong"] > 0 for r in broken),
           f"{sum(r['wrong'] > 0 for r in broken)} of {len(broken)} rows with #wrong > 0")
graph = {r["size_bytes"]: r for r in rows("nccl-graph") if r["op"] == "barrier"}
record("barrier under --cuda-graph timed eagerly",
       all(r["timer"] == "cuda-event" for r in graph.values()) and bool(graph),
       ", ".join(sorted({r["timer"] for r in graph.values()})))
events = {r["size_bytes"]: r for r in rows("nccl-events")}
host = {r["size_bytes"]: r for r in rows("nccl-host")}
for size in sorted(set(events) & set(host)):
    a, b = events[size]["lat_us_p50"], host[size]["lat_us_p50"]
    record(f"events vs host clock, allgather {size >> 20} MiB", abs(a - b) / b < 0.10,
           f"{a:.1f} vs {b:.1f} us ({a / b:.3f}x), busbw {events[size]['busbw_gbps']:.1f} GB/s")
meta_path = out / "nccl-sweep" / "run.json"
meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
gpus = [(r.get("gpu_uuid"), r.get("pci_bus_id")) for r in meta.get("ranks", [])]
record("GPU known by UUID or PCI domain:bus:device",
       bool(gpus) and all(u or (p and p.count(":") == 2) for u, p in gpus),
       ", ".join(f"{u} {p}" for u, p in gpus))
handling = meta.get("env", {}).get("TORCH_NCCL_ASYNC_ERROR_HANDLING")
record("nccl ranks abort a hung communicator", handling == "2",
       f"TORCH_NCCL_ASYNC_ERROR_HANDLING={handling}")
# record on NCCL: DDP's buckets, and each allreduce's kernel time from NCCL's own events
trace_files = sorted((out / "trace-nccl").glob("rank-*.jsonl"))
facts_path = out / "ddp-facts.json"
if trace_files and facts_path.exists():
    facts = json.loads(facts_path.read_text())
    calls = [json.loads(line) for line in trace_files[0].read_text().splitlines()[1:]]
    reduced = [c for c in calls if c.get("op") == "allreduce" and c.get("step", 0) >= 2]
    per_step = {}
    for c in reduced:
        per_step[c["step"]] = per_step.get(c["step"], 0) + c["in_numel"] * 4
    record("record: allreduce bytes per step = gradient", bool(per_step) and
           set(per_step.values()) == {facts["gradient_bytes"]},
           f"{sorted(set(per_step.values()))} vs {facts['gradient_bytes']}")
    timed = [c for c in reduced if c.get("dur_ns")]
    record("record: NCCL kernel time per call (dur_ns)", bool(reduced) and
           len(timed) == len(reduced), f"{len(timed)} of {len(reduced)} calls timed")
else:
    record("record a DDP job on nccl: trace", False, "no trace or facts written")
sweep = [r for r in rows("nccl-sweep") if r["size_bytes"] in (8, 1 << 20, 1 << 30)]
for r in sweep:
    print(f"  nccl {r['op']:<15}{r['size_bytes']:>12} B  {r['lat_us_p50']:>10.1f} us  "
          f"busbw {r['busbw_gbps']:>8.2f} GB/s")
sys.exit(1 if failed else 0)
PY
numbers=$?

echo "== verdict"
cat "$VERDICT"
if grep -q " FAIL " "$VERDICT" || [ "$numbers" -ne 0 ]; then
  echo "gpu-check: FAILED"
  exit 1
fi
echo "gpu-check: PASSED"
