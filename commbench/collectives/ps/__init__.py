"""ps: a sharded parameter server's gradient exchange, beside allreduce on the same workers.

The world is W workers (ranks 0..W-1) then S servers (ranks W..W+S-1). Server j owns shard j of
the n-byte gradient (the elements are split as evenly as whole elements allow); every shard is
cut into partitions of at most ``--partition`` bytes, the unit of one message (BytePS's
partitions: a large shard is pipelined, not sent as one tensor).

- sync: every worker pushes each partition of shard j to server j (isend); server j receives
  every worker's partitions (irecv), sums them and sends the sum back; every worker ends with
  the full sum. The time of a row is one step (push, sum, pull) on the workers. The steps on
  the wire are in synchronous.py.
- async: versioned pushes under a staleness bound, asynchronous.py.
- allreduce (the baseline variant): all_reduce over a group of the W workers at the same size,
  reported as op=allreduce rows, so a launch answers "PS or allreduce?" on one machine.

Validation: worker w's input is row w of the exact sum pattern of data.py over W ranks, so the
expected full sum is known exactly; a server also checks each worker's slot against that
worker's own input, so a partition from the wrong sender, at the wrong offset, or not arrived
(slots start at 0, which no input holds) is counted even where the sum would hide it.

Traffic per step, counted by the implementation as it posts each isend/irecv (the rows'
``worker_tx_bytes`` ... ``server_tx_bytes``): a worker sends n and receives n; a server
receives W·n/S and sends W·n/S. ``traffic`` (formulas.py) states the same numbers as formulas,
for the docs and as the tests' independent check; the rows never use it. busbw = algbw ·
max(1, W/S): the busiest link carries the larger of a worker's n and a server's W·n/S.
"""

from __future__ import annotations

from commbench.collectives.ps.descriptor import BASELINE, ParameterServer, partition_elements
from commbench.collectives.ps.formulas import (
    Traffic,
    async_reduced_gbps,
    reduced_gbps,
    roles,
    traffic,
)
from commbench.collectives.ps.options import modes_of
from commbench.collectives.ps.synchronous import Counted, partitions, shard_bounds

__all__ = [
    "BASELINE",
    "COLLECTIVE",
    "Counted",
    "ParameterServer",
    "Traffic",
    "async_reduced_gbps",
    "modes_of",
    "partition_elements",
    "partitions",
    "reduced_gbps",
    "roles",
    "shard_bounds",
    "traffic",
]

COLLECTIVE = ParameterServer()  # the one instance the registry reads
