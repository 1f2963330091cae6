"""End-of-notebook questions, each with an answer key that the code itself checks.

Every :class:`Question` carries the answer a learner reveals (``answer``, the key) and a
``check`` that computes the same value from nsqviz's grammar, tables, captures or
simulators. ``tests/notebooks/test_exercises.py`` asserts ``check() == answer`` for every
question (a wrong key fails the build) and that each notebook's last cell is exactly
:func:`markdown` of its questions (``python -m nsqviz.teaching.exercises`` rewrites those cells).
The answers sit in collapsed ``<details>`` blocks: they render closed in JupyterLab,
Notebook 7, VS Code, GitHub and nbviewer, and open with one click, no kernel needed.
"""

from __future__ import annotations

import functools
import html
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsqviz.nsq import grammar_frames, identify_fields

if TYPE_CHECKING:
    from nsqviz.capture.replay import Replay

__all__ = ["EXERCISES", "Question", "markdown", "write"]

DATA = Path(__file__).resolve().parents[2] / "data"


@dataclass(frozen=True)
class Question:
    """One question: what to ask, the key, why, and the code that computes the key."""

    ask: str
    answer: object
    why: str
    check: Callable[[], object]


# ------------------------------------------------------------------ checks (from code)


def _message_frame(body: bytes) -> bytes:
    from nsqviz.nsq import grammar

    return grammar.Frame.build({"frame_type": "FrameTypeMessage", "data": {
        "timestamp": 0, "attempts": 1, "id": b"0" * 16, "body": body}})


def _frame_size(body: bytes) -> int:
    return int.from_bytes(_message_frame(body)[:4], "big")


def _pub_body_size(body: bytes) -> int:
    from nsqviz.nsq import grammar

    data = grammar.Command.build({"verb": "PUB", "command": {"topic": "orders", "body": body}})
    return int.from_bytes(data[len(b"PUB orders\n"):][:4], "big")


def _id_offset() -> int:
    frame = _message_frame(b"x")
    return frame.index(b"0" * 16)


def _frame_type(name: str) -> int:

    return grammar_frames.FRAME_TYPES[name]


def _name_limit() -> int:
    from nsqviz.teaching.reference import name_limit

    return name_limit()


def _answer_of(verb: str) -> str:
    from nsqviz.nsq.commands import COMMANDS

    return COMMANDS[verb].answer


def _silent_verbs() -> str:
    from nsqviz.nsq.commands import COMMANDS

    return ", ".join(v for v, spec in COMMANDS.items() if not spec.answered)


def _non_fatal() -> str:
    from nsqviz.nsq.errors import ErrorCode

    return ", ".join(c.value for c in ErrorCode if not c.fatal)


def _after(verb: str) -> str:
    from nsqviz.nsq.commands import COMMANDS
    from nsqviz.nsq.states import TRANSITIONS, Role, State

    return TRANSITIONS[Role.SERVER][State.CONNECTED][COMMANDS[verb].event].value


def _max_rdy() -> int:
    from nsqviz.servers.nsqd.options import Options

    return Options().max_rdy_count


def _segments(coalesce: bool, mss: int = 48, sizes: tuple[int, ...] = (10, 10, 10, 10)) -> int:
    from nsqviz.clients.session.sticky import message_frames, simulate_segments

    return len(simulate_segments(message_frames(list(sizes)), mss=mss, coalesce=coalesce))


def _identify(field: str, what: str) -> object:

    return getattr(identify_fields.IDENTIFY_FIELDS[field], what)


def _both_compressions() -> str:
    from nsqviz.nsq.errors import ErrorCode

    code = ErrorCode.IDENTIFY_FAILED
    return f"{code.value}, {'fatal' if code.fatal else 'non-fatal'}"


def _replay(name: str) -> Replay:
    from nsqviz.capture.replay import Replay

    return Replay.load(DATA / name)


