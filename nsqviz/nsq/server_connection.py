"""nsqd's side of a sans-IO NSQ connection (see :mod:`nsqviz.nsq.connection`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from nsqviz.nsq import events as ev
from nsqviz.nsq import fastpath, runs
from nsqviz.nsq.commands import BY_EVENT, BY_VERB, ENDS_FLIGHT, name_of
from nsqviz.nsq.connection import DEFAULT_MAX_RDY_COUNT, _Connection, _continued, _garbage_raw
from nsqviz.nsq.errors import ErrorCode, not_in_flight
from nsqviz.nsq.framing import (
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_MSG_SIZE,
    CommandFraming,
)
from nsqviz.nsq.grammar_errors import GrammarError
from nsqviz.nsq.lexer import verb_of
from nsqviz.nsq.refusals import nsqd_answer
from nsqviz.nsq.states import Role, State, refusal
from nsqviz.sansio import LocalProtocolError
from nsqviz.stream.reassembly import FramingRule, Garbage, RawFrame

__all__ = ["ServerConfig", "ServerConnection"]

_RDY_COUNT_AT = len(BY_EVENT[ev.Rdy].verb) + 1  # the count follows the verb and one space
_ID = attrgetter("id")

LEFT_KEPT = 65536
"""How many ids that left flight a mid-stream observer remembers (memory stays bounded)."""


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
            self._advance(ev.Magic)
        self.identify: dict[str, Any] | None = None
        self.authenticated = False
        # AUTH accepted and its answer not yet given: nsqd reads the next command only
        # after the auth service answered, so commands pipelined behind AUTH are judged
        # as after a successful AUTH (a failed one closes the connection before them)
        self.auth_requested = False
        self.subscription: tuple[str, str] | None = None
        self.rdy = 0
        self.in_flight: set[bytes] = set()
        self.whole = passive and not midstream
        """An observer saw this connection from its first byte, with nothing missing
        since: it judges every command as nsqd does (:class:`~nsqviz.nsq.events.
        Refused`). Without that it judges only a FIN/REQ/TOUCH of an id it saw leave
        flight (:attr:`left`)."""
        self.left: dict[bytes, None] = {}
        """Ids an observer of a partial connection saw FIN'ed or REQ'ed (the latest
        :data:`LEFT_KEPT`, oldest first): a FIN/REQ/TOUCH of one not delivered again is
        refused for sure."""

    def _rule(self, *, expect_magic: bool) -> FramingRule:
        return CommandFraming(
            expect_magic=expect_magic and not self.midstream,
            max_body_size=self.config.max_body_size,
            max_msg_size=self.config.max_msg_size,
        )

    def gap(self) -> tuple[bytes, int | None]:
        """See :meth:`nsqviz.sansio.Connection.gap`. A magic not seen yet went with the
        bytes the capture lost (the framing after a gap expects none): the next unit is
        a command, not the magic."""
        if self.state is State.INIT:
            self._advance(ev.Magic)
        return super().gap()

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

    def send(self, frame: ev.ServerFrame, *, check: bool = True) -> bytes:
        """The bytes for ``frame``; a message is refused (:class:`LocalProtocolError`)
        where nsqd would not send it, unless ``check=False`` (to show what a client
        does with a server that misbehaves)."""
        if type(frame) is ev.Message:
            if check:
                self._check_delivery(1)
            self.in_flight.add(frame.id)
        return self._wrap(fastpath.encode_frame(frame))

    def send_messages(self, messages: Sequence[fastpath.MessageParts], *,
                      check: bool = True) -> bytes:
        """Several message frames at once: the broker's hot path to a consumer. Any
        objects with a message's fields will do (the broker passes its own)."""
        if check:
            self._check_delivery(len(messages))
        data = fastpath.encode_messages(messages)
        self.in_flight.update([m.id for m in messages])
        return self._wrap(data)

    def send_message_run(self, timestamp: int, attempts: int, ids: Sequence[bytes],
                         bodies: Sequence[bytes], *, check: bool = True) -> bytes:
        """:meth:`send_messages` for messages sharing a timestamp and an attempts count,
        given as columns (the broker's first delivery of part of a publish)."""
        if check:
            self._check_delivery(len(ids))
        data = runs.encode_message_run(timestamp, attempts, ids, bodies)
        self.in_flight.update(ids)
        return self._wrap(data)

    def _check_delivery(self, count: int) -> None:
        """nsqd sends messages only to a subscribed client, and no more than its RDY."""
        if self.state is not State.SUBSCRIBED:
            raise LocalProtocolError(f"cannot send a message in state {self.state.value} "
                                     "(only SUBSCRIBED)")
        if count > self.room:
            raise LocalProtocolError(f"{count} message(s) would exceed RDY {self.rdy} "
                                     f"with {len(self.in_flight)} in flight")

    def _bulk(
        self, buf: bytes, base: int, items: list[int | Garbage], i: int, pos: int,
        out: list[ev.Event],
    ) -> tuple[int, int]:
        # FINs in bulk only where nothing but the in-flight check can refuse them.
        if self.passive or ev.Fin not in self._row or (
            self.config.tls_required and not self.tls
        ):
            return i, pos
        start = pos
        fins: list[ev.Fin] = []
        i, pos = runs.decode_fins(buf, items, i, pos, fins)
        in_flight = self.in_flight
        ids = list(map(_ID, fins))
        if len(set(ids)) == len(ids) and in_flight.issuperset(ids):
            in_flight.difference_update(ids)  # every one in flight, none twice: in C
            out += fins
            return i, pos
        append = out.append
        for k, fin in enumerate(fins):
            mid = fin.id
            if mid in in_flight:
                in_flight.discard(mid)
                append(fin)
            else:
                code, text = not_in_flight("FIN", mid)
                offset = base + start + 21 * k  # every FIN of the run is 21 bytes
                append(ev.Violation(code, text, False, offset, None, fin, "id", "not in flight",
                                 offset + 4))
        return i, pos

    def start_compression(self, kind: str, level: int | None = None) -> None:
        """Switch both directions to ``kind``, as nsqd does right after the IDENTIFY
        response: what is sent next (the extra ``OK``) is compressed, and so is
        everything received from now on, including bytes already buffered."""
        self._start_compression(kind, level)
        self._held = self._reasm.take_remaining()
        self._reasm = self._reassembler(after_gap=True)

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

    def _on_garbage(self, garbage: Garbage, out: list[ev.Event]) -> None:
        if garbage.continued:
            out.append(_continued(garbage))
            return
        # nsqd answers a wrong magic with the bare code E_BAD_PROTOCOL.
        text = "" if garbage.code == ErrorCode.BAD_PROTOCOL else garbage.reason
        out.append(ev.Violation(garbage.code, text, True, garbage.offset, _garbage_raw(garbage),
                             reason=garbage.reason))
        self._fail()

    def _refuse(self, out: list[ev.Event], code: ErrorCode, text: str, offset: int,
                raw: RawFrame | None, command: ev.Command | None = None,
                field: str | None = None, reason: str = "",
                field_offset: int | None = None) -> bool:
        """Report what nsqd refuses (a :class:`Violation` with these details); fatal
        unless nsqd's code says otherwise."""
        return self._report(out, ev.Violation(code, text, code.fatal, offset, raw, command, field,
                                           reason, field_offset))

    def _report(self, out: list[ev.Event], violation: ev.Violation) -> bool:
        """Report a refusal; after a fatal one the connection is closed."""
        out.append(violation)
        if violation.fatal:
            self._fail()
        return False

    def _on_frame(
        self, buf: bytes, start: int, end: int, base: int, raw: RawFrame | None,
        out: list[ev.Event],
    ) -> bool:
        data = raw.data if raw is not None else buf[start:end]
        offset = base + start
        if self.state is State.INIT:
            self._advance(ev.Magic)
            out.append(ev.Magic(raw))
            return False
        nl = data.find(b"\n")
        verb = verb_of(data, 0, nl)
        if not self.passive:
            name = verb.decode("ascii", "replace")
            if self.config.tls_required and not self.tls and verb != b"IDENTIFY":
                text = f"{refusal(Role.SERVER, name, self.state)} (TLS required)"
                return self._refuse(out, ErrorCode.INVALID, text, offset, raw)
            spec = BY_VERB.get(verb)
            if spec is not None and spec.event not in self._row:
                text = refusal(Role.SERVER, name, self.state)
                return self._refuse(out, ErrorCode.INVALID, text, offset, raw)
        try:
            cmd, exc = fastpath.decode_command_lenient(data, raw)
        except GrammarError as exc:
            return self._refused(out, data, nl, exc, offset, raw, None)
        if exc is not None:
            return self._refused(out, data, nl, exc, offset, raw, cmd)
        if self.passive:  # an observer judges only what the stream itself shows
            if type(cmd) is ev.Rdy and (over := self._rdy_over_max(cmd, offset, raw)):
                out.append(over)
                return False
            refused = self._judge(cmd)
            self._track(cmd)
            out.append(cmd)
            if refused is not None:
                out.append(refused)
            return False
        return self._accept(cmd, offset, raw, out, len(data))

    def _judge(self, cmd: ev.Command) -> ev.Refused | None:
        """An observer's verdict on a well-formed command: what nsqd answers where its
        state (the transition table) or its flight forbids it, ``None`` where it is
        allowed or the observer cannot tell (it did not see the whole connection)."""
        kind = type(cmd)
        if self.whole and kind not in self._row:
            code = ErrorCode.INVALID
            return ev.Refused(code, refusal(Role.SERVER, name_of(kind), self.state),
                              code.fatal, cmd)
        if isinstance(cmd, ev.Fin | ev.Req | ev.Touch):
            mid = cmd.id
            if mid not in self.in_flight and (self.whole or mid in self.left):
                code, text = not_in_flight(name_of(kind), mid)
                return ev.Refused(code, text, code.fatal, cmd)
        return None

    def lost_bytes(self) -> None:
        """A capture lost bytes of this connection: an observer no longer knows its whole
        state, nor which ids flew in what it missed."""
        self.whole = False
        self.left.clear()

    def _refused(self, out: list[ev.Event], data: bytes, nl: int, exc: GrammarError,
                 offset: int, raw: RawFrame | None, cmd: ev.Command | None) -> bool:
        """A command the grammar refused: nsqd's answer, with the command (as sent) and
        the field attached; a command nsqd accepts all the same is then run."""
        code, text = nsqd_answer(data, nl, exc)
        at = None if exc.offset is None else offset + exc.offset
        field, reason = exc.field, exc.reason
        if code is None:
            # nsqd accepts it (parameters it ignores or defaults): only a command the
            # lenient decode kept has those, so ``cmd`` is there
            assert cmd is not None
            out.append(ev.Violation("", text, False, offset, raw, cmd, field, reason, at))
            if not self.passive:
                # nsqd runs it: the broker gets the command's own event next
                return self._accept(cmd, offset, raw, out, len(data))
            self._track(cmd)
            return False
        if self.passive:
            out.append(ev.Violation(code, text, code.fatal, offset, raw, cmd, field, reason, at))
            if cmd is not None and not code.fatal:
                self._track(cmd)
            return False
        return self._refuse(out, code, text, offset, raw, cmd, field, reason, at)

    def _accept(self, cmd: ev.Command, offset: int, raw: RawFrame | None,
                out: list[ev.Event], size: int) -> bool:
        """nsqd's checks that need the decoded command (``size`` bytes on the wire), then
        the state it changes."""
        kind = type(cmd)
        config = self.config
        refuse = self._refuse
        authed = self.authenticated or self.auth_requested
        if BY_EVENT[kind].auth and config.auth_enabled and not authed:
            text = f"AUTH required before {name_of(kind)}"
            return refuse(out, ErrorCode.AUTH_FIRST, text, offset, raw, command=cmd)
        if isinstance(cmd, ev.Fin | ev.Req | ev.Touch):
            if cmd.id not in self.in_flight:
                code, text = not_in_flight(name_of(kind), cmd.id)
                return refuse(out, code, text, offset, raw, command=cmd, field="id")
        elif isinstance(cmd, ev.Rdy):
            if over := self._rdy_over_max(cmd, offset, raw):
                return self._report(out, over)
        elif isinstance(cmd, ev.Auth):
            if authed:
                return refuse(out, ErrorCode.INVALID, "AUTH already set", offset, raw,
                              command=cmd)
            if not config.auth_enabled:
                return refuse(out, ErrorCode.AUTH_DISABLED, "AUTH disabled", offset, raw,
                              command=cmd)
            self.auth_requested = True
        elif isinstance(cmd, ev.Sub):
            if self.identify and self.identify.get("heartbeat_interval") == -1:
                text = "cannot SUB with heartbeats disabled"
                return refuse(out, ErrorCode.INVALID, text, offset, raw, command=cmd)
        elif isinstance(cmd, ev.Dpub):
            if cmd.defer_time > config.max_req_timeout:
                text = f"DPUB timeout {cmd.defer_time} out of range 0-{config.max_req_timeout}"
                return refuse(out, ErrorCode.INVALID, text, offset, raw, command=cmd,
                              field="defer_time")
        elif isinstance(cmd, ev.Mpub):
            if len(cmd.bodies) > (config.max_body_size - 4) // 5:
                text = f"MPUB invalid message count {len(cmd.bodies)}"
                return refuse(out, ErrorCode.BAD_BODY, text, offset, raw, command=cmd,
                              field="num messages")
            # no message is longer than the whole command: only an MPUB larger than
            # max_msg_size needs each message looked at (one look in C)
            if (size > config.max_msg_size
                    and max(map(len, cmd.bodies), default=0) > config.max_msg_size):
                big = next(b for b in cmd.bodies if len(b) > config.max_msg_size)
                text = f"MPUB message too big {len(big)} > {config.max_msg_size}"
                return refuse(out, ErrorCode.BAD_MESSAGE, text, offset, raw, command=cmd,
                              field="message size")
        self._track(cmd)
        out.append(cmd)
        return False

    def _rdy_over_max(self, cmd: ev.Rdy, offset: int, raw: RawFrame | None) -> ev.Violation | None:
        """nsqd's answer to a RDY count above ``max_rdy_count`` (with the RDY as sent, its
        ``count`` field and where that starts), or None for a count in range. The one
        judgement of it, for nsqd's side and for an observer (which learns the limit
        from the IDENTIFY response)."""
        limit = self.config.max_rdy_count
        if 0 <= cmd.count <= limit:
            return None
        code = ErrorCode.INVALID
        return ev.Violation(code, f"RDY count {cmd.count} out of range 0-{limit}", code.fatal,
                         offset, raw, cmd, "count",
                         f"count {cmd.count} is above max_rdy_count {limit}",
                         offset + _RDY_COUNT_AT)

    def _track(self, cmd: ev.Command) -> None:
        kind = type(cmd)
        before = self.state
        self._advance(kind)
        if isinstance(cmd, ENDS_FLIGHT):
            self.in_flight.discard(cmd.id)
            if self.passive and not self.whole:
                left = self.left
                left[cmd.id] = None
                if len(left) > LEFT_KEPT:
                    del left[next(iter(left))]
        elif isinstance(cmd, ev.Rdy):
            if before is State.SUBSCRIBED:  # nsqd ignores RDY after CLS
                self.rdy = cmd.count
        elif isinstance(cmd, ev.Identify):
            self.identify = cmd.data
        elif isinstance(cmd, ev.Sub):
            self.subscription = (cmd.topic, cmd.channel)
        elif kind is ev.Cls:
            self.rdy = 0
