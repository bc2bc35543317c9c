"""scripts/docs_output.py's reading of a block: which lines are headings, what makes a block
stale, how a measuring command is shrunk for the check and how a rewrite keeps the cuts. The
check itself runs every block's command: tests/integration/test_docs_output.py."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).parents[3]
spec = importlib.util.spec_from_file_location("docs_output", ROOT / "scripts/docs_output.py")
docs_output = importlib.util.module_from_spec(spec)
sys.modules["docs_output"] = docs_output  # a dataclass looks its module up
spec.loader.exec_module(docs_output)

BLOCK = """<!-- made-by: commbench allreduce --sizes 8-1K --nproc 2 | run: 2026-12-04 on 8ce6570 -->
```
$ commbench allreduce --sizes 8-1K --nproc 2
starting 2 local gloo rank(s) ...
# allreduce gloo [float32, op sum, time = median, rank-time avg, p99 over single calls]
   size       count  type           time    algbw    busbw  #wrong        p99   skew
    (B)  (elements)                 (us)   (GB/s)   (GB/s)               (us)    (%)
      8           2  float32        36.3    0.000    0.000       0       36.3    0.0
...
# Out of bounds values : 0 OK
results: results/x
```
"""


def _block(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(BLOCK)
    docs_output.ROOT = tmp_path
    (block,) = docs_output.blocks_of(page)
    return block


def test_headings_are_titles_footers_and_column_lines_not_rows_or_prose(tmp_path):
    block = _block(tmp_path)
    assert block.command == "commbench allreduce --sizes 8-1K --nproc 2"
    assert [line.split()[1] for line in docs_output.headings(block.body)] == [
        "allreduce", "count", "(elements)", "Out"]


def test_a_renamed_column_makes_the_block_stale_and_new_numbers_do_not(tmp_path):
    block = _block(tmp_path)
    now = BLOCK.split("```\n")[1].replace("36.3", "41.0").replace("0 OK", "12 OK")
    assert docs_output.stale_lines(block, now) == []  # numbers are masked
    renamed = now.replace("busbw", "bus_bw")
    assert [line.split()[5] for line in docs_output.stale_lines(block, renamed)] == ["busbw"]
    assert docs_output.stale_lines(block, now.replace("(GB/s)", "(Gb/s)"))


def test_a_measuring_command_is_shrunk_and_others_are_not():
    shrink = docs_output.shrink
    assert shrink(["allreduce", "--sizes", "8-64M", "--min-time", "0.5", "--name", "a"]) == [
        "allreduce", "--name", "a", "--sizes", "8,64M", "-n", "2", "-w", "0", "--force"]
    assert shrink(["p2p", "--sizes", "1K"])[1:3] == ["--sizes", "1K"]
    assert shrink(["allreduce", "-b", "8", "-e", "128K", "-n", "200"]) == [
        "allreduce", "-b", "8", "-e", "8", "-n", "2", "-w", "0"]
    assert shrink(["compare", "a", "b"]) == ["compare", "a", "b"]
    assert docs_output.split_command("env A=1 commbench compare a b") == (
        {"A": "1"}, ["compare", "a", "b"])
    assert docs_output.split_command("commbench allreduce | head -1") is None


def test_a_rewrite_keeps_the_prompt_and_the_cut(tmp_path):
    block = _block(tmp_path)
    output = "\n".join(f"line {n}" for n in range(20))
    new = docs_output.rewrite(block, output, "2026-12-05 on abc1234")
    assert new[0] == ("<!-- made-by: commbench allreduce --sizes 8-1K --nproc 2 | run: "
                      "2026-12-05 on abc1234 -->")
    assert new[2] == "$ commbench allreduce --sizes 8-1K --nproc 2"
    # the old block kept 5 lines before its cut and 2 after
    assert new[3:-1] == ["line 0", "line 1", "line 2", "line 3", "line 4", "...", "line 18",
                         "line 19"]


def test_a_labelled_line_is_checked_by_its_label_and_a_verdict_line_not_at_all(tmp_path):
    """locate's clean example printed '# no confirmed suspect; 1 transient' in the docs run and
    '# no suspect: ...' in CI's: a verdict varies with the run and must not make the block
    stale, while a renamed label or title still must."""
    page = tmp_path / "page.md"
    page.write_text("<!-- made-by: commbench locate --nproc 6 | run: 2026-12-04 on 0 -->\n```\n"
                    "$ commbench locate --nproc 6\n"
                    "# locate: 6 ranks, 30 pairs in 10 rounds (+12 confirmation)\n"
                    "# rule: bad = pooled effect at least 30% (cap)\n"
                    "# no confirmed suspect; 1 transient (slow in the matrix)\n```\n")
    docs_output.ROOT = tmp_path
    (block,) = docs_output.blocks_of(page)
    other_run = ("# locate: 6 ranks, 30 pairs in 10 rounds\n"
                 "# rule: bad = pooled effect at least 14% (noise)\n"
                 "# no suspect: no entity or link at least 30% slower\n")
    assert docs_output.stale_lines(block, other_run) == []
    renamed = other_run.replace("# rule:", "# the rule:")
    assert docs_output.stale_lines(block, renamed) == [
        "# rule: bad = pooled effect at least 30% (cap)"]


def _marked(tmp_path, command, check=None):
    page = tmp_path / "tier.md"
    extra = f" | check: {check}" if check else ""
    page.write_text(f"<!-- made-by: {command} | run: 2026-12-05 on 0e6b71c{extra} -->\n"
                    "```\n# a title\n```\n")
    docs_output.ROOT = tmp_path
    (block,) = docs_output.blocks_of(page)
    return block


def test_blocks_that_start_ranks_many_times_are_the_heavy_tier(tmp_path):
    """make test checks the light blocks, CI's second job the heavy ones: locate, ab and three
    launches or more are heavy; one launch, an offline command or a cheap check is light."""
    heavy = ["commbench locate --nproc 6 --sizes 8,256K",
             "env COMMBENCH_FAULT=slow=1.25 commbench ab --pairs 2 -- allreduce --nproc 2",
             "commbench alltoallv --nproc 4 ;; commbench alltoallv --nproc 4 ;; "
             "commbench alltoallv --nproc 4 ;; commbench compare results/a results/b",
             "bash -c 'commbench allreduce --nproc 2 && commbench allgather --nproc 2 && "
             "commbench broadcast --nproc 2'"]
    light = ["commbench allreduce --sizes 8-1K --nproc 2",
             "commbench allreduce --nproc 2 ;; commbench allreduce --nproc 2 ;; "
             "commbench compare results/a results/b",
             "commbench stragglers tests/fixtures/x"]
    assert [docs_output.heavy(_marked(tmp_path, c)) for c in heavy] == [True] * len(heavy)
    assert [docs_output.heavy(_marked(tmp_path, c)) for c in light] == [False] * len(light)
    # a block's cheap check decides, not the command it was made by
    assert not docs_output.heavy(_marked(tmp_path, "commbench locate --nproc 6",
                                         check="commbench report results/x"))