def _completed_by(name: str, number: int) -> str:
    from nsqviz.widgets.replay import ReplayView

    return ", ".join(r.name for r in ReplayView(_replay(name)).records_at(number))


def _fatal(name: str) -> bool:
    from nsqviz.nsq.errors import ErrorCode

    return ErrorCode[name].fatal


def _max_frame() -> int:
    from nsqviz.nsq.framing import DEFAULT_MAX_FRAME_SIZE

    return DEFAULT_MAX_FRAME_SIZE


def _nsq_analyses(attr: str) -> object:
    from nsqviz.nsq import analyses

    return getattr(analyses, attr)


def _frame_columns() -> list[str]:
    from nsqviz.records import frame_schema

    return list(frame_schema().names)


def _frame_name(value: int) -> str:
    from nsqviz.nsq.commands import FRAMES

    return next(name for name, v in FRAMES.values() if v == value)


def _share(max_in_flight: int, connections: int) -> int:
    from nsqviz.clients.nsq.consumer import rdy_share
    from nsqviz.nsq.connection import DEFAULT_MAX_RDY_COUNT

    return rdy_share(max_in_flight, connections, DEFAULT_MAX_RDY_COUNT)


def _rdy_holders(max_in_flight: int, connections: int) -> int:
    """How many of a consumer's ``connections`` hold RDY > 0 once each has connected: the
    consumer's own RDY rebalancing, on stand-ins that keep the RDY sent to them."""
    from types import SimpleNamespace

    from nsqviz.clients.nsq.consumer import Consumer
    from nsqviz.nsq.connection import DEFAULT_MAX_RDY_COUNT

    consumer: Any = Consumer("t", "c", lambda m: None, nsqd_tcp_addresses="127.0.0.1:4150",
                             max_in_flight=max_in_flight)
    for n in range(connections):
        conn = SimpleNamespace(rdy=0, max_rdy_count=DEFAULT_MAX_RDY_COUNT, is_open=True)
        conn.send = lambda rdy, conn=conn: setattr(conn, "rdy", rdy.count)
        consumer.conns[str(n)] = conn
        consumer._rebalance(conn)
    return sum(c.rdy > 0 for c in consumer.conns.values())


def _after_node_unknown() -> str:
    """What a consumer sends after the Master answered its heartbeat 411 (HB_NO_NODE, the
    registration timeout), against the simulated Master: the codec's state table puts the
    connection back to INIT, where a heartbeat is refused before it is sent and the one
    request it allows must be accepted."""
    import time

    from nsqviz.clients.session.tubemq import TubeSession
    from nsqviz.sansio import LocalProtocolError
    from nsqviz.servers.tubemq import EmbeddedSim

    sim = EmbeddedSim(topics=("demo",), client_timeout=0.5).start()
    try:
        consumer = TubeSession(sim=sim).consumer("C", client="consumer-C", group="g")
        consumer.register()
        consumer.heartbeat()
        time.sleep(2.0)  # past client_timeout and the Master's next look for silent clients
        timed_out = consumer.heartbeat()
        assert "411" in timed_out.summary, timed_out.summary
        try:
            consumer.heartbeat()
        except LocalProtocolError:
            pass
        else:
            raise AssertionError("a heartbeat after 411 was sent")
        again = consumer.register()
        assert again.call.ok and consumer.heartbeat().call.ok
        return str(again.call.request.name)
    finally:
        sim.stop()


@functools.cache
def _debugging() -> Any:
    """Notebook 07's capture, opened (and its doctor's findings, computed) once."""
    import nsqviz

    cap: Any = nsqviz.open(str(DATA / "nsqd" / "debugging" / "debugging.pcap"))
    return cap, cap.diagnose()


def _debugging_figure(rule: str, figure: str) -> object:
    """A figure of the first finding of ``rule`` in notebook 07's capture."""
    findings = _debugging()[1]
    figures: dict[str, object] = json.loads(findings[findings.rule == rule].iloc[0].figures)
    return figures[figure]


