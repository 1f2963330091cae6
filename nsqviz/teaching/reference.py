"""The NSQ V2 reference card, rendered from the tables the code runs on.

Nothing here states a protocol fact of its own: every row is read from the command table
(:mod:`nsqviz.nsq.commands`), the transition table (:mod:`nsqviz.nsq.states`), the error
table (:class:`nsqviz.nsq.errors.ErrorCode`), the grammar (message layout, IDENTIFY
fields, the name rule) and the option defaults of framing, codec and broker. The rule for
names and its length limit are found by asking the grammar's own check.

``python -m nsqviz.teaching.reference notebooks/00-reference.ipynb`` writes the reference notebook;
``tests/notebooks/test_reference.py`` fails when the stored notebook and the code differ.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from construct import Int16ub, Int64sb

from nsqviz.nsq import framing, grammar, identify_fields
from nsqviz.nsq import wire as nsq_wire
from nsqviz.nsq.commands import COMMANDS, FRAMES, BodyKind
from nsqviz.nsq.errors import ErrorCode
from nsqviz.nsq.states import CLOSERS, Role, State, allowed_states
from nsqviz.nsq.wire import MAGIC_V2
from nsqviz.servers.nsqd.options import _FLAGS as BROKER_HELP
from nsqviz.servers.nsqd.options import Options

__all__ = ["cells", "commands", "errors", "frames", "identify", "limits", "message_layout",
           "names", "notebook", "write"]

_BODY = {
    BodyKind.NONE: "—",
    BodyKind.JSON: "`[size:int32][JSON object]`",
    BodyKind.SECRET: "`[size:int32][secret]`",
    BodyKind.MESSAGE: "`[size:int32][message]`",
    BodyKind.MESSAGES: "`[size:int32][count:int32]([size:int32][message])*`",
}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(head: tuple[str, ...], rows: Sequence[tuple[object, ...]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def commands() -> str:
    """Every verb: its line, body, nsqd's answer (or none) and the states allowing it."""
    from nsqviz.nsq.events import Magic

    magic_states = [s.value for s in State if s in allowed_states(Role.SERVER, Magic)]
    rows: list[tuple[object, ...]] = [(
        f"`\"{MAGIC_V2.decode()}\"` (the magic: {len(MAGIC_V2)} bytes, no `\\n`)",
        "—", "—", f"none; anything else: {ErrorCode.BAD_PROTOCOL.value}", "no",
        ", ".join(magic_states))]
    for spec in COMMANDS.values():
        line = " ".join([spec.verb, *(f"<{p.field}>" for p in spec.params)])
        params = ", ".join(
            f"{p.field} ({p.kind.value}{'' if p.default is None else f', missing = {p.default}'})"
            for p in spec.params) or "—"
        allowed = allowed_states(Role.SERVER, spec.event)
        states = [s.value for s in State if s in allowed]
        rows.append((f"`{line}\\n`", params, _BODY[spec.body],
                     spec.answer or "none (only an error, if it fails)",
                     "yes" if spec.auth else "no", ", ".join(states)))
    return _table(("command line", "parameters", "body", "nsqd answers on success",
                   "asks auth", "allowed in states"), rows)


def states() -> str:
    """The server's transition table, one row per state."""
    rows = []
    for state, row in _server_rows():
        moves = ", ".join(f"{name} → {nxt.value}" if nxt is not state else name
                          for name, nxt in row)
        rows.append((state.value, moves or "nothing (the connection is gone)"))
    return _table(("state", "accepted (→ next state)"), rows)


def _server_rows() -> Iterator[tuple[State, list[tuple[str, State]]]]:
    from nsqviz.nsq.commands import name_of
    from nsqviz.nsq.states import TRANSITIONS

    for state in State:
        row = TRANSITIONS[Role.SERVER][state]
        yield state, [(name_of(e), nxt) for e, nxt in row.items() if e not in CLOSERS]


