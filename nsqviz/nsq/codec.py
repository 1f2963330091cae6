"""Sans-IO NSQ connections, one object per role, in the style of h11.

A :class:`ClientConnection` or :class:`ServerConnection` owns no socket, no thread and
no clock. Bytes that arrived go into ``receive(data)``, which returns the events they
completed; an event you want to send goes into ``send(event)``, which returns the bytes
to write. In between, the object tracks what the protocol says about the connection --
magic sent, identified, authenticated, subscribed, RDY, messages in flight, closing,
compression -- and refuses or reports what breaks it.

Both directions use the same pipeline: optional decompression, the stream
:class:`~nsqviz.stream.Reassembler` with NSQ's framing rule, then the grammar's fast
path. That is what lets the broker, the notebook session, pcap replay and Spark show the
same events for the same bytes.

Misuse by *us* raises :class:`LocalProtocolError` from ``send`` (h11's rule: you cannot
send what the protocol forbids -- unless you ask with ``check=False``, which is how a
notebook shows what nsqd answers to a bad command). Misbehaviour by the *peer* is data:
``receive`` returns a :class:`~nsqviz.nsq.events.Violation` carrying the error nsqd
v1.3.0 would answer with, and after a fatal one the connection is ``CLOSED``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from nsqviz.nsq import fastpath
from nsqviz.nsq.commands import BY_EVENT, BY_VERB, name_of
from nsqviz.nsq.compression import Deflate, Snappy, compressor
from nsqviz.nsq.errors import ErrorCode, LocalProtocolError, ProtocolError, not_in_flight
from nsqviz.nsq.events import (
    Auth,
    Cls,
    Command,
    CompressionStarted,
    ConnectionClosed,
    Dpub,
    Error,
    Event,
    Fin,
    Identify,
    Magic,
    Message,
    Mpub,
    Rdy,
    Req,
    Response,
    ServerFrame,
    Sub,
    TLSUpgrade,
    Touch,
    Truncated,
    Violation,
)
from nsqviz.nsq.framing import (
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_MAX_MSG_SIZE,
    CommandFraming,
    FrameFraming,
)
from nsqviz.nsq.grammar import GrammarError
from nsqviz.nsq.lexer import verb_of
from nsqviz.nsq.refusals import nsqd_answer
from nsqviz.nsq.states import TRANSITIONS, Role, State, refusal
from nsqviz.stream.reassembly import FramingError, Garbage, RawFrame, Reassembler
from nsqviz.stream.reassembly import Truncated as StreamTruncated

__all__ = [
    "ClientConnection",
    "LocalProtocolError",
    "ProtocolError",
    "ServerConfig",
    "ServerConnection",
    "State",
]

DEFAULT_MAX_RDY_COUNT = 2500
"""nsqd's --max-rdy-count default; clients must assume it without feature negotiation."""


# ------------------------------------------------------------------------------ common