def _debugging_rule(summary: str) -> str:
    """The rule of the first finding in notebook 07's capture whose summary says ``summary``."""
    findings = _debugging()[1]
    return str(findings[findings.summary.str.contains(summary, regex=False)].iloc[0].rule)


def _debugging_not_in_flight() -> str:
    """The error nsqd answered FINs for ids not in flight with, and whether it closed."""
    errors = _debugging()[0].errors
    fins = errors[errors.command == "FIN"]
    return f"{', '.join(sorted(set(fins.code)))}, {'yes' if fins.closed.any() else 'no'}"


def _starved(in_flight: int, rdy: int) -> bool:
    from types import SimpleNamespace

    from nsqviz.clients.nsq.consumer import Consumer

    conn = SimpleNamespace(in_flight=in_flight, rdy=rdy)
    consumer: Any = SimpleNamespace(conns={"c": conn})  # the one attribute the rule reads
    return Consumer.is_starved(consumer)


def _config_default(name: str) -> object:
    import dataclasses

    from nsqviz.clients.nsq.config import Config

    return next(f.default for f in dataclasses.fields(Config) if f.name == name)


def _abbrev(verb: str, name: str) -> str:
    from nsqviz.nsq.commands import COMMANDS
    from nsqviz.nsq.fields import param_abbrev

    return param_abbrev(next(p for p in COMMANDS[verb].params if p.field == name))


def _prefs() -> dict[str, str]:
    from nsqviz.wireshark.generate import preferences

    return preferences(DATA / "no-such-folder")


def _tube(attr: str) -> Any:
    from nsqviz.tubemq import grammar

    return getattr(grammar, attr)


# ------------------------------------------------------------------ the questions

