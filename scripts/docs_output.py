"""Console output shown in docs/ and README.md, kept from going stale.

Every console block of commbench output is made by a real command and says so on the line
before its fence (the convention, docs/project/testing.md#output-in-the-docs):

    <!-- made-by: commbench allreduce --sizes 8-1K --nproc 2 | run: 2026-12-04 on 8ce6570 -->

optionally with ``| check: COMMAND``, a cheaper command that prints the same headings (an
offline command on tests/fixtures where the block's own command needs a run folder that a
clean clone does not have).

``--write`` reruns each block's ``made-by`` command from the repository root and rewrites the
block: its ``$`` line(s) as shown, then the output (stdout and stderr, as a terminal shows
them), cut with "..." where the block was cut (as many lines kept before and after the cut as
before), and the ``run:`` date and commit. A command whose output starts with ``$ `` lines
(a ``bash -c`` of several steps that echoes its own prompts) makes the whole block.

``--check`` verifies that each block's command still prints the headings and column names
the block shows: every heading line of the block (a ``# `` title or footer line, a table's
column-name and unit lines; numbers masked, spacing collapsed) must be a line of the command's
output. Measuring commands run at their smallest size (the first size, ``-n 2 -w 0``, no
``--min-time``); single ``commbench`` commands run in this one process (torch imported once,
ranks forked from it: about 0.5 s a run), anything else through ``bash -c``. Every command
runs in a scratch folder that sees the repository's tests/ and examples/ and an empty
results/. Exit 1 naming each block and line that is stale.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"^<!-- made-by: (?P<command>.*?) \| run: (?P<run>[^|]*?)"
                  r"(?: \| check: (?P<check>.*?))? -->$")
FENCE = re.compile(r"^(```+|~~~+)")
# Commands that start ranks and take --sizes/-n/-w: shrunk for the check.
MEASURING = {"allreduce", "allgather", "broadcast", "reduce-scatter", "alltoall", "reduce",
             "gather", "scatter", "barrier", "p2p", "alltoallv", "ps", "run"}
SEEN_FROM_SCRATCH = ("examples", "bench", "scripts")
BOX = re.compile(r"[│┃┆┊|]")


@dataclass
class Block:
    path: Path
    mark_line: int  # 0-based index of the made-by comment
    command: str
    run: str
    check: str | None
    fence: str
    body: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.mark_line + 1}"


def doc_files() -> list[Path]:
    return [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found = []
    for i, line in enumerate(lines):
        mark = MARK.match(line.strip())
        if not mark or i + 1 >= len(lines) or not FENCE.match(lines[i + 1].strip()):
            continue
        fence = FENCE.match(lines[i + 1].strip()).group(1)
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == fence), None)
        if end is None:
            continue
        found.append(Block(path, i, mark["command"].strip(), mark["run"].strip(),
                           (mark["check"] or "").strip() or None, lines[i + 1].strip(),
                           lines[i + 2:end]))
    return found


# ---- what a block shows ---------------------------------------------------------------------

def _prompt_lines(body: list[str]) -> set[int]:
    """Indices of ``$`` lines and their ``\\`` continuations."""
    shown, going = set(), False
    for i, line in enumerate(body):
        if line.startswith("$ ") or going:
            shown.add(i)
            going = line.rstrip().endswith("\\")
    return shown


def _numeric(token: str) -> bool:
    return bool(re.match(r"^[(+\-~]?\d", token))


def is_heading(line: str) -> bool:
    """A ``# `` title or footer line, or a table's column-name or unit line: columns apart by
    two spaces or a box rule, and words, not numbers (a data row is mostly numbers)."""
    text = line.strip()
    if text.startswith("# "):
        return True
    if "│" in text:  # a rich table's body row (its header row is ruled with ┃)
        return False
    if not re.search(r"[A-Za-z]", text) and "(" not in text:
        return False
    cells = [c for c in re.split(r"\s{2,}", BOX.sub("  ", text).strip()) if c]
    tokens = text.replace("│", " ").replace("┃", " ").split()
    if len(cells) < 3 or not tokens:
        return False
    return sum(map(_numeric, tokens)) <= 0.25 * len(tokens)


def normal(line: str) -> str:
    """Numbers masked, box rules and runs of spaces made one space."""
    text = BOX.sub(" ", line)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return " ".join(text.split())


def headings(body: list[str]) -> list[str]:
    prompts = _prompt_lines(body)
    return [line for i, line in enumerate(body)
            if i not in prompts and line.strip() != "..." and is_heading(line)]


def key(line: str) -> str | None:
    """What of a heading must come back. A table line or a title (``# op backend [...]``):
    all of it, numbers masked. A labelled ``# `` line (``# rule: ...``, ``# Out of bounds values
    : 0 OK``): its label, since what follows the colon is the run's finding. A ``# `` line with
    neither a label nor a title (``# no confirmed suspect; 1 transient``) is a verdict that
    varies with the run: None, not checked."""
    text = normal(line)
    if not text.startswith("# ") or "[" in text:
        return text
    if ":" in text:
        return text.split(":", 1)[0].rstrip()
    return None


def stale_lines(block: Block, output: str) -> list[str]:
    """The block's heading lines the output no longer prints."""
    printed = set()
    for line in output.splitlines():
        printed.add(normal(line))
        if (label := key(line)) is not None:
            printed.add(label)
    return [line for line in headings(block.body)
            if (wanted := key(line)) is not None and wanted not in printed]


# ---- running a command ----------------------------------------------------------------------

def split_command(command: str) -> tuple[dict[str, str], list[str]] | None:
    """``[env] [K=V ...] commbench ARGS`` -> (env, ARGS); None for anything else (a pipe, a
    list of commands, a bash -c)."""
    if re.search(r"[|;&<>`$]", command.replace("$(", "")):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words and words[0] == "env":
        words = words[1:]
    env = {}
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words or words[0] != "commbench":
        return None
    return env, words[1:]


def _value_options(args: list[str], names: tuple[str, ...]) -> list[str]:
    """``args`` without the options ``names`` and their values."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in names:
            skip = True
            continue
        if any(arg.startswith(name + "=") for name in names if name.startswith("--")):
            continue
        out.append(arg)
    return out


def shrink(args: list[str], keep_sizes: bool = False) -> list[str]:
    """A measuring command at its smallest: its first and last sizes (a fit read from the run
    needs two), 2 iterations, no warm-up, no --min-time; the columns and titles do not depend
    on how long a size is timed."""
    if not args or args[0] not in MEASURING:
        return args
    first = None
    for i, arg in enumerate([] if keep_sizes else args[:-1]):
        if arg in ("--sizes", "-s"):
            ends = re.split(r"[,\-]", args[i + 1])
            first = ",".join(dict.fromkeys((ends[0], ends[-1])))
    args = _value_options(args, ("--min-time", "-n", "--iters", "-w", "--warmup", "--out"))
    if first is not None:
        args = [*_value_options(args, ("--sizes", "-s")), "--sizes", first]
    elif "-b" in args:
        begin = args[args.index("-b") + 1]
        args = [*_value_options(args, ("-b", "-e")), "-b", begin, "-e", begin]
    elif args[0] not in ("barrier",) and not keep_sizes:
        args = [*args, "--sizes", "8"]
    return [*args, "-n", "2", "-w", "0", *(["--force"] if "--name" in args else [])]


@contextlib.contextmanager
def _captured():
    """stdout and stderr, the ranks' included (they inherit the descriptors), into one file."""
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as out:
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        text: list[str] = []
        try:
            yield text
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            out.seek(0)
            text.append(out.read().decode(errors="replace"))


def run_here(env: dict[str, str], args: list[str], cwd: Path) -> str:
    """``commbench ARGS`` in this process (ranks forked from it), its output."""
    from commbench.cli import main

    before, saved = os.getcwd(), dict(os.environ)  # a command may set variables (gloo's
    os.environ.update(env)                           # interface): none leaks into the next
    os.chdir(cwd)
    try:
        with _captured() as text, contextlib.suppress(SystemExit):
            try:
                main(args)
            except Exception:  # a crash is a block whose command prints nothing it showed
                import traceback

                traceback.print_exc()
    finally:
        os.chdir(before)
        os.environ.clear()
        os.environ.update(saved)
    return text[0]


def run_shell(command: str, cwd: Path, timeout: float = 600) -> str:
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}
    for name in ("COLUMNS", "LINES", "RANK", "WORLD_SIZE"):
        env.pop(name, None)
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return done.stdout


