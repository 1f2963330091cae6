"""Capturing from a network interface for ``nsqviz decode -i``: a capture tool as a child.

nsqviz does not open interfaces itself (that needs privileges and libpcap); it runs a
capture tool writing a capture to a pipe and reads that pipe like any capture
(:func:`~nsqviz.capture.files.read_capture` blocks on it and yields each packet as soon
as it is written):

* ``tcpdump -i IFACE -s 0 -B 65536 -U --immediate-mode -w - [BPF]`` (classic pcap;
  ``-U``: written per packet, ``--immediate-mode``: handed over by the kernel per packet
  -- else libpcap waits up to a second to fill a buffer; ``-s 0``: whole packets). The
  default. In immediate mode libpcap gives every packet a whole-snaplen slot of the
  kernel's ring (256 KiB with ``-s 0``), so tcpdump's default 2 MiB buffer holds eight
  packets and a burst while tcpdump is not scheduled is dropped; ``-B 65536`` (KiB)
  holds 256. tcpdump counts what the kernel dropped on its standard error at the end.
* ``dumpcap -i IFACE -q -w - [-f BPF]`` (pcapng), where tcpdump is not installed.
  dumpcap (Wireshark 4.0) writes a pipe in blocks, not per packet: on a quiet link a
  record can wait for the next block.

The tool's own messages (``listening on lo ...``, permission errors) go to standard
error as it writes them.

The tool must end with nsqviz however nsqviz ends -- Ctrl-C, ``SIGTERM``, a closed
terminal's ``SIGHUP``, or killed outright -- though on a quiet link it would never notice
that nobody reads its pipe any more (it learns that only from its next write). So it runs
under a small guard process (:data:`GUARD`) whose standard input is a pipe only nsqviz
writes to: when nsqviz ends, by any means, the kernel closes that pipe, and the guard ends
the tool. (The kernel's parent-death signal would not do: tcpdump drops its root
privileges once it has opened the interface, which clears it.)
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, BinaryIO, cast

from nsqviz.usage import nearest

if TYPE_CHECKING:
    import subprocess

__all__ = ["GUARD", "TOOLS", "CaptureToolError", "LiveCapture", "capture_command"]

TOOLS = ("tcpdump", "dumpcap")
"""The capture tools, in the order of preference when none is named."""


GUARD = r"""
import signal, subprocess, sys, threading
child = None
stopping = threading.Event()
def end(*_):
    stopping.set()
    if child is not None and child.poll() is None:
        child.terminate()
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(sig, end)
def watch():
    sys.stdin.buffer.read()  # returns at end of file: nsqviz closed its end, or died
    end()
threading.Thread(target=watch, daemon=True).start()
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)
if stopping.is_set():
    end()
code = child.wait()
sys.exit(128 - code if code < 0 else code)
"""
"""The guard: runs the command it is given (its standard output, the capture, goes
straight to nsqviz), ends it on a signal or at the end of its own standard input, and
exits with the command's status."""


class CaptureToolError(Exception):
    """The capture cannot start: no tool, or no such interface (the message says which,
    and the nearest valid choices)."""


def capture_command(tool: str, interface: str, bpf: str | None) -> list[str]:
    """The command line that captures ``interface`` (through ``bpf``) to standard output."""
    if tool == "dumpcap":
        return ["dumpcap", "-i", interface, "-q", "-w", "-", *(["-f", bpf] if bpf else [])]
    if tool == "tcpdump":
        return ["tcpdump", "-i", interface, "-s", "0", "-B", "65536", "-U", "--immediate-mode",
                "-w", "-", *([bpf] if bpf else [])]
    raise CaptureToolError(f"unknown capture tool {tool!r}: choose from {', '.join(TOOLS)}")


def _check_interface(interface: str) -> None:
    """An interface name the system does not have is a bad argument; numbers (the tools'
    interface indexes) and ``any`` are left to the tool."""
    import socket

    names = [name for _, name in socket.if_nameindex()]
    if interface.isdigit() or interface == "any" or interface in names:
        return
    raise CaptureToolError(f"no interface {interface!r}: try "
                           f"{', '.join([*nearest(interface, names), 'any'])}")


def _tool(preferred: str | None) -> str:
    import shutil  # here and below: ``nsqviz decode`` of a file needs none of it

    for tool in (preferred,) if preferred else TOOLS:
        if shutil.which(tool) is not None:
            return tool
    wanted = preferred or " or ".join(TOOLS)
    raise CaptureToolError(f"{wanted} is not installed (Debian/Ubuntu: apt-get install"
                           " tcpdump, or wireshark-common for dumpcap)")


class LiveCapture:
    """A capture tool running under its :data:`GUARD`; :attr:`stdout` is the capture
    being written.

    :meth:`stop` ends it (also as a context manager); so does the end of this process,
    however it ends. :meth:`failure` says, once the capture has ended, whether the tool
    failed.
    """

    def __init__(self, interface: str, bpf: str | None = None, *, tool: str | None = None):
        _check_interface(interface)
        self.tool = _tool(tool)
        self.command = capture_command(self.tool, interface, bpf)
        import subprocess

        # the guard's standard input: a pipe nobody writes to, closed when we end
        self.process: subprocess.Popen[bytes] = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", GUARD, *self.command],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        # a pipe of bytes: BinaryIO is how the capture readers type their files
        self.stdout = cast(BinaryIO, self.process.stdout)

    def failure(self) -> str | None:
        """After the capture ended: why the tool stopped, if it failed."""
        code = self.process.wait()
        if code == 0:
            return None
        return f"{self.tool} ended with exit status {code} ({' '.join(self.command)})"

    def stop(self) -> None:
        """End the tool (if still running) and close the pipes."""
        import subprocess

        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.stdout.close()

    def __enter__(self) -> LiveCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
