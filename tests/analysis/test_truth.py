"""The analyses against what was really played (issue 31): sessions of known content
played against the embedded broker and against the real nsqd, captured with tcpdump,
analysed, and compared with the script -- every message's deliveries (attempts, FIN,
REQ and its delay, a TOUCH, a timeout), every error nsqd sent and the command it
answers, refused publishes, who closed each connection, and each publish's answer
(two PUBs glued in one packet included).

The session takes about two seconds a server: its one timeout runs out after IDENTIFY's
``msg_timeout`` of one second (nsqd's shortest).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

import nsqviz
from nsqviz.analysis.capture import Capture
from nsqviz.analysis.stats import stats
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.events import (
    Cls,
    Dpub,
    Error,
    Fin,
    Identify,
    Magic,
    Message,
    Mpub,
    Pub,
    Rdy,
    Req,
    Response,
    Sub,
    Touch,
)

pytestmark = [
    pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump is not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="tcpdump needs root to capture"),
]

MAX_MSG_SIZE = 1024
"""Both servers refuse a bigger message (E_BAD_MESSAGE)."""
MSG_TIMEOUT_MS = 1000
REQ_DELAY_MS = 100
DEFER_MS = 100
TOPIC = "truth"
UNKNOWN_ID = b"0123456789abcdef"

PLAN = {
    b"m0": ["FIN"],
    b"m1": ["REQ", "FIN"],
    b"m2": ["TOUCH"],  # TOUCH, then FIN on the same delivery
    b"m3": ["timeout", "FIN"],
    b"m4": ["FIN"],  # deferred
    b"m5": ["FIN"],
}
"""What the consumer does with each delivery of each message, by body."""
PUBLISHED = {b"m0": "PUB", b"m1": "PUB", b"m2": "MPUB", b"m3": "MPUB", b"m4": "DPUB",
             b"m5": "PUB"}


@dataclass
class Truth:
    """What the script did and saw, by connection (its client's flow label)."""

    ids: dict[bytes, str] = field(default_factory=dict)  # body -> message id
    errors: list[tuple[str, str, str | None]] = field(default_factory=list)
    closed_by: dict[str, str] = field(default_factory=dict)  # flow -> "client" | "server"
    client_ids: dict[str, str] = field(default_factory=dict)
    publishes: Counter[str] = field(default_factory=Counter)


class _Conn:
    """A blocking client on the project's codec (raw bytes where a script misbehaves)."""

    def __init__(self, port: int, truth: Truth, client_id: str | None = None, **identify):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        host, cport = self.sock.getsockname()
        self.flow = f"{host}:{cport}->127.0.0.1:{port}"
        self.codec = ClientConnection()
        self.frames: list = []
        self.truth = truth
        self.send(Magic())
        if client_id is not None:
            truth.client_ids[self.flow] = client_id
            self.send(Identify({"client_id": client_id, "feature_negotiation": True,
                                **identify}))
            self.expect(1)

    def send(self, *commands) -> None:
        self.sock.sendall(b"".join(self.codec.send(c) for c in commands))
        for c in commands:
            if isinstance(c, Pub | Mpub | Dpub):
                self.truth.publishes[type(c).__name__.upper()] += 1

    def raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def expect(self, n: int) -> list:
        """The next ``n`` frames (read as they come)."""
        while len(self.frames) < n:
            data = self.sock.recv(65536)
            assert data, f"{self.flow} closed early"
            self.frames.extend(e for e in self.codec.receive(data)
                               if isinstance(e, Response | Error | Message))
        out, self.frames = self.frames[:n], self.frames[n:]
        return out

    def until_closed(self) -> None:
        """The server closes: read to the end."""
        while self.sock.recv(65536):
            pass
        self.truth.closed_by[self.flow] = "server"
        self.sock.close()

    def close(self) -> None:
        self.truth.closed_by[self.flow] = "client"
        self.sock.close()


def _error(frame) -> str:
    assert isinstance(frame, Error), frame
    return frame.code


def _play(port: int) -> Truth:
    truth = Truth()
    # a producer: two PUBs glued in one write, an MPUB, a DPUB
    pub = _Conn(port, truth, "truth-pub")
    pub.send(Pub(TOPIC, b"m0"), Pub(TOPIC, b"m1"))
    assert [f.data for f in pub.expect(2)] == [b"OK", b"OK"]
    pub.send(Mpub(TOPIC, (b"m2", b"m3")))
    pub.expect(1)
    pub.send(Dpub(TOPIC, DEFER_MS, b"m4"))
    pub.expect(1)
    # refused publishes: a bad topic, a message over --max-msg-size; nsqd closes
    for body_size, code in ((10, "E_BAD_TOPIC"), (MAX_MSG_SIZE + 1, "E_BAD_MESSAGE")):
        bad = _Conn(port, truth, "truth-refused")
        topic = b"bad*topic" if code == "E_BAD_TOPIC" else TOPIC.encode()
        bad.raw(b"PUB " + topic + b"\n" + struct.pack(">i", body_size) + b"b" * body_size)
        assert _error(bad.expect(1)[0]) == code
        truth.errors.append((bad.flow, code, "PUB"))
        bad.until_closed()
    # bytes that are no command: E_INVALID, and nsqd closes
    bogus = _Conn(port, truth)
    bogus.raw(b"BOGUS\n")
    assert _error(bogus.expect(1)[0]) == "E_INVALID"
    truth.errors.append((bogus.flow, "E_INVALID", None))
    bogus.until_closed()

    con = _Conn(port, truth, "truth-sub", msg_timeout=MSG_TIMEOUT_MS)
    con.send(Sub(TOPIC, "c"))
    con.expect(1)
    # errors nsqd answers and goes on: a FIN and a REQ for an id not in flight
    con.send(Fin(UNKNOWN_ID))
    assert _error(con.expect(1)[0]) == "E_FIN_FAILED"
    truth.errors.append((con.flow, "E_FIN_FAILED", "FIN"))
    con.send(Req(UNKNOWN_ID, 0))
    assert _error(con.expect(1)[0]) == "E_REQ_FAILED"
    truth.errors.append((con.flow, "E_REQ_FAILED", "REQ"))
    con.send(Rdy(10))
    pub.send(Pub(TOPIC, b"m5"))  # published while the consumer is ready
    pub.expect(1)
    finished: set[bytes] = set()
    deadline = time.monotonic() + 10
    while finished != set(PLAN):
        assert time.monotonic() < deadline, f"finished only {finished}"
        (frame,) = con.expect(1)
        if not isinstance(frame, Message):
            continue  # the OK of nothing: none is expected
        truth.ids[frame.body] = frame.id.decode()
        what = PLAN[frame.body][frame.attempts - 1]
        if what == "FIN":
            con.send(Fin(frame.id))
            finished.add(frame.body)
        elif what == "REQ":
            con.send(Req(frame.id, REQ_DELAY_MS))
        elif what == "TOUCH":
            con.send(Touch(frame.id), Fin(frame.id))
            finished.add(frame.body)
        # "timeout": no answer; nsqd gives it again after msg_timeout
    con.send(Rdy(0), Cls())
    assert con.expect(1)[0].data == b"CLOSE_WAIT"
    con.close()
    pub.close()
    return truth


def _captured(port: int, path) -> Truth:
    # In --immediate-mode libpcap gives every packet a whole-snaplen slot of the kernel
    # ring (256 KiB with -s 0): a 4 MiB buffer held 16 packets, and on a loaded machine
    # tcpdump fell that far behind and the kernel dropped a PUB and its OK. 128 MiB holds
    # the session's packets even if tcpdump reads none of them until the end.
    dump = subprocess.Popen(
        ["tcpdump", "-i", "lo", "-s", "0", "-B", "131072", "--immediate-mode", "-U",
         "-w", str(path), f"tcp port {port}"], stderr=subprocess.PIPE, text=True)
    try:
        while "listening" not in (dump.stderr.readline() if dump.stderr else ""):
            assert dump.poll() is None, "tcpdump exited"
        truth = _play(port)
        time.sleep(0.2)  # the last FIN and ACKs
    finally:
        dump.send_signal(signal.SIGINT)
        dump.communicate(timeout=10)
    return truth


def _whole_capture(port: int, tmp_path) -> tuple[Truth, Capture]:
    """The session played and captured with nothing lost: a capture with a hole (a
    packet the kernel dropped when tcpdump fell behind on a loaded machine -- the tool
    reports it as a gap) cannot be held to the script, so the session is played again.
    tcpdump's own count of kernel drops is no guide: it counts the packets of every port
    that filled the ring before the capture filter was set."""
    holes = []
    for attempt in range(3):
        path = tmp_path / f"truth-{attempt}.pcap"
        truth = _captured(port, path)
        cap = nsqviz.open(str(path), ports={"nsq": [port]})
        if cap.gaps.empty:
            return truth, cap
        holes.append(cap.gaps.to_string())
    raise AssertionError("every capture lost packets:\n" + "\n".join(holes))


@pytest.fixture(params=["broker", "real_nsqd"])
def server(request, tmp_path):
    options = {"max_msg_size": MAX_MSG_SIZE}
    if request.param == "broker":
        from nsqviz.servers.nsqd import EmbeddedBroker

        with EmbeddedBroker(data_path=str(tmp_path / "nsqd"), **options) as running:
            yield running
    else:
        from nsqviz.servers.peers import RealNsqd

        from ..conftest import peer

        with RealNsqd(peer("nsqd"), data_path=str(tmp_path / "real"), **options) as running:
            yield running


def test_the_analyses_say_what_was_played(server, tmp_path):
    truth, cap = _whole_capture(server.tcp_port, tmp_path)

    # messages: each delivery's attempts and end, as played
    msgs = cap.messages.set_index("msg_id")
    assert sorted(msgs.index) == sorted(truth.ids.values())
    for body, plan in PLAN.items():
        m = msgs.loc[truth.ids[body]]
        assert m.publish_cmd == PUBLISHED[body], body
        got = [(d["attempts"], d["outcome"]) for d in m.deliveries]
        want = [(n, "FIN" if what == "TOUCH" else what) for n, what in enumerate(plan, 1)]
        assert got == want, body
        for d in m.deliveries:
            if d["outcome"] == "REQ":
                assert d["req_delay_ms"] == REQ_DELAY_MS
                assert abs(d["requeue_due_ts"] - (d["outcome_ts"] + REQ_DELAY_MS / 1000)) \
                    < 1e-6
            if d["outcome"] == "REQ":  # its timer starts once the REQ has arrived
                assert d["next_delivery_ts"] >= d["requeue_due_ts"] - 0.005
            if d["outcome"] == "timeout":
                # the server starts a delivery's timeout when it hands the message to its
                # buffered writer (nsqd: StartInFlightTimeout, then SendMessage), which
                # flushes it within output_buffer_timeout (250 ms by default) -- and on a
                # busy machine tens of ms later still -- before the packet the capture
                # timestamps
                assert d["next_delivery_ts"] >= d["requeue_due_ts"] - 0.35
            if d["outcome"] == "timeout":
                assert d["msg_timeout_ms"] == MSG_TIMEOUT_MS
                assert abs(d["requeue_due_ts"] - (d["ts"] + MSG_TIMEOUT_MS / 1000)) < 1e-6
        assert m.touches == (1 if "TOUCH" in plan else 0), body

    # errors: what nsqd sent, the command each answers, who closed after it
    errors = cap.errors
    got_errors = sorted((e.conn_id.split("@")[0], e.code, e.command)
                        for e in errors.itertuples())
    assert got_errors == sorted(truth.errors)
    assert stats(cap, [])["errors"] == dict(Counter(code for _, code, _ in truth.errors))
    closing = {"E_BAD_TOPIC", "E_BAD_MESSAGE", "E_INVALID"}
    assert {e.code: bool(e.closed) for e in errors.itertuples()} == {
        code: code in closing for _, code, _ in truth.errors}
    # the refused PUB and the bogus bytes are nsqviz's problems too
    problems = cap.problems
    assert {(p.name, p.problem) for p in problems.itertuples()} >= {
        ("PUB", "E_BAD_TOPIC"), ("E_INVALID", "E_INVALID")}

    # connections: who each client was, who closed
    conns = cap.connections.set_index("flow")
    assert {f: c.client_id for f, c in conns.iterrows() if c.client_id} == truth.client_ids
    for flow, side in truth.closed_by.items():
        c = conns.loc[flow]
        assert {"c2s": "client", "s2c": "server"}[c.ended_from] == side, flow
        assert c.ended_by in ("fin", "rst")

    # publishes: every one with its own answer, in order, never before it
    pubs = cap.publishes.sort_values(["ts", "seq"])  # two PUBs of one packet: one ts
    assert Counter(pubs.command) == truth.publishes + Counter({"PUB": 2})  # the refused
    answered = pubs[pubs.answer_text == "OK"]
    assert len(answered) == sum(truth.publishes.values())
    assert answered.answer_packet.is_unique
    assert (pubs.latency_s >= 0).all()
    glued = answered[answered.conn_id.str.startswith(next(
        f for f, c in truth.client_ids.items() if c == "truth-pub"))].head(2)
    assert glued.packet.nunique() == 1  # the two PUBs of one write
    assert glued.answer_packet.is_monotonic_increasing
    assert {p.answer_text for p in pubs.itertuples() if p.answer_text != "OK"} == {
        "E_BAD_TOPIC", "E_BAD_MESSAGE"}
