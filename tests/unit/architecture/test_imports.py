"""The architecture's rules, checked on the code as it is: what import-linter reads statically,
and what a process really loads.

import-linter's forbidden contract allows indirect imports because the collectives' descriptors
import torch inside functions (a static chain model -> collectives -> torch that never runs);
these tests load each torch-free package in a fresh interpreter and look at sys.modules, which
is what a user of ``commbench compare`` on a laptop without torch depends on.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TORCH_FREE = ("commbench.model.estimate", "commbench.model.fit", "commbench.model.trace_price",
              "commbench.compare.runs", "commbench.compare.locate", "commbench.importers",
              "commbench.results", "commbench.results.trace", "commbench.results.locate",
              "commbench.specs.measure", "commbench.specs.locate", "commbench.specs.replay",
              "commbench.specs.estimate", "commbench.history", "commbench.output.console",
              "commbench.output.comparison", "commbench.output.live", "commbench.engine.sinks",
              "commbench.results.launches", "commbench.record", "commbench.cli")


@pytest.mark.parametrize("module", TORCH_FREE)
def test_loading_the_package_loads_no_torch(module):
    probe = (f"import sys, {module}; "
             "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"{module} loaded torch: {done.stdout.strip()[:200]}"


# One planted edge per rule the contracts state, each caught by one contract only: the layers
# (the engine importing a command), the capabilities' independence (`|`: the sweep importing
# locate, which `:` allowed), only commands import output (the CLI importing a table), and the
# in-job shim's light imports (the recorder's helpers importing pandas).
PLANTED = [
    ("engine/binding.py", "from commbench.commands import measure",
     "commbench.engine.binding -> commbench.commands.measure"),
    ("measure/groups.py", "from commbench.locate import fleet",
     "commbench.measure.groups -> commbench.locate.fleet"),
    ("cli/options.py", "from commbench.output import tables",
     "commbench.cli.options -> commbench.output.tables"),
    ("record/calls.py", "import pandas", "commbench.record.calls -> pandas"),
]


def test_the_import_contracts_hold_and_catch_a_back_edge(tmp_path):
    """lint-imports passes on the tree, and fails on a copy with planted edges, naming each
    one, so no contract is vacuous."""
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed in this environment")
    clean = subprocess.run([str(lint)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert clean.returncode == 0, clean.stdout[-2000:]

    import shutil

    copy = tmp_path / "tree"
    shutil.copytree(ROOT / "commbench", copy / "commbench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    for module, line, _ in PLANTED:
        planted = copy / "commbench" / module
        planted.write_text(planted.read_text() + f"\n{line}  # noqa\n")
    broken = subprocess.run([str(lint)], capture_output=True, text=True, cwd=copy, timeout=300,
                            env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"})
    assert broken.returncode != 0
    report = " ".join(broken.stdout.split())  # lint-imports wraps long lines
    missed = [chain for _, _, chain in PLANTED if chain not in report]
    assert missed == [], f"no contract caught {missed}:\n{broken.stdout[-3000:]}"


def test_no_module_imports_itself_through_others():
    """No import cycle between any two modules, function-level imports included (grimp reads
    every import statement): a cycle once hid between model/curves.py and model/estimate.py,
    and config <-> collectives was dodged with imports inside functions."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("commbench", include_external_packages=False)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    cycles = _cycles(edges)
    assert cycles == [], cycles
    # the check sees a planted cycle
    assert _cycles({**edges, "commbench.core.stats": {"commbench.model.fit"},
                    "commbench.model.fit": edges["commbench.model.fit"] |
                    {"commbench.core.stats"}}) != []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


LIGHT = {"commbench.cli": "from commbench.cli import main\ntry: main(['--help'])\n"
                          "except SystemExit: pass",
         "commbench.record.recorder": "import commbench.record.recorder",
         "commbench.record.boot.sitecustomize": "import commbench.record.boot.sitecustomize"}


@pytest.mark.parametrize("module", LIGHT)
def test_the_cli_and_the_in_job_shim_load_no_rich_pandas_or_matplotlib(module):
    """What the forbidden contract cannot see (it allows the CLI's lazy route through a
    command): a process that loads the CLI (and prints --help), or the shim inside a user's
    job, loads none of them."""
    probe = (f"import sys\n{LIGHT[module]}\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('rich', 'pandas', 'matplotlib')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", f"{module}: {done.stdout[-300:]}"
