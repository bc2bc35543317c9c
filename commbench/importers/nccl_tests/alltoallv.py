"""nccl-tests' ``alltoallv_perf`` (2.19, ``src/alltoallv.cu``) as commbench's ``alltoallv`` rows.

alltoallv_perf has two traffic patterns, and what it prints differs between them:

- **generated** (the default): rank i sends rank j a share of the total that grows with their
  distance ``(j - i) mod n``, blended with the even share by ``NCCL_TESTS_ALLTOALLV_SPREAD``
  (1 by default, 0 = even), each chunk rounded down to 16 B. Every row and every column of
  that matrix holds each distance once, so **every rank sends and receives the same bytes**:
  the printed ``size`` is that (the busiest rank's, and the mean), ``count`` the even per-peer
  elements, so ``size`` is within 16 B a peer of ``count x itemsize x n``. Imbalance is 1.
- **matrix** (``NCCL_TESTS_ALLTOALLV_MATRIX_FILE``): the bytes come from a file; ``count`` is
  printed 0 and ``size`` is the busiest rank's bytes (the most any rank sends or receives).
  The mean a rank sends, hence the imbalance, needs the matrix, which the output does not hold:
  such a row's ``size_bytes`` is the busiest rank's bytes as printed, its ``imbalance`` 0
  (unknown), and a note says so.

Either way the file does not hold the per-peer split, and it is not one of commbench's routings,
so ``split_id`` is ``unknown`` (never a matrix made up here); the routing nccl-tests used is
said as far as the file tells it (the ``-J`` JSON records the environment; the text does not).

busbw: nccl-tests' ``AlltoAllvGetBw`` is the busiest rank's bytes / time x (n-1)/n. With
``size`` = those bytes, the importers' ``size / time x factor`` (alltoallv's ``ring_factor``)
is that number, in both patterns.
"""

from __future__ import annotations

import math

from commbench.importers.nccl_tests.model import Result, Section

OP = "alltoallv"
PATTERN = "dispatch"  # one way, as commbench's alltoallv rows without --combine
UNKNOWN_SPLITS = "unknown"  # the row's split_id: the file does not hold the split matrix
CHUNK_ALIGN = 16  # bytes: alltoallv.cu rounds every per-peer chunk down to a multiple
MATRIX_FILE = "NCCL_TESTS_ALLTOALLV_MATRIX_FILE"
MATRIX_SCALE = "NCCL_TESTS_ALLTOALLV_MATRIX_SCALE"
SPREAD = "NCCL_TESTS_ALLTOALLV_SPREAD"
DEFAULT_SPREAD = 1.0


def from_matrix(result: Result) -> bool:
    """A row of the matrix pattern: nccl-tests prints count 0 (its paramcount) there."""
    return result.count == 0


def row_fields(result: Result) -> dict:
    """The alltoallv columns of an imported row (schema.Row: max_rank_bytes, imbalance,
    split_id); ``size`` is the busiest rank's bytes in both patterns."""
    return {"max_rank_bytes": result.size,
            "imbalance": 0.0 if from_matrix(result) else 1.0,
            "split_id": UNKNOWN_SPLITS}


def count_problem(result: Result, itemsize: int, ranks: int) -> str:
    """Why ``size`` cannot be this row's with ``ranks`` ranks ('' when it can): the generated
    pattern's size is count x itemsize x n less under 16 B a peer; the matrix's is not tied to
    count (printed 0)."""
    if from_matrix(result):
        return ""
    even = result.count * itemsize * ranks
    if even - CHUNK_ALIGN * ranks < result.size <= even:
        return ""
    return (f"size {result.size} is not count {result.count} x {itemsize} B x {ranks} ranks "
            f"less under {CHUNK_ALIGN} B a peer (alltoallv_perf's generated pattern): is "
            "--op or --world-size right?")


def ranks_from_sizes(results: list[Result], itemsize_of: dict[str, int]) -> int | None:
    """The group size where no rank lines say it: from the generated row with the largest
    per-peer chunk c = count x itemsize, n = ceil(size / c), which is unambiguous when c is
    at least 16 B x n (each of the n chunks lost under 16 B). None when no row says it."""
    chunks = [(r.count * itemsize_of[r.type_name], r) for r in results
              if not from_matrix(r) and r.size > 0]
    if not chunks:
        return None
    chunk, result = max(chunks, key=lambda item: item[0])
    ranks = math.ceil(result.size / chunk)
    return ranks if chunk >= CHUNK_ALIGN * ranks else None


def routing(section: Section) -> str:
    """The traffic pattern as far as the file says: 'nccl-tests:spread=1' (generated, the
    spread known from the JSON's environment), 'nccl-tests:generated' (text: the environment
    is not printed), 'nccl-tests:file:PATH[,scale=S]' or 'nccl-tests:file' (matrix)."""
    env = section.env
    if MATRIX_FILE in env or any(from_matrix(r) for r in section.results if r.size > 0):
        path = env.get(MATRIX_FILE, "")
        scale = env.get(MATRIX_SCALE, "")
        text = f"nccl-tests:file:{path}" if path else "nccl-tests:file"
        return text + (f",scale={scale}" if scale and _number(scale) != 1.0 else "")
    if not section.env_known:
        return "nccl-tests:generated"
    spread = _number(env.get(SPREAD, "")) if SPREAD in env else DEFAULT_SPREAD
    spread = DEFAULT_SPREAD if spread is None else min(max(spread, 0.0), 1.0)  # as it clamps
    return f"nccl-tests:spread={spread:g}"


def notes(section: Section) -> list[str]:
    """What the reader of the imported rows must know: what size means, what is unknown."""
    said = [f"alltoallv_perf ({routing(section)}): split_id is '{UNKNOWN_SPLITS}' (the file "
            "does not hold the per-peer split, and it is not a commbench routing)"]
    if any(from_matrix(r) for r in section.results if r.size > 0):
        said.append("alltoallv_perf ran a traffic matrix: its size is the busiest rank's bytes "
                    "(as nccl-tests prints it), not the mean a rank sends, and imbalance is 0 "
                    "(unknown: the mean needs the matrix file)")
    return said


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
