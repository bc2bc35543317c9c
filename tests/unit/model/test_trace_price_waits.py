"""estimate --trace on a job with a straggler: nothing priced is said as such (not 0.000 and
"the rank whose steps cost most"), and the rank the others waited for is named (by the
command, which asks stragglers' rule and hands the note to the pricer)."""

from pathlib import Path

from commbench.model.trace_price import price_trace
from commbench.results import load_run
from commbench.results import trace as trace_format
from tests.unit.stragglers.synthetic import ddp_job

FIXTURES = Path(__file__).parents[2] / "fixtures"


def test_nothing_priced_is_said_and_the_straggler_named(tmp_path):
    trace = trace_format.load(ddp_job(tmp_path, slow={2: 0.03}))
    # model-exact has allreduce rows, but not at float32 x 4 ranks: nothing prices
    rows = [r for r in load_run(FIXTURES / "model-exact").rows if r["op"] == "broadcast"]
    priced = price_trace(trace, rows)
    text = "\n".join(priced.notes)
    assert "nothing was priced" in text
    assert "the rank whose steps cost most" not in text
    assert "waited for" not in text  # the pricer names no one by itself


def test_the_command_names_the_rank_the_others_waited_for(tmp_path, capsys):
    from tests.unit.history.cli_helper import run_cli

    folder = ddp_job(tmp_path, slow={2: 0.03})
    code, out, err = run_cli(capsys, "estimate", str(FIXTURES / "model-exact"),
                             "--trace", str(folder))
    assert code == 0, err
    assert "the others waited for rank 2 (culprit" in out + err
    assert "commbench stragglers" in out + err


def test_a_clean_job_names_no_rank_waited_for(tmp_path):
    trace = trace_format.load(ddp_job(tmp_path))
    priced = price_trace(trace, load_run(FIXTURES / "model-exact").rows)
    assert not any("waited for" in note for note in priced.notes)
