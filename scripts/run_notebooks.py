"""Execute notebooks in place, top to bottom on a fresh kernel, and store them static-first.

    .venv/bin/python scripts/run_notebooks.py notebooks/06-pcap-replay.ipynb [...]

Each notebook runs in its own directory (as nbval runs it). Before it is written back,
the live widgets' traces are dropped: every output's
``application/vnd.jupyter.widget-view+json`` (a reference to a widget model that only a
running kernel has) and the notebook's ``metadata.widgets`` (a snapshot of those models).
Every widget output of nsqviz also stores a complete ``text/html`` picture and a
``text/plain`` text (:class:`nsqviz.widgets.style.Live`), so what remains is what a reader
without a kernel can use: JupyterLab shows the picture until the cell is run (instead of
"model not found"), nbconvert and nbviewer show it instead of a blank widget area. Running
the cell brings the live widget back. nbval does not compare the widget reference
(its ``skip_compare``), so stored and fresh outputs still compare equal.
"""

from __future__ import annotations

import sys
from pathlib import Path

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def strip_widget_state(nb) -> int:
    """Drop widget references and the widget-state snapshot; the number dropped."""
    dropped = int(nb.metadata.pop("widgets", None) is not None)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if WIDGET_VIEW in out.get("data", {}):
                del out["data"][WIDGET_VIEW]
                dropped += 1
    return dropped


def run(path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    dropped = strip_widget_state(nb)
    nbformat.write(nb, path)
    print(f"{path}: executed, {dropped} widget reference(s) dropped")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for arg in sys.argv[1:]:
        run(Path(arg))
