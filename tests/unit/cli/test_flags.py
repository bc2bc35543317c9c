"""The flags nccl-tests and OSU users already type mean what they mean there; the command line
becomes typed specs (nothing is launched here: the measure command is replaced)."""

import pytest

from commbench.cli import main
from commbench.specs.measure import DEFAULTS


@pytest.fixture
def parsed(monkeypatch):
    """Run the CLI and return the (MeasureSpec, OutputSpec) the measure command would get."""
    seen = {}

    def fake(spec, output):
        seen["spec"], seen["output"] = spec, output
        return 0

    monkeypatch.setattr("commbench.commands.measure.run_measure", fake)

    def run(*args):
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        assert exit_info.value.code == 0
        return seen["spec"], seen["output"]

    return run


def test_nccl_tests_sweep_flags(parsed):
    spec, _ = parsed("allreduce", "-b", "8", "-e", "128M", "-f", "2")
    assert spec.sizes[0] == 8 and spec.sizes[-1] == 128 << 20 and len(spec.sizes) == 25


def test_nccl_tests_step_bytes(parsed):
    spec, _ = parsed("allreduce", "-b", "1K", "-e", "4K", "-i", "1K")
    assert spec.sizes == (1024, 2048, 3072, 4096)


def test_osu_message_range(parsed):
    spec, _ = parsed("allreduce", "-m", "8:64")
    assert spec.sizes == (8, 16, 32, 64)
    spec, _ = parsed("allreduce", "-m", "4")
    assert spec.sizes == (1, 2, 4)


def test_sizes_and_a_range_together_are_a_union(parsed):
    spec, _ = parsed("allreduce", "--sizes", "3M", "-b", "1M", "-e", "4M")
    assert spec.sizes == (1 << 20, 2 << 20, 3 << 20, 4 << 20)


def test_without_sizes_the_default_sweep_runs(parsed):
    spec, _ = parsed("allreduce")
    assert spec.sizes[0] == 8 and spec.sizes[-1] == 64 << 20


@pytest.mark.parametrize(
    ("args", "field", "value"),
    [
        (["-o", "max"], "reduce_op", "max"),  # nccl-tests -o: the reduce op, not a folder
        (["-n", "20"], "iters", 20),  # nccl-tests -n: iterations, not ranks
        (["-w", "3"], "warmup", 3),
        (["-d", "half"], "dtype", "float16"),
        (["-d", "float"], "dtype", "float32"),
        (["-d", "double"], "dtype", "float64"),
        (["-d", "bf16"], "dtype", "bfloat16"),
        (["-d", "char"], "dtype", "int8"),
        (["-d", "int"], "dtype", "int32"),
        (["-c", "0"], "check", False),
        (["-c", "1"], "check", True),
        (["--no-check"], "check", False),
        (["-a", "3"], "rank_time", "max"),
        (["-a", "0"], "rank_time", "rank0"),
        (["-a", "min"], "rank_time", "min"),
        (["-T", "5"], "timeout", 5.0),
        (["-G", "1"], "cuda_graph", True),
        (["-z", "1"], "blocking", True),
        ([], "rank_time", "avg"),
    ],
)
def test_short_flags_mean_what_they_mean_in_nccl_tests(parsed, args, field, value):
    spec, output = parsed("allreduce", *args)
    assert getattr(spec, field) == value
    assert output.out == "results"


def test_p2p_takes_peers_and_a_window(parsed):
    spec, _ = parsed("p2p", "--pattern", "unidir", "--peers", "0:8,1:9", "-W", "16")
    assert spec.peers == ((0, 8), (1, 9)) and spec.window == 16


def test_run_takes_every_option(parsed):
    spec, _ = parsed("run", "--ops", "allgather,p2p", "--inplace", "--mesh", "dp=2,tp=4",
                     "--dim", "tp", "--per-group", "-r", "1")
    assert spec.inplace and spec.mesh == (("dp", 2), ("tp", 4)) and spec.dims == ("tp",)
    assert spec.per_group and spec.root == 1


