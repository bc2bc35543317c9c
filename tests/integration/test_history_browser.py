"""history.html in a real headless Chromium: it renders (the screenshot is not blank), and the
page a browser built names every series and the change point.

Chromium is Debian's package (``apt-get install chromium``); the test skips, saying so, where no
chromium binary exists. As root it needs --no-sandbox.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from tests.unit.history.cli_helper import run_cli
from tests.unit.history.runs import make_run, night, sqlite_url

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


@pytest.fixture(scope="module")
def browser() -> str:
    found = next((shutil.which(name) for name in BROWSERS if shutil.which(name)), None)
    if found is None:
        pytest.skip("no chromium (apt-get install -y chromium)")
    return found


def _headless(browser: str, *args: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--allow-file-access-from-files"]
    if os.geteuid() == 0:
        flags.append("--no-sandbox")
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=90)


@pytest.mark.capability
def test_history_html_renders_in_chromium(browser, tmp_path, capsys):
    import matplotlib.image

    rng = np.random.default_rng(2)
    folders = [make_run(tmp_path / "runs", f"night-{n:02d}", night(n),
                        float(np.exp(rng.normal(0, 0.02))) * (1.3 if n >= 10 else 1.0),
                        ops=("allreduce",), sizes=(8, 1 << 20)) for n in range(13)]
    url = sqlite_url(tmp_path / "history.db")
    assert run_cli(capsys, "history", "add", *map(str, folders), "--db", url)[0] == 0
    code, _out, err = run_cli(capsys, "history", "report", "--db", url, "--out",
                              str(tmp_path / "report"))
    assert code == 0, err
    page = tmp_path / "report" / "history.html"
    (tmp_path / "report" / "history-allreduce-gloo-8-float32-n2-ci-runner.png").unlink()
    shot = tmp_path / "shot.png"  # the images are inside the page: no file next to it needed
    done = _headless(browser, f"--screenshot={shot}", "--window-size=1280,1600", "--dump-dom",
                     page.as_uri())  # one start of the browser: the picture and its DOM
    assert shot.exists(), done.stderr[-1000:]
    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.std() > 0.05  # not one blank colour
    assert (pixels.reshape(-1, 3).round(2) != 1.0).any(axis=1).mean() > 0.02  # drawn on
    dom = done.stdout
    assert "allreduce gloo 8 float32 n2 [ci-runner]" in dom
    assert "allreduce gloo 1M float32 n2 [ci-runner]" in dom
    assert "night-10" in dom and "regression" in dom
    assert dom.count("data:image/png;base64,") == 2
