"""The doctor's ``guide_failures`` (the client guide's checks run on a connection's control
rows where SQL shows that no rule reading every message can fail) gives exactly the failed
verdicts of the ``guide`` table (every check on every row): on every sample capture, and on
generated consumer connections whose answers, RDYs and heartbeats break the rules that
read every message (``in-flight``, ``rdy-update``, ``heartbeat``) or come close to it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from nsqviz.analysis.capture import Capture
from nsqviz.capture.synth import NsqTalk
from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.nsq import events as ev
from nsqviz.nsq.wire import HEARTBEAT

DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLES = sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*.pcap*"))


def _failed(cap: Capture) -> list[tuple]:
    guide = [r for r in cap.arrow_table("guide").to_pylist() if r["status"] == "fail"]
    return sorted(tuple((k, str(v)) for k, v in sorted(r.items())) for r in guide)


def _found(cap: Capture) -> list[tuple]:
    return sorted(tuple((k, str(v)) for k, v in sorted(r.items()))
                  for r in cap.arrow_table("guide_failures").to_pylist())


@pytest.mark.parametrize("name", SAMPLES)
def test_guide_failures_are_the_guides_failed_verdicts_on_every_sample(name):
    cap = Capture(str(DATA / name), fields=False)
    assert _found(cap) == _failed(cap)


def _consumer(talk: NsqTalk, rng: random.Random) -> None:
    """One consumer connection at random: deliveries of a few ids (so some come back),
    answers mostly for what is in flight, sometimes not, RDYs often re-sent with the same
    count, heartbeats answered or not, CLS or not."""
    talk.say(ev.Magic(), ev.Identify({"client_id": "gen", "feature_negotiation": True}))
    talk.answer(ev.Response(b'{"max_rdy_count":2500}'))
    talk.say(ev.Sub("t", "c"), ev.Rdy(rng.choice((1, 4))))
    talk.answer(ev.Response(b"OK"))
    flying: list[bytes] = []
    ids = [f"{k:016x}".encode() for k in range(rng.choice((3, 8, 30)))]
    for _ in range(rng.randrange(5, 60)):
        step = rng.random()
        if step < 0.35:
            batch = [ev.Message(1, 1, rng.choice(ids), b"x") for _ in range(rng.randrange(1, 4))]
            flying += [m.id for m in batch]
            talk.answer(*batch)
        elif step < 0.7:
            stray = rng.random() < 0.1 or not flying
            mid = rng.choice(ids) if stray else flying.pop(rng.randrange(len(flying)))
            verb = rng.choice((ev.Fin, ev.Fin, ev.Req, ev.Touch))
            talk.say(ev.Req(mid, 0) if verb is ev.Req else verb(mid))
            if verb is ev.Touch and not stray:
                flying.append(mid)
        elif step < 0.88:
            talk.say(ev.Rdy(rng.choice((1, 4, 4, 4, 8))))
        elif step < 0.95:
            talk.answer(ev.Response(HEARTBEAT))
            if rng.random() < 0.7:
                talk.say(ev.Nop())
        else:
            talk.say(ev.Cls())
            talk.answer(ev.Response(b"CLOSE_WAIT"))
            break


@pytest.mark.parametrize("seed", range(4))
def test_guide_failures_are_the_guides_failed_verdicts_on_generated_consumers(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "gen.pcap"
    with PcapWriter(path) as pcap:
        for k in range(40):
            conv = TcpConversation(pcap, (f"10.2.0.{k + 1}", 30000 + k), ("10.0.0.1", 4150),
                                   mss=1448)
            talk = NsqTalk(conv, ts=1_700_000_000.0 + k)
            conv.open(talk.ts)
            _consumer(talk, rng)
            conv.close(talk.ts + 0.001)
    cap = Capture(str(path), fields=False)
    failed = _failed(cap)
    rules = {dict(r)["rule"] for r in failed}
    assert {"in-flight", "rdy-update"} <= rules  # the generator breaks them
    assert _found(cap) == failed
