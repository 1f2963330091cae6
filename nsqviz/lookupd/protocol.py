"""nsqlookupd's ``"  V1"`` protocol as the protocol-free parts of nsqviz see it
(:class:`nsqviz.protocols.protocol.Protocol`).

Detection is the magic ``"  V1"`` nsqd sends first, or nsqlookupd's port 4160 (for a
capture that starts mid-connection, or a connection whose client sent something else:
nsqlookupd answers that with ``E_BAD_PROTOCOL``). Decoding is
:class:`~nsqviz.lookupd.observer.Observer`, its events turned into items and records by
:mod:`nsqviz.lookupd.items`.

Detection reads only the wire constants (:mod:`nsqviz.lookupd.wire`): the grammar, the
events, the observer, the analyses, the report and the rules are imported where they
are first asked for, so offering a capture's flows to every protocol builds none of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from nsqviz.lookupd.dissector import DISSECTOR
from nsqviz.lookupd.wire import ANSWER_STARTS, MAGIC_V1, VERBS
from nsqviz.nsq.framing import DEFAULT_MAX_BODY_SIZE
from nsqviz.protocols.detection import DetectionWords
from nsqviz.protocols.items import ObservedConnection, no_fields
from nsqviz.protocols.protocol import Part, Protocol, RecordView
from nsqviz.stream.direction import Direction

if TYPE_CHECKING:
    from nsqviz.doctor.rule import Rule
    from nsqviz.fields import Field
    from nsqviz.report import Report
    from nsqviz.sql import Analyses

__all__ = ["LOOKUPD", "LookupdProtocol"]

PORT = 4160
"""nsqlookupd's TCP port (``--tcp-address`` default)."""


class LookupdProtocol(Protocol):
    """The ``"  V1"`` protocol nsqd speaks to nsqlookupd."""

    name = "lookupd"
    title = "nsqlookupd V1"
    package = "nsqviz.lookupd"
    server_ports = frozenset({PORT})

    def client_hello(self, data: bytes) -> bool:
        return data.startswith(MAGIC_V1)

    detection_words = DetectionWords(
        "magic", "no magic: nsqlookupd will refuse it", "client did not send the lookup magic",
        "looks like nsqd talking to nsqlookupd",
        "no magic, port not a lookup port, not lookup-like")

    def server_hello(self, data: bytes) -> bool | None:
        """nsqlookupd's first answer: a size, then ``OK``, IDENTIFY's JSON or ``E_...``
        (its refusal of another protocol's magic too)."""
        if len(data) < 4:
            return None
        if not 2 <= int.from_bytes(data[:4], "big", signed=True) <= DEFAULT_MAX_BODY_SIZE:
            return False
        head = data[4:6]
        if any(head.startswith(start) for start in ANSWER_STARTS):
            return True
        return None if any(start.startswith(head) for start in ANSWER_STARTS) else False

    def looks_like(self, direction: str, data: bytes) -> bool:
        return _looks_like_lookup(direction, data)

    def observer(self, *, midstream: bool, fields: bool = True) -> ObservedConnection:
        from nsqviz.lookupd.items import items
        from nsqviz.lookupd.observer import Observer
        return ObservedConnection(Observer(midstream=midstream),
                                  items if fields else partial(items, fields_of=no_fields))

    def fields(self, event: Any) -> dict[str, Any]:
        from nsqviz.lookupd.items import event_fields
        return event_fields(event)

    def summary(self, kind: str, name: str, fields: Mapping[str, Any]) -> str:
        from nsqviz.lookupd.items import summary
        return summary(kind, name, fields)

    def label(self, event: Any) -> tuple[str, str]:
        from nsqviz.lookupd.items import label
        return label(event)

    def names(self) -> tuple[str, ...]:
        from nsqviz.lookupd.items import names
        return names()

    def record_names(self) -> frozenset[str]:
        from nsqviz.lookupd.items import record_names
        return record_names()

    def grammars(self) -> tuple[Any, ...]:
        from nsqviz.lookupd import grammar
        return (*grammar.COMMANDS.values(), grammar.Response)

    def record_name(self, event: Any) -> str | None:
        from nsqviz.lookupd.items import record_name
        return record_name(event)

    def layout(self, kind: str, name: str) -> Any:
        from nsqviz.lookupd import grammar
        from nsqviz.lookupd.events import MAGIC
        if name == MAGIC:
            return grammar.Magic
        if kind == "command":
            return grammar.COMMANDS.get(name)
        if kind == "frame":
            return grammar.Response
        return None

    filter_fields: Part[tuple[Field, ...]] = Part("nsqviz.lookupd.fields:FIELDS")

    def filter_values(self, record: RecordView) -> Mapping[str, list[Any]]:
        from nsqviz.lookupd.items import filter_values
        return filter_values(record)

    analyses: Part[Analyses] = Part("nsqviz.lookupd.analyses:ANALYSES")
    report: Part[Report] = Part("nsqviz.lookupd.report:REPORT")
    dissector = DISSECTOR
    rules: Part[tuple[Rule, ...]] = Part("nsqviz.lookupd.rules:RULES")
    typed_schema = (
        ("topic", "string"),
        ("channel", "string"),
        ("data", "string"),  # an answer's text; IDENTIFY's JSON
    )

    def typed(self, event: Any) -> dict[str, Any]:
        from nsqviz.lookupd.items import typed
        return typed(event)


def _looks_like_lookup(direction: str, data: bytes) -> bool:
    """Mid-stream detection: does this chunk start like a lookup command (nsqd's side)?
    Its answers (a size and ``OK``) look like too many things to claim a flow by; a verb
    another protocol shares (IDENTIFY) ties, and the first registered protocol wins."""
    if direction != Direction.C2S:
        return False
    verb = data[:16].split(b"\n", 1)[0].split(b" ", 1)[0].decode("ascii", "replace")
    return data.startswith(MAGIC_V1) or verb in VERBS


LOOKUPD = LookupdProtocol()
"""The lookup protocol, as registered in :data:`nsqviz.protocols.BUILTIN`."""
