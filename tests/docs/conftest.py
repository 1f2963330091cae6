"""The website, built once per test session by the command ``make docs`` runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Site:
    html: Path  # the built site's root (index.html, docs/, notebooks/, data/, _static/)
    output: str  # what the build printed, stdout and stderr
    returncode: int
    seconds: float


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    for name in ("sphinx", "myst_nb", "furo"):
        pytest.importorskip(name, reason=f"{name} is missing: `make venv` installs the docs "
                                         "extra (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    start = time.monotonic()
    done = subprocess.run(["bash", str(ROOT / "scripts" / "docs.sh"), str(out)],
                          env={**os.environ, "PYTHON": sys.executable}, capture_output=True,
                          text=True, timeout=600)
    return Site(out / "html", done.stdout + done.stderr, done.returncode,
                time.monotonic() - start)

