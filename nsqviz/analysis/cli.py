"""``nsqviz messages``, ``nsqviz connections`` and ``nsqviz stats``: the analyses of
captures, in-process (:mod:`nsqviz.pipeline.on_duckdb`), as text or JSON.

Every line names its packets (Wireshark's numbers: in rotated files, the number in the
frame's own file) and its time since the capture's first record, so each answer can be
checked in ``nsqviz decode`` or Wireshark.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from nsqviz.capture.options import add_capture_set_options, capture_set_options
from nsqviz.usage import damaged_input, nearest_hint, usage_error, warn

__all__ = ["register"]


def register(subparsers: Any) -> None:
    for name, run, text in (
        ("messages", _messages, "each message's publish, deliveries and answers"),
        ("connections", _connections, "each connection: client, features, SUB, RDY, "
                                      "errors and how it ended"),
        ("stats", _stats, "statistics, like tshark -z: frames, errors, sticky packets, "
                          "heartbeats, latencies, compression, RPC"),
    ):
        p = subparsers.add_parser(name, help=text, description=text)
        p.add_argument("captures", nargs="+", metavar="CAPTURE",
                       help="pcap/pcapng files, directories or globs (one capture set)")
        p.add_argument("--json", action="store_true", help="one JSON object per line")
        if name == "messages":
            p.add_argument("--id", action="append", default=[], metavar="ID",
                           help="only message ID (16 hex characters; repeatable)")
        add_capture_set_options(p)
        p.set_defaults(run=run)


def _open(args: argparse.Namespace) -> Any:
    from nsqviz.analysis.capture import Capture

    options = capture_set_options(args)
    try:
        cap = Capture(*args.captures, idle_split=options["idle_split"],
                      ports=options["ports"], fields=False)
    except FileNotFoundError as exc:
        raise SystemExit(usage_error(args.command, str(exc))) from None
    if cap.warnings and cap.arrow.num_rows == len(cap.warnings):
        # nothing but warnings: no capture was read
        raise SystemExit(damaged_input(args.command, cap.warnings))
    for warning in _warnings(cap, "PacketWarning"):  # one packet each: the file is sound
        warn(args.command, warning)
    return cap


def _warnings(cap: Any, name: str) -> list[str]:
    """The capture's warnings of one kind: ``CaptureWarning`` (the file is damaged) or
    ``PacketWarning`` (a packet in it cannot be read)."""
    import pyarrow.compute as pc

    rows = cap.arrow
    mine = rows.filter(pc.and_(pc.equal(rows["kind"], "error"), pc.equal(rows["name"], name)))
    return [str(r) for r in mine["reason"].to_pylist()]


def _status(args: argparse.Namespace, cap: Any) -> int:
    """0, or 2 after saying what could not be read of a damaged capture file
    (:func:`~nsqviz.usage.damaged_input`: one rule for ``decode`` and the analyses)."""
    damage = _warnings(cap, "CaptureWarning")
    return damaged_input(args.command, damage) if damage else 0


def _v(value: Any) -> Any:
    """A cell as JSON: NaN as null, numpy scalars and arrays as Python."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _v(x) for k, x in value.items()}
    if isinstance(value, list):
        return [_v(x) for x in value]
    return value


def _pkt(number: Any) -> str:
    number = _v(number)
    return "?" if number is None else str(int(number))


def _t(ts: Any, t0: float) -> str:
    ts = _v(ts)
    return "?" if ts is None else f"+{ts - t0:.6f}s"


def _messages(args: argparse.Namespace) -> int:
    cap = _open(args)
    # As Python rows straight from Arrow: pandas' per-cell conversions cost more than
    # the analysis on a big capture.
    msgs = cap.arrow_table("messages").sort_by(
        [("first_delivery_ts", "ascending"), ("msg_id", "ascending"),
         ("channel", "ascending")]).to_pylist()
    if args.id:
        known = {m["msg_id"] for m in msgs}
        for wanted in args.id:
            if wanted not in known:
                return usage_error(args.command, f"no message {wanted!r} in the capture"
                                   + nearest_hint(wanted, known))
        msgs = [m for m in msgs if m["msg_id"] in args.id]
    t0 = cap.t0
    out = sys.stdout
    for r in msgs:
        published = None if r["publish_cmd"] is None else {
            "command": r["publish_cmd"], "packet": r["publish_packet"], "ts": r["publish_ts"],
            "connection": r["publisher"]}
        deliveries = [{
            "packet": d["packet"], "attempts": d["attempts"], "channel": r["channel"],
            "connection": d["conn_id"], "ts": d["ts"], "outcome": d["outcome"],
            "outcome_packet": d["outcome_packet"], "outcome_ts": d["outcome_ts"],
            "req_delay_ms": None if d["req_delay_ms"] is None else int(d["req_delay_ms"]),
            "touches": d["touches"],
            "msg_timeout_ms": d["msg_timeout_ms"], "redelivered_ts": d["next_delivery_ts"],
        } for d in r["deliveries"]]
        if args.json:
            out.write(json.dumps({
                "id": r["msg_id"], "topic": r["topic"], "channel": r["channel"],
                "broker": r["server"], "published": published, "deliveries": deliveries,
                "outcome": r["outcome"]}) + "\n")
            continue
        out.write(f"message {r['msg_id']}  topic {r['topic']}  channel {r['channel']}  "
                  f"broker {r['server']}  -> {r['outcome']}\n")
        if published:
            out.write(f"  published  {published['command']} packet "
                      f"{_pkt(published['packet'])} {_t(published['ts'], t0)}\n")
        else:
            out.write("  published  (not in the capture)\n")
        for d in deliveries:
            line = (f"  delivered  packet {_pkt(d['packet'])} {_t(d['ts'], t0)} attempts "
                    f"{d['attempts']}: ")
            if d["outcome"] in ("FIN", "REQ"):
                line += f"{d['outcome']} packet {_pkt(d['outcome_packet'])} " \
                        f"{_t(d['outcome_ts'], t0)}"
                if d["outcome"] == "REQ":
                    line += f" delay {d['req_delay_ms']} ms"
            elif d["outcome"] == "timeout":
                line += (f"timeout (msg_timeout {d['msg_timeout_ms']} ms): requeue due "
                         f"{_t(d['outcome_ts'], t0)}, redelivery seen "
                         f"{_t(d['redelivered_ts'], t0)} "
                         f"({d['redelivered_ts'] - d['outcome_ts']:+.3f}s)")
            else:
                line += "open at the end of the capture"
            if d["touches"]:
                line += f", {d['touches']} TOUCH"
            out.write(line + "\n")
    return _status(args, cap)


