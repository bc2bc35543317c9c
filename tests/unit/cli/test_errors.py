"""Bad input: one line on stderr, exit code 2, no traceback, nothing written
(docs/reference/exit-codes.md#bad-input)."""

import pytest

from commbench.cli import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["allreduce", "--sizes", "0"], "at least 1 byte"),
        (["allreduce", "--sizes", "0-8"], "at least 1 byte"),
        (["allreduce", "--sizes", "64-8"], "start is larger"),
        (["allreduce", "--sizes", "8X"], "unknown unit"),
        (["allreduce", "--sizes", "8,,16"], "empty item"),
        (["allreduce", "--factor", "1"], "--factor"),
        (["allreduce", "--dtype", "float8"], "unknown dtype"),
        (["allreduce", "--op", "mean"], "unknown op"),
        (["allreduce", "--backend", "mpi"], "unknown backend"),
        (["allreduce", "--backend", "nccl"], "nccl"),
        (["allreduce", "--backend", "gloo,nccl"], "nccl is not available"),
        (["allreduce", "--device", "cuda"], "GPU"),
        (["allreduce", "--nproc", "0"], "--nproc"),
        (["allreduce", "--iters", "-1"], "--iters"),
        (["allreduce", "--iters", "abc"], "--iters"),
        (["allreduce", "--op", "avg", "--dtype", "int32"], "gloo cannot average"),
        (["allreduce", "--sizes", "1-4096G"], "GiB"),
        (["p2p", "--nproc", "1"], "at least 2 ranks"),
        (["p2p", "--pattern", "zigzag"], "unknown pattern"),
        (["broadcast", "--root", "5"], "--root"),
        (["run", "--ops", "allreduce,bogus"], "unknown op"),
        (["allreduce", "--name", "a/b"], "--name"),
        (["frobnicate"], "frobnicate"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--out", str(tmp_path / "out")] if args[0] != "frobnicate" else args)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err
    assert "Traceback" not in err
    leftovers = list((tmp_path / "out").glob("*")) if (tmp_path / "out").exists() else []
    assert leftovers == []


def test_unwritable_out_is_bad_input(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as exit_info:
        main(["allreduce", "--sizes", "8", "--out", str(blocker / "sub")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "cannot write to --out" in err


def test_help_is_fast_and_torch_free():
    import subprocess
    import sys
    import time

    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys; from commbench.cli import main\n"
         "try:\n main(['--help'])\nexcept SystemExit: pass\n"
         "assert 'torch' not in sys.modules and 'pandas' not in sys.modules"],
        capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "allreduce" in done.stdout
    assert time.perf_counter() - start < 5  # generous: the target (0.5 s) is in make bench


def test_version(capsys):
    from commbench import __version__

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"commbench {__version__}\n"


def test_doctor_refuses_a_missing_backend(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: tests/gpu covers doctor with nccl")
    with pytest.raises(SystemExit) as exit_info:
        main(["doctor", "--backend", "nccl"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "nccl is not available" in err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["allreduce", "--inplace"],
         "error: allreduce does not take --inplace; it is an option of allgather and "
         "reduce-scatter (and run)"),
        (["p2p", "--root", "1"],
         "error: p2p does not take --root; it is an option of broadcast, reduce, gather and "
         "scatter (and run)"),
        (["allreduce", "--sizes", "8-"],
         "error: bad range '8-': no end; a range is START-END, e.g. 8-64M"),
        (["allreduce", "--sizes", "-64M"],
         "error: bad range '-64M': no start; a range is START-END, e.g. 8-64M"),
        (["import", "nccl", "x.txt"],
         "error: No such command 'nccl'. Did you mean nccl-inspector or nccl-tests? (choose "
         "from flight-recorder, nccl-inspector, nccl-tests, osu, torch-profiler)"),
    ],
)
def test_a_mistake_is_answered_with_what_to_type(args, expected, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == expected


@pytest.mark.parametrize(("args", "says"), [
    (["allreduce", "--both-places"], "allgather and reduce-scatter"),
    (["allgather", "--both-places", "--inplace"], "drop --inplace"),
    (["run", "--ops", "allreduce,broadcast", "--both-places"], "allgather and reduce-scatter only"),
])
def test_both_places_is_refused_where_it_means_nothing(args, says, capsys):
    from commbench.cli import main

    with pytest.raises(SystemExit) as stop:
        main([*args, "--dry-run"])
    assert stop.value.code == 2 and says in capsys.readouterr().err
