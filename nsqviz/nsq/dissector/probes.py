"""What nsqd answers to each kind of malformed input, probed from the codec.

The codec (:mod:`nsqviz.nsq.connection`) is where nsqviz decides which error nsqd v1.3.0
gives to a bad command or frame -- its code, its text and whether it closes the
connection. Rather than re-type those decisions in Lua, the generator feeds the codec
one probe per situation (a parameter too few, a bad topic name, a message count of -7
...) and writes down what comes back, with the probe's value turned into a placeholder
(``{value}``, ``{quoted}``, ``{n}``, ``{verb}``, ``{pyrepr}``, ``{max}``: the limit in
force) that the dissector fills in. When the codec's answer changes, the regenerated
dissector changes with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.dissector.spec import CommandSpec, NsqSpec
from nsqviz.nsq.events import Violation
from nsqviz.nsq.server_connection import ServerConnection
from nsqviz.nsq.wire import MAGIC_V2
from nsqviz.wireshark.lua import SpecError

__all__ = ["Answer", "error_table"]

_VALID = {"name": b"t", "decimal": b"1", "message_id": b"0123456789abcdef"}
_BAD_NAME, _BAD_NUMBER = b"bad*x", b"x9"
_SHORT_ID, _NONHEX_ID = b"12x", b"0123456789abcdeg"
_N = -7  # a count or size no sender writes, easy to find in a text
_OVER = 98765432  # above any limit nsqd holds a number to, easy to find in a text


@dataclass(frozen=True, slots=True)
class Answer:
    """nsqd's error for one situation: ``text`` is a template (see the module doc)."""

    code: str
    text: str
    fatal: bool

    def lua(self) -> dict[str, Any]:
        return {"code": self.code, "text": self.text, "fatal": self.fatal}


def _size(n: int) -> bytes:
    return n.to_bytes(4, "big", signed=True)


def _violation(data: bytes, *, commands: bool) -> Violation:
    conn = ServerConnection(passive=True) if commands else ClientConnection(passive=True)
    events = conn.receive(data) + conn.receive(b"")
    found = [e for e in events if isinstance(e, Violation)]
    if not found:
        raise SpecError(f"the codec accepts the probe {data!r}: teach the generator")
    return found[0]


def _answer(data: bytes, *, commands: bool = True, verb: str = "", **subs: str) -> Answer:
    v = _violation((MAGIC_V2 + data) if commands else data, commands=commands)
    text = v.text
    if verb and text.startswith(verb + " "):
        text = "{verb}" + text[len(verb):]
    for name, value in subs.items():
        text = text.replace(value, "{" + name + "}")
    return Answer(v.code, text, v.fatal)


def _line(cmd: CommandSpec, params: list[bytes], body: bytes | None = None) -> bytes:
    line = b" ".join([cmd.verb.encode(), *params]) + b"\n"
    if cmd.body is None:
        return line
    body = body if body is not None else (b"{}" if cmd.body == "json" else
                                          _size(1) + _size(1) + b"x" if cmd.body == "messages"
                                          else b"x")
    return line + _size(len(body)) + body


def _bare_line(cmd: CommandSpec) -> bytes:
    """The command's line with valid parameters, without its body."""
    return b" ".join([cmd.verb.encode(), *(_VALID[p.kind] for p in cmd.params)]) + b"\n"


