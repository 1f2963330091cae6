"""NSQ's part of ``nsqviz messages``, ``connections`` and ``stats`` (:mod:`nsqviz.report`
says how the commands ask for it), read off NSQ's analyses (:mod:`nsqviz.nsq.analyses`).

* a message: its publish, each delivery and how it ended (FIN, REQ and its delay, a
  timeout; for both requeues when it was due back and when the redelivery was seen;
  still open), its TOUCHes; and why messages are not listed (ids the snaplen cut, no
  consumer);
* a connection: the client IDENTIFY named, each feature asked for and negotiated (with
  their packets), SUB, every RDY; nsqd is the server its errors name;
* stats: heartbeats and their answers, PUB -> answer and delivery -> FIN/REQ latencies,
  compression (frame bytes over wire bytes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from nsqviz.nsq import events as ev
from nsqviz.nsq.commands import BY_EVENT
from nsqviz.report import (
    ConnectionPart,
    Message,
    Report,
    Tables,
    cell,
    packet,
    percentile_line,
    percentiles,
    since,
)

__all__ = ["REPORT", "NsqReport"]

_FIN, _REQ = (BY_EVENT[e].verb for e in (ev.Fin, ev.Req))
_BATCH = 500
"""Messages turned into Python objects at a time: each carries its deliveries (every
channel's, each redelivery), so a batch of 10,000 from the 1M-message benchmark capture
was a million delivery dicts -- 0.9 GB at once."""


class NsqReport(Report):
    """NSQ's :class:`~nsqviz.report.Report`."""

    def messages(self, cap: Tables) -> Iterator[Message]:
        # As Python rows straight from Arrow, a batch at a time: pandas' per-cell
        # conversions cost more than the analysis on a big capture, and a million
        # messages as Python objects at once take gigabytes.
        table = cap.arrow_table("messages").sort_by(
            [("first_delivery_ts", "ascending"), ("msg_id", "ascending"),
             ("channel", "ascending")])
        for r in (r for batch in table.to_batches(_BATCH) for r in batch.to_pylist()):
            published = None if r["publish_cmd"] is None else {
                "command": r["publish_cmd"], "packet": r["publish_packet"],
                "ts": r["publish_ts"], "connection": r["publisher"]}
            deliveries = [{
                "packet": d["packet"], "attempts": d["attempts"], "channel": r["channel"],
                "connection": d["conn_id"], "ts": d["ts"], "outcome": d["outcome"],
                "outcome_packet": d["outcome_packet"], "outcome_ts": d["outcome_ts"],
                "req_delay_ms": None if d["req_delay_ms"] is None else int(d["req_delay_ms"]),
                "touches": d["touches"],
                "msg_timeout_ms": d["msg_timeout_ms"], "requeue_due_ts": d["requeue_due_ts"],
                "redelivered_ts": d["next_delivery_ts"],
            } for d in r["deliveries"]]
            yield Message(r["msg_id"], {
                "id": r["msg_id"], "topic": r["topic"], "channel": r["channel"],
                "broker": r["server"], "published": published, "deliveries": deliveries,
                "outcome": r["outcome"]})

    def render_message(self, message: dict[str, Any], t0: float) -> str:
        m = message
        out = [f"message {m['id']}  topic {m['topic']}  channel {m['channel']}  "
               f"broker {m['broker']}  -> {m['outcome']}\n"]
        published = m["published"]
        if published:
            out.append(f"  published  {published['command']} packet "
                       f"{packet(published['packet'])} {since(published['ts'], t0)}\n")
        else:
            out.append("  published  (not in the capture)\n")
        for d in m["deliveries"]:
            line = (f"  delivered  packet {packet(d['packet'])} {since(d['ts'], t0)} "
                    f"attempts {d['attempts']}: ")
            if d["outcome"] in (_FIN, _REQ):
                line += (f"{d['outcome']} packet {packet(d['outcome_packet'])} "
                         f"{since(d['outcome_ts'], t0)}")
                if d["outcome"] == _REQ:
                    line += f" delay {d['req_delay_ms']} ms: {_requeue(d, t0)}"
            elif d["outcome"] == "timeout":
                line += f"timeout (msg_timeout {d['msg_timeout_ms']} ms): {_requeue(d, t0)}"
            else:
                line += "open at the end of the capture"
            if d["touches"]:
                line += f", {d['touches']} TOUCH"
            out.append(line + "\n")
        return "".join(out)

    def unlisted(self, cap: Tables, listed: bool) -> str:
        """A message is known by the id its deliveries carry (``message_sources`` per
        broker): none delivered (no consumer in the capture, or none given a message),
        or ids the capture cut."""
        sources = cap.arrow_table("message_sources").to_pylist()
        if not sources:
            return ""
        frames = sum(s["message_frames"] for s in sources)
        cut = [s for s in sources if s["cut_ids"]]
        if cut:
            n = sum(s["cut_ids"] for s in cut)
            first = packet(min(s["first_cut_packet"] for s in cut))
            why = ("its snaplen: capture with tcpdump -s 0"
                   if any("snaplen" in (p or "") for p in cap.table("problems").reason)
                   else "bytes it lost")
            if listed:
                return (f"{n} of the capture's {frames} message frames are not listed: the "
                        f"capture cut them short of their 16-digit id (first: packet "
                        f"{first}) -- {why}")
            return (f"no message ids in the capture: it cut its {n} message frames short "
                    f"of their 16-digit id (first: packet {first}) -- {why}")
        if listed or frames:
            return ""
        subs = [s for s in sources if s["subscriptions"]]
        if subs:
            first = packet(min(s["first_sub_packet"] for s in subs))
            return (f"no message ids in the capture: a consumer subscribed (SUB packet "
                    f"{first}) but no message was delivered while it was captured")
        publishes = sum(s["publishes"] for s in sources)
        if publishes:
            first = packet(min(s["first_publish_packet"] for s in sources if s["publishes"]))
            return (f"no message ids in the capture: {publishes} publishes (first: packet "
                    f"{first}) but no consumer in the capture (no SUB, no message "
                    "frame) -- a message's id is only on the wire in its deliveries")
        return "no message ids in the capture: no publish, no consumer, no message frame"

    def connections(self, cap: Tables) -> dict[str, ConnectionPart]:
        conns = cap.table("connections")
        rdy = cap.where(BY_EVENT[ev.Rdy].verb)
        rdys: dict[str, list[dict[str, Any]]] = {}
        for r in rdy.sort_values("seq").to_dict("records"):
            rdys.setdefault(r["conn_id"], []).append(
                {"count": int(r["count"]), "packet": cell(r["packets"][0])})
        out = {}
        for c in conns[conns.protocol == "nsq"].to_dict("records"):
            c = {k: cell(v) for k, v in c.items()}
            mine = rdys.get(c["conn_id"], [])
            asked = json.loads(c["identify"]) if c["identify"] else None
            granted = json.loads(c["negotiated"]) if c["negotiated"] else None
            lines = []
            if asked is not None:
                lines.append(f"  client     client_id {c['client_id']}  user_agent "
                             f"{c['user_agent']}  (IDENTIFY packet "
                             f"{packet(c['identify_packet'])})\n")
                for key in sorted(set(asked) | set(granted or {})):
                    where = []
                    if key in asked:
                        where.append(f"asked {json.dumps(asked[key])} (packet "
                                     f"{packet(c['identify_packet'])})")
                    if granted and key in granted:
                        where.append(f"negotiated {json.dumps(granted[key])} (packet "
                                     f"{packet(c['negotiated_packet'])})")
                    lines.append(f"  feature    {key}: {', '.join(where)}\n")
            if c["topic"] is not None:
                lines.append(f"  SUB        {c['topic']}/{c['channel']} (packet "
                             f"{packet(c['sub_packet'])})\n")
            if mine:
                lines.append("  RDY        " + ", ".join(
                    f"{r['count']} (packet {packet(r['packet'])})" for r in mine) + "\n")
            out[c["conn_id"]] = ConnectionPart(c["role"], {
                "client_id": c["client_id"], "user_agent": c["user_agent"],
                "identify": asked, "identify_packet": c["identify_packet"],
                "negotiated": granted, "negotiated_packet": c["negotiated_packet"],
                "msg_timeout_ms": c["msg_timeout_ms"], "compression": c["compression"],
                "sub": None if c["topic"] is None else {
                    "topic": c["topic"], "channel": c["channel"], "packet": c["sub_packet"]},
                "rdy": mine,
            }, lines, server="nsqd")
        return out

    def stats(self, cap: Tables) -> dict[str, Any]:
        import pyarrow.compute as pc

        hb = cap.table("heartbeats")
        # a row per delivery: read in columns, not as a DataFrame
        deliv = cap.arrow_table("deliveries").select(["outcome", "ts", "outcome_ts"])
        taken = {o: pc.subtract(mine["outcome_ts"], mine["ts"]).to_pylist()
                 for o in (_FIN, _REQ)
                 for mine in [deliv.filter(pc.equal(deliv["outcome"], o))]}
        conns = cap.table("connections")
        compression = []
        for c in conns[conns.compression.notna()].to_dict("records"):
            compression.append({
                "connection": c["flow"], "compression": c["compression"],
                **{f"{d}_ratio": (round(c[f"frame_bytes_{d}"] / c[f"bytes_{d}"], 3)
                                  if c[f"bytes_{d}"] else None) for d in ("c2s", "s2c")}})
        return {
            "heartbeats": {
                "count": len(hb), "answered": int(hb.answered.sum()) if len(hb) else 0,
                "interval": percentiles(list(hb.interval_s)),
                "answer": percentiles(list(hb.response_s))},
            "pub_to_answer": percentiles(list(cap.table("publishes").latency_s)),
            "delivery_to_fin": percentiles(taken[_FIN]),
            "delivery_to_req": percentiles(taken[_REQ]),
            "compression": compression,
        }

    def render_stats(self, stats: dict[str, Any]) -> str:
        hb = stats["heartbeats"]
        out = [f"heartbeats: {hb['count']}, answered {hb['answered']}\n",
               percentile_line("interval", hb["interval"]),
               percentile_line("answered after", hb["answer"]),
               "latencies\n",
               percentile_line("PUB -> answer", stats["pub_to_answer"]),
               percentile_line(f"delivery -> {_FIN}", stats["delivery_to_fin"]),
               percentile_line(f"delivery -> {_REQ}", stats["delivery_to_req"]),
               "compression (frame bytes / wire bytes)\n"]
        out += [f"  {c['connection']}  {c['compression']}  c2s {c['c2s_ratio']}  s2c "
                f"{c['s2c_ratio']}\n" for c in stats["compression"]] or ["  none negotiated\n"]
        return "".join(out)


def _requeue(d: dict[str, Any], t0: float) -> str:
    """When a requeued delivery (REQ or timeout) was due back, and when its redelivery
    was seen: nsqd's queue scans bring it some time after."""
    due, seen = d["requeue_due_ts"], d["redelivered_ts"]
    if seen is None:
        return f"requeue due {since(due, t0)}, no redelivery in the capture"
    return (f"requeue due {since(due, t0)}, redelivery seen {since(seen, t0)} "
            f"({seen - due:+.3f}s)")


REPORT = NsqReport()
"""NSQ's report, read through :attr:`nsqviz.nsq.protocol.NsqProtocol.report`."""
