"""`make compat`: the CPU suite (scripts/compat_checks.py) on every torch release we claim.

One venv per release, cached outside the repo (``~/.cache/commbench/compat/torch-<v>``, or
``$COMMBENCH_COMPAT_CACHE``): the release's real wheel from the package index (a CUDA build
imports and runs on a CPU-only machine, so every gloo path is exercised), the project
installed editable beside it. Prints a check x release table and writes it, with the junit
files, to ``results/compat-<date>/``. Exit 1 when any check failed on any release.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELEASES = ("2.4.1", "2.6.0", "2.9.1", "2.11.0", "2.13.0")
CACHE = Path(os.environ.get("COMMBENCH_COMPAT_CACHE",
                            Path.home() / ".cache" / "commbench" / "compat"))


def sh(*command: str | Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], check=True, **kwargs)


def venv_for(release: str) -> Path:
    """The release's venv, made once; the project is reinstalled when pyproject.toml changes."""
    venv = CACHE / f"torch-{release}"
    python = venv / "bin" / "python"
    if not (venv / ".torch").exists():
        print(f"torch {release}: building {venv} (the wheel and its CUDA libraries: ~5 GB)",
              flush=True)
        sh(sys.executable, "-m", "venv", "--clear", venv)
        sh(python, "-m", "pip", "install", "-q", "--upgrade", "pip")
        sh(python, "-m", "pip", "install", "-q", f"torch=={release}")
        (venv / ".torch").touch()
    stamp = venv / ".project"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text() != digest:
        pin = venv / "torch-pin.txt"
        pin.write_text(f"torch=={release}\n")
        sh(python, "-m", "pip", "install", "-q", "-c", pin, "-e", f"{ROOT}[dev]")
        stamp.write_text(digest)
    return venv


# The recorder reads torch's dispatcher ops, whose schemas move between releases: its real-job
# tests run on every release too.
CHECK_FILES = ("scripts/compat_checks.py", "tests/integration/test_record.py")


def run_checks(release: str, venv: Path, out: Path) -> dict:
    python = venv / "bin" / "python"
    version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    junit = out / f"junit-{release}.xml"
    started = time.monotonic()
    subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    *CHECK_FILES, f"--junitxml={junit}"], cwd=ROOT)
    checks: dict[str, dict] = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "").split("[")[0].removeprefix("test_")
        check = checks.setdefault(name, {"passed": 0, "skipped": 0, "total": 0,
                                         "failure": "", "skip": ""})
        check["total"] += 1
        failed = case.find("failure")
        if failed is None:
            failed = case.find("error")
        skipped = case.find("skipped")
        if failed is None and skipped is None:
            check["passed"] += 1
        elif failed is None:  # a skip says why (a limit of this torch), and is not a failure
            check["skipped"] += 1
            check["skip"] = check["skip"] or (skipped.get("message") or "")[:160]
        elif not check["failure"]:
            check["failure"] = (failed.get("message") or "").splitlines()[0][:160]
    return {"release": release, "torch": version, "seconds": round(time.monotonic() - started),
            "checks": checks}


def cell(check: dict | None) -> str:
    if check is None:
        return "-"
    skipped = check.get("skipped", 0)
    if skipped == check["total"]:
        return "skip"
    if check["passed"] + skipped == check["total"]:
        text = "ok" if check["passed"] == 1 else f"ok ({check['passed']})"
        return text + (f", {skipped} skipped" if skipped else "")
    return f"FAIL {check['passed']}/{check['total']}"


def table_markdown(results: list[dict]) -> str:
    names = list(dict.fromkeys(n for r in results for n in r["checks"]))
    head = "| check | " + " | ".join(f"torch {r['release']}" for r in results) + " |"
    lines = [head, "|" + "---|" * (len(results) + 1)]
    for name in names:
        lines.append(f"| {name.replace('_', ' ')} | "
                     + " | ".join(cell(r["checks"].get(name)) for r in results) + " |")
    lines.append("| suite time | " + " | ".join(f"{r['seconds']} s" for r in results) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", default=",".join(RELEASES),
                        help="comma-separated torch releases (default: %(default)s)")
    args = parser.parse_args()
    releases = [r.strip() for r in args.releases.split(",") if r.strip()]
    out = ROOT / "results" / f"compat-{datetime.date.today().isoformat()}"
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for release in releases:
        print(f"\n== torch {release}", flush=True)
        results.append(run_checks(release, venv_for(release), out))
    table = table_markdown(results)
    (out / "table.md").write_text(table)
    (out / "compat.json").write_text(json.dumps(results, indent=1))
    print("\n" + table)
    for result in results:
        for name, check in result["checks"].items():
            if check["failure"]:
                print(f"torch {result['release']} {name}: {check['failure']}")
            elif check.get("skip"):
                print(f"torch {result['release']} {name}: skipped: {check['skip']}")
    print(f"written to {out.relative_to(ROOT)}/")
    failed = any(c["passed"] + c.get("skipped", 0) < c["total"]
                 for r in results for c in r["checks"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
