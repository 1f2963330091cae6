"""Starting a JupyterLab server for a test and stopping it again, in one place."""

from __future__ import annotations

import contextlib
import socket
import subprocess
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