def frames() -> str:
    """nsqd's frame types and the frame header."""
    rows = [(name, value, f"`{value.to_bytes(4, 'big').hex(' ')}`")
            for name, value in FRAMES.values()]
    return _table(("frame type", "value", "on the wire"), rows)


def message_layout() -> str:
    """The data of a FrameTypeMessage, field by field, from the grammar's ``Message``."""
    widths: dict[object, tuple[str | None, int | None]] = {
        Int64sb: ("int64, big-endian", 8), Int16ub: ("uint16, big-endian", 2)}
    rows, offset = [], 0
    for sub in grammar.Message.subcons:
        kind, size = widths.get(getattr(sub, "subcon", None), (None, None))
        if kind is None:
            try:
                size = sub.sizeof()
                kind = f"{size} ASCII hex digits" if sub.name == "id" else f"{size} bytes"
            except Exception:  # noqa: BLE001 - greedy: the rest of the frame
                kind, size = "the rest of the frame", None
        where = f"{offset}.." if size is None else f"{offset}..{offset + size - 1}"
        rows.append((sub.name, where, kind))
        offset += size or 0
    return _table(("field", "bytes (from the frame's data)", "type"), rows)


def identify() -> str:
    """Every IDENTIFY key: its default, the range nsqd v1.3.0 accepts (with the option
    values that bound it), what it does outside that range, and what -1 does."""
    opts = Options()
    rows = []
    for f in identify_fields.IDENTIFY_FIELDS.values():
        default = '""' if f.default == "" else f.default
        low, high = _bound(f, f.nsqd_low, opts), _bound(f, f.high, opts)
        span = f"{low} .. {high}" if (low or high) else "—"
        if f.nsqd_low != f.low:
            span += f" (the protocol document says {f.low})"
        outside = "—" if span == "—" else (
            f"capped at {f.high}; 0 or less: the default" if f.clamps
            else f"{ErrorCode.BAD_BODY.value} (fatal)")
        off = f"{f.disable}: {f.disabled}" if f.disable is not None else "—"
        rows.append((f.name, f.type.__name__, default, span, outside, off, f.since or "—",
                     f.doc))
    return _table(("key", "type", "default", "nsqd v1.3.0 accepts", "outside that",
                   "switched off with", "since", "meaning"), rows)


def _bound(f: identify_fields.IdentifyField, bound: int | str | None, opts: Options) -> str:
    """A range end as the card shows it: a number, or the nsqd option that sets it with
    its default value (in the field's unit)."""
    if bound is None:
        return ""
    if isinstance(bound, str):
        value = getattr(opts, bound)
        shown = f"{value * 1000:,.0f} ms" if f.unit == "ms" else f"{value:,}"
        return f"{bound} ({shown})"
    return f"{bound:,}"


def errors() -> str:
    """Every error code: text on the wire, whether nsqd closes after it, and why."""
    rows = [(f"`{code.value}`", "fatal: nsqd closes" if code.fatal else
             "**non-fatal**: connection stays", code.why) for code in ErrorCode]
    return _table(("code", "after it", "sent when"), rows)


def name_limit() -> int:
    """The longest topic/channel name the grammar accepts (found by asking it)."""
    n = 1
    while nsq_wire.is_valid_topic_name("a" * (n + 1)):
        n += 1
    return n


def names() -> str:
    """The rule for topic and channel names, checked against the grammar on examples."""
    limit = name_limit()
    examples = ["orders", "orders.v2_eu-1", "orders#ephemeral", "a" * limit,
                "a" * (limit + 1), "orders!", "", "my topic", "orders#archive"]
    rows = [(f"`{e}`" if len(e) < 20 else f"`{e[:6]}…` ({len(e)} chars)",
             "valid" if nsq_wire.is_valid_topic_name(e) else "refused") for e in examples]
    return (f"Characters `[.a-zA-Z0-9_-]`, 1 to **{limit}** of them in all, optionally "
            f"ending in `#ephemeral` (never written to disk; an ephemeral channel goes away "
            f"with its last client, an ephemeral topic with its last channel). Anything "
            f"else is {ErrorCode.BAD_TOPIC} / {ErrorCode.BAD_CHANNEL} "
            "(fatal).\n\n" + _table(("name", "grammar says"), rows))


