"""``nsqviz stats``: a capture's statistics, in the spirit of ``tshark -z``, read off the
analyses' tables (nothing is decoded or paired here).

The sections every capture has come first -- frames by name and direction, the servers'
error answers by code, nsqviz's problems by kind, sticky packets (several frames in one
packet, one frame over several) -- then each protocol's present in the capture, from its
:class:`~nsqviz.report.Report` (NSQ's heartbeats, latencies and compression; TubeMQ's
heartbeats, answers by method and status, messages and RPC latency): never a section of
a protocol the capture lacks.
Latencies are given as percentiles (nearest rank over the observed values, in ms).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from nsqviz.report import Report, Tables, packet

__all__ = ["render", "stats"]

_LISTED = 20  # packet numbers listed per line at most


def stats(cap: Tables, reports: Sequence[Report]) -> dict[str, Any]:
    """Every statistic of ``cap`` as plain data: the sections every capture has, then
    the sections of ``reports`` (the reports of the protocols present in it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    # Read off the Arrow frames table in columns: a row per frame of a big capture, never
    # a Python object per row.
    fr = cap.arrow.select(["kind", "name", "dir", "packets"])
    units = fr.filter(pc.is_in(fr["kind"], pa.array(["command", "frame"])))
    counted = units.group_by(["name", "dir"]).aggregate([([], "count_all")])
    by_name = dict(zip(zip(counted["name"].to_pylist(), counted["dir"].to_pylist(),
                           strict=True), counted["count_all"].to_pylist(), strict=True))
    several = units.filter(pc.greater(pc.list_value_length(units["packets"]), 1))
    split = pc.list_element(several["packets"], 0).to_pylist()
    packets = cap.arrow_table("packet_frames").to_pydict()
    glued = sorted({int(p) for p, n in zip(packets["packet"], packets["frames"], strict=True)
                    if n > 1})
    out: dict[str, Any] = {
        "frames": [{"name": n, "dir": d, "count": k} for (n, d), k in sorted(by_name.items())],
        "errors": dict(sorted(Counter(cap.table("errors").code).items())),
        "problems": dict(sorted(Counter(cap.table("problems").problem).items())),
        "glued_packets": glued,
        "split_frames": sorted(split),
    }
    for report in reports:
        part = report.stats(cap)
        if part.keys() & out.keys():
            raise ValueError(f"{type(report).__name__} gives sections another part gives: "
                             f"{sorted(part.keys() & out.keys())}")
        out.update(part)
    return out


def _listed(pids: list[int]) -> str:
    shown = ", ".join(packet(p) for p in pids[:_LISTED])
    return shown + (f", ... ({len(pids)} in all)" if len(pids) > _LISTED else "")


def render(s: dict[str, Any], reports: Sequence[Report]) -> str:
    """:func:`stats`' result as text."""
    out = ["frames by name and direction\n"]
    out += [f"  {f['name']:<22} {f['dir']}  {f['count']}\n" for f in s["frames"]]
    out.append("errors by code (the servers' error answers)\n")
    out += [f"  {code:<22} {n}\n" for code, n in s["errors"].items()] or ["  none\n"]
    out.append("problems nsqviz found (refused commands, undecodable bytes, capture gaps)\n")
    out += [f"  {what:<22} {n}\n" for what, n in s["problems"].items()] or ["  none\n"]
    out.append("sticky packets\n")
    out.append(f"  packets with several frames: {_listed(s['glued_packets']) or 'none'}\n")
    out.append(f"  frames over several packets (first packet): "
               f"{_listed(s['split_frames']) or 'none'}\n")
    out += [report.render_stats(s) for report in reports]
    return "".join(out)
