"""The views agree with each other and with the records ``nsqviz decode`` shows, on every
sample capture in data/ (issue 31): what one view says of a packet, another must not
contradict.

* every message frame ``decode`` shows with its whole id is one delivery in
  ``deliveries`` (same connection, packet and id), and no delivery is anything else;
* every error frame a server sent (NSQ's ``FrameTypeError``, nsqlookupd's ``Error``) is
  one row of ``errors`` (same connection, packet and code), and ``stats`` counts exactly
  those by code -- what nsqviz itself found is in ``problems``, never in either;
* the first close ``decode`` shows on a connection (a FIN or RST, and the side whose
  packet carried it) is how ``connections`` says it ended: same way, side and packet;
* every answer the analyses pair with a command (``answer_pairs``; ``publishes`` and
  ``errors`` read it) is the one ``decode`` says it answers: its ``response_to`` is the
  packet that completed the command; every publish is a row of ``publishes``, and each
  answered one's answer names it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

import nsqviz
from nsqviz.analysis.stats import stats
from nsqviz.capture.decode import decode_capture
from nsqviz.lookupd.events import ERROR as LOOKUPD_ERROR
from nsqviz.nsq import events as ev
from nsqviz.nsq.commands import COMMANDS, FRAME_NAMES, BodyKind
from nsqviz.nsq.grammar_frames import MessageID

DATA = Path(__file__).resolve().parents[2] / "data"
CAPTURES = sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*")
                  if p.suffix in (".pcap", ".pcapng"))

MESSAGE, ERROR = FRAME_NAMES[ev.Message], FRAME_NAMES[ev.Error]
ERRORS = {("nsq", ERROR), ("lookupd", LOOKUPD_ERROR)}
"""The error frames a server sends, by protocol (TubeMQ's answers carry a status instead:
its RPC tables hold them)."""
PUBLISHES = {v for v, c in COMMANDS.items() if c.body in (BodyKind.MESSAGE, BodyKind.MESSAGES)}
SIDES = {"c2s": "client", "s2c": "server"}


def _flow(conn_id: str) -> str:
    return conn_id.split("@")[0]


class _Decoded:
    """What ``nsqviz decode`` shows of a capture, indexed for the checks."""

    def __init__(self, path: Path):
        self.records = list(decode_capture(path, tcp_records=True))
        self.by_packet: dict[tuple[str, str, int], list] = defaultdict(list)
        for rec in self.records:
            if rec.packets and rec.kind in ("command", "frame"):
                self.by_packet[(rec.flow, rec.dir, rec.packets[0])].append(rec)

    def of(self, kind: str, names: set[str] | None = None) -> list:
        return [r for r in self.records if r.kind == kind and (names is None or r.name in names)]


@pytest.fixture(scope="module")
def opened():
    cache: dict[str, tuple[_Decoded, nsqviz.Capture]] = {}

    def get(name: str) -> tuple[_Decoded, nsqviz.Capture]:
        if name not in cache:
            cache.clear()  # one capture at a time in memory
            cache[name] = (_Decoded(DATA / name), nsqviz.open(str(DATA / name)))
        return cache[name]
    return get


@pytest.mark.parametrize("name", CAPTURES)
def test_every_message_frame_is_one_delivery(opened, name):
    decoded, cap = opened(name)
    whole = Counter(
        (r.flow, r.packets[0], r.fields["id"]) for r in decoded.of("frame", {MESSAGE})
        if r.protocol == "nsq" and len(r.fields.get("id", "")) == MessageID.sizeof())
    deliveries = Counter((_flow(d.conn_id), int(d.packet), d.msg_id)
                         for d in cap.deliveries.itertuples())
    assert deliveries == whole


@pytest.mark.parametrize("name", CAPTURES)
def test_every_error_frame_is_one_error_and_counted_by_stats(opened, name):
    decoded, cap = opened(name)
    sent = [r for r in decoded.records
            if r.kind == "frame" and (r.protocol, r.name) in ERRORS]
    want = Counter((r.flow, r.packets[0], r.fields.get("code") or
                    bytes.fromhex(r.fields["data"]).decode().split(" ")[0]) for r in sent)
    errors = cap.errors
    protocols = dict(zip(cap.connections.conn_id, cap.connections.protocol, strict=True))
    mine = errors[errors.conn_id.map(protocols).isin({p for p, _ in ERRORS})]
    got = Counter((_flow(e.conn_id), int(e.packet), e.code) for e in mine.itertuples())
    assert got == want
    assert stats(cap, [])["errors"] == dict(Counter(errors.code))
    assert Counter(mine.code) == Counter(code for _, _, code in want.elements())
    # TubeMQ's error answers are answers its codec paired by serialNo (rpc_pairs)
    rpc = {(p.conn_id, int(p.answer_seq)): int(p.request_seq)
           for p in cap.rpc_pairs.itertuples() if p.answer_seq == p.answer_seq}
    tubemq = errors[errors.conn_id.map(protocols) == "tubemq"]
    assert {(e.conn_id, int(e.seq)): e.command_seq for e in tubemq.itertuples()} == {
        (e.conn_id, int(e.seq)): rpc.get((e.conn_id, int(e.seq))) for e in tubemq.itertuples()}
    # what nsqviz found itself is a problem, not an error
    found = decoded.of("error") + decoded.of("gap") + [
        r for r in decoded.of("command") if "violation" in r.fields]
    assert len(cap.problems[cap.problems.conn_id.notna()]) == len(found)


@pytest.mark.parametrize("name", CAPTURES)
def test_the_first_close_is_how_the_connection_ended(opened, name):
    decoded, cap = opened(name)
    closes: dict[str, list] = defaultdict(list)
    for r in decoded.of("tcp", {"FIN", "RST"}):
        closes[r.flow].append(r)
    conns = cap.connections
    for flow, mine in closes.items():
        rows = conns[conns.flow == flow]
        assert len(rows) == 1, f"{flow}: {len(rows)} connections"
        c = rows.iloc[0]
        first = mine[0]
        assert (c.ended_by, SIDES[c.ended_from], int(c.end_packet)) == (
            first.name.lower(), first.fields["side"], first.packets[0]), flow
        # the side is the direction of the packet that carried it
        assert first.dir == c.ended_from


@pytest.mark.parametrize("name", CAPTURES)
def test_answers_pair_with_what_decode_says_they_answer(opened, name):
    decoded, cap = opened(name)
    frames = cap.frames.set_index(["conn_id", "seq"])
    for p in cap.answer_pairs.itertuples():
        flow = _flow(p.conn_id)
        answer = frames.loc[(p.conn_id, p.seq)]
        command = frames.loc[(p.conn_id, p.command_seq)]
        shown = [r for r in decoded.by_packet[(flow, "s2c", int(p.packet))]
                 if r.name == answer["name"]]
        assert shown, (flow, p.packet)
        if answer.protocol == "nsq":  # nsqviz decode names the packet that completed it
            assert {r.fields["response_to"] for r in shown} <= set(command.packets)
        assert command.dir == "c2s" and command.kind == "command"
        assert p.command_seq < p.seq
    pubs = decoded.of("command", PUBLISHES)
    publishes = cap.publishes
    assert len(publishes) == len([r for r in pubs if r.protocol == "nsq"])
    for q in publishes[publishes.answer_packet.notna()].itertuples():
        flow = _flow(q.conn_id)
        answers = [r for r in decoded.by_packet[(flow, "s2c", int(q.answer_packet))]
                   if "response_to" in r.fields]
        pub = [r for r in decoded.by_packet[(flow, "c2s", int(q.packet))]
               if r.name == q.command]
        assert {r.fields["response_to"] for r in answers} & {p for r in pub for p in r.packets}
        assert q.latency_s >= 0
