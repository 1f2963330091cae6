"""TubeMQ's part of ``nsqviz messages``, ``connections`` and ``stats`` (:mod:`nsqviz.report`
says how the commands ask for it), read off TubeMQ's analyses (:mod:`nsqviz.tubemq.analyses`
says what each links and why).

* a message (Broker, topic, partition, message id): its send and the Broker's answer,
  each fetch of it -- consumer, group, the batch -- and how the batch ended (committed,
  not consumed, open), by which call and packet;
* a connection: who (producer, consumer; of the Master or of a Broker), clientId,
  group, topics, partitions; the rebalance events the Master sent and when each was
  reported back; each partition registration on a Broker and how it was released;
  heartbeats, their 411 HB_NO_NODE answers and the register call that followed; the
  close call;
* stats: heartbeats per method (interval, answer, 411s), answers by method, status and
  errCode, messages sent, fetched and committed with their latencies, RPC latency per
  method.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

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
from nsqviz.tubemq.tables import ERRORS, ErrorCode, Role, UnregisterStatus

__all__ = ["REPORT", "TubeMQReport"]

_LISTED = 10  # packets listed per line at most


def _records(cap: Tables, name: str, *order: str) -> list[dict[str, Any]]:
    """A table's rows as Python values (whole numbers stay ints where a column has
    nulls: Arrow's rows, not pandas'), sorted by ``order``."""
    rows: list[dict[str, Any]] = cap.arrow_table(name).sort_by(
        [(k, "ascending") for k in order]).to_pylist()
    return rows


def _by_conn(rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["conn_id"], []).append(r)
    return out


def _code(code: Any) -> str:
    """An errCode with its name: ``411 HB_NO_NODE``."""
    if code is None:
        return "no answer"
    err = ERRORS.get(int(code))
    return f"{int(code)} {err.name}" if err else str(int(code))


def _listed(numbers: list[Any]) -> str:
    shown = ", ".join(packet(p) for p in numbers[:_LISTED])
    return shown + (f", ... ({len(numbers)} in all)" if len(numbers) > _LISTED else "")


class TubeMQReport(Report):
    """TubeMQ's :class:`~nsqviz.report.Report`."""

    def messages(self, cap: Tables) -> Iterator[Message]:
        rows = cap.arrow_table("tubemq_messages").to_pylist()
        rows.sort(key=lambda r: (min(t for t in (r["send_ts"], _first_fetch(r))
                                     if t is not None),
                                 r["server"], r["topic"], r["partition_id"], r["msg_id"]))
        for r in rows:
            sent = None if r["send_packet"] is None else {
                "packet": r["send_packet"], "ts": r["send_ts"], "connection": r["producer"],
                "client_id": r["producer_id"], "answer_packet": r["send_answer_packet"],
                "answer_ts": r["send_answer_ts"], "append_offset": r["append_offset"]}
            fetches = [{
                "packet": f["packet"], "ts": f["ts"], "connection": f["conn_id"],
                "client_id": f["client_id"], "group": f["group_name"], "batch": f["batch"],
                "outcome": f["outcome"], "outcome_method": f["outcome_method"],
                "outcome_packet": f["outcome_packet"], "outcome_ts": f["outcome_ts"],
                "outcome_err_code": f["outcome_err_code"],
            } for f in r["fetches"] or []]
            yield Message(str(r["msg_id"]), {
                "protocol": "tubemq", "id": r["msg_id"], "topic": r["topic"],
                "partition": r["partition_id"], "broker": r["server"], "sent": sent,
                "fetches": fetches, "committed_by": r["committed_by"] or []})

    def render_message(self, message: dict[str, Any], t0: float) -> str:
        m = message
        if m["committed_by"]:
            summary = f"committed by {', '.join(m['committed_by'])}"
        else:
            summary = "fetched, not committed" if m["fetches"] else "not fetched"
        out = [f"message {m['id']}  topic {m['topic']}  partition {m['partition']}  "
               f"broker {m['broker']}  -> {summary}\n"]
        sent = m["sent"]
        if sent:
            out.append(f"  sent       packet {packet(sent['packet'])} {since(sent['ts'], t0)}"
                       f" by {sent['client_id']}: answered packet "
                       f"{packet(sent['answer_packet'])} {since(sent['answer_ts'], t0)}"
                       f" (appendOffset {sent['append_offset']})\n")
        else:
            out.append("  sent       (not in the capture)\n")
        for f in m["fetches"]:
            line = (f"  fetched    packet {packet(f['packet'])} {since(f['ts'], t0)} by "
                    f"group {f['group']} ({f['client_id']}), batch of {f['batch']}: ")
            if f["outcome"] == "open":
                line += "no commit before the connection or the capture ended"
            else:
                line += (f"{f['outcome']} by {f['outcome_method']} packet "
                         f"{packet(f['outcome_packet'])} {since(f['outcome_ts'], t0)}")
                if f["outcome_err_code"] is not None:
                    line += f" ({_code(f['outcome_err_code'])})"
            out.append(line + "\n")
        return "".join(out)

    def connections(self, cap: Tables) -> dict[str, ConnectionPart]:
        events = _by_conn(_records(cap, "tubemq_rebalances", "conn_id", "packet"))
        parts = _by_conn(_records(cap, "tubemq_partitions", "conn_id", "packet"))
        beats = _by_conn(_records(cap, "tubemq_heartbeats", "conn_id", "heartbeat"))
        out = {}
        for c in _records(cap, "connections", "conn_id"):
            if c["protocol"] != "tubemq":
                continue
            conn = c["conn_id"]
            json_part = {
                "server_role": c["server_role"], "client_id": c["client_id"],
                "group": c["group_name"], "topics": c["topics"] or [],
                "partitions": c["partitions"] or [],
                "registered_packet": c["registered_packet"],
                "rebalances": [_event(e) for e in events.get(conn, [])],
                "partition_registrations": [_registration(p) for p in parts.get(conn, [])],
                "heartbeats": _heartbeats(beats.get(conn, [])),
                "messages_sent": c["messages_published"], "messages_fetched": c["messages_in"],
                "closed": None if c["closed_with"] is None else {
                    "method": c["closed_with"], "packet": c["close_packet"],
                    "err_code": c["close_err_code"]},
            }
            out[conn] = ConnectionPart(c["role"], json_part, _lines(json_part))
        return out

    def stats(self, cap: Tables) -> dict[str, Any]:
        beats = cap.table("tubemq_heartbeats")
        heartbeats = []
        for method, mine in sorted(beats.groupby("method"), key=lambda kv: str(kv[0])):
            heartbeats.append({
                "method": method, "count": len(mine), "answered": int(mine.answered.sum()),
                "hb_no_node": int(mine.hb_no_node.sum()),
                "interval": percentiles(list(mine.interval_s)),
                "answer": percentiles(list(mine.latency_ms / 1000))})
        statuses = _records(cap, "tubemq_statuses", "method", "status", "err_code")
        sends = cap.table("tubemq_sends")
        msgs = cap.table("tubemq_messages")
        return {"tubemq": {
            "heartbeats": heartbeats,
            "statuses": statuses,
            "messages": {
                "sent": int(sends.msg_id.notna().sum()),
                "fetched": int((msgs.fetches_count > 0).sum()),
                "committed": int(msgs.committed_by.map(
                    lambda groups: groups is not None and len(groups) > 0).sum()),
                "send_to_answer": percentiles(list(sends.latency_ms / 1000)),
                "send_to_fetch": percentiles(list(msgs.send_to_fetch_s))},
            "rpc": [{k: cell(v) for k, v in r.items()}
                    for r in cap.table("rpc_latency").to_dict("records")],
        }}

    def render_stats(self, stats: dict[str, Any]) -> str:
        s = stats["tubemq"]
        out = ["TubeMQ heartbeats\n"]
        for h in s["heartbeats"]:
            out.append(f"  {h['method']:<22} {h['count']}, answered {h['answered']}, "
                       f"{_code(ErrorCode.HB_NO_NODE)} {h['hb_no_node']}\n")
            out.append("  " + percentile_line("interval", h["interval"]))
            out.append("  " + percentile_line("answered after", h["answer"]))
        if not s["heartbeats"]:
            out.append("  none\n")
        out.append("TubeMQ answers by method, status and errCode\n")
        out += [f"  {r['method']:<28} {r['status']:<8} "
                f"{'-' if r['err_code'] is None else _code(r['err_code']):<28} "
                f"{r['answers']}{'  (error)' if r['error'] else ''}\n"
                for r in s["statuses"]] or ["  none\n"]
        m = s["messages"]
        out.append(f"TubeMQ messages: {m['sent']} sent (answered with an id), "
                   f"{m['fetched']} fetched, {m['committed']} committed\n")
        out.append(percentile_line("send -> answer", m["send_to_answer"]))
        out.append(percentile_line("send -> first fetch", m["send_to_fetch"]))
        out.append("RPC latency per method\n")
        out += [f"  {r['protocol']} {r['method']:<28} requests {r['requests']} answered "
                f"{r['answers']} errors {r['errors']} p50 {r['p50_ms']:.3f}ms p95 "
                f"{r['p95_ms']:.3f}ms max {r['max_ms']:.3f}ms\n"
                if r["answers"] else f"  {r['protocol']} {r['method']:<28} requests "
                f"{r['requests']} unanswered\n" for r in s["rpc"]] or ["  none\n"]
        return "".join(out)


