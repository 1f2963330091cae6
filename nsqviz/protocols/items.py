"""What a protocol's capture observer tells the capture layer: :class:`Item` s of an
:class:`ItemKind`, and what a gap cost it (:class:`Lost`).

Every protocol's observer speaks these words (:meth:`nsqviz.protocols.protocol.Protocol.
observer`), so the capture layer, the records and every view handle a unit, an error, a
cut or a switch to TLS alike, whichever protocol it came from.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple
from typing import Protocol as TypingProtocol

from nsqviz.sansio import ConnectionClosed, truncated_fields
from nsqviz.stream.direction import C2S

if TYPE_CHECKING:
    from nsqviz import sansio

__all__ = ["ANSWERS", "ConnectionObserver", "Item", "ItemKind", "Lost", "ObservedConnection",
           "no_fields", "truncated_item"]


class ItemKind(enum.StrEnum):
    """What an :class:`Item` is (the capture layer has one handler per kind)."""

    COMMAND = "command"
    """A decoded unit, client to server; ``fields`` may hold a ``"violation"`` (what the
    server refuses in it, :func:`nsqviz.sansio.violation_fields`)."""
    FRAME = "frame"
    """A decoded unit, server to client (an answer, a message, a frame); ``fields`` may
    hold a ``"violation"``."""
    ERROR = "error"
    """Bytes that could not be decoded as a unit: ``name`` is the server's error code
    (or the protocol's name for the problem, or ``"Undecodable"``); ``fields`` are
    :func:`nsqviz.sansio.violation_fields` and the bytes as ``data``."""
    TRUNCATED = "truncated"
    """The stream ended inside a unit."""
    SKIPPED = "skipped"
    """The rest of undecodable bytes whose start an :attr:`ERROR` reported."""
    TLS = "tls"
    """The connection switches to TLS here (nothing after it is readable)."""
    ANNOTATION = "annotation"
    """``fields`` to add to the previous record of the same direction (a compression
    switch that takes effect right after a response, the packet a response answers) --
    but :data:`ANSWERS`, which the record keeps apart."""


ANSWERS = "answers"
"""The key, in an annotation's fields (or a cut unit's), of the command a server's
answer answers by its number among the client's commands on the connection (1: the
client's first unit shown as a command, its magic included): the capture layer takes it
out of the fields into :attr:`nsqviz.records.DecodedRecord.answers` -- what the
analyses pair an answer with its command by (a packet number, ``response_to``, may name
several commands)."""


class Item(NamedTuple):
    """One thing a connection observer saw, in words every output understands.

    ``kind`` says what (:class:`ItemKind`); ``name`` is the record's name (a command's
    verb, a frame type, an RPC message). ``offset`` is the stream offset of the unit
    relative to where the observer's current stream starts (the capture layer adds what
    came before a gap, to the offsets of a violation in ``fields`` too); ``raw`` is the
    reassembled frame (``raw.sources`` name its packets) or ``None``.
    """

    kind: ItemKind
    name: str
    fields: dict[str, Any]
    event: Any
    offset: int | None = None
    raw: Any = None


class Lost(NamedTuple):
    """What a gap in one direction cost the observer.

    ``partial`` is the start of the unit the gap cut, ``length`` that unit's full size
    when its size prefix arrived before the gap (then the next boundary is proven);
    a non-empty ``dead`` says why nothing more of this direction can be decoded.
    ``unit``: that unit decoded as far as it was captured (a ``command`` or ``frame``
    whose fields hold ``"cut": {"captured": N, "length": M}``, no event), when its head
    says what it was -- a capture cut by its snaplen keeps the heads of long units.
    When more than that unit is missing the capture layer calls :meth:`ConnectionObserver.
    gap` again, at the unit boundary (nothing buffered): a unit then went unseen.
    """

    partial: bytes = b""
    length: int | None = None
    dead: str = ""
    unit: Item | None = None


def truncated_item(event: sansio.Truncated, unit: str) -> Item:
    """The item of a :class:`nsqviz.sansio.Truncated` event, alike in every protocol but
    for what it calls a ``unit`` (``"frame"``, ``"message"``)."""
    fields = {**truncated_fields(event), "reason": f"the stream ended inside this {unit}"}
    return Item(ItemKind.TRUNCATED, "Truncated", fields, event, event.offset, event.raw)


class ConnectionObserver(TypingProtocol):
    """A passive decoder of one connection, both directions (a capture's view)."""

    @property
    def encrypted(self) -> bool:
        """True once the connection switched to TLS: nothing more is decodable."""
        ...

    def feed(self, direction: str, data: bytes, segment: int) -> list[Item]:
        """Bytes of ``direction`` (a :class:`~nsqviz.stream.Direction`) carried by packet
        ``segment``."""
        ...

    def gap(self, direction: str) -> Lost:
        """Bytes of ``direction`` are missing from the capture here."""
        ...

    def end(self, direction: str, segment: int) -> list[Item]:
        """``direction`` ended (FIN, RST, end of capture): what is left in it."""
        ...


def no_fields(event: Any) -> dict[str, Any]:
    """An item's fields when nobody reads them
    (:meth:`~nsqviz.protocols.protocol.Protocol.observer` without ``fields``): an empty
    dict, still there for what marks the item to be added to."""
    return {}


class ObservedConnection:
    """A protocol's sans-IO :class:`nsqviz.sansio.Observer` behind
    :class:`ConnectionObserver`: each direction's events become items through ``items``.
    A protocol whose gaps cost more than the frame in progress overrides :meth:`gap`."""

    __slots__ = ("codec", "items")

    def __init__(self, codec: sansio.Observer,
                 items: Callable[[list[Any]], list[Item]]) -> None:
        self.codec = codec
        self.items = items

    @property
    def encrypted(self) -> bool:
        return self.codec.encrypted

    def feed(self, direction: str, data: bytes, segment: int) -> list[Item]:
        codec = self.codec
        events = (codec.c2s if direction == C2S else codec.s2c)(data, segment=segment)
        return self.items(events) if events else []

    def end(self, direction: str, segment: int) -> list[Item]:
        """The end of ``direction``: what its codec had left, as items. Its last event,
        :class:`~nsqviz.sansio.ConnectionClosed`, is the TCP layer's matter in every
        protocol: the capture layer reports the flow's end itself."""
        codec = self.codec
        events = (codec.c2s if direction == C2S else codec.s2c)(b"", segment=segment)
        events = [e for e in events if type(e) is not ConnectionClosed]
        return self.items(events) if events else []

    def gap(self, direction: str) -> Lost:
        partial, length = self.codec.gap(direction)
        return Lost(partial, length)
