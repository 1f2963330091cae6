"""The client's side of a sans-IO NSQ connection (see :mod:`nsqviz.nsq.connection`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nsqviz.nsq import events as ev
from nsqviz.nsq import fastpath
from nsqviz.nsq.commands import BY_EVENT, ENDS_FLIGHT, name_of
from nsqviz.nsq.connection import (
    DEFAULT_MAX_RDY_COUNT,
    _Connection,
    _continued,
    _garbage_raw,
    _json_or_none,
)
from nsqviz.nsq.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameFraming,
)
from nsqviz.nsq.grammar_errors import GrammarError
from nsqviz.nsq.states import Role, refusal
from nsqviz.sansio import LocalProtocolError
from nsqviz.stream.reassembly import FramingRule, Garbage, RawFrame

__all__ = ["ClientConnection"]

_TLS_OK = "TLS OK"
_COMPRESSED_OK = "compressed OK"

Compression = tuple[str, int | None]
"""A negotiated compression: its kind and its level (deflate only)."""


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
        midstream: bool = False,
    ):
        self.max_frame_size = max_frame_size
        super().__init__(provenance=provenance, passive=passive)
        if midstream:  # a capture that starts after the magic
            self._advance(ev.Magic)
        self.identify: dict[str, Any] | None = None
        self.features: dict[str, Any] | None = None
        self.auth_required = False
        self.authenticated = False
        self.auth_info: dict[str, Any] | None = None
        self.subscription: tuple[str, str] | None = None
        self.rdy = 0
        # Ids only: holding the messages would keep every unfinished body alive here.
        self.in_flight: set[bytes] = set()
        self.pending: list[ev.Command | str] = []
        """What awaits an answer, in order: the commands nsqd answers, and the extra
        ``OK`` frames a TLS or compression switch brings."""
        self._after_tls: Compression | None = None

    def _rule(self, *, expect_magic: bool) -> FramingRule:
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

    def send(self, cmd: ev.Command, *, check: bool = True) -> bytes:
        """The bytes for ``cmd``; raises :class:`LocalProtocolError` on misuse."""
        if check:
            self._check(cmd)
        data = fastpath.encode_command(cmd)
        self.sent(cmd)
        return self._wrap(data)

    def send_all(self, cmds: list[ev.Command], *, check: bool = True) -> bytes:
        """The bytes for several commands written at once (a consumer's batch of FINs):
        each is checked and tracked as by :meth:`send`, compressed as one write."""
        encode = fastpath.encode_command
        parts = []
        for cmd in cmds:
            if check:
                self._check(cmd)
            parts.append(encode(cmd))
            self.sent(cmd)
        return self._wrap(b"".join(parts))

    def _check(self, cmd: ev.Command) -> None:
        kind = type(cmd)
        if kind not in self._row:
            raise LocalProtocolError(refusal(Role.CLIENT, name_of(kind), self.state))
        if kind is ev.Magic:
            return
        if self._after_tls is not None or _TLS_OK in self.pending:
            raise LocalProtocolError("finish the TLS handshake first")
        rule = _RULES.get(kind)
        if rule is not None:
            rule(self, cmd)
        if (
            self.auth_required
            and not self.authenticated
            and BY_EVENT[kind].auth
            and not any(isinstance(p, ev.Auth) for p in self.pending)
        ):
            raise LocalProtocolError(f"AUTH required before {name_of(kind)}")

    def _check_identify(self, cmd: ev.Identify) -> None:
        if self.identify is not None:
            raise LocalProtocolError("IDENTIFY was already sent")
        if cmd.data.get("snappy") and cmd.data.get("deflate"):
            raise LocalProtocolError("a client cannot enable both snappy and deflate")

    def _check_auth(self, cmd: ev.Auth) -> None:
        if self.authenticated or any(isinstance(p, ev.Auth) for p in self.pending):
            raise LocalProtocolError("AUTH was already sent")
        if self.features is not None and not self.auth_required:
            raise LocalProtocolError("the server did not ask for AUTH: a client must not")

    def _check_sub(self, cmd: ev.Sub) -> None:
        if self.identify and self.identify.get("heartbeat_interval") == -1:
            raise LocalProtocolError("cannot SUB with heartbeats disabled")

    def _check_rdy(self, cmd: ev.Rdy) -> None:
        if not 0 <= cmd.count <= self.max_rdy_count:
            raise LocalProtocolError(f"RDY {cmd.count} out of range 0-{self.max_rdy_count}")

    def _check_mpub(self, cmd: ev.Mpub) -> None:
        if not cmd.bodies:
            raise LocalProtocolError("MPUB needs at least one message")

    def sent(self, cmd: ev.Command) -> None:
        """Track ``cmd`` as sent (its answer is awaited, RDY and in flight updated)
        without encoding it: :meth:`send` calls it, and an observer for a command it saw
        the client send."""
        kind = type(cmd)
        self._advance(kind)
        if isinstance(cmd, ENDS_FLIGHT):  # a consumer's answers: the usual command
            self.in_flight.discard(cmd.id)
        elif kind in _ANSWERED:
            self.pending.append(cmd)
            if isinstance(cmd, ev.Identify):
                self.identify = dict(cmd.data)
            elif isinstance(cmd, ev.Sub):
                self.subscription = (cmd.topic, cmd.channel)
        elif isinstance(cmd, ev.Rdy):
            self.rdy = cmd.count

    def tls_established(self) -> None:
        """The caller finished the TLS handshake: the next frame is the ``OK`` inside TLS."""
        self.tls = True

    # -- receiving -----------------------------------------------------------------

    def _tls_pending(self) -> bool:
        return bool(self.pending) and self.pending[0] == _TLS_OK and not self.tls

    def _on_garbage(self, garbage: Garbage, out: list[ev.Event]) -> None:
        if garbage.continued:
            out.append(_continued(garbage))
            return
        out.append(ev.Violation(garbage.code, garbage.reason, True, garbage.offset,
                                _garbage_raw(garbage), reason=garbage.reason))
        self._fail()

    def _bulk(
        self, buf: bytes, base: int, items: list[int | Garbage], i: int, pos: int,
        out: list[ev.Event],
    ) -> tuple[int, int]:
        messages: list[ev.Message] = []
        i, pos = fastpath.decode_messages(buf, items, i, pos, messages)
        if messages:
            out.extend(messages)
            self.in_flight.update([m.id for m in messages])
        return i, pos

    def _on_frame(
        self, buf: bytes, start: int, end: int, base: int, raw: RawFrame | None,
        out: list[ev.Event],
    ) -> bool:
        try:
            frame = fastpath.decode_frame_at(buf, start, end, raw)
        except GrammarError as exc:
            offset = base + start + (exc.offset or 0)
            out.append(ev.Violation("", exc.reason, True, offset, raw, field=exc.field,
                                    reason=exc.reason))
            self._fail()
            return False
        out.append(frame)
        if isinstance(frame, ev.Message):
            self.in_flight.add(frame.id)
            return False
        return self._on_reply(frame, out)

    def answered_by(self, frame: ev.Response | ev.Error) -> None:
        """An observer saw an answer cut short by the capture: pair it with what asked
        for it, as if it had been read whole."""
        self._on_reply(frame, [])

    def _on_reply(self, frame: ev.Response | ev.Error, out: list[ev.Event]) -> bool:
        """Pair a response or error with what asked for it; True if the stream switches."""
        if isinstance(frame, ev.Error):
            if frame.fatal:
                if self.pending:
                    self.pending.pop(0)
                self._fail()
            return False
        if frame.is_heartbeat or not self.pending:
            return False
        asked = self.pending.pop(0)
        if isinstance(asked, ev.Identify):
            return self._identified(frame, out)
        if asked == _TLS_OK:
            if self._after_tls is not None:
                kind_level, self._after_tls = self._after_tls, None
                return self._compress(*kind_level, out)
            return False
        if isinstance(asked, ev.Auth):
            self.authenticated = True
            self.auth_info = _json_or_none(frame.data)
        return False

    def _identified(self, frame: ev.Response, out: list[ev.Event]) -> bool:
        if frame.is_ok:
            return False
        features = _json_or_none(frame.data)
        if features is None:
            return False
        self.features = features
        self.auth_required = bool(features.get("auth_required"))
        compression: Compression | None = None
        if features.get("snappy"):
            compression = ("snappy", None)
        elif features.get("deflate"):
            compression = ("deflate", int(features.get("deflate_level") or 6))
        if features.get("tls_v1"):
            self.pending.insert(0, _TLS_OK)
            self._after_tls = compression
            out.append(ev.TLSUpgrade())
            return True
        if compression is not None:
            return self._compress(*compression, out)
        return False

    def _compress(self, kind: str, level: int | None, out: list[ev.Event]) -> bool:
        self._start_compression(kind, level)
        self.pending.insert(0, _COMPRESSED_OK)
        out.append(ev.CompressionStarted(kind, level))
        return True


_RULES: dict[type[ev.Command], Callable[[ClientConnection, Any], None]] = {
    ev.Identify: ClientConnection._check_identify,
    ev.Auth: ClientConnection._check_auth,
    ev.Sub: ClientConnection._check_sub,
    ev.Rdy: ClientConnection._check_rdy,
    ev.Mpub: ClientConnection._check_mpub,
}
"""What a client must not send beyond what its state allows, per command."""

_ANSWERED = frozenset(kind for kind, spec in BY_EVENT.items() if spec.answered)
"""The commands nsqd answers, whose answers the codec pairs with them."""
