"""NSQ V2's columnar framer: a whole connection's two byte streams straight to the
frames table's NSQ columns, without a Python object for each FIN and each message.

What carries the volume of an NSQ capture -- a consumer's FIN and TOUCH lines, nsqd's
message frames and heartbeats -- is gathered with numpy over the unit boundaries: the
boundaries are walked once per direction by the framing rules themselves
(:class:`~nsqviz.nsq.framing.CommandFraming`, :class:`~nsqviz.nsq.framing.FrameFraming`:
their bulk ``scan``, ``measure`` where it stops), the fixed-offset fields read at the
offsets the grammar's layouts give (:data:`~nsqviz.nsq.fields.FRAME_HEADER`,
:data:`~nsqviz.nsq.fields.MESSAGE`), the lines of the verbs whose one parameter is a
message id matched as their table entry spells them. Every other command (the magic,
IDENTIFY, SUB, PUB, RDY, REQ ...) is decoded by the codec's own decoder, one event each,
and typed by the protocol's :meth:`~nsqviz.nsq.protocol.NsqProtocol.typed`.

The observer's judgement (:class:`~nsqviz.nsq.observer.Observer`) is then checked for the
whole connection at once, and where it would say anything the columnar path says
nothing: :meth:`NsqColumns.connection` declines (returns ``None``) and the capture layer
decodes that connection through the observer. It declines a stream the framing rules
refuse or that ends inside a unit, a command the grammar refuses, a command its state
does not allow (:data:`~nsqviz.nsq.states.TRANSITIONS`), a FIN, REQ or TOUCH of an id not
in flight, a RDY above a ``max_rdy_count`` in force, an error frame, a message frame the
grammar refuses, a connection that negotiates TLS, and one that switches to compression
other than right after its opening IDENTIFY. What is left is what the observer passes
without a word: its records differ only in how they are made, and the answers are paired
with their commands by the observer's rule (the oldest command still waiting that nsqd
answers, among the last :data:`~nsqviz.nsq.observer.WAITING_KEPT`).

A connection that switches to snappy or deflate after IDENTIFY (as clients do) is read
as the observer reads it: each direction decompressed chunk by chunk by the same codec
(:mod:`~nsqviz.nsq.compression`) from the switch on, the timeline told how many bytes
each chunk gave (which is when each unit was complete, and in which packets), the
offsets counted afresh from the switch, and the switch's own ``OK`` answering nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from nsqviz.arrays import from_numpy
from nsqviz.nsq import events as ev
from nsqviz.nsq.commands import (
    BY_EVENT,
    BY_VERB,
    COMMAND_NAMES,
    ENDS_FLIGHT,
    FRAME_NAMES,
    FRAMES,
    MESSAGE_ID,
    BodyKind,
    ParamKind,
)
from nsqviz.nsq.compression import compressor
from nsqviz.nsq.connection import DEFAULT_MAX_RDY_COUNT, _json_or_none
from nsqviz.nsq.fastpath import decode_command_lenient
from nsqviz.nsq.fields import FRAME_HEADER, MESSAGE
from nsqviz.nsq.framing import CommandFraming, FrameFraming
from nsqviz.nsq.grammar_errors import GrammarError
from nsqviz.nsq.observer import WAITING_KEPT
from nsqviz.nsq.runs import HEX_DIGITS
from nsqviz.nsq.states import TRANSITIONS, Role, State, allowed_states
from nsqviz.nsq.wire import HEARTBEAT, MAGIC_V2
from nsqviz.protocols.columnar import Timeline, Units
from nsqviz.stream.direction import Direction
from nsqviz.stream.reassembly import FramingError

__all__ = ["NsqColumns"]

_HEADER = sum(f.size for f in FRAME_HEADER)
"""Bytes of a frame's size and type: where its data starts."""
_AT = {}
_at = _HEADER
for _f in MESSAGE:
    _AT[_f.name] = _at
    _at += _f.size
_MESSAGE_HEAD = _at
"""Where a message frame's body starts; :data:`_AT`: where each of its fields does."""
del _at, _f