def test_defaults_come_from_the_spec(parsed):
    spec, _ = parsed("allreduce", "--sizes", "8")
    untouched = ("min_time", "timeout", "check", "window", "rank_time", "backends", "device")
    assert all(getattr(spec, f) == getattr(DEFAULTS, f) for f in untouched)
    # and the spec's defaults are the ones the README and --help promise
    assert (spec.min_time, spec.timeout, spec.window, spec.rank_time) == (1.5, 300.0, 64, "avg")
    assert spec.check and spec.backends == ("auto",) and spec.device == "auto"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["p2p", "--inplace"],  # nothing in place about p2p
         "p2p does not take --inplace; it is an option of allgather and reduce-scatter"),
        (["alltoall", "--inplace"], "alltoall does not take --inplace; it is an option of"),
        (["barrier", "--dtype", "float32"], "barrier does not take --dtype; every other op does"),
        (["run", "--ops", "p2p,barrier", "--inplace"], "--inplace means something for"),
        (["allreduce", "-d", "uint32"], "no uint32 collectives here; use int32"),
        (["allreduce", "-d", "quad"], "unknown dtype 'quad'"),
        (["allreduce", "-a", "7"], "unknown --rank-time '7'"),
        (["allreduce", "-b", "64", "-e", "8"], "larger than"),
        (["allreduce", "-i", "8"], "-i/--step needs a range"),
        (["allreduce", "-m", "64:8"], "start is larger"),
        (["p2p", "--peers", "0-1"], "bad --peers"),
        (["p2p", "--peers", "0:0", "--nproc", "2"], "cannot pair with itself"),
        (["p2p", "--peers", "0:5", "--nproc", "2"], "the run has ranks 0..1"),
        (["allreduce", "--mesh", "dp=2,tp=2", "--nproc", "2"], "has 4 ranks, the run has 2"),
        (["allreduce", "--mesh", "dp=1,dp=2"], "dimension 'dp' is repeated"),
        (["allreduce", "--mesh", "dp=2", "--dim", "tp"], "--dim tp is not a dimension"),
        (["allreduce", "--mesh", "a b=2"], "bad --mesh"),
        (["allreduce", "--split", "mod:3", "--nproc", "4"], "3 does not divide the 4 ranks"),
        (["allreduce", "--split", "and:0x5"], "only masks of low bits"),
        (["allreduce", "--split", "mod:2", "--mesh", "dp=2"], "cannot be combined"),
        (["allreduce", "--dim", "tp"], "--dim needs --mesh"),
        (["broadcast", "--mesh", "dp=2,tp=2", "--dim", "tp", "-r", "2", "--nproc", "4"],
         "the root is a rank within each group of 2"),
    ],
)
def test_bad_flags_are_one_line_exit_2(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err
    assert not (tmp_path / "out").exists()


def test_more_ranks_than_cores_is_a_warning(tmp_path, monkeypatch, capsys):
    """A warning, not a refusal: it is said, then that many ranks are launched. The launch is
    faked (a real one costs seconds here); real gloo runs with more ranks than this host's
    cores are in tests/integration (3-12 ranks on 2 cores)."""
    import os

    class Launched(Exception):
        pass

    def fake_run_local(entry, args, *, nproc, **kw):
        raise Launched(nproc)

    monkeypatch.setattr("commbench.launch.local.run_local", fake_run_local)
    ranks = (os.cpu_count() or 1) + 1
    with pytest.raises(Launched) as launched:
        main(["barrier", "-n", "2", "--nproc", str(ranks), "--out", str(tmp_path), "--quiet"])
    assert launched.value.args == (ranks,)
    err = capsys.readouterr().err
    assert f"warning: {ranks} ranks on {os.cpu_count()} CPU cores" in err
    assert "error" not in err


def test_osu_warmup_flag(parsed):
    spec, _ = parsed("allreduce", "-x", "3", "--sizes", "8")
    assert spec.warmup == 3


def test_osu_iterations_flag_is_refused_with_the_flag_to_use(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["allreduce", "-i", "1000"])
    assert exit_info.value.code == 2
    assert "OSU's -i, iterations, is -n/--iters here" in capsys.readouterr().err


def test_help_names_placeholders_after_the_option_and_none_for_flags(capsys):
    """typer printed ``<str>``, ``<float>`` and ``<bool>`` (even for flags)."""
    from commbench.cli import main

    with pytest.raises(SystemExit):
        main(["allreduce", "--help"])
    lines = [line for line in capsys.readouterr().out.splitlines() if "--help" not in line]
    text = "\n".join(lines)  # typer adds --help itself, after commbench has seen the options
    assert "SIZES" in text and "TIMEOUT" in text
    assert not any(tag in text for tag in ("<bool>", "<str>", "<int>", "<float>"))