class _Connection:
    """What both roles share: the receive pipeline and the compression switch.

    A ``passive`` connection observes someone else's traffic (a capture): it decodes
    without judging -- the real peer's verdicts are in the other direction -- reads on
    after undecodable bytes by resynchronising, and is never closed by a violation.
    """

    role: Role  # whose row of the transition table this connection follows

    def __init__(self, *, provenance: bool, passive: bool = False) -> None:
        self.provenance = provenance
        self.passive = passive
        self.state = State.INIT
        self.compression: str | None = None
        self.tls = False
        self._codec: Snappy | Deflate | None = None
        self._reasm = self._reassembler(expect_magic=True)
        self._eof = False
        self._held = b""  # received before a compression switch, still to decompress

    def _reassembler(self, *, expect_magic: bool) -> Reassembler:
        rule = self._rule(expect_magic=expect_magic)
        return Reassembler(rule, provenance=self.provenance, resync=self.passive)

    def _advance(self, event: type[Event]) -> None:
        """Take the transition ``event`` leads to from the current state, if any."""
        self.state = TRANSITIONS[self.role][self.state].get(event, self.state)

    def _fail(self) -> None:
        """A fatal violation: a peer closes; an observer reads on."""
        if not self.passive:
            self._advance(Error)

    # subclasses provide
    def _rule(self, *, expect_magic: bool):  # pragma: no cover - abstract
        raise NotImplementedError

    def _on_frame(
        self, buf: bytes, start: int, end: int, base: int, raw: RawFrame | None, out: list[Event]
    ) -> bool:  # pragma: no cover - abstract
        """Decode ``buf[start:end]`` (stream offset ``base + start``) into ``out``; return
        True if the stream changes form after it."""
        raise NotImplementedError

    def _on_garbage(self, garbage: Garbage, out: list[Event]) -> None:  # pragma: no cover
        raise NotImplementedError

    def receive(self, data: bytes, *, segment: int | None = None) -> list[Event]:
        """Feed bytes that arrived; ``b""`` means the peer closed its side."""
        out: list[Event] = []
        if self._eof:
            return out
        if not data:
            self._eof = True
            for ev in self._reasm.finish():
                if isinstance(ev, StreamTruncated):
                    out.append(Truncated(ev.offset, ev.data, ev.expected))
                else:
                    self._on_garbage(ev, out)
            out.append(ConnectionClosed())
            self._advance(ConnectionClosed)
            return out
        if self.state is State.CLOSED:
            return out
        if self._held:
            data, self._held = self._held + data, b""
        if self._codec is None:
            self._pump(data, out, segment)
            return out
        for piece in self._decompress(data, out):
            self._pump(piece, out, segment)
            if self.state is State.CLOSED:
                break
        return out

    def _pump(self, data: bytes, out: list[Event], segment: int | None) -> None:
        """Frame and decode ``data``; if the stream changes form after a frame (TLS,
        compression), re-read the bytes after it in their new form.

        Runs of the frames that make up a busy connection's steady traffic (messages to
        a consumer, FINs from it) are handed to the role's ``_bulk`` hook, which decodes
        them without a call per frame; everything else goes frame by frame.
        """
        reasm = self._reasm
        buf, base, items = reasm.cut(data, segment=segment)
        prov = self.provenance
        bulk = None if prov else self._bulk
        on_frame = self._on_frame
        n = len(items)
        i = pos = 0
        while i < n:
            if bulk is not None:
                i, pos = bulk(buf, base, items, i, pos, out)
                if i >= n:
                    return
            item = items[i]
            i += 1
            if type(item) is int:
                start, pos = pos, item
                raw = reasm.frame(buf, base, start, item) if prov else None
                if on_frame(buf, start, item, base, raw, out):
                    self._switch(buf[pos:], out, segment)
                    return
            else:
                self._on_garbage(item, out)
                pos = item.offset - base + len(item.data)
            if self.state is State.CLOSED:
                return

    def _bulk(
        self, buf: bytes, base: int, items: list, i: int, pos: int, out: list[Event]
    ) -> tuple[int, int]:
        """Decode a run of common frames from ``items[i]`` on; return where it stopped."""
        return i, pos

    def _switch(self, rest: bytes, out: list[Event], segment: int | None) -> None:
        self._reasm = self._reassembler(expect_magic=False)
        if not rest:
            return
        if self._tls_pending():
            out[-1] = TLSUpgrade(rest)  # handshake bytes: the caller's TLS layer reads them
            return
        if self._codec is None:
            if self.state is not State.CLOSED:
                self._pump(rest, out, segment)
            return
        for piece in self._decompress(rest, out):
            if self.state is State.CLOSED:
                break
            self._pump(piece, out, segment)

    def _tls_pending(self) -> bool:
        return False

    def gap(self) -> tuple[bytes, int | None]:
        """Bytes are missing from the stream here (a capture lost them).

        The frame in progress is lost: it is dropped and returned, with the length it
        was to have when its size prefix arrived (``None`` otherwise), so that the
        caller knows whether the next frame boundary is proven or must be searched for.
        A live socket never loses bytes; only a capture needs this.
        """
        partial = self._reasm.take_remaining()
        self._held = b""
        self._reasm = self._reassembler(expect_magic=False)
        try:
            length = self._reasm.rule.measure(partial, 0) if partial else None
        except FramingError:
            length = None
        return partial, length

    def _decompress(self, data: bytes, out: list[Event]) -> Iterator[bytes]:
        """The decompressed pieces of ``data``; a broken stream ends them with a fatal
        violation."""
        pieces = self._codec.decompress(data)
        while True:
            try:
                piece = next(pieces)
            except StopIteration:
                return
            except Exception as exc:  # snappy and zlib raise their own types
                out.append(Violation("", f"bad {self.compression} stream: {exc}", True,
                                     self._reasm.offset))
                self._advance(Error)  # nothing after a broken stream is readable
                return
            yield piece

    def _start_compression(self, kind: str, level: int | None) -> None:
        self._codec = compressor(kind, level)
        self.compression = kind

    def _wrap(self, data: bytes) -> bytes:
        return self._codec.compress(data) if self._codec is not None else data


