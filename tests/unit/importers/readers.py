"""The importers' fixtures and the readers the importer tests share (nccl-tests, OSU)."""

from pathlib import Path

from commbench.importers import read

FIXTURES = Path(__file__).parents[2] / "fixtures"
NCCL = FIXTURES / "nccl-tests"
OSU = FIXTURES / "osu"


def nccl(name, **kw):
    return read("nccl-tests", str(NCCL / name), **kw)


def osu(name, **kw):
    return read("osu", str(OSU / name), **kw)


def row(imported, size, inplace=False, **match):
    found = [r for r in imported.rows if r["size_bytes"] == size and r["inplace"] == inplace
             and all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (size, inplace, found)
    return found[0]


def gbps(size, time_us):
    return size / (time_us * 1e-6) / 1e9
