"""Refusals that happen before any process starts."""

import pytest

from commbench.core.errors import UsageError
from commbench.specs.measure import MeasureSpec, parse_ops, unsupported, validate


def config(**kw):
    kw.setdefault("ops", ("allreduce",))
    kw.setdefault("sizes", (8,))
    kw.setdefault("backends", ("gloo",))
    return MeasureSpec(**kw)


@pytest.mark.parametrize(
    ("kw", "world", "message"),
    [
        ({"dtype": "float8"}, 2, "unknown dtype"),
        ({"reduce_op": "mean"}, 2, "unknown op"),
        ({"iters": 0}, 2, "--iters"),
        ({"warmup": -1}, 2, "--warmup"),
        ({"min_time": 0}, 2, "--min-time"),
        ({"timeout": -5}, 2, "--timeout"),
        ({"root": 2}, 2, "--root"),
        ({}, 0, "--nproc"),
        ({"ops": ("p2p",)}, 1, "at least 2 ranks"),
        ({"reduce_op": "avg", "dtype": "int32"}, 2, "gloo cannot average int32"),
        ({"cuda_graph": True}, 2, "--cuda-graph"),
        ({"device": "tpu"}, 2, "unknown device"),
        ({"backends": ("nccl",), "device": "cpu"}, 2, "nccl moves CUDA tensors only"),
    ],
)
def test_bad_input_is_refused(kw, world, message):
    with pytest.raises(UsageError, match=message):
        validate(config(**kw), world)


def test_good_input_passes():
    validate(config(reduce_op="avg", dtype="bfloat16"), 3)


def test_non_reducing_ops_ignore_the_reduce_op():
    assert unsupported("gloo", "int8", "avg", reduces=False) == ""
    assert unsupported("nccl", "int8", "avg", reduces=True) == ""


def test_ops_lists():
    assert parse_ops("allreduce,reduce_scatter") == ("allreduce", "reduce-scatter")
    assert len(parse_ops("all")) == 10
    with pytest.raises(UsageError, match="unknown op"):
        parse_ops("allreduce,bogus")


@pytest.mark.parametrize("typed, meant", [("all_reduce", "allreduce"), ("All_Gather", "allgather"),
                                          ("allredcue", "allreduce"),
                                          ("reducescatter", "reduce-scatter")])
def test_an_unknown_op_is_echoed_as_typed_with_the_closest(typed, meant):
    with pytest.raises(UsageError) as refused:
        parse_ops(f"broadcast,{typed}")
    assert str(refused.value).startswith(f"unknown op {typed!r}: did you mean {meant}? (choose")


def test_an_op_like_none_gets_no_suggestion():
    with pytest.raises(UsageError) as refused:
        parse_ops("zzz")
    assert str(refused.value).startswith("unknown op 'zzz' (choose from allreduce")


def test_default_devices_follow_the_backend():
    assert config().device_for("nccl") == "cuda"
    assert config().device_for("gloo") == "cpu"
    assert config(device="cuda").device_for("gloo") == "cuda"


def test_gloo_on_cuda_is_limited_to_what_gloo_moves():
    with pytest.raises(UsageError, match="gloo cannot run allgather on CUDA"):
        validate(config(ops=("allgather",), device="cuda"), 2)
    validate(config(ops=("allreduce", "broadcast"), device="cuda"), 2)


def test_cuda_graphs_need_nccl():
    with pytest.raises(UsageError, match="--cuda-graph needs nccl"):
        validate(config(device="cuda", cuda_graph=True), 2)
    validate(config(backends=("nccl",), cuda_graph=True), 1)