# ------------------------------------------------------------------------------ client

_IDENTIFY_OK = "IDENTIFY"
_TLS_OK = "TLS OK"
_COMPRESSED_OK = "compressed OK"



class ClientConnection(_Connection):
    """The client's side of an NSQ connection.

    Responses are paired with the commands that asked for them, in order (nsqd answers
    IDENTIFY, AUTH, SUB, PUB, MPUB, DPUB and CLS; RDY, FIN, REQ, TOUCH and NOP only get
    an answer when they fail). After an IDENTIFY response that negotiates TLS the codec
    returns :class:`TLSUpgrade` and expects the caller to run the handshake; after one
    that negotiates snappy or deflate it switches both directions right after that frame
    and expects the extra compressed ``OK``, as the spec describes.
    """

    role = Role.CLIENT

    def __init__(
        self,
        *,
        provenance: bool = False,
        passive: bool = False,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ):
        self.max_frame_size = max_frame_size
        super().__init__(provenance=provenance, passive=passive)
        self.identify: dict[str, Any] | None = None
        self.features: dict[str, Any] | None = None
        self.auth_required = False
        self.authenticated = False
        self.auth_info: dict[str, Any] | None = None
        self.subscription: tuple[str, str] | None = None
        self.rdy = 0
        # Ids only: holding the messages would keep every unfinished body alive here.
        self.in_flight: set[bytes] = set()
        self.pending: list[Any] = []
        self._after_tls: tuple[str, int | None] | None = None

    def _rule(self, *, expect_magic: bool):
        return FrameFraming(max_size=self.max_frame_size)

    @property
    def max_rdy_count(self) -> int:
        if self.features and "max_rdy_count" in self.features:
            return int(self.features["max_rdy_count"])
        return DEFAULT_MAX_RDY_COUNT

    def snapshot(self) -> dict[str, Any]:
        """The tracked state as plain data, for before/after views and transcripts."""
        return {
            "state": self.state.value,
            "identified": self.identify is not None,
            "features": dict(self.features) if self.features else None,
            "auth_required": self.auth_required,
            "authenticated": self.authenticated,
            "subscription": self.subscription,
            "rdy": self.rdy,
            "in_flight": [m.decode() for m in self.in_flight],
            "compression": self.compression,
            "tls": self.tls,
            "pending": [p if isinstance(p, str) else name_of(type(p)) for p in self.pending],
        }

    # -- sending -------------------------------------------------------------------

    def send(self, cmd: Command, *, check: bool = True) -> bytes:
        """The bytes for ``cmd``; raises :class:`LocalProtocolError` on misuse."""
        if check:
            self._check(cmd)
        data = fastpath.encode_command(cmd)
        self._sent(cmd)
        return self._wrap(data)

    def send_all(self, cmds: list[Command], *, check: bool = True) -> bytes:
        """The bytes for several commands written at once (a consumer's batch of FINs):
        each is checked and tracked as by :meth:`send`, compressed as one write."""
        encode = fastpath.encode_command
        parts = []
        for cmd in cmds:
            if check:
                self._check(cmd)
            parts.append(encode(cmd))
            self._sent(cmd)
        return self._wrap(b"".join(parts))

    def _check(self, cmd: Command) -> None:
        kind = type(cmd)
        state = self.state
        if kind not in TRANSITIONS[Role.CLIENT][state]:
            raise LocalProtocolError(refusal(Role.CLIENT, name_of(kind), state))
        if kind is Magic:
            return
        if self._after_tls is not None or _TLS_OK in self.pending:
            raise LocalProtocolError("finish the TLS handshake first")
        if kind is Identify:
            if self.identify is not None:
                raise LocalProtocolError("IDENTIFY was already sent")
            if cmd.data.get("snappy") and cmd.data.get("deflate"):
                raise LocalProtocolError("a client cannot enable both snappy and deflate")
        elif kind is Auth:
            if self.authenticated or any(isinstance(p, Auth) for p in self.pending):
                raise LocalProtocolError("AUTH was already sent")
            if self.features is not None and not self.auth_required:
                raise LocalProtocolError("the server did not ask for AUTH: a client must not")
        elif kind is Sub:
            if self.identify and self.identify.get("heartbeat_interval") == -1:
                raise LocalProtocolError("cannot SUB with heartbeats disabled")
        elif kind is Rdy:
            if not 0 <= cmd.count <= self.max_rdy_count:
                raise LocalProtocolError(f"RDY {cmd.count} out of range 0-{self.max_rdy_count}")
        elif kind is Mpub and not cmd.bodies:
            raise LocalProtocolError("MPUB needs at least one message")
        if (
            BY_EVENT[kind].auth
            and self.auth_required
            and not self.authenticated
            and not any(isinstance(p, Auth) for p in self.pending)
        ):
            raise LocalProtocolError(f"AUTH required before {name_of(kind)}")

    def _sent(self, cmd: Command) -> None:
        kind = type(cmd)
        self._advance(kind)
        if kind is Magic:
            return
        if BY_EVENT[kind].answered:
            self.pending.append(cmd)
        if kind is Identify:
            self.identify = dict(cmd.data)
        elif kind is Sub:
            self.subscription = (cmd.topic, cmd.channel)
        elif kind is Rdy:
            self.rdy = cmd.count
        elif kind is Fin or kind is Req:
            self.in_flight.discard(cmd.id)

    def tls_established(self) -> None:
        """The caller finished the TLS handshake: the next frame is the ``OK`` inside TLS."""
        self.tls = True

    # -- receiving -----------------------------------------------------------------

    def _tls_pending(self) -> bool:
        return bool(self.pending) and self.pending[0] == _TLS_OK and not self.tls

    def _on_garbage(self, garbage: Garbage, out: list[Event]) -> None:
        out.append(Violation(garbage.code, garbage.reason, True, garbage.offset,
                             _garbage_raw(garbage)))
        self._fail()

    def _bulk(self, buf, base, items, i, pos, out):
        first = len(out)
        i, pos = fastpath.decode_messages(buf, items, i, pos, out)
        if len(out) > first:
            self.in_flight.update([m.id for m in out[first:]])
        return i, pos

    def _on_frame(self, buf, start, end, base, raw, out):
        try:
            ev = fastpath.decode_frame_at(buf, start, end, raw)
        except GrammarError as exc:
            offset = base + start + (exc.offset or 0)
            out.append(Violation("", exc.reason, True, offset, raw))
            self._fail()
            return False
        out.append(ev)
        if type(ev) is Message:
            self.in_flight.add(ev.id)
            return False
        return self._on_reply(ev, out)

    def _on_reply(self, ev: Response | Error, out: list[Event]) -> bool:
        """Pair a response or error with what asked for it; True if the stream switches."""
        if type(ev) is Error:
            if ev.fatal:
                if self.pending:
                    self.pending.pop(0)
                self._fail()
            return False
        if ev.is_heartbeat or not self.pending:
            return False
        asked = self.pending.pop(0)
        if isinstance(asked, Identify):
            return self._identified(ev, out)
        if asked == _TLS_OK:
            if self._after_tls is not None:
                kind_level, self._after_tls = self._after_tls, None
                return self._compress(*kind_level, out)
            return False
        if isinstance(asked, Auth):
            self.authenticated = True
            self.auth_info = _json_or_none(ev.data)
        return False

    def _identified(self, ev: Response, out: list[Event]) -> bool:
        if ev.is_ok:
            return False
        features = _json_or_none(ev.data)
        if features is None:
            return False
        self.features = features
        self.auth_required = bool(features.get("auth_required"))
        compression = None
        if features.get("snappy"):
            compression = ("snappy", None)
        elif features.get("deflate"):
            compression = ("deflate", int(features.get("deflate_level") or 6))
        if features.get("tls_v1"):
            self.pending.insert(0, _TLS_OK)
            self._after_tls = compression
            out.append(TLSUpgrade())
            return True
        if compression is not None:
            return self._compress(*compression, out)
        return False

    def _compress(self, kind: str, level: int | None, out: list[Event]) -> bool:
        self._start_compression(kind, level)
        self.pending.insert(0, _COMPRESSED_OK)
        out.append(CompressionStarted(kind, level))
        return True


