"""The real browser the browser tests drive: Debian's Chromium (``$NSQVIZ_CHROMIUM`` to
use another), through playwright."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("NSQVIZ_CHROMIUM", "/usr/bin/chromium")


def need_chromium() -> Any:
    """Skip the test, saying how to get what is missing, unless Chromium and playwright
    are installed; return playwright's sync API."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium (scripts/sysdeps.sh)")
    return pytest.importorskip("playwright.sync_api",
                               reason="the playwright package is not installed")
