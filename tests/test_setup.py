"""The README's first command: ``make lab`` (bootstrap, then ``scripts/lab.sh``) serves
JupyterLab on notebooks/. The bootstrap half runs before every CI test run; this checks
the other half the way a newcomer meets it, as the machine's user (root here)."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_lab_script_serves_the_notebooks(tmp_path):
    if not (ROOT / ".venv" / "bin" / "jupyter").exists():
        pytest.skip("no .venv with jupyter: run `make lab` or `make test` first")
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    log = (tmp_path / "lab.log").open("w")
    proc = subprocess.Popen(
        [
            str(ROOT / "scripts" / "lab.sh"),
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            "--ServerApp.port_retries=0",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                url = f"http://127.0.0.1:{port}/api/contents?token={token}"
                listing = json.loads(urllib.request.urlopen(url, timeout=2).read())
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text())
                time.sleep(0.5)
        names = {item["name"] for item in listing["content"]}
        assert "02-live-session.ipynb" in names
        assert names >= {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make lab" in readme
    assert [
        line for line in ci.splitlines() if line and not line.startswith(("#", "set ", "cd "))
    ] == ["make test"]