def _first_fetch(r: dict[str, Any]) -> float | None:
    fetches = r["fetches"] or []
    return min((f["ts"] for f in fetches), default=None)


def _event(e: dict[str, Any]) -> dict[str, Any]:
    return {"rebalance_id": e["rebalance_id"], "event": e["event"], "op_type": e["op_type"],
            "partitions": e["partitions"] or [], "packet": e["packet"], "ts": e["ts"],
            "pushes": e["pushes"], "reported": e["reported"],
            "report_status": e["report_status_name"], "report_packet": e["report_packet"],
            "report_s": e["report_s"], "heartbeats_before_report": e["heartbeats_before_report"]}


def _registration(p: dict[str, Any]) -> dict[str, Any]:
    return {"topic": p["topic"], "partition": p["partition_id"], "packet": p["packet"],
            "answer_packet": p["answer_packet"], "err_code": p["err_code"],
            "held": p["held"], "released": p["released"],
            "released_packet": p["released_packet"],
            "released_read_status": p["released_read_status"],
            "fetches": p["fetches"], "messages": p["messages"]}


def _heartbeats(beats: list[dict[str, Any]]) -> dict[str, Any]:
    no_node = [b for b in beats if b["hb_no_node"]]
    again = [b["registered_again_packet"] for b in no_node
             if b["registered_again_packet"] is not None]
    return {"count": len(beats), "methods": sorted({b["method"] for b in beats}),
            "answered": sum(1 for b in beats if b["answered"]),
            "hb_no_node": len(no_node),
            "hb_no_node_packets": [b["answer_packet"] for b in no_node],
            "registered_again_packet": again[-1] if again else None}


