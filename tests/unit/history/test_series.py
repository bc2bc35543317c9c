"""Series built from the store, locate entities among them, and the OpenMetrics export parsed
back by prometheus_client's own parser."""

from __future__ import annotations

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from commbench.history import add_runs
from commbench.history.openmetrics import openmetrics_text
from commbench.history.series import Series, build_series, changes, select
from commbench.history.store import Store
from tests.unit.history.runs import make_locate_run, make_run, night, sqlite_url


@pytest.fixture
def loaded(tmp_path):
    url = sqlite_url(tmp_path / "h.db")
    folders = [make_run(tmp_path, f"a{n}", night(n), 1.0 + 0.01 * (n % 2), sizes=(8, 1 << 20))
               for n in range(3)]
    folders.append(make_run(tmp_path, "b0", night(1), hosts=("gpu-a", "gpu-b"),
                            sizes=(8,), ops=("allreduce",)))
    # node n2 degrades at run 10 (a permutation test needs about 12 runs to judge a 3-run step)
    ratios = [1.0, 0.99, 1.01, 1.0, 0.98, 1.0, 1.02, 0.99, 1.0, 1.01, 0.6, 0.62, 0.59]
    folders += [make_locate_run(tmp_path, f"loc{n}", night(n), {"n1": 1.0, "n2": ratio})
                for n, ratio in enumerate(ratios)]
    add_runs(url, folders)
    with Store(url) as store:
        runs = store.runs()
        return runs, build_series(runs, store.points(), store.entities())


def test_one_series_per_key_and_cluster_in_start_order(loaded):
    runs, series = loaded
    sweep = [s for s in series if s.key.op != "locate"]
    assert len(sweep) == 2 * 2 + 1  # two ops x two sizes on ci-runner, one on gpu-a,gpu-b
    clusters = {s.key.cluster for s in sweep}
    assert clusters == {"ci-runner", "gpu-a,gpu-b"}
    one = select(series, op="allreduce", size_bytes=8, cluster="ci-runner")
    assert [o.run.run_id for o in one[0].observations] == ["a0", "a1", "a2"]


def test_a_locate_entity_that_degrades_is_a_regression(loaded):
    _runs, series = loaded
    # nine runs, the last three low: as extreme as noise can arrange 9 values (2 in 84)
    (n2,) = [s for s in select(series, op="locate") if s.key.variant == "n2"]
    assert changes(Series(n2.key, n2.observations[4:]), 0.05) == []
    (n2,) = [s for s in select(series, op="locate") if s.key.variant == "n2"]
    assert n2.key.label() == "locate n2 (node) busbw ratio [n1,n2]"
    (finding,) = changes(n2, 0.05)
    assert (finding.run_id, finding.verdict) == ("loc10", "regression")
    (n1,) = [s for s in select(series, op="locate") if s.key.variant == "n1"]
    assert changes(n1, 0.05) == []


def test_openmetrics_parses_back_with_the_latest_values(loaded):
    _runs, series = loaded
    text = openmetrics_text(series)
    assert text.endswith("# EOF\n")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    busbw = families["commbench_busbw_gbps"].samples
    assert len(busbw) == 5
    assert {s.labels["cluster"] for s in busbw} == {"ci-runner", "gpu-a,gpu-b"}
    assert all(s.timestamp is None for s in busbw)  # the textfile collector refuses them
    ratios = {s.labels["entity"]: s.value for s in families["commbench_locate_busbw_ratio"]
              .samples}
    assert ratios == {"n1": 1.0, "n2": 0.59}
    started = families["commbench_run_start_time_seconds"].samples
    assert {s.labels["cluster"] for s in started} == {"ci-runner", "gpu-a,gpu-b", "n1,n2"}


def test_more_than_one_run_carries_timestamps_in_order(loaded):
    _runs, series = loaded
    families = {f.name: f for f in text_string_to_metric_families(openmetrics_text(series, 3))}
    samples = [s for s in families["commbench_lat_us_p50"].samples
               if s.labels["cluster"] == "ci-runner" and s.labels["size"] == "8"
               and s.labels["op"] == "allreduce"]
    stamps = [float(s.timestamp) for s in samples]
    assert len(stamps) == 3 and stamps == sorted(stamps)