EXERCISES: dict[str, list[Question]] = {
    "01-wire-format": [
        Question("A FrameTypeMessage carries the 5-byte body `hello`. What is its `size` "
                 "field?", 35,
                 "size counts everything after itself: 4 (frame type) + 8 (timestamp) + 2 "
                 "(attempts) + 16 (id) + 5 (body).", lambda: _frame_size(b"hello")),
        Question("`PUB orders` with the body `hello`: what is the 4-byte size that follows "
                 "the line?", 5, "a command body's size counts the data only; a frame's size "
                 "also counts its 4 frame-type bytes.", lambda: _pub_body_size(b"hello")),
        Question("At which byte offset of a message frame does the message id start?", 18,
                 "4 (size) + 4 (frame type) + 8 (timestamp) + 2 (attempts).", _id_offset),
        Question("What are the 4 frame-type bytes of a FrameTypeError, as a number?", 1,
                 "FrameTypeResponse is 0, FrameTypeError 1, FrameTypeMessage 2.",
                 lambda: _frame_type("FrameTypeError")),
        Question("How long may a topic name be at most?", 64,
                 "`[.a-zA-Z0-9_-]`, 1 to 64 characters, `#ephemeral` included.", _name_limit),
    ],
    "02-live-session": [
        Question("Which command does nsqd answer with `CLOSE_WAIT`?", "CLS",
                 "CLS asks nsqd to stop sending; the answer confirms, in-flight messages may "
                 "still be finished.", lambda: next(v for v in ("SUB", "CLS", "FIN")
                                                    if _answer_of(v) == "CLOSE_WAIT")),
        Question("Which commands get no frame back when they succeed?",
                 "RDY, FIN, REQ, TOUCH, NOP",
                 "so a client must not wait for an answer to them; only a failure is "
                 "answered.", _silent_verbs),
        Question("In which state is a connection after a successful SUB?", "SUBSCRIBED",
                 "only then may RDY, FIN, REQ, TOUCH and CLS be sent.", lambda: _after("SUB")),
        Question("Which three errors leave the connection open?",
                 "E_FIN_FAILED, E_REQ_FAILED, E_TOUCH_FAILED",
                 "they mean the id is not in flight any more, usually because its "
                 "msg_timeout ran out first: timing, not a broken client.", _non_fatal),
        Question("What is the largest RDY count the embedded nsqd accepts by default?", 2500,
                 "nsqd's --max-rdy-count; RDY above it is E_INVALID and closes the "
                 "connection.", _max_rdy),
    ],
    "03-sticky-packets": [
        Question("How many bytes does a message frame with a 10-byte body take on the wire?",
                 44, "4 (size) + 4 (frame type) + 26 (timestamp, attempts, id) + 10.",
                 lambda: len(_message_frame(b"x" * 10))),
        Question("Four such frames are sent with Nagle on (coalesced writes) over an MSS of "
                 "48. How many segments?", 4, "the first frame leaves alone (44 bytes: nothing "
                 "is in flight); the other three wait for its ACK, glued, and leave as "
                 "48 + 48 + 36, so frame boundaries fall inside segments. With Nagle off "
                 "each frame is its own 44-byte segment.", lambda: _segments(True)),
        Question("How many bytes must a reader hold before it can know where an NSQ frame "
                 "ends?", 4, "the size field; then it waits for `size` more bytes.",
                 lambda: len(_message_frame(b"")) - _frame_size(b"")),
        Question("Same four frames, MSS 200, Nagle on: how many segments?", 2,
                 "the first frame alone (nothing was in flight), then the other three glued "
                 "into one 132-byte segment when its ACK comes back (粘包).",
                 lambda: _segments(True, mss=200)),
    ],
    "05-feature-negotiation": [
        Question("IDENTIFY asks for snappy and deflate together. What does nsqd answer?",
                 "E_IDENTIFY_FAILED, fatal", "one compression per connection; the stream "
                 "can switch only once.", _both_compressions),
        Question("Which heartbeat_interval value switches heartbeats off?", -1,
                 "the spec's disable value; values from 1000 ms up to "
                 "max_heartbeat_interval are accepted.",
                 lambda: _identify("heartbeat_interval", "disable")),
        Question("What is output_buffer_timeout's default, in ms?", 250,
                 "nsqd flushes buffered frames to the client at the latest after it.",
                 lambda: _identify("output_buffer_timeout", "default")),
        Question("What is the lowest heartbeat_interval a client may ask for, in ms?", 1000,
                 "below it nsqd answers E_BAD_BODY.",
                 lambda: _identify("heartbeat_interval", "low")),
    ],
    "06-pcap-replay": [
        Question("How many packets does `pubsub-pynsq.pcap` hold?", 86,
                 "the replay's slider runs over them; 50 commands and frames are decoded.",
                 lambda: len(_replay("pubsub-pynsq.pcap").packets)),
        Question("What does packet 33 of `pubsub-pynsq.pcap` complete?", "FrameTypeMessage",
                 "a message nsqd pushed after the consumer's RDY.",
                 lambda: _completed_by("pubsub-pynsq.pcap", 33)),
        Question("How many commands and frames does the replay decode in that capture?", 50,
                 "both directions of every connection, each with the packets it came in.",
                 lambda: len(_replay("pubsub-pynsq.pcap").records)),
        Question("Which client command in the capture gives a message back to nsqd for "
                 "redelivery?", "REQ", "REQ <id> <timeout>: 0 requeues at once.",
                 lambda: "REQ" if "REQ" in {r.name for r in _replay(
                     "pubsub-pynsq.pcap").records} else None),
    ],
    "10-spark-pipeline": [
        Question("When does the pipeline call a connection starved? `in_flight > 0 and "
                 "in_flight >= r × last RDY`: what is r?", 0.85,
                 "the client-library guide's rule; `work2` with RDY 1 is starved at every "
                 "delivery.", lambda: _nsq_analyses("STARVATION_RATIO")),
        Question("The `frames` table starts with the fields `nsqviz decode --json` prints. "
                 "Which seven?", "ts, flow, dir, kind, name, fields, packets",
                 "one row per command or frame; gaps and errors are rows too.",
                 lambda: ", ".join(_frame_columns()[:7])),
        Question("In the `frames` table, what is the `name` of a message nsqd pushed?",
                 "FrameTypeMessage", "the spec's name for frame type 2.",
                 lambda: _frame_name(2)),
        Question("Which 4 bytes (hex) make the pipeline hand a connection to TubeMQ?",
                 "ff7ff4fe", "TubeMQ's begin token (or the Master's and Brokers' ports).",
                 lambda: _tube("BEGIN_TOKEN").hex()),
    ],
    "11-tubemq": [
        Question("What are the 4 bytes that begin every TubeMQ RPC frame (hex)?",
                 "ff7ff4fe", "the begin token; a reader that lost its place searches "
                 "for it.", lambda: _tube("BEGIN_TOKEN").hex()),
        Question("How large is each TubeMQ block at most, in bytes?", 8192,
                 "a frame is split into blocks of at most RPC_MAX_BUFFER_SIZE, each with "
                 "its own length.", lambda: _tube("RPC_MAX_BUFFER_SIZE")),
        Question("How many bytes is the frame header (token, serialNo, listSize)?", 12,
                 "4 + 4 + 4; then listSize blocks of [length][bytes].",
                 lambda: _tube("HEADER_SIZE")),
        Question("Which header field does a TubeMQ client use to pair an answer with its "
                 "request?", "serialNo", "chosen by the requester and echoed in the answer; "
                 "NSQ has no such field (answers come in order).",
                 lambda: _tube("FrameStruct").subcons[1].name),
        Question("The Master answers a consumer's heartbeat with errCode 411 (HB_NO_NODE, "
                 "the registration timeout). Which request must the consumer send next?",
                 "RegisterRequestC2M", "the Master has forgotten it (no heartbeat within its "
                 "client timeout): the connection is back where it began, and only "
                 "registering anew brings the consumer back; then it heartbeats as before.",
                 _after_node_unknown),
    ],
    "08-client-library": [
        Question("max_in_flight 100 over 3 nsqd connections: what RDY does each get?", 33,
                 "the share is max_in_flight // connections (at least 1, at most "
                 "max_rdy_count).", lambda: _share(100, 3)),
        Question("max_in_flight 2 over 5 connections: how many of them hold RDY 1 at a time?",
                 2, "only max_in_flight of them, the others RDY 0, so the sum of RDY never "
                 "passes max_in_flight; every rdy_redistribute_interval the idle ones give "
                 "theirs to others, so every nsqd is read in turn.",
                 lambda: _rdy_holders(2, 5)),
        Question("A connection has RDY 10 and 9 messages in flight. Is the consumer "
                 "starved?", "yes", "9 ≥ 0.85 × 10: a batching handler should process its "
                 "batch now.", lambda: "yes" if _starved(9, 10) else "no"),
        Question("How many attempts does nsqviz.clients.nsq allow a message by default before "
                 "it gives up on it?", 5, "`max_attempts`, as in go-nsq and pynsq.",
                 lambda: _config_default("max_attempts")),
    ],
    "07-debugging-a-capture": [
        Question("Which rule of the doctor reports heartbeats left unanswered until nsqd closed "
                 "the connection?", "nsq.heartbeat-missed",
                 "its summary says how many in a row, how often, and when nsqd closed; an "
                 "error when nsqd closed, a warning otherwise.",
                 lambda: _debugging_rule("nsqd closed the connection")),
        Question("In this capture, how many heartbeats in a row went unanswered before nsqd "
                 "closed that connection?", 2,
                 "nsqd closes a client it has read nothing from for two heartbeat intervals, "
                 "and its heartbeat ticks twice in that window.",
                 lambda: _debugging_figure("nsq.heartbeat-missed", "in_row")),
        Question("The starved consumer of topic `jobs`: what RDY did it send?", 1,
                 "with RDY 1 one message is in flight at a time, so in flight sits at RDY -- "
                 "past the guide's 85 % -- nearly the whole time; raise RDY (max_in_flight).",
                 lambda: _debugging_figure("nsq.starved", "rdy")),
        Question("Which error did nsqd answer the FINs for ids not in flight with, and did it "
                 "close the connection after them?", "E_FIN_FAILED, no",
                 "non-fatal: an id no longer in flight is a matter of timing (or a client "
                 "bug), not a broken stream; the doctor reports it as the guide's in-flight "
                 "rule.", _debugging_not_in_flight),
    ],
    "09-wireshark": [
        Question("Which display filter field holds a SUB's or PUB's topic?", "nsq.topic",
                 "every parameter is a filter field under `nsq.`.",
                 lambda: _abbrev("SUB", "topic")),
        Question("Which field finds a message and its FIN, REQ and TOUCH alike?",
                 "nsq.msg.id", "message ids live under `nsq.msg`, in frames and commands.",
                 lambda: _abbrev("FIN", "id")),
        Question("Which Wireshark preference must be on for a frame split over segments to "
                 "be dissected whole?", "tcp.desegment_tcp_streams",
                 "TCP reassembly: the dissector asks TCP for the rest of the frame.",
                 lambda: next(iter(_prefs()))),
        Question("How many bytes does the dissector need before it knows an NSQ frame's "
                 "length?", 4, "the size field; the rest is asked for with desegment_len.",
                 lambda: len(_message_frame(b"")) - _frame_size(b"")),
    ],
    "04-failure-labs": [
        Question("Does the connection survive `E_BAD_PROTOCOL` (lab 1)?", "no",
                 "it is fatal: nsqd sends the error and closes.",
                 lambda: "no" if _fatal("BAD_PROTOCOL") else "yes"),
        Question("Does the connection survive `E_FIN_FAILED` (lab 6)?", "yes",
                 "FIN, REQ and TOUCH of an id no longer in flight are non-fatal: the "
                 "message's msg_timeout ran out first, a matter of timing.",
                 lambda: "no" if _fatal("FIN_FAILED") else "yes"),
        Question("And `E_INVALID` after RDY 2501 (lab 8)?", "no",
                 "RDY above max_rdy_count is a broken client: fatal.",
                 lambda: "no" if _fatal("INVALID") else "yes"),
        Question("`\"GET \"` read as a frame size is 1,195,725,856. Above which size does the "
                 "reader refuse a frame?", 5243904,
                 "max_body_size (5 MiB) + 1024 for the header; the refusal comes after 4 "
                 "bytes, nothing is allocated.", _max_frame),
    ],
}


