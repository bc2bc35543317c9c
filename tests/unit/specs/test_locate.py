"""locate's options (specs.locate): bad input and nonsense are refused in one line, exit 2,
before anything starts; the parsers of --sizes, --min-effect and --rounds; one node is known
from the launcher."""

from __future__ import annotations

import pytest

from commbench.specs.locate import MinEffect


def test_one_node_is_known_from_the_launcher():
    from commbench.launch.environment import RankEnv
    from commbench.specs.locate import one_node

    def env(world, local_world, nnodes=0):
        return RankEnv("torchrun", 0, world, 0, local_world, "127.0.0.1", 29500, True, nnodes)

    assert one_node(None)
    assert one_node(env(8, 8))
    assert not one_node(env(8, 2))  # four torchrun agents of two ranks: four nodes
    assert one_node(env(8, 2, nnodes=1))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rounds", "some"], "--rounds"),
        (["--rounds", "0"], "--rounds"),
        (["--sizes", "8"], "two sizes"),
        (["--sizes", "1,64M"], "at least 4 bytes"),
        (["--min-effect", "ten"], "--min-effect"),
        (["--level", "rack"], "--level"),
        (["--confirm", "-1"], "--confirm"),
        (["--nproc", "1"], "at least 2 ranks"),
        (["--backend", "mpi"], "--backend"),
        # nonsense that parses: refused before anything starts, as bad input is
        (["--sizes", "8,8"], "must be smaller"),
        (["--sizes", "64M,64M"], "must be smaller"),
        (["--nproc", "4", "--level", "node"], "--level node needs several nodes"),
        (["--nproc", "4", "--level", "rail"], "--level rail needs several nodes"),
    ],
)
def test_bad_locate_input_exits_2_with_one_line(args, message, tmp_path, capsys):
    from commbench.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["locate", *args, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "out").exists()


def test_parsers():
    from commbench.specs.locate import parse_effect, parse_rounds, parse_sizes

    assert parse_sizes("64M,8") == (8, 64 << 20)
    assert parse_effect("10%") == MinEffect(0.1, 0.1) == parse_effect("0.1")
    # a metric left out is drawn from the run's noise, as the whole line is without the option
    assert parse_effect("busbw=20%") == MinEffect(0.2, None)
    assert parse_effect("busbw=20%,lat=0.3") == MinEffect(0.2, 0.3)
    assert parse_effect("latency=5%") == MinEffect(None, 0.05)
    assert parse_effect(None) is None and parse_effect("auto") is None
    assert parse_rounds("Quick") == "quick" and parse_rounds("7") == "7"
