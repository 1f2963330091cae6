"""The dissectors ``nsqviz wireshark`` writes, and the tshark options they need: every
registered protocol's :attr:`~nsqviz.protocols.protocol.Protocol.dissector`, generated from its
own tables (``nsqviz/<name>/dissector/``); nothing here names a protocol."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from nsqviz import protocols
from nsqviz.protocols.protocol import Protocol

__all__ = ["dissected", "preferences", "tshark_args", "write_dissectors"]


def dissected() -> dict[str, Protocol]:
    """The registered protocols that have a dissector, by name."""
    return {p.name: p for p in protocols.registered() if p.dissector is not None}


def write_dissectors(folder: str | Path, names: Iterable[str] | None = None) -> list[Path]:
    """Write the dissectors of the protocols ``names`` (default: all that have one) into
    ``folder``; return the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    which = dissected()
    written = []
    for name in names or which:
        proto = which[name]
        assert proto.dissector is not None  # dissected() holds only those
        for path_name, text in proto.dissector.files(proto).items():
            path = folder / path_name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def preferences(folder: str | Path) -> dict[str, str]:
    """The Wireshark preferences the dissectors written into ``folder`` rely on: TCP
    reassembly, and what each protocol's dissector asks for (TubeMQ's ``.proto``
    folder on the protobuf search path, say)."""
    prefs = {"tcp.desegment_tcp_streams": "TRUE"}
    for proto in dissected().values():
        assert proto.dissector is not None
        prefs.update(proto.dissector.preferences(Path(folder)))
    return prefs


def tshark_args(folder: str | Path) -> list[str]:
    """``-X lua_script:`` for every dissector in ``folder`` plus ``-o`` preferences."""
    folder = Path(folder)
    args = [f"-Xlua_script:{p}" for p in sorted(folder.glob("*.lua"))]
    for key, value in preferences(folder).items():
        args += ["-o", f"{key}:{value}"]
    return args
