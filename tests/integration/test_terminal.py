"""On a real terminal (a pty of 80 or 60 columns): rows appear as they are measured, no line
is wider than the terminal, and no number loses a digit (the columns that go are whole)."""

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

from commbench.core.sizes import format_size

pytestmark = [pytest.mark.integration, pytest.mark.capability]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def on_terminal(args, columns, tmp_path):
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-m", "commbench", *args, "--out", str(tmp_path)],
                            stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(master)
    text = ANSI.sub("", b"".join(chunks).decode(errors="replace"))
    lines = [part for line in text.split("\n") for part in line.split("\r")]
    return proc.returncode, lines


@pytest.mark.parametrize("columns", [80, 60])
def test_the_live_table_fits_and_keeps_every_digit(tmp_path, columns):
    code, lines = on_terminal(["run", "--ops", "allreduce,allgather", "--sizes", "8,64K,16M",
                               "--backend", "gloo", "-n", "3", "--name", "tty"],
                              columns, tmp_path)
    assert code == 0, "\n".join(lines)
    # The folder's path is printed whole, to be copied (the terminal wraps it).
    too_wide = [line for line in lines if len(line.rstrip()) > columns
                and not line.startswith("results: ")]
    assert too_wide == []
    rows = [json.loads(line) for line in (tmp_path / "tty" / "results.jsonl").read_text()
            .splitlines()]
    for row in rows:
        cells = [format_size(row["size_bytes"]), f"{row['lat_us_p50']:.1f}",
                 f"{row['busbw_gbps']:.3f}", str(row["wrong"])]
        matching = [line for line in lines if line.split()[:1] == cells[:1]
                    and all(f" {cell}" in f" {line} " for cell in cells)]
        assert matching, (row["op"], cells)
    # The progress bar counted visits (rich draws it as done/total before it clears it):
    # -n 3 over the default 5 rounds is 3 visits a size (a block each).
    assert any(re.search(rf"\b[1-9]\d*/{len(rows) * 3}\b", line) for line in lines)
    # Rows are printed with markup off while the bar re-renders inside that print: a column
    # given as a markup string then showed its tag raw ('[progress.description]allreduce ...').
    assert not [line for line in lines if "[progress." in line]
    header = next(line for line in lines if line.strip().startswith("size"))
    if columns == 60:
        assert "count" not in header and "type" not in header  # the low-value columns went
        assert "busbw" in header and "#wrong" in header and "time" in header


def test_a_reader_that_leaves_early_is_not_a_failure(tmp_path):
    """`commbench allreduce | head -1`: rank 0's stdout closes under it. The run measures on
    into its folder, says so once on stderr, blames no rank and exits 0."""
    proc = subprocess.Popen([sys.executable, "-m", "commbench", "allreduce", "--sizes",
                             "8,1K,64K,1M", "--backend", "gloo", "-n", "20", "--name", "head",
                             "--out", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.readline()  # the first line of the table, then the reader leaves
    proc.stdout.close()
    stderr = proc.stderr.read()
    code = proc.wait(timeout=120)
    assert code == 0, stderr
    assert [line for line in stderr.splitlines() if "stdout closed" in line] == [
        f"note: stdout closed (its reader left): measuring on, every row goes to "
        f"{tmp_path / 'head'}"]
    assert "lost a peer" not in stderr and "Traceback" not in stderr
    run = json.loads((tmp_path / "head" / "run.json").read_text())
    assert run["status"] == "complete"
    assert len((tmp_path / "head" / "results.jsonl").read_text().splitlines()) == 4


def test_the_bar_counts_visits_before_the_rows_of_rounds_appear(tmp_path):
    """In rounds an op's rows are printed after its last round; the bar must move before:
    it counts (size, round) visits, 2 sizes x 3 rounds here, each about a second."""
    code, lines = on_terminal(["allreduce", "--sizes", "8,1K", "--min-time", "3", "--rounds",
                               "3", "--backend", "gloo", "--name", "bar"], 80, tmp_path)
    assert code == 0, "\n".join(lines)
    table = next(i for i, line in enumerate(lines) if line.startswith("# allreduce"))
    moving = {match.group(1) for line in lines[:table]
              for match in [re.search(r"\b([1-5])/6\b", line)] if match}
    assert moving, "\n".join(lines[:table])