def _lines(c: dict[str, Any]) -> list[str]:
    """A connection's text, from its JSON part."""
    server = {Role.MASTER: "of the Master", Role.BROKER: "of a Broker"}.get(
        c["server_role"], "")
    details = "  ".join(text for value, text in (
        (c["client_id"], f"clientId {c['client_id']}"), (c["group"], f"group {c['group']}"),
        (c["registered_packet"], f"(registered packet {packet(c['registered_packet'])})"))
        if value is not None)
    who = ": ".join(part for part in (server, details) if part)
    lines = [f"  client     {who}\n"] if who else []
    if c["topics"]:
        lines.append(f"  topics     {', '.join(c['topics'])}\n")
    if c["partitions"] and not c["partition_registrations"]:
        lines.append(f"  partitions {', '.join(c['partitions'])}\n")
    for e in c["rebalances"]:
        again = f", sent {e['pushes']} times" if e["pushes"] > 1 else ""
        line = (f"  rebalance  {e['rebalance_id']} {e['event']} "
                f"{', '.join(e['partitions'])} (packet {packet(e['packet'])}{again}): ")
        if e["reported"]:
            line += (f"reported {e['report_status']} (packet {packet(e['report_packet'])}, "
                     f"{e['report_s']:.3f}s later)")
        else:
            line += f"never reported ({e['heartbeats_before_report']} heartbeats after it)"
        lines.append(line + "\n")
    for p in c["partition_registrations"]:
        line = (f"  partition  {p['topic']}:{p['partition']} registered (packet "
                f"{packet(p['packet'])}): {_code(p['err_code'])}")
        if p["held"]:
            line += f", {p['fetches']} fetches, {p['messages']} messages; "
            if p["released"] == "unregistered":
                status = p["released_read_status"]
                name = UnregisterStatus(status).name if status in (
                    UnregisterStatus.CONSUMED, UnregisterStatus.NOT_CONSUMED) else status
                line += (f"unregistered (packet {packet(p['released_packet'])}, readStatus "
                         f"{status} {name})")
            elif p["released"] == "registered again":
                line += f"registered again (packet {packet(p['released_packet'])})"
            else:
                line += "held to the end"
        lines.append(line + "\n")
    h = c["heartbeats"]
    if h["count"]:
        line = (f"  heartbeats {h['count']} {', '.join(h['methods'])}, answered "
                f"{h['answered']}, {_code(ErrorCode.HB_NO_NODE)} {h['hb_no_node']}")
        if h["hb_no_node"]:
            line += f" (packets {_listed(h['hb_no_node_packets'])}); "
            line += (f"registered again (packet {packet(h['registered_again_packet'])})"
                     if h["registered_again_packet"] is not None else "never registered again")
        lines.append(line + "\n")
    counts = [f"{n} {what}" for n, what in ((c["messages_sent"], "sent"),
                                            (c["messages_fetched"], "fetched")) if n]
    if counts:
        lines.append(f"  messages   {', '.join(counts)}\n")
    closed = c["closed"]
    if closed is not None:
        lines.append(f"  closed     {closed['method']} (packet {packet(closed['packet'])}): "
                     f"{_code(closed['err_code'])}\n")
    return lines


REPORT = TubeMQReport()
"""TubeMQ's report, read through :attr:`nsqviz.tubemq.protocol.TubeMQProtocol.report`."""
