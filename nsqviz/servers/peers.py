"""The real NSQ programs beside the project: where they are, and a real nsqd to run.

The project does not ship nsqd, nsqlookupd or the NSQ tools; it uses them when they are
at hand -- the real nsqd is the reference the embedded broker is tested against, the
tools are real clients and load generators. :func:`find` looks for one in this order:

1. the path given by the caller (a command-line option, a fixture argument);
2. the environment variable named after the program (``NSQD``, ``NSQLOOKUPD``,
   ``NSQ_TAIL``, ``TO_NSQ``, ``BENCH_WRITER``, ``BENCH_READER``, ``TUBEMQ_PRODUCER``,
   ``TUBEMQ_CONSUMER``) -- a path to the executable;
3. the program's name on ``PATH``;
4. the folder ``$NSQVIZ_PEERS`` names, where a machine keeps the NSQ release's programs
   side by side (the project's make targets and test suite set it to the folder this
   project's machines keep them in, when it exists).

:func:`require` returns the path or raises :class:`PeerNotFound` whose text says what was
tried -- tests use that text as their skip reason. :class:`RealNsqd` starts the real nsqd
on free loopback ports (it is told port 0 and reads the ports it got from its log);
:meth:`NsqdProcess.nsqviz` runs ``nsqviz broker`` the same way, with the same flags.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from nsqviz.servers.nsqd.options import DURATION_FLAGS

__all__ = ["PEERS", "PEERS_DIR_VARIABLE", "NsqdProcess", "PeerNotFound", "RealNsqd", "env_var",
           "find", "require"]

PEERS = (
    "nsqd",
    "nsqlookupd",
    "nsq_tail",
    "to_nsq",
    "bench_writer",
    "bench_reader",
    "tubemq-producer",
    "tubemq-consumer",
)
"""The programs this module knows how to find."""

PEERS_DIR_VARIABLE = "NSQVIZ_PEERS"
"""The environment variable naming a folder that holds the programs side by side."""


class PeerNotFound(LookupError):
    """A real program is not available; the text says where it was looked for."""


def env_var(name: str) -> str:
    """The environment variable that names a program's path: ``nsq_tail`` -> ``NSQ_TAIL``."""
    return name.upper().replace("-", "_")


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find(name: str, explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The path of the real program ``name``, or None (see the module doc for the order).

    A path given explicitly or through the environment that is not an executable is an
    error (:class:`PeerNotFound`), not a reason to look elsewhere: the user asked for it.
    """
    if name not in PEERS:
        raise ValueError(f"unknown program {name!r}: one of {', '.join(PEERS)}")
    variable = env_var(name)
    for given, origin in ((explicit, "given path"), (os.environ.get(variable), f"${variable}")):
        if given:
            path = Path(given).expanduser()
            if not _executable(path):
                raise PeerNotFound(f"{name}: {origin} {str(path)!r} is not an executable file")
            return path
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path)
    folder = os.environ.get(PEERS_DIR_VARIABLE)
    if folder:
        beside = Path(folder).expanduser() / name
        if _executable(beside):
            return beside
    return None


def require(name: str, explicit: str | os.PathLike[str] | None = None) -> Path:
    """Like :func:`find`, but a missing program raises :class:`PeerNotFound` saying why."""
    path = find(name, explicit)
    if path is None:
        raise PeerNotFound(
            f"real {name} not found: set ${env_var(name)} to its path, put it on PATH, "
            f"or name a folder holding it in ${PEERS_DIR_VARIABLE}"
        )
    return path


_LISTENING = re.compile(r"(TCP|HTTP|HTTPS): listening on (\S+)")


class NsqdProcess:
    """An nsqd-compatible server run as a process on free loopback ports: the real nsqd
    (:class:`RealNsqd`) or ``nsqviz broker`` (:meth:`nsqviz`), given the same flags.

    Keywords are nsqd's flags (underscores become dashes; ``True`` is a bare flag,
    ``False`` is ``--flag=false``, ``None`` leaves it out; a list repeats it).
    ``with RealNsqd(mem_queue_size=100) as nsqd: nsqd.tcp_address`` -- ``"127.0.0.1:PORT"``:
    the server is told port 0 and its log says which port it got.
    The data path is a temporary directory unless given. Leaving the block stops it with
    SIGTERM (queues are written to disk); :meth:`kill` sends SIGKILL. Its log (stdout and
    stderr) is kept in :attr:`log`.
    """

    def __init__(self, command: list[str], *, data_path: str | None = None, **flags: Any):
        self.command = command
        self.flags = flags
        self.data_path = data_path
        self.process: subprocess.Popen[str] | None = None
        self.log: list[str] = []
        self.tcp_address = ""
        self.http_address = ""
        self.https_address = ""
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._reader: threading.Thread | None = None

    @classmethod
    def nsqviz(cls, *, data_path: str | None = None, **flags: Any) -> NsqdProcess:
        """``nsqviz broker`` with nsqd's flags, run by this Python."""
        return cls([sys.executable, "-m", "nsqviz.cli", "broker"], data_path=data_path, **flags)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def tcp_port(self) -> int:
        return int(self.tcp_address.rpartition(":")[2])

    @property
    def http_port(self) -> int:
        return int(self.http_address.rpartition(":")[2])

    def argv(self) -> list[str]:
        """The command line nsqd is started with."""
        flags = {
            "tcp_address": "127.0.0.1:0",
            "http_address": "127.0.0.1:0",
            "broadcast_address": "127.0.0.1",
            **self.flags,
        }
        argv = [*self.command, f"--data-path={self.data_path}"]
        for key, value in flags.items():
            flag = "--" + key.replace("_", "-")
            for one in value if isinstance(value, list | tuple) else [value]:
                if one is True:
                    argv.append(flag)
                elif one is False:
                    argv.append(f"{flag}=false")  # Go's bool flags need the = form
                elif key in DURATION_FLAGS and isinstance(one, int | float):
                    argv.append(f"{flag}={one * 1000:g}ms")  # seconds, as Options holds them
                elif one is not None:
                    argv.append(f"{flag}={one}")
        return argv

    def start(self, timeout: float = 120.0) -> NsqdProcess:
        """Start the server and wait until its log names both listeners. ``timeout`` only
        bounds a hang: ``nsqviz broker`` is a Python that imports before it listens, and
        six started at once on a busy 2-core machine (the differential pairs) took more
        than 30 s."""
        if self.data_path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="nsqd-")
            self.data_path = self._tmp.name
        Path(self.data_path).mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            self.argv(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        ready = threading.Event()
        wanted = {"TCP", "HTTP"}

        process = self.process

        def read() -> None:
            assert process.stdout is not None  # stdout=PIPE
            for line in process.stdout:
                self.log.append(line.rstrip("\n"))
                match = _LISTENING.search(line)
                if match:
                    kind, address = match.groups()
                    setattr(self, f"{kind.lower()}_address", address.replace("[::]", "127.0.0.1"))
                    wanted.discard(kind)
                    if not wanted:
                        ready.set()
            ready.set()  # nsqd exited: wake the starter

        self._reader = threading.Thread(target=read, name="nsqd-log", daemon=True)
        self._reader.start()
        if not ready.wait(timeout) or wanted:
            self.stop()
            tail = "\n".join(self.log[-10:])
            argv = " ".join(self.argv())
            raise RuntimeError(f"{self.command[-1]} did not start ({argv}):\n{tail}")
        return self

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait: nsqd flushes its queues to the data path. Returns its exit code."""
        code = self._end(signal.SIGTERM, timeout)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        return code

    def kill(self) -> int | None:
        """SIGKILL: nothing is flushed (the data path stays for a restart)."""
        return self._end(signal.SIGKILL, 10.0)

    def _end(self, sig: int, timeout: float) -> int | None:
        if self.process is None:
            return None
        process, self.process = self.process, None
        if process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._reader is not None:
            self._reader.join(5)
        return process.returncode

    def __enter__(self) -> NsqdProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RealNsqd(NsqdProcess):
    """The real nsqd (found by :func:`require`) as an :class:`NsqdProcess`; its HTTPS
    listener, when TLS is configured, also goes to a free loopback port."""

    def __init__(self, binary: str | os.PathLike[str] | None = None, *,
                 data_path: str | None = None, **flags: Any):
        flags = {"https_address": "127.0.0.1:0", **flags}
        super().__init__([str(require("nsqd", binary))], data_path=data_path, **flags)
