"""Set-up for the interop tests: real client libraries in their own cached environments.

pynsq 0.9.1 needs tornado 6.0.x (newer tornado breaks its compressed connections) and
gnsq brings gevent, so both live in a git-ignored venv inside the repository,
``.venv-pynsq/``, created by the first test that needs it and reused afterwards (a stamp
file records what was installed). nsqjs 0.13.0 is installed with npm into the
git-ignored ``.venv-nsqjs/``. TLS tests get a self-signed certificate from the
``openssl`` command line.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CLIENTS = Path(__file__).resolve().parent / "clients"
PY_VENV = ROOT / ".venv-pynsq"
PY_REQUIREMENTS = ["pynsq==0.9.1", "tornado==6.0.4", "python-snappy", "gnsq==1.0.2"]
NODE_DIR = ROOT / ".venv-nsqjs"
NODE_REQUIREMENTS = {"nsqjs": "0.13.0"}


def _locked(name: str):
    """A file lock so parallel test processes do not install twice."""
    ROOT.joinpath(".pytest_cache").mkdir(exist_ok=True)
    fh = open(ROOT / ".pytest_cache" / f"{name}.lock", "w")  # noqa: SIM115
    fcntl.flock(fh, fcntl.LOCK_EX)
    return fh


def python_clients() -> Path:
    """The interpreter of the client venv, created on first use."""
    python = PY_VENV / "bin" / "python"
    stamp = PY_VENV / ".nsqviz-requirements"
    want = "\n".join(PY_REQUIREMENTS)
    with _locked("venv-pynsq"):
        if python.exists() and stamp.exists() and stamp.read_text() == want:
            return python
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(PY_VENV)], check=True)
        r = subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PY_REQUIREMENTS],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.fail(f"could not install {PY_REQUIREMENTS} into {PY_VENV}:\n{r.stderr[-2000:]}")
        stamp.write_text(want)
    return python


def node_clients() -> Path:
    """The directory whose node_modules holds nsqjs, installed on first use."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm not installed (the nsqjs interop test needs them)")
    stamp = NODE_DIR / ".nsqviz-requirements"
    want = json.dumps(NODE_REQUIREMENTS, sort_keys=True)
    with _locked("venv-nsqjs"):
        if stamp.exists() and stamp.read_text() == want and (NODE_DIR / "node_modules").exists():
            return NODE_DIR
        NODE_DIR.mkdir(exist_ok=True)
        (NODE_DIR / "package.json").write_text(json.dumps(
            {"name": "nsqviz-interop", "private": True, "dependencies": NODE_REQUIREMENTS}))
        r = subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=NODE_DIR,
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.fail(f"npm install nsqjs failed:\n{r.stderr[-2000:]}")
        stamp.write_text(want)
    return NODE_DIR


def self_signed_cert(directory: Path) -> tuple[str, str]:
    """A certificate for 127.0.0.1/localhost and its key, made with the openssl CLI."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl command not installed (needed to make a test certificate)")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    return str(cert), str(key)


def run_client(argv: list[str], *, timeout: float = 60, cwd: Path | None = None,
               env: dict | None = None) -> dict:
    """Run a client script; its last stdout line is a JSON report."""
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                       env={**os.environ, **(env or {})})
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert r.returncode == 0 and lines, (
        f"client {argv[1]} failed (rc={r.returncode})\nstdout:\n{r.stdout[-3000:]}\n"
        f"stderr:\n{r.stderr[-3000:]}"
    )
    return json.loads(lines[-1])


class CLIBroker:
    """``nsqviz broker`` as its own process (what the issue's 'done' names), on free
    ports; stopped with SIGTERM, which must exit 0."""

    def __init__(self, *flags: str):
        self.flags = flags

    def __enter__(self) -> CLIBroker:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nsqviz.cli", "broker", "--tcp-address", "127.0.0.1:0",
             "--http-address", "127.0.0.1:0", "--log-level", "warn", *self.flags],
            stdout=subprocess.PIPE, text=True,
        )
        self.tcp_address = self.proc.stdout.readline().split()[-1]
        self.http_address = self.proc.stdout.readline().split()[-1]
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        assert self.proc.wait(timeout=30) == 0
