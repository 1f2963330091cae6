"""Starting a JupyterLab server for a test and stopping it again, in one place."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_lab(cmd: list[str], env: dict, log_path: Path, probe: str) -> Iterator[bytes]:
    """Run ``cmd`` (a JupyterLab server), wait until ``probe`` (a URL) answers, yield that
    answer, and stop the server afterwards; its log is in ``log_path`` and in the error
    if it never comes up."""
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + 90
            while True:
                try:
                    answer = urllib.request.urlopen(probe, timeout=2).read()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(
                            "JupyterLab did not start:\n" + log_path.read_text()
                        ) from None
                    time.sleep(0.5)
            yield answer
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def write_settings(settings: Path, *, theme: str | None = None) -> None:
    """JupyterLab user settings for a quiet, fully rendered notebook (and ``theme``, e.g.
    ``"JupyterLab Dark"``, when given)."""
    files: dict[str, dict] = {
        # render every cell (JupyterLab 4 detaches off-screen cells by default)
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        # no news or update checks: the test has no network
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false", "checkForUpdates": False},
    }
    if theme is not None:
        files["@jupyterlab/apputils-extension/themes.jupyterlab-settings"] = {"theme": theme}
    for name, doc in files.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))


@contextlib.contextmanager
def lab_server(tmp_path: Path, root: Path, *, theme: str | None = None,
               app: str = "jupyterlab") -> Iterator[tuple[str, str]]:
    """A JupyterLab (or, with ``app="notebook"``, a Jupyter Notebook 7) serving ``root`` on
    a free loopback port with its own token, settings, workspaces, runtime and config
    directories under ``tmp_path`` (nothing of the user's is read or written); yields
    ``(url, token)`` once it answers, stops it afterwards."""
    write_settings(tmp_path / "settings", theme=theme)
    port, token = free_port(), secrets.token_hex(16)
    cmd = [
        sys.executable, "-m", app, "--no-browser", "--ip=127.0.0.1",
        f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        "--ServerApp.port_retries=0", "--allow-root",
    ]
    if app == "jupyterlab":
        cmd += [f"--LabApp.user_settings_dir={tmp_path / 'settings'}",
                f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}", "--LabApp.news_url="]
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
           "JUPYTER_DATA_DIR": str(tmp_path / "data"),  # its trust database: see trust()
           "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),  # what Notebook 7 reads
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}
    url = f"http://127.0.0.1:{port}"
    with running_lab(cmd, env, tmp_path / "lab.log", f"{url}/api/status?token={token}"):
        yield url, token


def trust(tmp_path: Path, notebook: Path) -> None:
    """Sign ``notebook`` in the trust database of the :func:`lab_server` run with the same
    ``tmp_path``, as "File > Trust Notebook" would: JupyterLab then renders its stored
    HTML with its ``<style>`` blocks, as it renders outputs it has just run (an untrusted
    notebook's stored HTML is sanitized: no style blocks, no inputs)."""
    import nbformat
    from nbformat.sign import NotebookNotary

    data = tmp_path / "data"
    data.mkdir(parents=True, exist_ok=True)
    notary = NotebookNotary(data_dir=str(data))
    nb = nbformat.read(notebook, as_version=4)
    notary.sign(nb)
    nbformat.write(nb, notebook)