def scratch() -> Path:
    """A folder that sees the repository's inputs and an empty results/; tests/fixtures is a
    copy (commands such as model write into the run folder they read)."""
    import shutil

    folder = Path(tempfile.mkdtemp(prefix="docs-output-"))
    for name in SEEN_FROM_SCRATCH:
        (folder / name).symlink_to(ROOT / name)
    (folder / "tests").mkdir()
    for entry in (ROOT / "tests").iterdir():
        if entry.name == "fixtures":
            shutil.copytree(entry, folder / "tests" / "fixtures")
        else:
            (folder / "tests" / entry.name).symlink_to(entry)
    (folder / "results").mkdir()
    return folder


def steps(command: str) -> list[str]:
    """A made-by of several steps, each shown with its own ``$`` line: STEP ;; STEP."""
    return [step.strip() for step in command.split(" ;; ") if step.strip()]


# Commands that start ranks many times over (a locate run's rounds, ab's alternated launches).
MANY_LAUNCHES = {"locate", "ab"}
HEAVY_LAUNCHES = 3


def heavy(block: Block) -> bool:
    """A block whose check starts ranks many times: a ``locate`` or an ``ab``, or three
    measuring launches or more. ``make test`` checks the others (about a minute), CI's second
    job (``make test-capabilities``) these (``--tier``): every block is checked in CI."""
    launches = 0
    for command in steps(block.check or block.command):
        split = split_command(command)  # one commbench command, or a shell line: all of them
        words = (split[1][:1] if split is not None
                 else re.findall(r"commbench\s+([a-z-]+)", command))
        if MANY_LAUNCHES & set(words):
            return True
        launches += sum(word in MEASURING for word in words)
    return launches >= HEAVY_LAUNCHES


