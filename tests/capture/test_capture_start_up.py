"""``nsqviz decode`` of a short capture loads only what decoding needs.

A run's start-up is most of a short capture's time (``benchmarks.wireshark_decode``
prints it beside ``tshark -r``): the analyses' engines (pandas, pyarrow, DuckDB), the
notebook widgets and the display-filter engine (RE2) are imported where they are used,
never by the decode command itself. Each check is a fresh interpreter, whose
``sys.modules`` is what the run imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data"

NOT_FOR_DECODE = ("pandas", "pyarrow", "duckdb", "ipywidgets", "re2", "nsqviz.filters",
                  "nsqviz.analysis", "nsqviz.pipeline", "asyncio")
"""Top-level modules a plain ``nsqviz decode`` (no ``-Y``) has no use for."""


def _loaded_after(code: str) -> set[str]:
    """The top-level and nsqviz modules in ``sys.modules`` after running ``code``."""
    probe = (f"import sys, json\n{code}\n"
             "print(json.dumps(sorted(sys.modules)), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=120)
    names = json.loads(done.stderr.strip().splitlines()[-1])
    return set(names) | {n.split(".")[0] for n in names}


def _unwanted(loaded: set[str]) -> list[str]:
    return sorted(n for n in NOT_FOR_DECODE if n in loaded)


def test_importing_the_decode_command_loads_no_analysis_engine():
    loaded = _loaded_after("import nsqviz.capture.cli")
    assert "nsqviz.capture.cli" in loaded
    assert _unwanted(loaded) == []


def test_a_decode_run_loads_no_analysis_engine():
    capture = DATA / "pubsub-nsqjs.pcapng"
    loaded = _loaded_after(
        "import contextlib, io\nfrom nsqviz.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    assert main(['decode', '--json', {str(capture)!r}]) == 0\n"
        "assert out.getvalue().count('\\n') > 10")
    assert "nsqviz.records" in loaded
    assert _unwanted(loaded) == []


def test_a_display_filter_loads_the_filter_engine_when_asked():
    """The check above can fail: ``-Y`` does import what it lists."""
    capture = DATA / "pubsub-nsqjs.pcapng"
    loaded = _loaded_after(
        "import contextlib, io\nfrom nsqviz.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['decode', '-Y', 'nsq', {str(capture)!r}])")
    assert {"re2", "nsqviz.filters"} <= loaded
