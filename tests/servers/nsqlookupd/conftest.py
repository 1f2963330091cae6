"""Fixtures for the lookupd tests: ours in-process, the real nsqlookupd as a process."""

from __future__ import annotations

import re
import subprocess
import threading

import pytest

from tests.conftest import peer


class RealLookupd:
    """The real nsqlookupd on free loopback ports (its log tells the ports it got)."""

    def __init__(self, **flags):
        self.argv = [str(peer("nsqlookupd")), "--tcp-address=127.0.0.1:0",
                     "--http-address=127.0.0.1:0", "--broadcast-address=127.0.0.1",
                     *(f"--{k.replace('_', '-')}={v}" for k, v in flags.items())]

    def __enter__(self) -> RealLookupd:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        found: dict[str, str] = {}
        for line in self.proc.stdout:
            m = re.search(r"(TCP|HTTP): listening on (\S+)", line)
            if m:
                found[m.group(1)] = m.group(2)
            if len(found) == 2:
                break
        self.tcp_address, self.http_address = found["TCP"], found["HTTP"]
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def real_lookupd():
    with RealLookupd() as running:
        yield running


@pytest.fixture
def lookupd():
    from nsqviz.servers.nsqlookupd import EmbeddedLookupd

    with EmbeddedLookupd() as running:
        yield running