_RESPONSE, _ERROR, _MESSAGE = (FRAMES[cls][1] for cls in (ev.Response, ev.Error, ev.Message))
_BOUND = next(p.bound for p in BY_EVENT[ev.Rdy].params if p.bound)
"""The key of nsqd's IDENTIFY response that bounds RDY (``max_rdy_count``)."""
_SWITCHES = ("snappy", "deflate", "tls_v1")
"""Features of nsqd's IDENTIFY response after which the stream is no longer plain."""
_IDENTIFY = MAGIC_V2 + BY_EVENT[ev.Identify].wire + b"\n"
"""How a connection that may switch to compression starts."""

_ID_SIZE = next(f.size for f in MESSAGE if f.name == MESSAGE_ID.field)
_DIGITS = 18
"""The most digits of a number gathered in columns (an int64 holds them all); a longer
one is decoded by the codec."""
_ID_LINES = tuple(
    (spec, len(spec.wire) + 1 + _ID_SIZE + 1) for spec in BY_VERB.values()
    if spec.body is BodyKind.NONE and spec.params[:1] == (MESSAGE_ID,)
    and [p.kind for p in spec.params[1:]] in ([], [ParamKind.DECIMAL]))
"""The verbs whose line is the verb, a space, a message id and perhaps a space and a
number (FIN, TOUCH; REQ), with the size of their line without the number: matched by
their spelling, no event made."""
_ID_COLUMN = MESSAGE_ID.column or ""

_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", np.uint8)
"""A nibble's hex digit, as ``hashlib``'s ``hexdigest`` writes it."""
_HEX = np.zeros(256, dtype=bool)
_HEX[np.frombuffer(HEX_DIGITS, dtype=np.uint8)] = True

_STATES = list(State)
_ALLOWED = {spec.event: np.array([s in allowed_states(Role.SERVER, spec.event) for s in _STATES])
            for spec, _ in _ID_LINES}

_NAMES_C2S = [COMMAND_NAMES[ev.Magic], *(spec.verb for spec in BY_VERB.values())]
_NAMES_S2C = [FRAME_NAMES[cls] for cls in FRAMES]


def _ends(rule: Any, data: bytes) -> np.ndarray | None:
    """Where each unit of ``data`` ends, by the framing rule; ``None`` when the rule
    refuses the bytes or the stream ends inside a unit."""
    ends: list[int] = []
    pos, n = 0, len(data)
    while pos < n:
        pos = rule.scan(data, pos, ends)
        if pos >= n:
            break
        try:
            size = rule.measure(data, pos)
        except FramingError:
            return None
        if size is None:
            return None
        pos += size
        ends.append(pos)
    return np.array(ends, dtype=np.int64)


def _switch(c2s: bytes, s2c: bytes, timeline: Timeline) -> tuple[str, tuple[int, int]] | None:
    """The compression both directions switch to after the IDENTIFY response, and where
    in each stream -- when the connection opens with the magic and IDENTIFY, answered by
    nsqd's first frame, its features asking for snappy or deflate (without TLS) as the
    client's reader takes them (:class:`~nsqviz.nsq.client_connection.ClientConnection`),
    and the client sent nothing after IDENTIFY before the observer read that answer (what
    it did send is held back to be decompressed with the bytes after it: the object
    path's)."""
    if s2c[_HEADER - 4:_HEADER + 1] != _RESPONSE.to_bytes(4, "big") + b"{":
        return None
    try:
        s_at = FrameFraming().measure(s2c, 0)
        c_at = CommandFraming(expect_magic=False).measure(c2s, len(MAGIC_V2))
    except FramingError:
        return None
    if s_at is None or c_at is None or not c2s.startswith(_IDENTIFY):
        return None
    c_at += len(MAGIC_V2)
    features = _json_or_none(s2c[_HEADER:s_at])
    if features is None or features.get("tls_v1"):
        return None
    kind = "snappy" if features.get("snappy") else "deflate" if features.get("deflate") else None
    if kind is None:
        return None
    if c_at < len(c2s):  # IDENTIFY ends a chunk, and the next came after the answer
        if c_at not in np.cumsum(timeline.sizes(Direction.C2S)):
            return None
        answered = timeline.order(Direction.S2C, np.array([s_at]))[0]
        if timeline.order(Direction.C2S, np.array([c_at + 1]))[0] < answered:
            return None
    return kind, (c_at, s_at)


