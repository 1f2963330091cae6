"""The HTTP APIs' part of ``nsqviz connections`` and ``nsqviz stats`` (:mod:`nsqviz.report`
says how the commands ask for it), from the ``http_exchanges`` analysis and the
``connections`` table's HTTP columns (:mod:`nsqviz.http.analyses`).

* ``connections``: each HTTP connection's role (``producer``: it published; ``lookup``:
  it asked nsqlookupd where a topic is; else ``http``), then one line per request with
  its answer -- the endpoint, topic and channel, the messages a publish carried, the
  status and nsqd's error code, the nsqd a ``/lookup`` named, the packets and latency;
* ``stats``: requests by endpoint and status, and the time to the answer.

Its messages are NSQ's: a message published over HTTP is in NSQ's part of ``nsqviz
messages``, linked to its deliveries over TCP (``published``).
"""

from __future__ import annotations

from typing import Any

from nsqviz.http.fields import PREFIX
from nsqviz.report import ConnectionPart, Report, Tables, cell, packet, percentile_line, percentiles

__all__ = ["REPORT", "HttpReport"]


def _exchange(e: dict[str, Any]) -> dict[str, Any]:
    """One request and its answer, JSON-ready."""
    bodies = e["bodies"]
    return {"request": e["request"], "path": e["path"], "topic": e["topic"],
            "channel": e["channel"], "messages": None if bodies is None else len(bodies),
            "delay_ms": e["delay_ms"], "packet": e["packet"], "status": e["status"],
            "error": e["error"], "producers": e["producers"],
            "answer_packet": e["answer_packet"],
            "latency_ms": None if e["latency_s"] is None else round(e["latency_s"] * 1000, 3)}


def _line(x: dict[str, Any]) -> str:
    """``  request    GET /lookup topic=orders -> 200 nsqd 127.0.0.1:4150 (packets 91,
    93, 0.388 ms)``."""
    what = [x["request"] if x["request"].endswith(x["path"]) else
            f"{x['request']} {x['path']}"]
    what += [f"{k}={x[k]}" for k in ("topic", "channel") if x[k] is not None]
    if x["messages"] is not None:
        what.append(f"{x['messages']} message{'' if x['messages'] == 1 else 's'}")
    if x["delay_ms"] is not None:
        what.append(f"defer {x['delay_ms']} ms")
    if x["status"] is None:
        return f"  request    {' '.join(what)} -> no answer (packet {packet(x['packet'])})\n"
    answer = [str(x["status"])]
    if x["error"] is not None:
        answer.append(x["error"])
    if x["producers"]:
        answer.append("nsqd " + ", ".join(x["producers"]))
    return (f"  request    {' '.join(what)} -> {' '.join(answer)} (packets "
            f"{packet(x['packet'])}, {packet(x['answer_packet'])}, {x['latency_ms']} ms)\n")


class HttpReport(Report):
    """The HTTP APIs' :class:`~nsqviz.report.Report`."""

    def connections(self, cap: Tables) -> dict[str, ConnectionPart]:
        conns = cap.table("connections")
        exchanges: dict[str, list[dict[str, Any]]] = {}
        for e in cap.table("http_exchanges").sort_values(["conn_id", "seq"]).to_dict(
                "records"):
            exchanges.setdefault(e["conn_id"], []).append(
                _exchange({k: cell(v) for k, v in e.items()}))
        out = {}
        for c in conns[conns.protocol == PREFIX].to_dict("records"):
            c = {k: cell(v) for k, v in c.items()}
            mine = exchanges.get(c["conn_id"], [])
            out[c["conn_id"]] = ConnectionPart(c["role"], {
                "http_requests": c["http_requests"], "http_lookups": c["http_lookups"],
                "messages_published": c["messages_published"], "requests": mine},
                [_line(x) for x in mine])
        return out

    def stats(self, cap: Tables) -> dict[str, Any]:
        ex = cap.table("http_exchanges")
        counts = ex.fillna({"status": -1}).groupby(["request", "status"]).size()
        return {"http": {
            "requests": [{"request": request, "status": None if status == -1 else int(status),
                          "count": int(n)} for (request, status), n in sorted(counts.items())],
            "answer": percentiles(list(ex.latency_s)),
        }}

    def render_stats(self, stats: dict[str, Any]) -> str:
        s = stats["http"]
        out = ["HTTP requests by endpoint and status\n"]
        out += [f"  {r['request']:<22} {'none' if r['status'] is None else r['status']:<6} "
                f"{r['count']}\n" for r in s["requests"]] or ["  none\n"]
        out.append(percentile_line("request -> answer", s["answer"]))
        return "".join(out)


REPORT = HttpReport()
"""The HTTP APIs' report, read through :attr:`nsqviz.http.protocol.HttpProtocol.report`."""
