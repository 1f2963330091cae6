"""The listen backlog of every server here: the system's maximum, as Go's ``net.Listen``
gives nsqd and nsqlookupd (``/proc/sys/net/core/somaxconn``). asyncio's default of 100
made a burst of 500 connects wait about a second for SYN retransmits."""

from __future__ import annotations

import socket

__all__ = ["listen_backlog"]


def listen_backlog() -> int:
    """``somaxconn`` as Go reads it (capped at 65535), else ``socket.SOMAXCONN``."""
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            n = int(f.read())
    except (OSError, ValueError):
        return socket.SOMAXCONN
    return min(n, 65535) if n > 0 else socket.SOMAXCONN