_PLAIN_MOST = 64
"""How many times its compressed size a stream may inflate to in columns; a stream that
inflates more is left to the observer, which reads it piece by piece."""


def _plain(kind: str, data: bytes, at: int, timeline: Timeline, direction: Direction
           ) -> bytes | None:
    """``data`` as the observer reads it: its first ``at`` bytes as they are, the rest
    decompressed chunk by chunk by the codec the observer uses (the timeline learns how
    many bytes each chunk gave); ``None`` for a broken compressed stream."""
    codec = compressor(kind, None)
    pieces = [data[:at]]
    given: list[int] = []
    pos = 0
    most = _PLAIN_MOST * len(data) + (1 << 20)
    total = at
    try:
        for size in timeline.sizes(direction).tolist():
            end = pos + size
            got = max(0, min(end, at) - pos)
            if end > at:
                for piece in codec.decompress(data[max(pos, at):end]):
                    pieces.append(piece)
                    got += len(piece)
                total += got - max(0, min(end, at) - pos)
                if total > most:
                    return None
            given.append(got)
            pos = end
    except Exception:  # snappy and zlib raise their own types: the observer's to report
        return None
    timeline.read_as(direction, np.array(given, np.int64))
    return b"".join(pieces)


def _block(buf: np.ndarray, starts: np.ndarray, at: int, size: int) -> np.ndarray:
    """The ``size`` bytes at ``at`` from each start, as rows of a 2-D array."""
    return buf[starts[:, None] + np.arange(at, at + size)]


