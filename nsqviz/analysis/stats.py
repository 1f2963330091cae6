"""``nsqviz stats``: a capture's statistics, in the spirit of ``tshark -z``, read off the
analyses' tables (nothing is decoded or paired here).

Latencies are given as percentiles (nearest rank over the observed values, in ms).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

__all__ = ["PERCENTILES", "render", "stats"]

PERCENTILES = (50, 90, 99, 100)
_LISTED = 20  # packet numbers listed per line at most


def _pct(values: list[float]) -> dict[str, Any]:
    """Count and nearest-rank percentiles of ``values`` (seconds) in ms."""
    v = sorted(x for x in values if x is not None and not math.isnan(x))
    out: dict[str, Any] = {"n": len(v)}
    for p in PERCENTILES:
        out[f"p{p}_ms"] = round(v[max(math.ceil(p / 100 * len(v)) - 1, 0)] * 1000, 3) \
            if v else None
    return out


def _packet(number: int) -> str:
    return str(int(number))


def stats(cap: Any) -> dict[str, Any]:
    """Every statistic of ``cap`` (a :class:`~nsqviz.analysis.capture.Capture`) as
    plain data."""
    fr = cap.frames
    units = fr[fr.kind.isin(["command", "frame"])]
    by_name = Counter(zip(units.name, units.dir, strict=True))
    split = [int(packets[0]) for packets in units.packets if len(packets) > 1]
    packets = cap.arrow_table("packet_frames").to_pydict()
    glued = sorted({int(p) for p, n in zip(packets["packet"], packets["frames"], strict=True)
                    if n > 1})
    hb = cap.heartbeats
    deliv = cap.deliveries
    answered = deliv[deliv.outcome.isin(["FIN", "REQ"])]
    conns = cap.connections
    compression = []
    for c in conns[conns.compression.notna()].to_dict("records"):
        compression.append({
            "connection": c["flow"], "compression": c["compression"],
            **{f"{d}_ratio": (round(c[f"frame_bytes_{d}"] / c[f"bytes_{d}"], 3)
                              if c[f"bytes_{d}"] else None) for d in ("c2s", "s2c")}})
    return {
        "frames": [{"name": n, "dir": d, "count": k} for (n, d), k in sorted(by_name.items())],
        "errors": dict(sorted(Counter(cap.errors.code).items())),
        "problems": dict(sorted(Counter(cap.problems.problem).items())),
        "glued_packets": glued,
        "split_frames": sorted(split),
        "heartbeats": {
            "count": len(hb), "answered": int(hb.answered.sum()) if len(hb) else 0,
            "interval": _pct(list(hb.interval_s)), "answer": _pct(list(hb.response_s))},
        "pub_to_answer": _pct(list(cap.publishes.latency_s)),
        "delivery_to_fin": _pct(list((answered.outcome_ts - answered.ts)[
            answered.outcome == "FIN"])),
        "delivery_to_req": _pct(list((answered.outcome_ts - answered.ts)[
            answered.outcome == "REQ"])),
        "compression": compression,
        "rpc": [{k: v for k, v in r.items()} for r in cap.rpc_latency.to_dict("records")],
    }


def _listed(pids: list[int]) -> str:
    shown = ", ".join(_packet(p) for p in pids[:_LISTED])
    return shown + (f", ... ({len(pids)} in all)" if len(pids) > _LISTED else "")


def _line(name: str, p: dict[str, Any]) -> str:
    if not p["n"]:
        return f"  {name:<22} none\n"
    return f"  {name:<22} n={p['n']:<6} " + "  ".join(
        f"p{q}={p[f'p{q}_ms']}ms" for q in PERCENTILES) + "\n"


def render(s: dict[str, Any]) -> str:
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
    hb = s["heartbeats"]
    out.append(f"heartbeats: {hb['count']}, answered {hb['answered']}\n")
    out.append(_line("interval", hb["interval"]))
    out.append(_line("answered after", hb["answer"]))
    out.append("latencies\n")
    out.append(_line("PUB -> answer", s["pub_to_answer"]))
    out.append(_line("delivery -> FIN", s["delivery_to_fin"]))
    out.append(_line("delivery -> REQ", s["delivery_to_req"]))
    out.append("compression (frame bytes / wire bytes)\n")
    out += [f"  {c['connection']}  {c['compression']}  c2s {c['c2s_ratio']}  s2c "
            f"{c['s2c_ratio']}\n" for c in s["compression"]] or ["  none negotiated\n"]
    out.append("RPC latency per method\n")
    out += [f"  {r['protocol']} {r['method']:<28} requests {r['requests']} answered "
            f"{r['answers']} errors {r['errors']} p50 {r['p50_ms']:.3f}ms p95 "
            f"{r['p95_ms']:.3f}ms max {r['max_ms']:.3f}ms\n"
            if r["answers"] else f"  {r['protocol']} {r['method']:<28} requests "
            f"{r['requests']} unanswered\n" for r in s["rpc"]] or ["  none\n"]
    return "".join(out)