def _connections(args: argparse.Namespace) -> int:
    cap = _open(args)
    conns = cap.connections.sort_values(["start_ts", "conn_id"])
    errors, t0, rdy = cap.errors, cap.t0, cap.where("RDY")
    out = sys.stdout
    for c in conns.to_dict("records"):
        c = {k: _v(v) for k, v in c.items()}
        mine = errors[errors.conn_id == c["conn_id"]].sort_values("seq")
        errs = [{"code": e["code"], "packet": _v(e["packet"]), "dir": e["dir"],
                 "command": e["command"], "command_packet": _v(e["command_packet"]),
                 "nsqd_closed": bool(e["closed"])} for e in mine.to_dict("records")]
        rdys = [{"count": int(r["count"]), "packet": _v(r["packets"][0])}
                for r in rdy[rdy.conn_id == c["conn_id"]].sort_values("seq")
                .to_dict("records")]
        asked = json.loads(c["identify"]) if c["identify"] else None
        granted = json.loads(c["negotiated"]) if c["negotiated"] else None
        obj = {
            "connection": c["flow"], "start_ts": c["start_ts"], "role": c["role"],
            "client_id": c["client_id"], "user_agent": c["user_agent"],
            "identify": asked, "identify_packet": c["identify_packet"],
            "negotiated": granted, "negotiated_packet": c["negotiated_packet"],
            "msg_timeout_ms": c["msg_timeout_ms"], "compression": c["compression"],
            "sub": None if c["topic"] is None else {
                "topic": c["topic"], "channel": c["channel"], "packet": c["sub_packet"]},
            "rdy": rdys, "errors": errs,
            "ended": {"how": c["ended_by"], "first_side": c["ended_from"],
                      "packet": c["end_packet"], "after": c["last_frame"],
                      "after_packet": c["last_frame_packet"]},
        }
        if args.json:
            out.write(json.dumps(obj) + "\n")
            continue
        out.write(f"connection {c['flow']}  {c['role']}  {_t(c['start_ts'], t0)} for "
                  f"{c['duration_s']:.3f}s\n")
        if asked is not None:
            out.write(f"  client     client_id {c['client_id']}  user_agent "
                      f"{c['user_agent']}  (IDENTIFY packet {_pkt(c['identify_packet'])})\n")
            for key in sorted(set(asked) | set(granted or {})):
                where = []
                if key in asked:
                    where.append(f"asked {json.dumps(asked[key])} (packet "
                                 f"{_pkt(c['identify_packet'])})")
                if granted and key in granted:
                    where.append(f"negotiated {json.dumps(granted[key])} (packet "
                                 f"{_pkt(c['negotiated_packet'])})")
                out.write(f"  feature    {key}: {', '.join(where)}\n")
        if c["topic"] is not None:
            out.write(f"  SUB        {c['topic']}/{c['channel']} (packet "
                      f"{_pkt(c['sub_packet'])})\n")
        if rdys:
            out.write("  RDY        " + ", ".join(f"{r['count']} (packet {_pkt(r['packet'])})"
                                                 for r in rdys) + "\n")
        for e in errs:
            answers = (f" answers {e['command']} (packet {_pkt(e['command_packet'])})"
                       if e["command"] else " (in the client's bytes)")
            out.write(f"  error      {e['code']} packet {_pkt(e['packet'])}{answers}"
                      f"{'; nsqd closed' if e['nsqd_closed'] else ''}\n")
        side = {"c2s": "client", "s2c": "server"}.get(c["ended_from"] or "", "?")
        if c["ended_by"] in ("fin", "rst"):
            after = (f"{c['last_frame']} (packet {_pkt(c['last_frame_packet'])})"
                     if c["last_frame"] else "no frame")
            out.write(f"  ended      {c['ended_by'].upper()} from the {side} (packet "
                      f"{_pkt(c['end_packet'])}) after {after}\n")
        else:
            out.write(f"  ended      {c['ended_by'] or 'open'} (no FIN or RST seen)\n")
    return _status(args, cap)


def _stats(args: argparse.Namespace) -> int:
    from nsqviz.analysis.stats import stats

    cap = _open(args)
    result = stats(cap)
    if args.json:
        sys.stdout.write(json.dumps(result, default=_v) + "\n")
        return _status(args, cap)
    from nsqviz.analysis.stats import render

    sys.stdout.write(render(result))
    return _status(args, cap)