def _id_lines(buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray, spec: Any,
              size: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """The lines of ``spec`` (one of :data:`_ID_LINES`, ``size`` bytes without its
    number) spelled as the grammar takes them without a word: its rows, ids and
    numbers (``None`` for a verb without one), a group per line length."""
    prefix = np.frombuffer(spec.wire + b" ", dtype=np.uint8)
    numbered = len(spec.params) > 1
    lo, hi = (size + 2, size + 1 + _DIGITS) if numbered else (size, size)
    candidates = (sizes >= lo) & (sizes <= hi)
    candidates[0] = False  # the magic is no command line
    for length in (np.unique(sizes[candidates]).tolist() if numbered else [size]):
        rows = np.flatnonzero(sizes == length)
        rows = rows[rows > 0]
        line = _block(buf, starts[rows], 0, length)
        id_end = len(prefix) + _ID_SIZE
        ok = ((line[:, :len(prefix)] == prefix).all(axis=1) & (line[:, -1] == 0x0A)
              & _HEX[line[:, len(prefix):id_end]].all(axis=1))
        number = None
        if numbered:
            digits = line[:, id_end + 1:-1].astype(np.int64) - 0x30
            ok &= (line[:, id_end] == 0x20) & ((digits >= 0) & (digits <= 9)).all(axis=1)
            number = digits[ok] @ (10 ** np.arange(digits.shape[1] - 1, -1, -1, dtype=np.int64))
        if ok.any():
            yield rows[ok], np.ascontiguousarray(line[ok, len(prefix):id_end]), number


def _strings(block: np.ndarray) -> Any:
    """Rows of ASCII bytes (ids checked to be hex digits) as an Arrow string array."""
    n, size = block.shape
    offsets = pa.py_buffer(np.arange(0, (n + 1) * size, size, dtype=np.int32).tobytes())
    return pa.Array.from_buffers(pa.string(), n, [None, offsets,
                                                  pa.py_buffer(block.tobytes())])


def _ids(block: np.ndarray) -> np.ndarray:
    """16-byte ids as two 64-bit words each, to sort and compare."""
    return np.ascontiguousarray(block).view(np.uint64)


class _Side:
    """One direction's units as the gather builds them: a name code per unit, and parts
    of typed columns (rows, ``{column: values}``)."""

    def __init__(self, ends: np.ndarray):
        self.ends = ends
        self.starts = np.concatenate(([0], ends[:-1])).astype(np.int64)
        self.codes = np.full(len(ends), -1, dtype=np.int64)
        self.parts: list[tuple[np.ndarray, dict[str, Any]]] = []


class NsqColumns:
    """The columnar framer of NSQ V2 (:class:`~nsqviz.protocols.columnar.ColumnarFramer`);
    ``typed`` is the protocol's :meth:`~nsqviz.protocols.protocol.Protocol.typed`, for the
    commands decoded one by one."""

    def __init__(self, typed: Callable[[Any], dict[str, Any]]):
        self.typed = typed

    def connection(self, c2s: bytes, s2c: bytes, timeline: Timeline) -> tuple[Units, Units] | None:
        restart = (0, 0)
        switch = _switch(c2s, s2c, timeline)
        if switch is not None:  # read both streams as the observer does after the switch
            kind, restart = switch
            c_plain = _plain(kind, c2s, restart[0], timeline, Direction.C2S)
            s_plain = _plain(kind, s2c, restart[1], timeline, Direction.S2C)
            if c_plain is None or s_plain is None:
                return None
            c2s, s2c = c_plain, s_plain
        client_ends = _ends(CommandFraming(), c2s)
        server_ends = _ends(FrameFraming(), s2c)
        if client_ends is None or server_ends is None:
            return None
        client, server = _Side(client_ends), _Side(server_ends)
        c_order = timeline.order(Direction.C2S, client_ends)
        s_order = timeline.order(Direction.S2C, server_ends)
        frames = self._frames(s2c, server, restart[1])
        if frames is None:
            return None
        msg_rows, msg_ids, responses, limit = frames
        commands = self._commands(c2s, client, limit)
        if commands is None:
            return None
        answered, flight_rows, flight_ids, ends_flight = commands
        if not _in_flight(c_order, flight_rows, flight_ids, ends_flight,
                          s_order, msg_rows, msg_ids):
            return None
        response_to, answers = _pairs(answered, c_order, timeline.packet(Direction.C2S,
                                                                         client_ends),
                                      responses, s_order, len(server_ends))
        return (Units("command", client_ends, _NAMES_C2S, client.codes, client.parts,
                      None, None, restart[0]),
                Units("frame", server_ends, _NAMES_S2C, server.codes, server.parts,
                      response_to, answers, restart[1]))

    # -- server to client --------------------------------------------------------------

    def _frames(self, s2c: bytes, side: _Side, switched: int) -> tuple[Any, ...] | None:
        """Message frames gathered, responses typed one by one; ``None`` where the
        observer would speak (see the module doc). Returns the message rows and ids,
        the rows of the responses that answer a command, and the lowest
        ``max_rdy_count`` announced. ``switched``: where the stream switched to
        compression after the first frame (:func:`_switch`), or 0."""
        buf = np.frombuffer(s2c, dtype=np.uint8)
        starts, ends = side.starts, side.ends
        if not len(ends):
            return np.zeros(0, np.int64), np.zeros((0, 2), np.uint64), np.zeros(0, np.int64), \
                DEFAULT_MAX_RDY_COUNT
        ftype = _block(buf, starts, 4, 4).view(">i4")[:, 0]
        if (ftype == _ERROR).any() or not np.isin(ftype, (_RESPONSE, _MESSAGE)).all():
            return None
        side.codes[:] = np.where(ftype == _MESSAGE, _NAMES_S2C.index(FRAME_NAMES[ev.Message]),
                                 _NAMES_S2C.index(FRAME_NAMES[ev.Response]))
        msg = np.flatnonzero(ftype == _MESSAGE)
        if (ends[msg] - starts[msg] < _MESSAGE_HEAD).any():
            return None  # the grammar refuses a message shorter than its header
        ms = starts[msg]
        mid_block = _block(buf, ms, _AT["id"], _ID_SIZE)
        if not _HEX[mid_block].all():
            return None
        ts = _block(buf, ms, _AT["timestamp"], 8).view(">i8")[:, 0]
        attempts = _block(buf, ms, _AT["attempts"], 2).view(">u2")[:, 0]
        head = _MESSAGE_HEAD
        view = memoryview(s2c)
        sha1 = hashlib.sha1
        digests = np.frombuffer(b"".join([
            sha1(view[s + head:e]).digest()
            for s, e in zip(ms.tolist(), ends[msg].tolist(), strict=True)]), np.uint8)
        hexed = _HEX_DIGITS[np.stack((digests >> 4, digests & 15), axis=1)]
        bodies = pa.ListArray.from_arrays(  # one body each: its sha1, in hex digits
            from_numpy(np.arange(len(msg) + 1, dtype=np.int32), pa.int32()),
            _strings(hexed.reshape(len(msg), 2 * hashlib.sha1().digest_size)))
        side.parts.append((msg, {
            _ID_COLUMN: _strings(mid_block), "attempts": attempts.astype(np.int32),
            "msg_ts": ts / 1e9, "bodies": bodies}))
        resp = np.flatnonzero(ftype == _RESPONSE)
        data = [s2c[s + _HEADER:e] for s, e in zip(starts[resp].tolist(),
                                                   ends[resp].tolist(), strict=True)]
        limit = DEFAULT_MAX_RDY_COUNT
        for row, d in zip(resp.tolist(), data, strict=True):
            if d[:1] == b"{":
                features = _json_or_none(d)
                if features is None:
                    continue
                if any(features.get(k) for k in _SWITCHES) and not (switched and row == 0):
                    return None
                bound = features.get(_BOUND)
                if type(bound) is int and bound >= 0:
                    limit = min(limit, bound)
        side.parts.append((resp, {"data": [d.decode("utf-8", "replace") for d in data]}))
        answering = resp[[d != HEARTBEAT for d in data]] if data else resp
        if switched and len(answering) > 1:  # the switch's own OK answers no command
            answering = np.delete(answering, 1)
        return msg, _ids(mid_block), answering, limit

    # -- client to server --------------------------------------------------------------

    def _commands(self, c2s: bytes, side: _Side, limit: int) -> tuple[Any, ...] | None:
        """Commands gathered (the id lines) or decoded (the rest); ``None`` where the
        observer would speak. Returns the rows of the commands nsqd answers, and the
        rows, ids and flight-ending flags of every FIN, REQ and TOUCH."""
        buf = np.frombuffer(c2s, dtype=np.uint8)
        starts, ends = side.starts, side.ends
        n = len(ends)
        if not n:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 2), np.uint64), \
                np.zeros(0, bool)
        sizes = ends - starts
        hot = np.zeros(n, dtype=bool)
        id_rows: list[np.ndarray] = []
        id_blocks: list[np.ndarray] = []
        id_ends: list[np.ndarray] = []
        id_events: list[Any] = []
        for spec, size in _ID_LINES:
            for rows, block, number in _id_lines(buf, starts, sizes, spec, size):
                hot[rows] = True
                side.codes[rows] = _NAMES_C2S.index(spec.verb)
                values = {_ID_COLUMN: _strings(block)}
                if number is not None:
                    values[spec.params[1].column or ""] = number
                side.parts.append((rows, values))
                id_rows.append(rows)
                id_blocks.append(block)
                id_ends.append(np.full(len(rows), spec.event in ENDS_FLIGHT))
                id_events.append((spec.event, rows))
        if bytes(c2s[:len(MAGIC_V2)]) != MAGIC_V2 or ends[0] != len(MAGIC_V2):
            return None
        side.codes[0] = 0
        side.parts.append((np.zeros(1, np.int64), {}))
        # the other commands, one event each, judged in order by the state table
        rest = np.flatnonzero(~hot)[1:]
        state = TRANSITIONS[Role.SERVER][State.INIT][ev.Magic]
        changes = [0]
        after = [_STATES.index(state)]
        answered: list[int] = []
        typed: list[dict[str, Any]] = []
        flight: list[tuple[int, bytes, bool]] = []
        for row, s, e in zip(rest.tolist(), starts[rest].tolist(), ends[rest].tolist(),
                             strict=True):
            try:
                cmd, exc = decode_command_lenient(c2s[s:e])
            except GrammarError:
                return None
            kind = type(cmd)
            nxt = TRANSITIONS[Role.SERVER][state].get(kind)
            if exc is not None or nxt is None:
                return None
            if isinstance(cmd, ev.Rdy) and not 0 <= cmd.count <= limit:
                return None
            spec = BY_EVENT[kind]
            side.codes[row] = _NAMES_C2S.index(spec.verb)
            if spec.answered:
                answered.append(row)
            if isinstance(cmd, ev.Fin | ev.Req | ev.Touch):
                flight.append((row, cmd.id, kind in ENDS_FLIGHT))
            if nxt is not state:
                state = nxt
                changes.append(row)
                after.append(_STATES.index(state))
            typed.append(self.typed(cmd))
        columns: dict[str, list[Any]] = {}
        for k, values in enumerate(typed):
            for name, value in values.items():
                columns.setdefault(name, [None] * len(typed))[k] = value
        side.parts.append((rest, columns))
        # the id lines were allowed in the state the other commands left
        where = np.searchsorted(np.array(changes), np.arange(n), side="right") - 1
        states = np.array(after)[where]
        for event, rows in id_events:
            if not _ALLOWED[event][states[rows]].all():
                return None
        if flight:
            rows_, mids, ends_ = zip(*flight, strict=True)
            if any(len(m) != _ID_SIZE for m in mids):
                return None
            id_rows.append(np.array(rows_, dtype=np.int64))
            id_blocks.append(np.frombuffer(b"".join(mids), np.uint8).reshape(-1, _ID_SIZE))
            id_ends.append(np.array(ends_, dtype=bool))
        if not id_rows:
            return np.array(answered, np.int64), np.zeros(0, np.int64), \
                np.zeros((0, 2), np.uint64), np.zeros(0, bool)
        return (np.array(answered, np.int64), np.concatenate(id_rows),
                _ids(np.concatenate(id_blocks)), np.concatenate(id_ends))


