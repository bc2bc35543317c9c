"""locate's options (specs.locate): nonsense is refused in one line, exit 2, before anything
starts; one node is known from the launcher."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sizes", "8,8"], "must be smaller"),
        (["--sizes", "64M,64M"], "must be smaller"),
        (["--nproc", "4", "--level", "node"], "--level node needs several nodes"),
        (["--nproc", "4", "--level", "rail"], "--level rail needs several nodes"),
    ],
)
def test_nonsense_is_refused_in_one_line(args, message, tmp_path, capsys):
    from commbench.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["locate", *args, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "out").exists()


def test_one_node_is_known_from_the_launcher():
    from commbench.launch.environment import RankEnv
    from commbench.specs.locate import one_node

    def env(world, local_world, nnodes=0):
        return RankEnv("torchrun", 0, world, 0, local_world, "127.0.0.1", 29500, True, nnodes)

    assert one_node(None)
    assert one_node(env(8, 8))
    assert not one_node(env(8, 2))  # four torchrun agents of two ranks: four nodes
    assert one_node(env(8, 2, nnodes=1))
