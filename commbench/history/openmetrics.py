"""The latest values of every series as OpenMetrics text, written by prometheus_client.

For a Prometheus node-exporter textfile collector: write the text to a ``*.prom`` file in its
``--collector.textfile.directory`` (atomically: a temporary file renamed over the old one) and
node-exporter serves it with the node's own metrics. With ``last > 1`` every value carries its
run's start time as the sample timestamp, for backfilling with ``promtool tsdb
create-blocks-from openmetrics``; the textfile collector refuses timestamps, so it wants
``last == 1``, the default.

Metrics (gauges, one sample per series and run):
``commbench_lat_us_p50``, ``commbench_busbw_gbps``, ``commbench_algbw_gbps`` labelled op, size
(bytes), backend, dtype, world_size, dim, variant, cluster, routing and split_id (alltoallv's split
identity: empty for the other ops, which Prometheus reads as the label being absent);
``commbench_locate_busbw_ratio`` labelled entity, level, cluster;
``commbench_run_start_time_seconds`` (the newest complete run of each cluster, so an alert can say
the nightly stopped arriving).
"""

from __future__ import annotations

from datetime import datetime

from commbench.history.series import ENTITY_RATIO, Observation, Series

SERIES_LABELS = ("op", "size", "backend", "dtype", "world_size", "dim", "variant", "cluster",
                 "routing", "split_id")
SWEEP_METRICS = (
    ("commbench_lat_us_p50", "Median latency of a collective call (microseconds).",
     lambda o: o.value),
    ("commbench_busbw_gbps", "Bus bandwidth (GB/s, nccl-tests' busbw).", lambda o: o.busbw_gbps),
    ("commbench_algbw_gbps", "Algorithm bandwidth: size / time (GB/s).", lambda o: o.algbw_gbps),
)


def _seconds(observation: Observation) -> float:
    return datetime.fromisoformat(observation.run.start_time).timestamp()


def _families(series: list[Series], last: int) -> list:
    from prometheus_client.core import GaugeMetricFamily

    stamped = last > 1
    sweep = [GaugeMetricFamily(name, text, labels=list(SERIES_LABELS))
             for name, text, _value in SWEEP_METRICS]
    ratio = GaugeMetricFamily("commbench_locate_busbw_ratio",
                              "A locate entity's busbw over the fleet median (1 = typical).",
                              labels=["entity", "level", "cluster"])
    newest: dict[str, float] = {}
    for one in series:
        key = one.key
        for observation in one.usable[-last:]:
            when = _seconds(observation) if stamped else None
            newest[key.cluster] = max(newest.get(key.cluster, 0.0), _seconds(observation))
            if key.metric == ENTITY_RATIO:
                ratio.add_metric([key.variant, key.dim, key.cluster], observation.value, when)
                continue
            labels = [key.op, str(key.size_bytes), key.backend, key.dtype, str(key.world_size),
                      key.dim, key.variant, key.cluster, key.routing, key.split_id]
            for family, (_name, _text, value_of) in zip(sweep, SWEEP_METRICS, strict=True):
                value = value_of(observation)
                if value is not None:
                    family.add_metric(labels, value, when)
    started = GaugeMetricFamily("commbench_run_start_time_seconds",
                                "Start of the newest complete run stored, per cluster "
                                "(Unix time).", labels=["cluster"])
    for cluster, seconds in sorted(newest.items()):
        started.add_metric([cluster], seconds)
    return [*sweep, ratio, started]


def openmetrics_text(series: list[Series], last: int = 1) -> str:
    """The OpenMetrics exposition (ending in ``# EOF``) of the newest ``last`` complete runs."""
    from prometheus_client.openmetrics.exposition import generate_latest

    families = _families(series, last)

    class _Collected:
        def collect(self):
            return iter(families)

    return generate_latest(_Collected()).decode()