def check_output(block: Block, cwd: Path) -> str:
    outputs = []
    for command in steps(block.check or block.command):
        split = split_command(command)
        if split is None:
            outputs.append(run_shell(command, cwd, timeout=300))
            continue
        env, args = split
        # a check: command's sizes are chosen for it (a fit needs 4); others' are shrunk
        outputs.append(run_here(env, shrink(args, keep_sizes=block.check is not None), cwd))
    return "\n".join(outputs)


# ---- the two modes --------------------------------------------------------------------------

def check(paths: list[Path], budget: float | None = None, tier: str = "all") -> int:
    found = [block for path in paths for block in blocks_of(path)
             if tier == "all" or heavy(block) == (tier == "heavy")]
    started, stale = time.monotonic(), []
    cwd = scratch()
    try:
        stale = _check_blocks(found, cwd)
    finally:
        import shutil

        shutil.rmtree(cwd, ignore_errors=True)
    took = time.monotonic() - started
    for block, missing, output in stale:
        print(f"{block.where}: '{block.check or block.command}' no longer prints:",
              file=sys.stderr)
        for line in missing:
            print(f"    {line.strip()}", file=sys.stderr)
        print("  it printed:\n" + "\n".join("    " + line for line in output.splitlines()[-30:]),
              file=sys.stderr)
    print(f"docs_output: {len(found)} block(s) checked in {took:.0f} s, {len(stale)} stale",
          file=sys.stderr)
    if budget is not None and took > budget:
        print(f"docs_output: over the {budget:.0f} s budget", file=sys.stderr)
        return 1
    return 1 if stale else 0


def _check_blocks(found: list[Block], cwd: Path) -> list[tuple[Block, list[str], str]]:
    stale = []
    for block in found:
        if not headings(block.body):
            continue
        output = check_output(block, cwd)
        missing = stale_lines(block, output)
        if missing:
            stale.append((block, missing, output))
    return stale