def _in_flight(c_order: np.ndarray, rows: np.ndarray, ids: np.ndarray, ends: np.ndarray,
               s_order: np.ndarray, msg_rows: np.ndarray, msg_ids: np.ndarray) -> bool:
    """Was every FIN, REQ and TOUCH of an id in flight -- delivered (a message frame the
    observer had read) and not FIN'ed or REQ'ed since?"""
    if not len(rows):
        return True
    # events by id, in the order the observer read them: a message puts its id in
    # flight (1), a FIN or REQ takes it out (0), a TOUCH leaves it (-1)
    order = np.concatenate([s_order[msg_rows], c_order[rows]])
    sub = np.concatenate([msg_rows, rows])
    effect = np.concatenate([np.ones(len(msg_rows), np.int8),
                             np.where(ends, 0, -1).astype(np.int8)])
    every = np.concatenate([msg_ids, ids]) if len(msg_ids) else ids
    check = np.concatenate([np.zeros(len(msg_rows), bool), np.ones(len(rows), bool)])
    k = np.lexsort((sub, order, every[:, 1], every[:, 0]))
    every, effect, check = every[k], effect[k], check[k]
    idx = np.arange(len(k))
    group = np.concatenate(([True], (every[1:] != every[:-1]).any(axis=1)))
    first = np.maximum.accumulate(np.where(group, idx, 0))
    changes = np.where(effect >= 0, idx, -1)
    before = np.concatenate(([-1], np.maximum.accumulate(changes)[:-1]))
    ok = (before >= first) & (effect[np.maximum(before, 0)] == 1)
    return bool(ok[check].all())


def _pairs(answered: np.ndarray, c_order: np.ndarray, c_packets: np.ndarray,
           responses: np.ndarray, s_order: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each response's command (the observer's rule, see the module doc): the packet the
    command completed in, and its number among the client's commands (the magic is the
    first); -1 where a response answers none."""
    response_to = np.full(n, -1, dtype=np.int64)
    answers = np.full(n, -1, dtype=np.int64)
    if not len(responses) or not len(answered):
        return response_to, answers
    # how many commands the observer had read when it read each response
    read = np.searchsorted(c_order, s_order[responses], side="right")
    waiting = 0  # the first command still waiting
    for r, seen in zip(responses.tolist(), read.tolist(), strict=True):
        lo = max(waiting, seen - WAITING_KEPT)
        j = int(np.searchsorted(answered, lo))
        if j < len(answered) and answered[j] < seen:
            row = int(answered[j])
            response_to[r], answers[r] = c_packets[row], row + 1
            waiting = row + 1
    return response_to, answers
