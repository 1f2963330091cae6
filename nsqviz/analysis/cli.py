"""``nsqviz messages``, ``nsqviz connections`` and ``nsqviz stats``: the analyses of
captures, in-process (:mod:`nsqviz.pipeline.on_duckdb`), as text or JSON.

What every capture has is printed here; each protocol present in the capture adds its
part through its report (:mod:`nsqviz.report`): its messages, its lines of each of its
connections, its statistics. A connection no report claims gets the shared lines only.

Every line names its packets (Wireshark's numbers: in rotated files, the number in the
frame's own file) and its time since the capture's first record, so each answer can be
checked in ``nsqviz decode`` or Wireshark.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from nsqviz import protocols
from nsqviz.capture.options import add_capture_set_options, capture_set_options
from nsqviz.compactjson import line
from nsqviz.report import ConnectionPart, Message, Report, cell, packet, since
from nsqviz.usage import damaged_input, nearest_hint, usage_error, warn

__all__ = ["register"]


def register(subparsers: Any) -> None:
    for name, run, text in (
        ("messages", _messages, "each message from its publish or send to each delivery "
                                "or fetch and how it ended (FIN, REQ, commit ...)"),
        ("connections", _connections, "each connection: its role and client, what it "
                                      "negotiated, subscribed to or holds, its errors and "
                                      "how it ended"),
        ("stats", _stats, "statistics, like tshark -z: frames, errors, sticky packets, and "
                          "each protocol's heartbeats, answers and latencies"),
    ):
        p = subparsers.add_parser(name, help=text, description=f"{text[0].upper()}{text[1:]}.")
        p.add_argument("captures", nargs="+", metavar="CAPTURE",
                       help="pcap/pcapng files, directories or globs (one capture set)")
        p.add_argument("--json", action="store_true", help="one JSON object per line")
        if name == "messages":
            p.add_argument("--id", action="append", default=[], metavar="ID",
                           help="only message ID, as the message lines show it "
                                "(repeatable)")
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

    from nsqviz.arrays import string

    rows = cap.arrow
    mine = rows.filter(pc.and_(pc.equal(rows["kind"], string("error")),
                               pc.equal(rows["name"], string(name))))
    return [str(r) for r in mine["reason"].to_pylist()]


def _status(args: argparse.Namespace, cap: Any) -> int:
    """0, or 2 after saying what could not be read of a damaged capture file
    (:func:`~nsqviz.usage.damaged_input`: one rule for ``decode`` and the analyses)."""
    damage = _warnings(cap, "CaptureWarning")
    return damaged_input(args.command, damage) if damage else 0


def _reports(cap: Any) -> list[Report]:
    """The reports of the protocols present in ``cap``, in registration order."""
    present = set(cap.protocols)
    return [p.report for p in protocols.registered()
            if p.report is not None and p.name in present]


def _messages(args: argparse.Namespace) -> int:
    cap = _open(args)
    reports = _reports(cap)
    found: Iterator[tuple[Report, Message]] = (
        (report, m) for report in reports for m in report.messages(cap))
    if args.id:  # the ids are checked before a line is written
        chosen, known = [], set()
        for report, m in found:
            known.add(m.id)
            if m.id in args.id:
                chosen.append((report, m))
        for wanted in args.id:
            if wanted not in known:
                return usage_error(args.command, f"no message {wanted!r} in the capture"
                                   + nearest_hint(wanted, known))
        found = iter(chosen)
    t0 = cap.t0
    listed = False
    # written as they come: a big capture's messages are never all held
    binary = getattr(sys.stdout, "buffer", None)  # none: a StringIO
    if args.json and binary is not None:  # UTF-8 lines as orjson writes them
        sys.stdout.flush()
        for _, m in found:
            binary.write(line(m.json))
            listed = True
        binary.flush()
    elif args.json:
        for _, m in found:
            sys.stdout.write(line(m.json).decode())
            listed = True
    else:
        for report, m in found:
            sys.stdout.write(report.render_message(m.json, t0))
            listed = True
    if not args.id:
        for report in reports:
            note = report.unlisted(cap, listed)
            if note and args.json:
                warn(args.command, note)
            elif note:
                sys.stdout.write(note + "\n")
    return _status(args, cap)


_OTHER = ConnectionPart("other", {}, [])
"""A connection no protocol with a report claims: only the lines every connection has."""


def _connections(args: argparse.Namespace) -> int:
    cap = _open(args)
    parts: dict[str, ConnectionPart] = {}
    for report in _reports(cap):
        parts.update(report.connections(cap))
    conns = cap.connections.sort_values(["start_ts", "conn_id"])
    errors, problems, t0 = cap.errors, cap.problems, cap.t0
    out = sys.stdout
    for c in conns.to_dict("records"):
        c = {k: cell(v) for k, v in c.items()}
        part = parts.get(c["conn_id"], _OTHER)
        closed = f"{part.server}_closed"
        mine = errors[errors.conn_id == c["conn_id"]].sort_values("seq")
        errs = [{"code": e["code"], "packet": cell(e["packet"]), "dir": e["dir"],
                 "text": e["text"],
                 "command": e["command"], "command_packet": cell(e["command_packet"]),
                 closed: bool(e["closed"])} for e in mine.to_dict("records")]
        found = [{"problem": p["problem"], "name": p["name"], "packet": cell(p["packet"]),
                  "dir": p["dir"], "reason": p["reason"]}
                 for p in problems[problems.conn_id == c["conn_id"]].sort_values("seq")
                 .to_dict("records")]
        obj = {
            "connection": c["flow"], "start_ts": c["start_ts"], "role": part.role,
            **part.json, "errors": errs, "problems": found,
            "ended": {"how": c["ended_by"], "first_side": c["ended_from"],
                      "packet": c["end_packet"], "after": c["last_frame"],
                      "after_packet": c["last_frame_packet"]},
        }
        if args.json:
            out.write(line(obj).decode())
            continue
        out.write(f"connection {c['flow']}  {part.role}  {since(c['start_ts'], t0)} for "
                  f"{c['duration_s']:.3f}s\n")
        out.writelines(part.lines)
        for e in errs:
            if e["command"]:
                answers = f" answers {e['command']} (packet {packet(e['command_packet'])})"
            elif e["command_packet"] is not None:
                answers = (" answers bytes that are no command (packet "
                           f"{packet(e['command_packet'])})")
            else:
                answers = " (answers nothing the capture shows)"
            out.write(f"  error      {e['code']} packet {packet(e['packet'])}{answers}"
                      f"{f'; {part.server} closed' if e[closed] else ''}\n")
        if found:
            out.write(f"  problems   {_problems(found)}\n")
        side = {"c2s": "client", "s2c": "server"}.get(c["ended_from"] or "", "?")
        if c["ended_by"] in ("fin", "rst"):
            after = (f"{c['last_frame']} (packet {packet(c['last_frame_packet'])})"
                     if c["last_frame"] else "no frame")
            out.write(f"  ended      {c['ended_by'].upper()} from the {side} (packet "
                      f"{packet(c['end_packet'])}) after {after}\n")
        else:
            out.write(f"  ended      {c['ended_by'] or 'open'} (no FIN or RST seen)\n")
    return _status(args, cap)


def _problems(found: list[dict[str, Any]]) -> str:
    """nsqviz's findings on one connection, by kind, with their packets (``Gap (packets
    12, 14)``; a refused command: ``RDY refused E_INVALID (packet 26)``)."""
    by: dict[str, list[str]] = {}
    for p in found:
        what = (p["problem"] if p["problem"] == p["name"]
                else f"{p['name']} refused {p['problem']}")
        by.setdefault(what, []).append(packet(p["packet"]))
    return "; ".join(
        f"{what} (packet{'s' if len(pkts) > 1 else ''} {', '.join(pkts[:_LISTED])}"
        f"{f', ... {len(pkts)} in all' if len(pkts) > _LISTED else ''})"
        for what, pkts in by.items())


_LISTED = 10  # packets listed per kind of problem at most


def _stats(args: argparse.Namespace) -> int:
    from nsqviz.analysis.stats import render, stats

    cap = _open(args)
    reports = _reports(cap)
    result = stats(cap, reports)
    if args.json:
        sys.stdout.write(json.dumps(result, default=cell) + "\n")
        return _status(args, cap)
    sys.stdout.write(render(result, reports))
    return _status(args, cap)