# ------------------------------------------------------------------------------ server


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """The nsqd options the protocol layer itself enforces (the broker owns the rest)."""

    max_rdy_count: int = DEFAULT_MAX_RDY_COUNT
    max_msg_size: int = DEFAULT_MAX_MSG_SIZE
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    max_req_timeout: int = 60 * 60 * 1000  # ms; nsqd's --max-req-timeout default is 1h
    auth_enabled: bool = False
    tls_required: bool = False


class ServerConnection(_Connection):
    """nsqd's side of a connection: commands in, frames out, nsqd's rules in between.

    The broker decides what commands *do* (queues, auth service, features); this object
    decides whether they are allowed, with the error code and text nsqd v1.3.0 gives,
    and owns the flow control: the client's RDY and the ids in flight. ``send`` refuses
    a message nsqd would not send (before SUB, after CLS, beyond RDY); FIN, REQ and
    TOUCH of an id not in flight become the non-fatal E_FIN_FAILED, E_REQ_FAILED,
    E_TOUCH_FAILED.
    """

    role = Role.SERVER

    def __init__(
        self,
        config: ServerConfig | None = None,
        *,
        provenance: bool = False,
        passive: bool = False,
        midstream: bool = False,
    ):
        self.config = config or ServerConfig()
        self.midstream = midstream
        super().__init__(provenance=provenance, passive=passive)
        if midstream:  # a capture that starts after the magic
            self._advance(Magic)
        self.identify: dict[str, Any] | None = None
        self.authenticated = False
        self.subscription: tuple[str, str] | None = None
        self.rdy = 0
        self.in_flight: set[bytes] = set()

    def _rule(self, *, expect_magic: bool):
        return CommandFraming(
            expect_magic=expect_magic and not self.midstream,
            max_body_size=self.config.max_body_size,
            max_msg_size=self.config.max_msg_size,
        )

    def snapshot(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "identified": self.identify is not None,
            "authenticated": self.authenticated,
            "subscription": self.subscription,
            "rdy": self.rdy,
            "in_flight": sorted(m.decode() for m in self.in_flight),
            "compression": self.compression,
            "tls": self.tls,
        }

    @property
    def room(self) -> int:
        """How many more messages the client's RDY allows in flight now."""
        if self.state is not State.SUBSCRIBED:
            return 0
        return max(0, self.rdy - len(self.in_flight))

    # -- sending -------------------------------------------------------------------

    def send(self, frame: ServerFrame, *, check: bool = True) -> bytes:
        """The bytes for ``frame``; a message is refused (:class:`LocalProtocolError`)
        where nsqd would not send it, unless ``check=False`` (to show what a client
        does with a server that misbehaves)."""
        if type(frame) is Message:
            if check:
                self._check_delivery(1)
            self.in_flight.add(frame.id)
        return self._wrap(fastpath.encode_frame(frame))

    def send_messages(self, messages: list[Message], *, check: bool = True) -> bytes:
        """Several message frames at once: the broker's hot path to a consumer."""
        if check:
            self._check_delivery(len(messages))
        encode = fastpath.encode_frame
        self.in_flight.update(m.id for m in messages)
        return self._wrap(b"".join([encode(m) for m in messages]))

    def _check_delivery(self, count: int) -> None:
        """nsqd sends messages only to a subscribed client, and no more than its RDY."""
        if self.state is not State.SUBSCRIBED:
            raise LocalProtocolError(f"cannot send a message in state {self.state.value} "
                                     "(only SUBSCRIBED)")
        if count > self.room:
            raise LocalProtocolError(f"{count} message(s) would exceed RDY {self.rdy} "
                                     f"with {len(self.in_flight)} in flight")

    def _bulk(self, buf, base, items, i, pos, out):
        # FINs in bulk only where nothing but the in-flight check can refuse them.
        if self.passive or Fin not in TRANSITIONS[Role.SERVER][self.state] or (
            self.config.tls_required and not self.tls
        ):
            return i, pos
        first, start = len(out), pos
        i, pos = fastpath.decode_fins(buf, items, i, pos, out)
        in_flight = self.in_flight
        for k in range(first, len(out)):
            mid = out[k].id
            if mid in in_flight:
                in_flight.discard(mid)
            else:
                code, text = not_in_flight("FIN", mid)
                offset = base + start + 21 * (k - first)  # every FIN of the run is 21 bytes
                out[k] = Violation(code, text, False, offset, None, out[k], "id",
                                   "not in flight", offset + 4)
        return i, pos

    def start_compression(self, kind: str, level: int | None = None) -> None:
        """Switch both directions to ``kind``, as nsqd does right after the IDENTIFY
        response: what is sent next (the extra ``OK``) is compressed, and so is
        everything received from now on, including bytes already buffered."""
        self._start_compression(kind, level)
        self._held = self._reasm.take_remaining()
        self._reasm = self._reassembler(expect_magic=False)

    def tls_started(self) -> None:
        """The TLS handshake finished; commands now arrive over TLS."""
        self.tls = True

    def authorized(self) -> None:
        """The auth service accepted this client's secret."""
        self.authenticated = True

    def forget(self, message_id: bytes) -> None:
        """A message left this connection's flight without FIN/REQ (timed out)."""
        self.in_flight.discard(message_id)

    # -- receiving -----------------------------------------------------------------

    def _on_garbage(self, garbage: Garbage, out: list[Event]) -> None:
        # nsqd answers a wrong magic with the bare code E_BAD_PROTOCOL.
        text = "" if garbage.code == ErrorCode.BAD_PROTOCOL else garbage.reason
        out.append(Violation(garbage.code, text, True, garbage.offset, _garbage_raw(garbage),
                             reason=garbage.reason))
        self._fail()

    def _refuse(self, out: list[Event], code: str, text: str, offset: int,
                raw: RawFrame | None, **detail: Any) -> bool:
        """Report what nsqd refuses; fatal unless nsqd's code says otherwise."""
        fatal = ErrorCode(code).fatal
        out.append(Violation(code, text, fatal, offset, raw, **detail))
        if fatal:
            self._fail()
        return False

    def _on_frame(
        self, buf: bytes, start: int, end: int, base: int, raw: RawFrame | None,
        out: list[Event],
    ) -> bool:
        data = raw.data if raw is not None else buf[start:end]
        offset = base + start
        if self.state is State.INIT:
            self._advance(Magic)
            out.append(Magic(raw))
            return False
        nl = data.find(b"\n")
        verb = verb_of(data, 0, nl)
        if not self.passive:
            name = verb.decode("ascii", "replace")
            if self.config.tls_required and not self.tls and verb != b"IDENTIFY":
                text = f"{refusal(Role.SERVER, name, self.state)} (TLS required)"
                return self._refuse(out, ErrorCode.INVALID, text, offset, raw)
            spec = BY_VERB.get(verb)
            if spec is not None and spec.event not in TRANSITIONS[Role.SERVER][self.state]:
                text = refusal(Role.SERVER, name, self.state)
                return self._refuse(out, ErrorCode.INVALID, text, offset, raw)
        try:
            cmd, exc = fastpath.decode_command_lenient(data, raw)
        except GrammarError as exc:
            return self._refused(out, data, nl, exc, offset, raw, None)
        if exc is not None:
            return self._refused(out, data, nl, exc, offset, raw, cmd)
        if self.passive:  # an observer decodes without judging
            self._track(cmd)
            out.append(cmd)
            return False
        return self._accept(cmd, offset, raw, out)

    def _refused(self, out: list[Event], data: bytes, nl: int, exc: GrammarError,
                 offset: int, raw: RawFrame | None, cmd: Command | None) -> bool:
        """A command the grammar refused: nsqd's answer, with the command (as sent) and
        the field attached; a command nsqd accepts all the same is then run."""
        code, text = nsqd_answer(data, nl, exc)
        at = None if exc.offset is None else offset + exc.offset
        detail = {"command": cmd, "field": exc.field, "reason": exc.reason, "field_offset": at}
        if code is None:
            out.append(Violation("", text, False, offset, raw, **detail))
            if not self.passive:
                # nsqd runs it: the broker gets the command's own event next
                return self._accept(cmd, offset, raw, out)
            self._track(cmd)
            return False
        if self.passive:
            out.append(Violation(code, text, code.fatal, offset, raw, **detail))
            if cmd is not None and not code.fatal:
                self._track(cmd)
            return False
        return self._refuse(out, code, text, offset, raw, **detail)

    def _accept(self, cmd: Command, offset: int, raw: RawFrame | None, out: list[Event]) -> bool:
        """nsqd's checks that need the decoded command, then the state it changes."""
        kind = type(cmd)
        config = self.config
        refuse = self._refuse
        if BY_EVENT[kind].auth and config.auth_enabled and not self.authenticated:
            text = f"AUTH required before {name_of(kind)}"
            return refuse(out, ErrorCode.AUTH_FIRST, text, offset, raw, command=cmd)
        if kind is Fin or kind is Req or kind is Touch:
            if cmd.id not in self.in_flight:
                code, text = not_in_flight(name_of(kind), cmd.id)
                return refuse(out, code, text, offset, raw, command=cmd, field="id")
        elif kind is Rdy:
            if not 0 <= cmd.count <= config.max_rdy_count:
                text = f"RDY count {cmd.count} out of range 0-{config.max_rdy_count}"
                return refuse(out, ErrorCode.INVALID, text, offset, raw, command=cmd,
                              field="count")
        elif kind is Auth:
            if self.authenticated:
                return refuse(out, ErrorCode.INVALID, "AUTH already set", offset, raw,
                              command=cmd)
            if not config.auth_enabled:
                return refuse(out, ErrorCode.AUTH_DISABLED, "AUTH disabled", offset, raw,
                              command=cmd)
        elif kind is Sub:
            if self.identify and self.identify.get("heartbeat_interval") == -1:
                text = "cannot SUB with heartbeats disabled"
                return refuse(out, ErrorCode.INVALID, text, offset, raw, command=cmd)
        elif kind is Dpub:
            if cmd.defer_time > config.max_req_timeout:
                text = f"DPUB timeout {cmd.defer_time} out of range 0-{config.max_req_timeout}"
                return refuse(out, ErrorCode.INVALID, text, offset, raw, command=cmd,
                              field="defer_time")
        elif kind is Mpub:
            if len(cmd.bodies) > (config.max_body_size - 4) // 5:
                text = f"MPUB invalid message count {len(cmd.bodies)}"
                return refuse(out, ErrorCode.BAD_BODY, text, offset, raw, command=cmd,
                              field="num messages")
            for body in cmd.bodies:
                if len(body) > config.max_msg_size:
                    text = f"MPUB message too big {len(body)} > {config.max_msg_size}"
                    return refuse(out, ErrorCode.BAD_MESSAGE, text, offset, raw, command=cmd,
                                  field="message size")
        self._track(cmd)
        out.append(cmd)
        return False

    def _track(self, cmd: Command) -> None:
        kind = type(cmd)
        before = self.state
        self._advance(kind)
        if kind is Fin or kind is Req:
            self.in_flight.discard(cmd.id)
        elif kind is Rdy:
            if before is State.SUBSCRIBED:  # nsqd ignores RDY after CLS
                self.rdy = cmd.count
        elif kind is Identify:
            self.identify = cmd.data
        elif kind is Sub:
            self.subscription = (cmd.topic, cmd.channel)
        elif kind is Cls:
            self.rdy = 0


def _garbage_raw(garbage: Garbage) -> RawFrame:
    """Undecodable bytes as a frame of their own, so that a violation says which bytes
    (and, with provenance, which packets) it is about."""
    return RawFrame(garbage.data, garbage.offset, garbage.sources)


def _json_or_none(data: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None