def _mib(n: int) -> str:
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n > 1024 * 1024:
        return f"{n // (1024 * 1024)} MiB + {n % (1024 * 1024)} B"
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} B"


def limits() -> str:
    """Every size limit and timer default, the number and where it comes from."""
    opts = Options()
    frame = framing.DEFAULT_MAX_FRAME_SIZE
    rows = [
        ("max_msg_size", opts.max_msg_size, _mib(opts.max_msg_size),
         f"nsqd `--max-msg-size`: {BROKER_HELP['max_msg_size'][1]} (PUB, DPUB, each MPUB "
         f"message); over it: {ErrorCode.BAD_MESSAGE}"),
        ("max_body_size", opts.max_body_size, _mib(opts.max_body_size),
         f"nsqd `--max-body-size`: {BROKER_HELP['max_body_size'][1]}; "
         f"over it: {ErrorCode.BAD_BODY}"),
        ("MPUB message count", (opts.max_body_size - 4) // 5,
         "(max_body_size − 4) ÷ 5",
         "the most messages an MPUB body can hold: each takes at least 4 size bytes + 1"),
        ("largest frame we accept from nsqd", frame, _mib(frame),
         f"nsqviz's client framing (DEFAULT_MAX_FRAME_SIZE): {frame} = max_body_size "
         f"{opts.max_body_size} + 1024 for the frame header "
         "(a larger size is a broken or hostile stream, refused at its 4 size bytes)"),
        ("command line", framing.DEFAULT_MAX_LINE, _mib(framing.DEFAULT_MAX_LINE),
         "nsqd reads a line with a 16 KiB buffered reader"),
        ("max_rdy_count", opts.max_rdy_count, "",
         f"nsqd `--max-rdy-count`: {BROKER_HELP['max_rdy_count'][1]}; RDY above it: "
         f"{ErrorCode.INVALID} (fatal)"),
        ("msg_timeout", opts.msg_timeout, "s",
         f"nsqd `--msg-timeout`: {BROKER_HELP['msg_timeout'][1]}"),
        ("max_msg_timeout", opts.max_msg_timeout, "s", "nsqd `--max-msg-timeout`"),
        ("max_req_timeout", opts.max_req_timeout, "s",
         f"nsqd `--max-req-timeout`: {BROKER_HELP['max_req_timeout'][1]}"),
        ("client_timeout", opts.client_timeout, "s",
         "nsqd `--client-timeout`; the default heartbeat_interval is half of it, and a "
         "client silent for two intervals is closed"),
        ("max_heartbeat_interval", opts.max_heartbeat_interval, "s",
         "nsqd `--max-heartbeat-interval`"),
        ("output_buffer_timeout", opts.output_buffer_timeout, "s",
         f"nsqd `--output-buffer-timeout`: {BROKER_HELP['output_buffer_timeout'][1]}"),
        ("min_output_buffer_timeout", opts.min_output_buffer_timeout, "s",
         "nsqd `--min-output-buffer-timeout`: the least output_buffer_timeout IDENTIFY may "
         "ask for"),
        ("max_output_buffer_timeout", opts.max_output_buffer_timeout, "s",
         "nsqd `--max-output-buffer-timeout`: the most output_buffer_timeout IDENTIFY may "
         "ask for"),
        ("max_output_buffer_size", opts.max_output_buffer_size, _mib(opts.max_output_buffer_size),
         "nsqd `--max-output-buffer-size`: the most output_buffer_size IDENTIFY may ask for"),
        ("max_deflate_level", opts.max_deflate_level, "",
         "nsqd `--max-deflate-level`: a higher deflate_level is lowered to it, not refused"),
    ]
    return _table(("limit", "default", "as", "where it comes from"), rows)


