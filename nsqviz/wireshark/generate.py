"""The dissectors ``nsqviz wireshark`` writes, by protocol, and the tshark options they need."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from nsqviz.wireshark import lookupd_lua, nsq_lua, tubemq_lua

__all__ = ["DISSECTORS", "preferences", "tshark_args", "write_dissectors"]

def _tubemq() -> dict[str, str]:
    files = {"tubemq.lua": tubemq_lua.render()}
    for name, text in tubemq_lua.proto_sources().items():
        files[f"{tubemq_lua.PROTO_DIR}/{name}"] = text
    return files


DISSECTORS: dict[str, Callable[[], dict[str, str]]] = {
    "nsq": lambda: {"nsq.lua": nsq_lua.render()},
    "tubemq": _tubemq,
    "lookupd": lambda: {"lookupd.lua": lookupd_lua.render()},
}
"""Protocol -> a function returning ``{file name: text}`` of its dissector files."""


def write_dissectors(folder: str | Path, protocols: Iterable[str] | None = None) -> list[Path]:
    """Write the dissectors of ``protocols`` (default: all) into ``folder``; return the
    paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for proto in protocols or DISSECTORS:
        for name, text in DISSECTORS[proto]().items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def preferences(folder: str | Path) -> dict[str, str]:
    """The Wireshark preferences the generated dissectors rely on: TCP reassembly, and
    for TubeMQ the ``.proto`` folder on the protobuf search path (its messages as
    ``pbf.*`` filter fields too)."""
    prefs = {"tcp.desegment_tcp_streams": "TRUE"}
    protos = Path(folder).resolve() / tubemq_lua.PROTO_DIR
    if protos.is_dir():
        prefs["uat:protobuf_search_paths"] = f'"{protos}","TRUE"'
        prefs["protobuf.pbf_as_hf"] = "TRUE"
        prefs["protobuf.preload_protos"] = "TRUE"
    return prefs


def tshark_args(folder: str | Path) -> list[str]:
    """``-X lua_script:`` for every dissector in ``folder`` plus ``-o`` preferences."""
    folder = Path(folder)
    args = [f"-Xlua_script:{p}" for p in sorted(folder.glob("*.lua"))]
    for key, value in preferences(folder).items():
        args += ["-o", f"{key}:{value}"]
    return args
