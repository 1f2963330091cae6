"""Running tshark with the generated dissectors, and reading what it found.

:func:`tshark_pdus` runs ``tshark -T json`` over a capture with the dissectors of a
folder written by :func:`~nsqviz.wireshark.generate.write_dissectors` and returns one
:class:`TsharkPdu` per PDU of a protocol Wireshark showed, in packet order, with its
packet numbers (all the TCP segments of a reassembled PDU) and its ``<protocol>.*``
fields. A protocol's dissector package may turn them into ``nsqviz decode --json`` rows
(NSQ's: :func:`nsqviz.nsq.dissector.tshark_records.as_record`), so the two can be
compared field by field (``tests/wireshark``, notebook 09).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nsqviz.wireshark.generate import tshark_args

__all__ = ["TsharkPdu", "find_tshark", "tshark_pdus"]


def find_tshark() -> str | None:
    """The tshark on PATH (``scripts/sysdeps.sh`` installs Debian's), or None."""
    return shutil.which("tshark")


@dataclass
class TsharkPdu:
    """One PDU as tshark showed it."""

    frame: int
    packets: tuple[int, ...]
    src: str
    dst: str
    fields: dict[str, list[Any]] = field(default_factory=dict)

    def first(self, name: str, default: Any = None) -> Any:
        values = self.fields.get(name)
        return values[0] if values else default


def _flatten(node: Any, out: dict[str, list[Any]], prefix: str) -> None:
    """Collect every ``<prefix>.*`` field below ``node`` (subtrees included, the JSON
    and protobuf dissectors' own trees excluded), in tree order."""
    if isinstance(node, list):
        for item in node:
            _flatten(item, out, prefix)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in ("json", "protobuf"):
            continue
        if key.startswith(prefix + ".") and not key.endswith("_tree"):
            out.setdefault(key, []).extend(value if isinstance(value, list) else [value])
        elif isinstance(value, dict | list):
            _flatten(value, out, prefix)


def _endpoint(layers: dict[str, Any], side: str) -> str:
    ip = layers.get("ip") or layers.get("ipv6") or {}
    addr = ip.get(f"ip.{side}") or ip.get(f"ipv6.{side}")
    if "ipv6" in layers:
        addr = f"[{addr}]"
    port = layers["tcp"][f"tcp.{side}port"]
    return f"{addr}:{port}"


def tshark_pdus(capture: str | Path, folder: str | Path, *, protocol: str = "nsq",
                tshark: str = "tshark", timeout: float = 300) -> list[TsharkPdu]:
    """The PDUs of ``protocol`` (a registered protocol's name) tshark finds in
    ``capture`` with the dissectors in ``folder``."""
    cmd = [tshark, *tshark_args(folder), "-r", str(capture), "-Y", protocol, "-T", "json",
           "--no-duplicate-keys", "-J", f"frame ip ipv6 tcp tcp.segments {protocol}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0 or "Lua: Error" in proc.stderr:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    packets = json.loads(proc.stdout or "[]")
    out: list[TsharkPdu] = []
    for packet in packets:
        layers = packet["_source"]["layers"]
        number = int(layers["frame"]["frame.number"])
        segments = layers.get("tcp.segments", {}).get("tcp.segment")
        if isinstance(segments, str):
            segments = [segments]
        trees = layers.get(protocol, [])
        trees = trees if isinstance(trees, list) else [trees]
        src, dst = _endpoint(layers, "src"), _endpoint(layers, "dst")
        for i, tree in enumerate(trees):
            fields: dict[str, list[Any]] = {}
            _flatten(tree, fields, protocol)
            # TCP hands a reassembled PDU over first; the rest of the segment follows.
            spans = tuple(sorted({int(s) for s in segments})) if i == 0 and segments else (number,)
            out.append(TsharkPdu(number, spans, src, dst, fields))
    return out