COMPRESSION = (
    "**snappy and deflate cannot be combined.** IDENTIFY may ask for one of them; asking "
    "for both is answered `{code}` ({fatal}: {why}). After a successful IDENTIFY "
    "response the stream switches to the chosen compression in both directions."
)

NON_FATAL = (
    "**Why three errors are not fatal.** {codes} answer a FIN, REQ or TOUCH of a message "
    "id the client does not hold in flight. That is a matter of timing, not a broken "
    "client: the message's msg_timeout may have run out (nsqd took it back and will "
    "redeliver it, perhaps to another consumer) just before the client's command arrived. "
    "So nsqd reports it and keeps the connection open; every other error closes it."
)


def cells() -> list[tuple[str, str]]:
    """The reference notebook's cells: ``(title, markdown)``."""
    non_fatal = [c.value for c in ErrorCode if not c.fatal]
    fatal_both = ErrorCode.IDENTIFY_FAILED
    return [
        ("Commands", "Every command line ends in `\\n`. Its parameters are separated by "
         "one space; a body, where there is one, follows the line as "
         "`[4-byte big-endian size][data]` — the size counts the data only. A command "
         "nsqd does not answer (RDY, FIN, REQ, TOUCH, NOP) gets no frame back unless it "
         "fails. REQ's `timeout` is in milliseconds: **0 requeues the message at once**, "
         "a larger value defers its redelivery (up to max_req_timeout).\n\n" + commands()),
        ("States", "Which commands nsqd accepts in each connection state (a fatal error "
         "or the end of the stream closes the connection from any state):\n\n" + states()),
        ("Frames", "Every frame from nsqd is `[size:int32][frame type:int32][data]`, "
         "big-endian. Unlike a command body's size, the frame's **size counts the 4 "
         "frame-type bytes too**: size = 4 + len(data).\n\n" + frames()),
        ("The message layout", "The data of a FrameTypeMessage:\n\n" + message_layout()),
        ("IDENTIFY", "The keys of IDENTIFY's JSON body. A range's end may name the nsqd "
         "option that sets it (its default value in brackets); 0 always asks for nsqd's "
         "default:\n\n" + identify() + "\n\n" + COMPRESSION.format(
             code=fatal_both.value, fatal="fatal" if fatal_both.fatal else "non-fatal",
             why=fatal_both.why)),
        ("Errors", "An error is a FrameTypeError whose data is `E_CODE text`.\n\n"
         + errors() + "\n\n" + NON_FATAL.format(codes=", ".join(non_fatal))),
        ("Topic and channel names", names()),
        ("Sizes and timers", limits()),
    ]


def notebook() -> dict[str, Any]:
    """The reference notebook as nbformat-4 JSON (markdown only: it needs no kernel)."""
    intro = ("# 00 · NSQ V2 reference card\n\n"
             "Generated from nsqviz's own tables — the command table, the transition table, "
             "the error table, the grammar and the option defaults — by "
             "`python -m nsqviz.teaching.reference notebooks/00-reference.ipynb`. A test fails "
             "when this card and the code disagree, so it cannot drift. Keep it open beside "
             "the other notebooks.")
    sources = [intro] + [f"## {title}\n\n{body}" for title, body in cells()]
    return {
        "cells": [{"cell_type": "markdown", "id": f"ref{i:02d}", "metadata": {},
                   "source": _lines(src)} for i, src in enumerate(sources)],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                    "name": "python3"},
                     "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + [parts[-1]]


def render() -> str:
    """The notebook file's text, as :func:`write` stores it."""
    return json.dumps(notebook(), indent=1, ensure_ascii=False) + "\n"


def write(path: str | Path) -> None:
    """Write the reference notebook to ``path``."""
    Path(path).write_text(render())


if __name__ == "__main__":  # pragma: no cover - a one-line CLI
    write(sys.argv[1] if len(sys.argv) > 1 else "notebooks/00-reference.ipynb")
