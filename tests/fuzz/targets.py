"""Fuzz targets: each takes one input's bytes and raises only on a bug.

What the project promises for any bytes (issue 14): the grammars and fast paths raise
nothing but their ``GrammarError``, with an offset inside the input; the codecs, in every
role and at any chunking, turn bad bytes into events, never exceptions; reading a
capture gives records and warnings, or a ``CaptureFormatError`` naming an offset; the
HTTP layer answers every request, or closes, and never raises.

The same targets run under hypothesis in ``make test`` (``test_fuzz.py``, a small
budget) and under atheris in ``make fuzz`` (``python -m tests.fuzz``, long runs). An input
that made a target fail becomes a file in ``tests/fuzz/regressions/<target>/``, replayed
by every test run.
"""

from __future__ import annotations

import contextlib
import functools
import io
import random
from collections.abc import Callable
from pathlib import Path

from nsqviz import filters
from nsqviz.capture.cli import json_line
from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.files import CaptureFormatError
from nsqviz.lookupd import codec as lookupd_codec
from nsqviz.lookupd import grammar as lookupd_grammar
from nsqviz.nsq import events as nsq_events
from nsqviz.nsq import fastpath
from nsqviz.nsq import grammar as nsq_grammar
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.json_object import read_object
from nsqviz.nsq.observer import Observer as NsqObserver
from nsqviz.nsq.server_connection import ServerConnection
from nsqviz.servers.httpd import GET, POST, HTTPError, HTTPServerConnection, route_table, text
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


def json_object_target(data: bytes) -> None:
    """The one JSON-object reader of every decoder: a dict or BadJSON, nothing else."""
    with contextlib.suppress(nsq_grammar.BadJSON):
        read_object(data)


# -------------------------------------------------------------------------- lookupd


def lookupd_grammar_target(data: bytes) -> None:
    """The ``"  V1"`` grammar: a command as nsqlookupd reads it, an answer as nsqd does."""
    for parse in (lookupd_grammar.parse_command, lookupd_grammar.parse_response):
        try:
            parse(data)
        except nsq_grammar.GrammarError as exc:
            _check_offset(exc, data)


LOOKUPD_INFO = {"broadcast_address": "h", "tcp_port": 4150, "http_port": 4151,
                "version": "1.3.0"}


def lookupd_codec_target(data: bytes) -> None:
    """The lookup codec as nsqlookupd, and as nsqd waiting for the answer to IDENTIFY or
    to IDENTIFY, REGISTER and PING; cut at random; then the close."""
    if len(data) < 2:
        return
    role = data[0] % 3
    stream = data[2:]
    if role == 0:
        server = lookupd_codec.ServerConnection()
        if data[1] & 1:
            stream = lookupd_grammar.MAGIC_V1 + stream  # mostly past the magic
        receive = server.receive
    else:
        client = lookupd_codec.ClientConnection()
        asked = [lookupd_codec.Magic(), lookupd_codec.Identify(LOOKUPD_INFO)]
        if role == 2:
            asked += [lookupd_codec.Register("t", "c"), lookupd_codec.Ping()]
        for cmd in asked:
            client.send(cmd)
        receive = client.receive
    for chunk in _chunks(stream, data[1]):
        receive(chunk)
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


# ------------------------------------------------------------------------------ HTTP


def _echo(query: dict[str, list[str]], body: bytes) -> tuple[int, bytes, str | None]:
    if "fail" in query:
        raise HTTPError(400, "MISSING_ARG_TOPIC")
    return text(b"%d" % len(body))


_HTTP_ROUTE = route_table({"/get": (GET, _echo), "/post": (POST, _echo)})


def http_target(data: bytes) -> None:
    """The broker's and lookupd's HTTP layer, cut at random, then the close: it never
    raises, and what it sends is HTTP/1.1 answers."""
    if not data:
        return
    conn = HTTPServerConnection(_HTTP_ROUTE, max_body_size=1024)
    for chunk in [*_chunks(data[1:], data[0]), b""]:
        out = conn.receive(chunk)
        if out and not out.startswith(b"HTTP/1.1 "):
            raise AssertionError(f"not an HTTP answer: {out[:40]!r}")
        if conn.closed:
            break


# -------------------------------------------------------------------- display filters


@functools.cache
def _packet_values() -> list[dict]:
    """Every packet's filter values of a sample capture with errors and violations."""
    from nsqviz.filters.values import packet_values, packets

    decoder = CaptureDecoder()
    records = list(decoder.decode([str(ROOT / "data" / "errors.pcap")]))
    return [packet_values(group, decoder.first_ts) for group in packets(records)]


def display_filter_target(data: bytes) -> None:
    """A display filter from any bytes, read as the command line reads them (bytes that
    are not UTF-8 as lone surrogates): it compiles, or raises :class:`FilterError` in one
    line naming a position inside the expression (issue 33 item 5); what compiles is
    evaluated on every packet of a sample capture (a linear-time regular expression
    engine: no input may hang it)."""
    expr = data.decode("utf-8", "surrogateescape")
    try:
        compiled = filters.compile(expr)
    except filters.FilterError as exc:
        if "\n" in str(exc) or not 0 <= exc.position <= len(expr):
            raise AssertionError(f"not one line naming a place in the input: {exc}") from None
        return
    for values in _packet_values():
        compiled.matches(values)


def filter_seeds() -> list[bytes]:
    """Filters that compile (those proven against tshark) and some that must not."""
    from tests.filters.test_hostile import REFUSED
    from tests.filters.test_tshark_parity import FILTERS

    return [f.encode() for f in FILTERS] + [e.encode() for e, _ in REFUSED if len(e) < 200] \
        + [b'nsq.topic matches "(a+)+$"', b'nsq.topic == "caf\xe9"', b"nsq.topic == \xff"]


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
    "json_object": json_object_target,
    "lookupd_grammar": lookupd_grammar_target,
    "lookupd_codec": lookupd_codec_target,
    "http": http_target,
    "display_filter": display_filter_target,
}


def regressions(name: str) -> list[bytes]:
    """Inputs that once made ``name`` fail (kept as files, replayed by every test run)."""
    folder = REGRESSIONS / name
    return [p.read_bytes() for p in sorted(folder.glob("*"))] if folder.is_dir() else []
