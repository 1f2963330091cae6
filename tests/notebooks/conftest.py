"""Runs every notebook in notebooks/ under nbval as part of a plain ``pytest``.

nbval only collects ``.ipynb`` files it is pointed at with ``--nbval``; the notebooks live
outside ``tests/`` (where ``testpaths`` points). So this directory's ``sanitize.cfg``
doubles as the collection hook: when pytest meets it, it collects every
``notebooks/*.ipynb`` -- numbered notebooks added later are picked up without touching
this file -- as nbval items, with outputs compared after the regexes of ``sanitize.cfg``
(timings, message ids and timestamps, ports) have been applied to both sides.

Each notebook runs on a fresh kernel of the Python running pytest (nbval's
``--nbval-current-env``), with its directory as the working directory.
Run just the notebooks with ``pytest tests/notebooks``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent
NOTEBOOKS = HERE.parent.parent / "notebooks"
SANITIZE = HERE / "sanitize.cfg"


class NotebookSuite(pytest.File):
    """A collector for every notebook; nbval's own collector does the rest per file."""

    def collect(self):
        from nbval.plugin import IPyNbFile

        option = self.config.option
        if option.nbval_sanitize_with is None:
            option.nbval_sanitize_with = str(SANITIZE)
        if not option.nbval_kernel_name:
            option.nbval_current_env = True
        for notebook in sorted(NOTEBOOKS.glob("*.ipynb")):
            nb = IPyNbFile.from_parent(self, path=notebook)
            nb.add_marker(pytest.mark.slow)  # a kernel each, seconds to a minute (06: Spark)
            yield nb


def pytest_collect_file(file_path: Path, parent):
    if file_path == SANITIZE:
        return NotebookSuite.from_parent(parent, path=file_path)
    return None
