"""--overlap / --background on the command line: bad input is one line and exit 2, on the
commands they belong to and on those where they do not apply (ps, locate)."""

import pytest

from commbench.cli import main


@pytest.mark.parametrize("args, says", [
    (["allreduce", "--overlap", "conv:8"], "unknown kind 'conv'"),
    (["allreduce", "--overlap", "matmul:big"], "'big' is not a whole number"),
    (["allgather", "--overlap", "matmul"], "give KIND:SIZE"),
    (["ps", "--overlap", "matmul:64"], "ps does not take --overlap"),
    (["locate", "--overlap", "matmul:64"], "No such option: --overlap"),
    (["allreduce", "--nproc", "2", "--background", "1M", "--background-ranks", "0-3"],
     "names 4 ranks, the run has 2"),
    (["allreduce", "--nproc", "2", "--background", "1M", "--background-ranks", "0,5"],
     "rank 5 is not in the run"),
    (["run", "--ops", "allreduce", "--overlap", "matmul:8", "--per-call"], "drop --per-call"),
])
def test_bad_contention_input_is_one_line_exit_2(args, says, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main([*args, "--dry-run"] if args[0] != "locate" else args)
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_good_overlap_plans_like_a_plain_run(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["allreduce", "--nproc", "2", "--sizes", "1K", "--overlap", "matmul:64",
              "--background", "64K", "--dry-run"])
    assert stop.value.code == 0
    assert "1K" in capsys.readouterr().out
