"""Fuzz targets: each takes one input's bytes and raises only on a bug.

What the project promises for any bytes (issue 14): the grammars and fast paths raise
nothing but their ``GrammarError``, with an offset inside the input; the codecs, in every
role and at any chunking, turn bad bytes into events, never exceptions; reading a
capture gives records and warnings, or a ``CaptureFormatError`` naming an offset.

The same targets run under hypothesis in ``make test`` (``test_fuzz.py``, a small
budget) and under atheris in ``make fuzz`` (``python -m tests.fuzz``, long runs). An input
that made a target fail becomes a file in ``tests/fuzz/regressions/<target>/``, replayed
by every test run.
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable
from pathlib import Path

from nsqviz.capture.cli import json_line
from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.files import CaptureFormatError
from nsqviz.nsq import events as nsq_events
from nsqviz.nsq import fastpath
from nsqviz.nsq import grammar as nsq_grammar
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.observer import Observer as NsqObserver
from nsqviz.nsq.server_connection import ServerConnection
from nsqviz.tubemq import codec as tube_codec
from nsqviz.tubemq import grammar as tube_grammar

ROOT = Path(__file__).resolve().parents[2]
REGRESSIONS = Path(__file__).resolve().parent / "regressions"


def _check_offset(exc: Exception, data: bytes) -> None:
    offset = getattr(exc, "offset", None)
    if offset is None or not 0 <= offset <= len(data):
        raise AssertionError(f"{type(exc).__name__} without an offset inside the input: "
                             f"{offset!r} ({exc})")


def _chunks(data: bytes, seed: int) -> list[bytes]:
    """``data`` cut at random places (1..64 bytes, sometimes whole), from ``seed``."""
    rng = random.Random(seed)
    if rng.random() < 0.2:
        return [data]
    out, pos = [], 0
    while pos < len(data):
        n = rng.randint(1, 64)
        out.append(data[pos : pos + n])
        pos += n
    return out


# ------------------------------------------------------------------------------ NSQ


def nsq_grammar_target(data: bytes) -> None:
    """Both NSQ parsers (the grammar and the fast path), both directions."""
    for parse in (nsq_grammar.parse_frame, nsq_grammar.parse_command,
                  fastpath.decode_frame, fastpath.decode_command):
        try:
            parse(data)
        except nsq_grammar.GrammarError as exc:
            _check_offset(exc, data)


_NSQ_ROLES = ("client", "server", "server-snappy", "server-deflate", "observer")


def _nsq_peer(role: str):
    if role == "client":  # a consumer that subscribed: it reads frames
        c = ClientConnection()
        for cmd in (nsq_events.Magic(), nsq_events.Sub("t", "c"), nsq_events.Rdy(100)):
            c.send(cmd)
        return c.receive
    if role.startswith("server"):
        s = ServerConnection()
        if "-" in role:
            kind = role.split("-")[1]
            client = ClientConnection()
            s.receive(client.send(nsq_events.Magic())
                      + client.send(nsq_events.Identify({kind: True})))
            s.start_compression(kind, 6 if kind == "deflate" else None)
        return s.receive
    obs = NsqObserver(midstream=True)
    return lambda chunk: obs.c2s(chunk) if chunk[:1] < b"\x80" else obs.s2c(chunk)


def nsq_codec_target(data: bytes) -> None:
    """The NSQ codec in each role on the input, cut at random; then the close."""
    if len(data) < 2:
        return
    role = _NSQ_ROLES[data[0] % len(_NSQ_ROLES)]
    receive = _nsq_peer(role)
    stream = data[2:]
    if role == "server" and data[1] & 1:
        stream = nsq_grammar.MAGIC_V2 + stream  # mostly past the magic, into commands
    for chunk in _chunks(stream, data[1]):
        receive(chunk)
    if role != "observer":
        receive(b"")


# --------------------------------------------------------------------------- TubeMQ


def tubemq_grammar_target(data: bytes) -> None:
    try:
        tube_grammar.parse_frame(data)
    except tube_grammar.GrammarError as exc:
        _check_offset(exc, data)


def tubemq_codec_target(data: bytes) -> None:
    """The TubeMQ codec as client, server and observer, cut at random; then the close."""
    if len(data) < 2:
        return
    role = data[0] % 3
    stream = data[2:]
    if data[1] & 1:
        stream = tube_grammar.BEGIN_TOKEN + stream
    if role == 2:
        obs = tube_codec.Observer(midstream=bool(data[1] & 2))
        for i, chunk in enumerate(_chunks(stream, data[1])):
            (obs.c2s if i % 2 else obs.s2c)(chunk, now=float(i))
        return
    conn = tube_codec.ClientConnection() if role == 0 else tube_codec.ServerConnection()
    for i, chunk in enumerate(_chunks(stream, data[1])):
        conn.receive(chunk, now=float(i))
    conn.receive(b"", now=0.0)


# -------------------------------------------------------------------------- captures


def capture_target(data: bytes) -> None:
    """What ``nsqviz decode`` (and ``--json``) does with a capture file."""
    try:
        for rec in CaptureDecoder().decode([io.BytesIO(data)]):
            json_line(rec)
    except CaptureFormatError as exc:
        _check_offset(exc, data)


def capture_seeds() -> list[bytes]:
    """The sample captures (NSQ and TubeMQ) under ``data/``, the small ones."""
    return [p.read_bytes() for p in sorted((ROOT / "data").rglob("*.pcap*"))
            if p.stat().st_size <= 64 * 1024]


TARGETS: dict[str, Callable[[bytes], None]] = {
    "nsq_grammar": nsq_grammar_target,
    "nsq_codec": nsq_codec_target,
    "tubemq_grammar": tubemq_grammar_target,
    "tubemq_codec": tubemq_codec_target,
    "capture": capture_target,
}


def regressions(name: str) -> list[bytes]:
    """Inputs that once made ``name`` fail (kept as files, replayed by every test run)."""
    folder = REGRESSIONS / name
    return [p.read_bytes() for p in sorted(folder.glob("*"))] if folder.is_dir() else []