def _cut(old: list[str], new: list[str]) -> list[str]:
    """``new`` cut where ``old`` was: as many lines before the first '...' and after the last
    as ``old`` kept, and a piece ``old`` kept between two cuts from where its first line (its
    words, numbers masked) is in ``new``."""
    cuts = [i for i, line in enumerate(old) if line.strip() == "..."]
    if not cuts:
        return new
    head, tail = cuts[0], len(old) - cuts[-1] - 1
    if head + tail >= len(new):
        return new
    searched = [normal(line) for line in new]
    # where the old cut fell, found again by the lines around it (their words; numbers are
    # masked): the head as long as before from where the old first line now is (lines the
    # command now prints above it shift it), the tail from the old tail's first line to the
    # end; counts where a line is not found
    if head:
        first = next((i for i, text in enumerate(searched) if text == normal(old[0])), 0)
        head = min(first + head, len(new))
    if tail:
        found = next((i for i in range(len(new) - 1, head - 1, -1)
                      if searched[i] == normal(old[cuts[-1] + 1])), None)
        tail = tail if found is None else len(new) - found
    kept = [*new[:head], "..."]
    for start, end in zip(cuts, cuts[1:], strict=False):
        piece = old[start + 1:end]
        at = next((i for i in range(head, len(new) - tail)
                   if piece and searched[i] == normal(piece[0])), None)
        if at is not None:
            kept += [*new[at:at + len(piece)], "..."]
    return [*kept, *(new[len(new) - tail:] if tail else [])]


def rewrite(block: Block, output: str, stamp: str) -> list[str]:
    out_lines = [line.rstrip() for line in output.rstrip("\n").splitlines()]
    prompts = sorted(_prompt_lines(block.body))
    if len(steps(block.command)) > 1 or (out_lines and out_lines[0].startswith("$ ")):
        body = _cut(block.body, out_lines)
    else:
        shown = [block.body[i] for i in prompts[:1]]
        i = prompts[0] + 1 if prompts else 0
        while shown and shown[-1].rstrip().endswith("\\") and i < len(block.body):
            shown.append(block.body[i])
            i += 1
        old_output = [line for j, line in enumerate(block.body) if j not in prompts]
        body = [*shown, *_cut(old_output, out_lines)]
    check = f" | check: {block.check}" if block.check else ""
    mark = f"<!-- made-by: {block.command} | run: {stamp}{check} -->"
    return [mark, block.fence, *body, FENCE.match(block.fence).group(1)]


def write(paths: list[Path], match: str | None) -> int:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    stamp = f"{datetime.date.today().isoformat()} on {commit}"
    for path in paths:
        lines = path.read_text().splitlines()
        made = []
        for block in blocks_of(path):  # in page order: a block may read what one above made
            if match and match not in block.command:
                continue
            print(f"{block.where}: {block.command}", file=sys.stderr, flush=True)
            parts = steps(block.command)
            if len(parts) == 1:
                output = run_shell(parts[0], ROOT)
            else:  # in one shell (echo $? reads the step before): each $ line, its output
                output = run_shell("\n".join(
                    f"s=$?; printf '%s\\n' {shlex.quote('$ ' + step)}; (exit $s); {step}"
                    for step in parts), ROOT)
            made.append((block, rewrite(block, output, stamp)))
        for block, new in reversed(made):  # from the end: the indices above stay valid
            lines[block.mark_line:block.mark_line + 2 + len(block.body) + 1] = new
        if made:
            path.write_text("\n".join(lines) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rerun and rewrite the blocks")
    mode.add_argument("--check", action="store_true", help="verify the blocks' headings")
    parser.add_argument("paths", nargs="*", type=Path, help="docs pages (default: all)")
    parser.add_argument("--match", help="--write: only blocks whose command contains this")
    parser.add_argument("--budget", type=float, help="--check: fail when it takes longer (s)")
    parser.add_argument("--tier", choices=("all", "light", "heavy"), default="all",
                        help="--check: only the blocks that start ranks many times (heavy: "
                        "locate, ab, 3+ launches) or only the others (light)")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.paths] or doc_files()
    if args.write:
        return write(paths, args.match)
    return check(paths, args.budget, args.tier)


if __name__ == "__main__":
    sys.exit(main())
