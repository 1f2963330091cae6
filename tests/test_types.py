"""``mypy --strict`` over what pyproject.toml's ``[tool.mypy]`` names (every module of
``nsqviz``; construct read through construct-typing's stubs); ``ruff`` over the whole
tree, as ``make lint``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # half a minute of CPU on a fresh clone (no .mypy_cache)
def test_mypy_strict_is_clean():
    pytest.importorskip("mypy", reason="mypy is not installed: `make venv` installs the dev extra")
    out = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "Success: no issues found" in out.stdout


def test_ruff_is_clean():
    pytest.importorskip("ruff", reason="ruff is not installed: `make venv` installs the dev extra")
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
