"""Proof by tshark for nsqlookupd's "  V1": the generated ``lookupd.lua``, run by the real
tshark over the real captures in data/lookupd/, shows the same PDUs as ``nsqviz
decode``: the same commands with the same topic and channel, the same answers (and
which command each answers), on the same packets (every segment of a command nsqd wrote
in pieces), with the same refusals -- and on a synthetic capture of what the real
programs never send (refusals that leave no command, a garbage answer and the
resynchronisation after it).

No difference is allowed: a connection whose client sent another protocol's magic (an
NSQ client's ``"  V2"`` on the lookup port) is lookupd's in both -- in nsqviz because
nsqlookupd answers it in its own framing, in Wireshark by the port.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nsqviz import protocols
from nsqviz.capture.decode import decode_capture
from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.cli import main as nsqviz_main
from nsqviz.lookupd.protocol import LOOKUPD
from nsqviz.stream.direction import Direction
from nsqviz.wireshark.tshark import TsharkPdu, find_tshark, tshark_pdus

pytestmark = pytest.mark.skipif(
    find_tshark() is None, reason="tshark is not installed (scripts/sysdeps.sh installs it)"
)

DATA = Path(__file__).resolve().parents[2] / "data" / "lookupd"
SAMPLES = sorted(p.name for p in DATA.glob("*.pcap"))
T0 = 1_700_000_000.0


@pytest.fixture(scope="module")
def lua_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wireshark")
    assert nsqviz_main(["wireshark", "--out", str(folder), "--protocol", "lookupd"]) == 0
    assert (folder / "lookupd.lua").exists()
    return folder


def _ours(path: Path, records: list | None = None) -> list[tuple]:
    rows = []
    for r in decode_capture(path):
        assert r.protocol == "lookupd", r
        if r.kind not in ("command", "frame", "error"):
            continue
        problem = r.fields.get("violation") or {}
        code = r.fields["code"] if r.kind == "error" or r.name == "Error" else \
            problem.get("code")
        rows.append((r.flow, r.dir, r.kind, r.name, r.fields.get("topic"),
                     r.fields.get("channel"), code, r.fields.get("answers"),
                     tuple(r.packets)))
        if records is not None:
            records.append(r)
    return rows


def _theirs(pdu: TsharkPdu) -> tuple | None:
    """A PDU as a row of :func:`_ours`; ``None`` for the rest of refused bytes (nsqviz's
    ``Skipped`` record, which is not a command, answer or error)."""
    f = pdu.first
    if f("lookupd.skipped") is not None:
        return None
    c2s = f("lookupd.dir") == "c2s"
    client, server = (pdu.src, pdu.dst) if c2s else (pdu.dst, pdu.src)
    code = f("lookupd.violation")
    if c2s:
        verb = f("lookupd.command")
        if f("lookupd.magic") is not None:
            kind, name = "command", "MAGIC"
        elif verb is None:
            kind, name = "error", code or "Undecodable"
        else:
            kind, name = "command", verb
    elif f("lookupd.size") is None:  # bytes that frame as no answer
        kind, name = "error", code or "Undecodable"
    else:
        kind = "frame"
        name = "Error" if f("lookupd.error.code") is not None else "Response"
        code = f("lookupd.error.code")
    answers = f("lookupd.answers")
    return (f"{client}->{server}", "c2s" if c2s else "s2c", kind, name, f("lookupd.topic"),
            f("lookupd.channel"), code, answers, pdu.packets)


@pytest.fixture(scope="module")
def edge_cases(tmp_path_factory) -> Path:
    """What the real programs never send: a REGISTER without a topic, an unknown verb, a
    bad channel name, a PING before IDENTIFY; an answer whose size cannot be, then a good
    one to resynchronise on."""
    path = tmp_path_factory.mktemp("lookupd") / "edge-cases.pcap"
    with PcapWriter(str(path)) as w:
        conv = TcpConversation(w, ("127.0.0.1", 50000), ("127.0.0.1", 4160), mss=1448)
        conv.open(T0)
        conv.send(Direction.C2S, b"  V1REGISTER\nNOPE x\nREGISTER orders bad*chan\nPING\n",
                  T0 + 1)
        conv.send(Direction.S2C, b"\x00\x00\x00\x02OK", T0 + 2)
        conv.send(Direction.S2C, b"\xff\xff\xff\xff\x00\x00\x00\x02OK", T0 + 3)
        conv.close(T0 + 4)
        # an NSQ client on the lookup port: nsqlookupd refuses its magic and closes, so
        # the PING it sends after it is never read
        conv = TcpConversation(w, ("127.0.0.1", 50001), ("127.0.0.1", 4160), mss=1448)
        conv.open(T0 + 5)
        conv.send(Direction.C2S, b"  V2", T0 + 6)
        conv.send(Direction.S2C, b"\x00\x00\x00\x0eE_BAD_PROTOCOL", T0 + 7)
        conv.send(Direction.C2S, b"PING\n", T0 + 8)
        conv.close(T0 + 9)
    return path


def test_edge_cases_agree(edge_cases, lua_dir):
    ours = _ours(edge_cases)
    assert [(r[2], r[3], r[6]) for r in ours] == [
        ("command", "MAGIC", None), ("error", "E_INVALID", "E_INVALID"),
        ("error", "E_INVALID", "E_INVALID"), ("command", "REGISTER", "E_BAD_CHANNEL"),
        ("command", "PING", None), ("frame", "Response", None),
        ("error", "Undecodable", ""), ("frame", "Response", None),
        ("error", "E_BAD_PROTOCOL", "E_BAD_PROTOCOL"), ("frame", "Error", "E_BAD_PROTOCOL")]
    assert _theirs_all(edge_cases, lua_dir) == ours


def _theirs_all(path: Path, lua_dir: Path) -> list[tuple]:
    pdus = tshark_pdus(path, lua_dir, protocol="lookupd")
    return [t for t in map(_theirs, pdus) if t is not None]


@pytest.mark.parametrize("sample", SAMPLES)
def test_tshark_shows_what_nsqviz_decodes(sample, lua_dir):
    ours = _ours(DATA / sample)
    theirs = _theirs_all(DATA / sample, lua_dir)
    assert ours, sample
    assert theirs == ours


@pytest.mark.parametrize("sample", SAMPLES)
def test_filter_fields_hold_the_same_values(sample, lua_dir):
    """Every ``lookupd.*`` field of every PDU has the values nsqviz's field registry gives
    the record (``LOOKUPD.filter_values``), so a display filter selects the same units in
    both -- but ``lookupd.response_to``, a packet number no record holds yet."""
    records: list = []
    _ours(DATA / sample, records)
    pdus = tshark_pdus(DATA / sample, lua_dir, protocol="lookupd")
    assert len(pdus) == len(records)
    for pdu, rec in zip(pdus, records, strict=True):
        theirs = {k: [str(v) for v in vs] for k, vs in pdu.fields.items()
                  if k != "lookupd.response_to"}
        ours = {k: [str(v) for v in vs] for k, vs in LOOKUPD.filter_values(rec).items()}
        assert theirs == ours, (rec.packets, rec.name)
        assert set(ours) <= set(protocols.filter_fields())