def _command_answers(cmd: CommandSpec, bounds: dict[str, int]) -> dict[str, Answer]:
    valid = [_VALID[p.kind] for p in cmd.params]
    out: dict[str, Answer] = {}
    if cmd.params:
        out["few"] = _answer(_line(cmd, valid[:-1]))
    out["many"] = _answer(_line(cmd, [*valid, b"extra"]))
    for i, p in enumerate(cmd.params):
        if p.kind == "name":
            bad = [*valid[:i], _BAD_NAME, *valid[i + 1:]]
            out[f"param.{p.name}"] = _answer(_line(cmd, bad), quoted=f'"{_BAD_NAME.decode()}"')
        elif p.kind == "decimal":
            bad = [*valid[:i], _BAD_NUMBER, *valid[i + 1:]]
            out[f"param.{p.name}"] = _answer(_line(cmd, bad), value=_BAD_NUMBER.decode())
            if p.bound is not None:  # above the limit nsqd holds it to
                over = [*valid[:i], str(_OVER).encode(), *valid[i + 1:]]
                out[f"bound.{p.name}"] = _answer(_line(cmd, over), value=str(_OVER),
                                                 max=str(bounds[p.bound]))
        else:
            short = [*valid[:i], _SHORT_ID, *valid[i + 1:]]
            nonhex = [*valid[:i], _NONHEX_ID, *valid[i + 1:]]
            out["id_length"] = _answer(_line(cmd, short), value=_SHORT_ID.decode())
            out["id_hex"] = _answer(_line(cmd, nonhex), value=_NONHEX_ID.decode())
    if cmd.body == "json":
        out["json"] = _answer(_line(cmd, valid, b"nojsn"))
    elif cmd.body == "messages":
        n = str(_N)
        out["count_cut"] = _answer(_line(cmd, valid, b"ab"))
        out["count"] = _answer(_line(cmd, valid, _size(_N) + b"abcd"), n=n)
        out["size_cut"] = _answer(_line(cmd, valid, _size(2) + _size(1) + b"x" + b"ab"))
        out["size"] = _answer(_line(cmd, valid, _size(1) + _size(_N) + b"abcd"), n=n)
        out["cut"] = _answer(_line(cmd, valid, _size(1) + _size(9) + b"x"))
        out["trailing"] = _answer(_line(cmd, valid, _size(1) + _size(1) + b"x" + b"zzz"),
                                  n="3")
    return out


def _framing_answers(spec: NsqSpec) -> dict[str, Answer]:
    message = next(c for c in spec.commands if c.body == "bytes" and c.message)
    body = next(c for c in spec.commands if c.body is not None and not c.message)
    prefix_m = _bare_line(message)
    prefix_b = _bare_line(body)
    too_big = 10**8
    return {
        "message_size": _answer(prefix_m + _size(_N), verb=message.verb, n=str(_N)),
        "message_big": _answer(prefix_m + _size(too_big), verb=message.verb, n=str(too_big)),
        "body_size": _answer(prefix_b + _size(_N), verb=body.verb, n=str(_N)),
        "body_big": _answer(prefix_b + _size(too_big), verb=body.verb, n=str(too_big)),
        "line": _answer(b"x" * (spec.max_line + 1)),
        "magic": _magic(),
    }


def _magic() -> Answer:
    v = _violation(b"GET / HTTP/1.1\n", commands=True)  # no magic in front
    return Answer(v.code, v.text, v.fatal)


def _frame_answers(spec: NsqSpec) -> dict[str, Answer]:
    types = spec.frame_types
    message = types["FrameTypeMessage"]
    bad_type = max(types.values()) + 5
    fixed = sum(f.size for f in spec.message)
    bad_id = b"0123456789abcdeZ"
    return {
        "frame_type": _answer(_size(12) + _size(bad_type) + b"whatever", commands=False,
                              n=str(bad_type)),
        "size_small": _answer(_size(2) + b"xx", commands=False, n="2"),
        "size_big": _answer(_size(10**8) + _size(0), commands=False, n=str(10**8)),
        "short": _answer(_size(4 + fixed - 6) + _size(message) + bytes(fixed - 6),
                         commands=False),
        "id": _answer(_size(4 + fixed) + _size(message) + bytes(fixed - 16) + bad_id,
                      commands=False, pyrepr=repr(bad_id)),
    }


def error_table(spec: NsqSpec) -> dict[str, Any]:
    """``{"commands": {verb: {situation: answer}}, "unknown": answer, "framing": {...},
    "frames": {...}}`` as plain data for the Lua generator."""
    commands = {c.verb: {k: a.lua() for k, a in _command_answers(c, spec.bounds).items()}
                for c in spec.commands}
    return {
        "commands": commands,
        "unknown": _answer(b"BOGUS\n", value="BOGUS").lua(),
        "framing": {k: a.lua() for k, a in _framing_answers(spec).items()},
        "frames": {k: a.lua() for k, a in _frame_answers(spec).items()},
    }
