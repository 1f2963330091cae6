"""A protocol's columnar path: a whole connection's units gathered straight into the
frames table's columns, with no object per unit (:meth:`nsqviz.protocols.protocol.
Protocol.columnar`, read by :mod:`nsqviz.capture.columns`)."""

from __future__ import annotations

from typing import Any, NamedTuple
from typing import Protocol as TypingProtocol

__all__ = ["ColumnarFramer", "Timeline", "Units"]


class Timeline(TypingProtocol):
    """When each unit of a connection seen whole was complete, as the capture layer
    knows it (:mod:`nsqviz.capture.columns`): ``ends`` are the units' end offsets in
    their direction's stream, in order (numpy arrays in and out)."""

    def order(self, direction: str, ends: Any) -> Any:
        """For each unit, when an observer fed packet by packet would have read it: an
        increasing number comparable across both directions of the connection."""
        ...

    def packet(self, direction: str, ends: Any) -> Any:
        """For each unit, the packet (id) that completed it."""
        ...

    def sizes(self, direction: str) -> Any:
        """How many bytes of ``direction``'s stream each of its chunks brought, in order."""
        ...

    def read_as(self, direction: str, sizes: Any) -> None:
        """From now on ``ends`` of ``direction`` are offsets in the stream as the protocol
        reads it -- decompressed, say -- to which its chunks gave ``sizes`` bytes each
        (a chunk that gave none completed no unit and is none of a unit's packets)."""
        ...


class Units(NamedTuple):
    """One direction's units as a :class:`ColumnarFramer` gathers them: their ``kind``
    (``command`` or ``frame``), where each ends in the stream, each one's record name
    (``names[codes[i]]``), its typed columns in parts -- ``(rows, {column: values})``,
    the values an Arrow array, a numpy array or a list, one per row -- and, for answers,
    the packet of the command each answers and that command's number among the client's
    commands (``response_to``, ``answers``: -1 where none; ``None``: no row answers);
    ``restart``: where the stream changed form (a switch to compression) -- the offsets of
    the units from there on count from it, as the observer's reader starts afresh."""

    kind: str
    ends: Any
    names: list[str]
    codes: Any
    parts: list[tuple[Any, dict[str, Any]]]
    response_to: Any
    answers: Any
    restart: int = 0


class ColumnarFramer(TypingProtocol):
    """A protocol's path from a connection's reassembled bytes straight to the frames
    table's columns (:meth:`nsqviz.protocols.protocol.Protocol.columnar`)."""

    def connection(self, c2s: bytes, s2c: bytes,
                   timeline: Timeline) -> tuple[Units, Units] | None:
        """The units of a connection seen whole, from its first byte to its last in each
        direction -- the same rows, names, typed columns and answers the protocol's
        :meth:`~nsqviz.protocols.protocol.Protocol.observer` gives -- or ``None`` where
        the observer would say more than that (a violation, a refused command, a switch
        to compression or TLS): the capture layer then decodes the connection through
        the observer."""
        ...
