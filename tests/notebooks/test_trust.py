"""``make lab`` and Binder trust the notebooks the project ships, and only those: an
untrusted notebook's stored HTML loses its style sheets in JupyterLab."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
from nbformat.sign import NotebookNotary

ROOT = Path(__file__).resolve().parents[2]
JUPYTER = str(Path(sys.executable).with_name("jupyter"))


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_only_notebooks_unchanged_since_checkout_are_trusted(tmp_path):
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    (repo / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "trust_notebooks.sh", repo / "scripts")
    for name in ("01-wire-format.ipynb", "09-wireshark.ipynb"):
        shutil.copy(ROOT / "notebooks" / name, repo / "notebooks" / name)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "shipped")
    changed = repo / "notebooks" / "09-wireshark.ipynb"
    nb = nbformat.read(changed, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("<style>*{}</style>"))
    nbformat.write(nb, changed)
    shutil.copy(ROOT / "notebooks" / "03-sticky-packets.ipynb", repo / "notebooks")  # untracked

    data = tmp_path / "data"
    env = {**os.environ, "JUPYTER_DATA_DIR": str(data), "JUPYTER": JUPYTER}
    out = subprocess.run(["bash", "scripts/trust_notebooks.sh"], cwd=repo, env=env,
                         check=True, capture_output=True, text=True).stdout
    assert "trusted 1 notebooks" in out and "1 changed" in out

    notary = NotebookNotary(data_dir=str(data))
    trusted = {p.name: notary.check_signature(nbformat.read(p, as_version=4))
               for p in (repo / "notebooks").glob("*.ipynb")}
    assert trusted == {"01-wire-format.ipynb": True, "09-wireshark.ipynb": False,
                       "03-sticky-packets.ipynb": False}


def test_make_lab_and_binder_run_it():
    assert "scripts/trust_notebooks.sh" in (ROOT / "scripts" / "lab.sh").read_text()
    assert "scripts/trust_notebooks.sh" in (ROOT / "binder" / "postBuild").read_text()