def markdown(questions: list[Question]) -> str:
    """The exercises cell: numbered questions, each answer in a collapsed block."""
    parts = ["## Exercises", "",
             "Answer from what this notebook showed, then open the answer to check. "
             "(The project's tests check every answer key against the code.)",
             ""]
    for n, q in enumerate(questions, 1):
        key, why = html.escape(str(q.answer), quote=False), html.escape(q.why, quote=False)
        parts += [f"{n}. {q.ask}", "",
                  f"   <details><summary>answer</summary><b>{key}</b> — {why}</details>", ""]
    return "\n".join(parts).rstrip() + "\n"


def _cell(text: str, name: str) -> dict[str, Any]:
    lines = text.split("\n")
    return {"cell_type": "markdown", "id": f"exercises-{name[:2]}", "metadata": {},
            "source": [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])}


def write(notebooks: Path) -> None:
    """Put each notebook's exercises cell last (replacing an older one)."""
    for name, questions in EXERCISES.items():
        path = notebooks / f"{name}.ipynb"
        nb = json.loads(path.read_text())
        cells = [c for c in nb["cells"] if not str(c.get("id", "")).startswith("exercises-")]
        cells.append(_cell(markdown(questions), name))
        nb["cells"] = cells
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":  # pragma: no cover - a one-line CLI
    write(Path(sys.argv[1] if len(sys.argv) > 1 else "notebooks"))
