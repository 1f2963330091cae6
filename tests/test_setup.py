"""The README's first command: ``make lab`` (bootstrap, then ``scripts/lab.sh``) serves
JupyterLab on notebooks/. The bootstrap half runs before every CI test run; this checks
the other half the way a newcomer meets it, as the machine's user (root here)."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest

from tests._jupyter import free_port, running_lab

ROOT = Path(__file__).resolve().parent.parent


def test_lab_script_serves_the_notebooks(tmp_path):
    if not (ROOT / ".venv" / "bin" / "jupyter").exists():
        pytest.skip("no .venv with jupyter: run `make lab` or `make test` first")
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    cmd = [
        str(ROOT / "scripts" / "lab.sh"),
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        "--ServerApp.port_retries=0",
    ]
    probe = f"http://127.0.0.1:{port}/api/contents?token={token}"
    with running_lab(cmd, env, tmp_path / "lab.log", probe) as answer:
        names = {item["name"] for item in json.loads(answer)["content"]}
    assert "02-live-session.ipynb" in names
    assert names >= {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make lab" in readme
    assert [
        line for line in ci.splitlines() if line and not line.startswith(("#", "set ", "cd "))
    ] == ["make test"]
