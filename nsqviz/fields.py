"""Display-filter fields: what a field is, and the capture layer's own fields.

One registry of field names serves every reader: the display-filter engine
(``nsqviz decode -Y``, :mod:`nsqviz.filters`) evaluates expressions over them and the
Wireshark generator (:mod:`nsqviz.wireshark`) declares them as the dissectors'
``ProtoField`` s, so a filter names the same thing in nsqviz and in tshark. The names
are Wireshark's ``abbrev`` s (``nsq.msg.id``, ``tcp.stream``).

This module names no protocol: each protocol declares its fields next to its tables
(``nsqviz/<protocol>/fields.py``) and offers them as
:attr:`nsqviz.protocols.protocol.Protocol.filter_fields`; :func:`nsqviz.protocols.filter_fields`
joins them with :data:`CAPTURE_FIELDS`, the packet-level fields Wireshark's own
dissectors (frame, IP, TCP) register and nsqviz fills from its records.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["CAPTURE_FIELDS", "Field", "FieldType", "by_abbrev"]


class FieldType(enum.Enum):
    """A field's type, spelled as Wireshark's ``ProtoField`` constructors are (the Lua
    generator writes ``ProtoField.<value>``); the filter engine reads literals by it."""

    NONE = "none"  # a flag: present or not, no value (Wireshark's FT_NONE)
    STRING = "string"
    BYTES = "bytes"
    BOOL = "bool"
    UINT8 = "uint8"
    UINT16 = "uint16"
    UINT32 = "uint32"
    UINT64 = "uint64"
    INT32 = "int32"
    INT64 = "int64"
    FRAMENUM = "framenum"
    ABSOLUTE_TIME = "absolute_time"
    RELATIVE_TIME = "relative_time"
    IPV4 = "ipv4"
    IPV6 = "ipv6"

    @property
    def integer(self) -> bool:
        """Values are integers (counts, sizes, frame numbers)."""
        return self in _INTEGERS

    @property
    def textual(self) -> bool:
        """Values are strings or bytes (``contains``/``matches`` apply)."""
        return self in (FieldType.STRING, FieldType.BYTES)


_INTEGERS = frozenset({FieldType.UINT8, FieldType.UINT16, FieldType.UINT32, FieldType.UINT64,
                       FieldType.INT32, FieldType.INT64, FieldType.FRAMENUM})


@dataclass(frozen=True, slots=True)
class Field:
    """One display-filter field.

    ``abbrev`` is the filter name (``nsq.msg.attempts``); ``title`` the label Wireshark
    shows in the packet tree; ``description`` says what it holds when the title does not;
    ``values`` names an integer field's values (Wireshark's value_string: the frame type
    2 reads ``FrameTypeMessage``); ``base`` is Wireshark's display base (``"DEC"``,
    ``"HEX"``, ``"UTC"`` for a time) when it is not the default.
    """

    abbrev: str
    type: FieldType
    title: str
    description: str = ""
    values: Mapping[int, str] | None = None
    base: str | None = None

    @property
    def protocol(self) -> str:
        """The first word of the name: the protocol (or layer) the field belongs to."""
        return self.abbrev.partition(".")[0]


def _f(abbrev: str, type_: FieldType, title: str, description: str = "") -> Field:
    return Field(abbrev, type_, title, description)


CAPTURE_FIELDS: tuple[Field, ...] = (
    _f("frame.number", FieldType.FRAMENUM, "Frame number",
       "The packet's 1-based number in the capture (a unit spanning several packets is"
       " shown in the packet that completed it, as Wireshark's reassembly does)"),
    _f("frame.time_relative", FieldType.RELATIVE_TIME, "Time since the first frame",
       "Seconds since the capture's first packet"),
    _f("tcp.stream", FieldType.UINT32, "Stream index",
       "The TCP connection's 0-based index in the capture (nsqviz decode's flow id)"),
    _f("tcp.port", FieldType.UINT16, "Source or destination port"),
    _f("tcp.srcport", FieldType.UINT16, "Source port"),
    _f("tcp.dstport", FieldType.UINT16, "Destination port"),
    _f("ip.addr", FieldType.IPV4, "Source or destination address"),
    _f("ip.src", FieldType.IPV4, "Source address"),
    _f("ip.dst", FieldType.IPV4, "Destination address"),
    _f("ipv6.addr", FieldType.IPV6, "Source or destination address"),
    _f("ipv6.src", FieldType.IPV6, "Source address"),
    _f("ipv6.dst", FieldType.IPV6, "Destination address"),
    _f("tcp.flags.fin", FieldType.BOOL, "Fin", "The packet's FIN flag"),
    _f("tcp.flags.reset", FieldType.BOOL, "Reset", "The packet's RST flag"),
    _f("tcp.analysis.zero_window", FieldType.NONE, "Zero window",
       "The packet announced a window of 0: its sender stopped reading (a ZeroWindow record)"),
    _f("tcp.analysis.retransmission", FieldType.NONE, "Retransmission",
       "The packet resent sequence numbers already sent (a Retransmission record of kind"
       " retransmission, fast retransmission or spurious retransmission)"),
    _f("tcp.analysis.fast_retransmission", FieldType.NONE, "Fast retransmission",
       "A retransmission after the receiver's duplicate ACKs asked for it"),
    _f("tcp.analysis.spurious_retransmission", FieldType.NONE, "Spurious retransmission",
       "A retransmission of bytes the receiver had already acknowledged"),
    _f("tcp.analysis.out_of_order", FieldType.NONE, "Out-of-order",
       "A segment below the highest sequence number seen that came within a round trip of"
       " it: reordered, not resent"),
)
"""The packet-level fields of Wireshark's frame, IP and TCP dissectors (and its TCP
analysis, :mod:`nsqviz.capture.tcp_analysis`) that nsqviz fills."""


def by_abbrev(fields: Iterable[Field]) -> dict[str, Field]:
    """``{abbrev: field}``; one name declared twice with different types is an error
    (Wireshark allows one type per name), the same declaration twice is one field."""
    out: dict[str, Field] = {}
    for f in fields:
        seen = out.setdefault(f.abbrev, f)
        if seen.type is not f.type:
            raise TypeError(f"field {f.abbrev!r} is declared as {seen.type.value} and as"
                            f" {f.type.value}")
    return out
