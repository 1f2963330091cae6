"""What tshark shows of NSQ (:func:`nsqviz.wireshark.tshark.tshark_pdus` with NSQ's
generated dissector) as ``nsqviz decode --json`` rows: :func:`as_record` turns one PDU
into the row nsqviz gives the same bytes, so the two can be compared field by field
(``tests/wireshark``, notebook 09).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from nsqviz.nsq import events
from nsqviz.nsq.commands import COMMAND_NAMES, COMMANDS, FRAME_NAMES, ParamKind
from nsqviz.nsq.dissector.spec import nsq_spec
from nsqviz.nsq.fields import param_abbrev
from nsqviz.stream.direction import Direction
from nsqviz.wireshark.tshark import TsharkPdu

__all__ = ["as_record"]


def _hex(value: str | None) -> str:
    return (value or "").replace(":", "")


_SPEC = nsq_spec()
_COMMANDS = {c.verb: c for c in _SPEC.commands}
_FRAME_NAMES = {v: k for k, v in _SPEC.frame_types.items()}
_MESSAGE, _ERROR = FRAME_NAMES[events.Message], FRAME_NAMES[events.Error]


def _command_fields(verb: str, pdu: TsharkPdu) -> dict[str, Any]:
    spec = _COMMANDS[verb]
    out: dict[str, Any] = {}
    for p in spec.params:
        value = pdu.first(p.abbrev)
        out[p.name] = int(value) if p.kind == "decimal" else value
    if spec.body is None:
        return out
    # the event's name for the body (data, secret, body, bodies)
    event = getattr(events, verb.capitalize())
    (name,) = [f for f in event.__dataclass_fields__ if f not in out and f != "raw"]
    if spec.body == "json":
        out[name] = json.loads(bytes.fromhex(_hex(pdu.first("nsq.body"))))
        out["body"] = _hex(pdu.first("nsq.body"))
    elif spec.body == "messages":
        out[name] = [_hex(b) for b in pdu.fields.get("nsq.mpub.body", [])]
    else:
        out[name] = _hex(pdu.first("nsq.body"))
    return out


def _cut(pdu: TsharkPdu) -> tuple[str, str, dict[str, Any]] | None:
    """``(kind, name, fields)`` of a PDU the snaplen cut, as nsqviz decodes what was
    captured of it (:func:`nsqviz.nsq.cut.cut_unit`), or None: too little to name it."""
    f = pdu.first
    length = f("nsq.cut.length")
    cut = {"captured": int(f("nsq.cut.captured")),
           "length": None if length is None else int(length)}
    fields: dict[str, Any] = {}
    verb = f("nsq.command")
    if verb is not None:
        for p in COMMANDS[verb].params:
            value = pdu.first(param_abbrev(p))
            if value is None:
                break
            fields[p.field] = int(value) if p.kind is ParamKind.DECIMAL else value
        if f("nsq.body_size") is not None:
            fields["body_size"] = int(f("nsq.body_size"))
            if f("nsq.mpub.count") is not None:
                fields["messages"] = int(f("nsq.mpub.count"))
            fields["body"] = _hex(f("nsq.body"))
        return "command", verb, {**fields, "cut": cut}
    if f("nsq.frame_type") is None:
        return None
    name = _FRAME_NAMES[int(f("nsq.frame_type"))]
    if name == _MESSAGE:
        for key, convert in (("timestamp", int), ("attempts", int), ("id", str)):
            value = f(f"nsq.msg.{key}")
            if value is None:
                break
            fields[key] = convert(value)
        fields["body_size"] = int(f("nsq.size")) - 4 - 26
        fields["body"] = _hex(f("nsq.msg.body"))
    else:
        fields["data"] = _hex(f("nsq.response"))
        if f("nsq.response_to") is not None:
            fields["response_to"] = int(f("nsq.response_to"))
    return "frame", name, {**fields, "cut": cut}


def as_record(pdu: TsharkPdu) -> dict[str, Any] | None:
    """The ``nsqviz decode --json`` row (without ``ts``) this PDU corresponds to, or
    None for a PDU that is not a frame of its own (compressed or TLS data, skipped
    bytes, a PDU the snaplen cut too short to name)."""
    f = pdu.first
    if f("nsq.compressed") or f("nsq.tls") or f("nsq.skipped"):
        return None
    client = pdu.src if f("nsq.dir") == Direction.C2S else pdu.dst
    if f("nsq.cut") is not None:
        cut = _cut(pdu)
        if cut is None:
            return None
        kind, name, fields = cut
    elif f("nsq.magic") is not None:
        kind, name, fields = "command", COMMAND_NAMES[events.Magic], {}
    elif f("nsq.violation") is not None or f("nsq.skipped.reason") is not None:
        code = f("nsq.violation") or ""
        if f("nsq.skipped.reason") is not None:
            kind, name, fields = "gap", "Skipped", {"text": f("nsq.skipped.reason")}
        else:
            problem = {"code": code, "text": f("nsq.violation.text"),
                       "fatal": f("nsq.violation.fatal") in ("1", "True", True)}
            verb = f("nsq.command")
            spec = _COMMANDS.get(verb)
            if spec is not None and f("nsq.violation.kept") in ("1", "True", True):
                # a well-framed command whose line nsqd refuses or reads leniently: the
                # command, its violation attached (a body fault leaves no command)
                kind, name = "command", verb
                fields = {**_command_fields(verb, pdu), "violation": problem}
            else:
                kind, name, fields = "error", code or "Undecodable", problem
    elif f("nsq.command") is not None:
        verb = f("nsq.command")
        kind, name = "command", verb
        fields = _command_fields(verb, pdu)
    elif f("nsq.frame_type") is not None:
        kind = "frame"
        name = _FRAME_NAMES[int(f("nsq.frame_type"))]
        if name == _MESSAGE:
            fields = {"timestamp": int(f("nsq.msg.timestamp")),
                      "attempts": int(f("nsq.msg.attempts")),
                      "id": f("nsq.msg.id"), "body": _hex(f("nsq.msg.body"))}
        elif name == _ERROR:
            code, text = f("nsq.error.code"), f("nsq.error.text")
            data = code if text is None else f"{code} {text}"
            fields = {"data": data.encode().hex(), "code": code, "text": text or ""}
        else:
            fields = {"data": _hex(f("nsq.response"))}
            data = bytes.fromhex(fields["data"])
            if data[:1] == b"{":  # Wireshark's JSON dissector shows it decoded
                with contextlib.suppress(ValueError):
                    fields["json"] = json.loads(data)
            switch = f("nsq.switch")
            if switch in ("snappy", "deflate"):
                level = f("nsq.switch.level")
                fields["compression_starts"] = {"kind": switch,
                                                "level": None if level is None else int(level)}
    else:
        return None
    if kind == "frame" and f("nsq.response_to") is not None:
        fields["response_to"] = int(f("nsq.response_to"))
    server = pdu.dst if client == pdu.src else pdu.src
    direction = Direction.C2S if client == pdu.src else Direction.S2C
    record: dict[str, Any] = {"flow": f"{client}->{server}", "dir": direction,
              "kind": kind, "name": name, "fields": fields, "packets": list(pdu.packets)}
    if kind == "error" and f("nsq.command") is None and f("nsq.frame_type") is None \
            and f("nsq.magic") is None:
        record["unframed"] = True  # bytes the framing rule could not cut into a PDU
    return record
