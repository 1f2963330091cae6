"""What nsqviz needs from a protocol, and the registry of the protocols it knows.

A protocol is one package, ``nsqviz/<name>/``, that owns everything about itself, and
one :class:`Protocol` instance in it, registered here. The capture decoder, the records,
the display filters, the palette, the views and the replay, both analyses engines, the
Spark pipeline, ``nsqviz wireshark`` and the site's reference never name a protocol:
they ask this module (:func:`registered`, :func:`by_name`, :func:`of_event`).

The package (NSQ's, nsqlookupd's and TubeMQ's each have these parts):

===================  ===================================================================
``grammar.py``       its bytes, parsed and built (``construct``); :meth:`~Protocol.grammars`
tables               commands/methods, states and transitions (h11's ``_state.py``), errors:
                     data every other part reads, never strings parsed back
``events.py``        what happens on a connection: frozen dataclasses, one base
``codec.py`` ...     a sans-IO connection per role (``ClientConnection``,
                     ``ServerConnection``) and a capture ``Observer``, on
                     :mod:`nsqviz.sansio`: its ``Violation`` and error family
``protocol.py``      the :class:`Protocol` instance (detection, records, typed columns)
``fields.py``        its display-filter fields, ``<name>.*``
``analyses.py``      its SQL views for both engines, and its hooks into the shared tables
``report.py``        its part of ``nsqviz messages``, ``connections`` and ``stats``
``rules.py``         its doctor rules (:mod:`nsqviz.doctor`), its ``RULES``
``dissector/``       its Wireshark dissector generator (``script.py``, ``engine.lua``)
===================  ===================================================================

The interface, hook by hook:

* **detection** -- :attr:`~Protocol.server_ports`, :meth:`~Protocol.client_hello` (the bytes
  only its client sends first), :meth:`~Protocol.starts_hello`,
  :meth:`~Protocol.server_hello` (how its server frames its first answer, a refusal of
  another protocol's hello too), :meth:`~Protocol.looks_like` (mid-connection),
  :attr:`~Protocol.detection_words`; :meth:`~Protocol.detect` scores them alike for every
  protocol;
* **decoding** -- :meth:`~Protocol.observer`: a :class:`ConnectionObserver` (usually
  :class:`ObservedConnection` around the sans-IO observer) turning its events into
  protocol-free :class:`Item` s of an :class:`ItemKind`, and saying what a gap costs
  (:class:`Lost`);
* **records** -- :meth:`~Protocol.fields` (JSON-ready), :meth:`~Protocol.summary`
  (``nsqviz decode``'s Info), :meth:`~Protocol.label` (diagrams), :meth:`~Protocol.names`,
  :meth:`~Protocol.aliases` and :meth:`~Protocol.record_name` (one colour per name),
  :meth:`~Protocol.layout` (what a hex view colours bytes with), :attr:`~Protocol.bytes_fields`;
* **the frames table** -- :attr:`~Protocol.typed_schema` and :meth:`~Protocol.typed`: the
  typed columns its analyses aggregate on; :meth:`~Protocol.columnar` (a
  :class:`ColumnarFramer`, optional): a whole connection's units gathered into those
  columns with no object per unit, for the analyses (:mod:`nsqviz.capture.columns`);
* **display filters** -- :attr:`~Protocol.filter_fields`, :meth:`~Protocol.filter_values`,
  :meth:`~Protocol.record_names`;
* **analyses** -- :attr:`~Protocol.analyses` (:class:`nsqviz.sql.Analyses`): its views,
  which read only its own rows, its columns of ``connections``, its error answers;
* **report** -- :attr:`~Protocol.report` (:class:`nsqviz.report.Report`): its messages,
  its part of each of its connections, its sections of ``nsqviz stats`` (text and JSON);
  ``nsqviz.open``'s Capture gives its analyses' tables by name, with no hook of its own;
* **doctor** -- :attr:`~Protocol.rules`: declarative definitions over the analyses'
  tables (:class:`nsqviz.doctor.rule.Rule`), kept with the protocol and run by the same
  engines into the ``findings`` table;
* **views** -- :meth:`~Protocol.timers`: the timers its units start and stop, as spans
  (:class:`TimerSpan`) over a diagram's rows (:class:`TimerRow`), which the replay
  draws under each connection's lane;
* **Wireshark** -- :attr:`~Protocol.dissector` (a :class:`Dissector`): the files
  ``nsqviz wireshark`` writes and the preferences tshark needs.

How a protocol plugs in: write its package with those parts, and add
``"nsqviz.<name>.protocol:INSTANCE"`` to :data:`BUILTIN` (or call :func:`register` with
the instance, for a protocol that lives outside nsqviz). Nothing else is edited: a
capture's flows are offered to every registered protocol (:func:`detect`), records find
their protocol from the event's class (:func:`of_event`), the palette colours every
protocol's names, the frames table gets every protocol's typed columns
(:func:`typed_columns`), :func:`filter_fields` lists every field,
:mod:`nsqviz.pipeline.definitions` collects every protocol's analyses and
:mod:`nsqviz.wireshark.generate` every dissector.
"""

from __future__ import annotations

import enum
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple
from typing import Protocol as TypingProtocol

from nsqviz import sansio
from nsqviz.doctor.rule import Rule
from nsqviz.fields import CAPTURE_FIELDS, Field, by_abbrev
from nsqviz.report import Report
from nsqviz.sql import Analyses
from nsqviz.stream.direction import Direction

__all__ = [
    "ANSWERS",
    "BUILTIN",
    "ConnectionObserver",
    "ObservedConnection",
    "Detection",
    "DetectionWords",
    "Dissector",
    "Item",
    "ItemKind",
    "Lost",
    "LuaScript",
    "Protocol",
    "RecordView",
    "TimerRow",
    "TimerSpan",
    "answer_undecided",
    "by_name",
    "detect",
    "filter_fields",
    "no_fields",
    "of_event",
    "register",
    "registered",
    "typed_columns",
]

BUILTIN = (
    "nsqviz.nsq.protocol:NSQ",
    "nsqviz.tubemq.protocol:TUBEMQ",
    "nsqviz.lookupd.protocol:LOOKUPD",
    "nsqviz.http.protocol:HTTP",
)
"""The protocols nsqviz ships, in detection order (``module:attribute``)."""


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


class Detection(NamedTuple):
    """How sure a protocol is that a flow is its own: ``score`` 4 the server's first
    answer is framed as its server frames, 3 the client's hello was seen, 2 the server
    port is one of its ports, 1 the bytes look like it, 0 not it (``why`` says which).

    The server's answer outranks the client's hello because a server refuses a hello it
    does not speak in its *own* protocol: a client that sends nsqlookupd's magic to nsqd
    gets nsqd's ``E_BAD_PROTOCOL`` as an NSQ error frame, and the connection is nsqd's
    (what its client sent is shown as the magic nsqd refused)."""

    score: int
    why: str


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


class Units(NamedTuple):
    """One direction's units as a :class:`ColumnarFramer` gathers them: their ``kind``
    (``command`` or ``frame``), where each ends in the stream, each one's record name
    (``names[codes[i]]``), its typed columns in parts -- ``(rows, {column: values})``,
    the values an Arrow array, a numpy array or a list, one per row -- and, for answers,
    the packet of the command each answers and that command's number among the client's
    commands (``response_to``, ``answers``: -1 where none; ``None``: no row answers)."""

    kind: str
    ends: Any
    names: list[str]
    codes: Any
    parts: list[tuple[Any, dict[str, Any]]]
    response_to: Any
    answers: Any


class ColumnarFramer(TypingProtocol):
    """A protocol's path from a connection's reassembled bytes straight to the frames
    table's columns (:meth:`Protocol.columnar`)."""

    def connection(self, c2s: bytes, s2c: bytes,
                   timeline: Timeline) -> tuple[Units, Units] | None:
        """The units of a connection seen whole, from its first byte to its last in each
        direction -- the same rows, names, typed columns and answers the protocol's
        :meth:`~Protocol.observer` gives -- or ``None`` where the observer would say
        more than that (a violation, a refused command, a switch to compression or
        TLS): the capture layer then decodes the connection through the observer."""
        ...


def no_fields(event: Any) -> dict[str, Any]:
    """An item's fields when nobody reads them (:meth:`Protocol.observer` without
    ``fields``): an empty dict, still there for what marks the item to be added to."""
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
        events = (codec.c2s if direction == Direction.C2S else codec.s2c)(data, segment=segment)
        return self.items(events) if events else []

    def end(self, direction: str, segment: int) -> list[Item]:
        return self.feed(direction, b"", segment)

    def gap(self, direction: str) -> Lost:
        partial, length = self.codec.gap(direction)
        return Lost(partial, length)


class RecordView(TypingProtocol):
    """What a protocol reads of one decoded record to give its filter values (a
    :class:`nsqviz.records.DecodedRecord` is one; named here so that this module and
    the records module, which asks it for each record's protocol, do not import each
    other)."""

    @property
    def kind(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def fields(self) -> dict[str, Any]: ...

    @property
    def dir(self) -> str | None: ...

    @property
    def event(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class TimerRow:
    """One arrow of a diagram, as a protocol's timers read it: its row ``index``, its
    time ``t`` (seconds), its ``connection``, the event it carried (``item``: a command
    or frame event of the protocol) and whether the client sent it."""

    index: int
    t: float
    connection: str
    item: Any
    from_client: bool


@dataclass(frozen=True, slots=True)
class TimerSpan:
    """A timer drawn beside a diagram's arrows: from row ``first`` to row ``last``
    (``None``: still running where the diagram ends), ``label`` next to it, in
    ``name``'s colour (:func:`nsqviz.palette.name_colour`)."""

    first: int
    last: int | None
    label: str
    name: str = ""


class DetectionWords(NamedTuple):
    """What :meth:`Protocol.detect` says of a flow, in a protocol's own words: its hello
    ``seen``; on its port from the start but without it, what its server does
    (``refused``); ``missing`` the hello elsewhere; the bytes ``look`` like it; ``none``."""

    seen: str
    refused: str
    missing: str
    look: str
    none: str


class Dissector(ABC):
    """A protocol's Wireshark dissector, generated from its tables and grammar
    (``nsqviz/<name>/dissector/``): the files ``nsqviz wireshark`` writes, and the
    preferences tshark needs to use them."""

    @abstractmethod
    def files(self, protocol: Protocol) -> dict[str, str]:
        """``{path within the folder: text}`` of ``protocol``'s dissector (its name,
        title, ports and filter fields come from it): the Lua script ``<name>.lua``
        first, then what it reads beside it."""

    def preferences(self, folder: Path) -> dict[str, str]:
        """The Wireshark preferences (``-o key:value``) it needs once its files are in
        ``folder``; a ``uat:<table>`` one is a line of that table, which ``nsqviz
        wireshark --install`` adds to the user's own."""
        return {}


class LuaScript(Dissector):
    """A dissector that is one Lua script, ``<name>.lua``, written by the ``render``
    function of the module ``script`` (``nsqviz.<name>.dissector.script``), which is
    imported when the dissector is written, not with the protocol."""

    def __init__(self, script: str) -> None:
        self.script = script

    def files(self, protocol: Protocol) -> dict[str, str]:
        render = importlib.import_module(self.script).render
        return {f"{protocol.name}.lua": render(protocol)}


class Protocol(ABC):
    """One protocol, as the protocol-free parts of nsqviz see it. See the module doc."""

    name: str
    """Short name: ``"nsq"``, ``"tubemq"``; the ``protocol`` of its records."""
    title: str
    """How people write it: ``"NSQ"``."""
    package: str
    """The package its events are defined in (``"nsqviz.nsq"``): records find their
    protocol by the module of the event's class."""
    server_ports: frozenset[int]
    """Ports its servers listen on by default."""

    # -- detection ---------------------------------------------------------------

    @abstractmethod
    def client_hello(self, data: bytes) -> bool:
        """Do these first bytes of a stream prove their sender is this protocol's client?
        (The capture layer uses it to orient a flow whose SYN was not captured.)"""

    detection_words: DetectionWords
    """The words of :meth:`detect`'s verdicts."""

    def starts_hello(self, data: bytes) -> bool:
        """Could a client's first bytes ``data`` (perhaps fewer than the whole hello) be
        this protocol's hello? By default: they are all of it."""
        return self.client_hello(data)

    def server_hello(self, data: bytes) -> bool | None:
        """Are a server's first bytes on a connection (``data``: what arrived of them,
        perhaps one segment of a few bytes) framed as this protocol's server frames its
        first answer -- to its own client's hello, or its refusal of another's? ``None``:
        too few bytes yet to tell. By default ``False``: the answer names no protocol."""
        return False

    def looks_like(self, direction: str, data: bytes) -> bool:
        """Do bytes seen in the middle of a flow look like this protocol's?"""
        return False

    def detect(self, direction: str, data: bytes, *, from_start: bool,
               server_port: bool, answer: bytes = b"") -> Detection:
        """Is a flow this protocol's? ``data`` is the first payload seen, in
        ``direction``; ``from_start``: it is the client's first bytes after a captured
        handshake; ``server_port``: the server's port is one of this protocol's;
        ``answer``: the server's first bytes, when a flow seen from its start has them.
        Every protocol scores alike (:class:`Detection`): its server's answer
        (:meth:`server_hello`), its hello (:meth:`starts_hello`), then its port, then the
        look of the bytes (:meth:`looks_like`)."""
        words = self.detection_words
        if from_start:
            hello = self.starts_hello(data)
            if answer and self.server_hello(answer):  # said only where it decides
                return Detection(4, words.seen if hello else
                                 f"the server answers in {self.title}'s framing "
                                 f"({words.missing})")
            if hello:
                return Detection(3, words.seen)
            if server_port:
                return Detection(2, f"server port ({words.refused})")
            return Detection(0, words.missing)
        if server_port:
            return Detection(2, "server port")
        if self.looks_like(direction, data):
            return Detection(1, words.look)
        return Detection(0, words.none)

    # -- decoding -----------------------------------------------------------------

    @abstractmethod
    def observer(self, *, midstream: bool, fields: bool = True) -> ConnectionObserver:
        """A fresh observer for one connection (``midstream``: its start was not seen).
        Without ``fields`` its command and frame items carry only what marks them (a
        violation, what they answer), not the fields a JSON line, a summary or a filter
        reads: for readers that take a record's values from :meth:`typed` alone, like
        the frames table without its ``fields`` column (building those dicts is about
        a seventh of decoding)."""

    # -- records ------------------------------------------------------------------

    @abstractmethod
    def fields(self, event: Any) -> dict[str, Any]:
        """The event's fields as JSON-ready data (bytes as hex)."""

    @abstractmethod
    def summary(self, kind: str, name: str, fields: Mapping[str, Any]) -> str:
        """The Info column of ``nsqviz decode`` for a command or frame record."""

    @abstractmethod
    def label(self, event: Any) -> tuple[str, str]:
        """``(label, style)`` for diagrams: ``("SUB orders audit", "command")``."""

    def names(self) -> tuple[str, ...]:
        """The names its command and frame records take (``SUB``, ``FrameTypeMessage``,
        an RPC method), in its tables' order: :mod:`nsqviz.palette` gives each its own
        colour, the same in every view."""
        return ()

    def aliases(self) -> Mapping[str, str]:
        """Other spellings of :meth:`names` (a request message's name for its method, the
        magic in lower case), each to the name whose colour it takes."""
        return {}

    def grammars(self) -> tuple[Any, ...]:
        """The grammar of its units: the ``construct`` s its commands and frames parse
        and build with (``nsqviz/<name>/grammar.py``; a constant magic aside), in order.
        :mod:`nsqviz.palette` gives the first protocol's field names their own fills."""
        return ()

    def record_name(self, event: Any) -> str | None:
        """The name a command or frame record of ``event`` takes (one of :meth:`names`),
        or ``None`` for an event that is no command or frame."""
        return None

    def layout(self, kind: str, name: str) -> Any:
        """The grammar (a ``construct``) a hex view colours a unit's bytes with, or a
        function from the bytes to a :class:`nsqviz.layout.Layout` (a protocol whose
        fields a construct cannot trace, such as TubeMQ's protobuf fields inside blocks),
        or ``None`` when there is none."""
        return None

    bytes_fields: frozenset[str] = frozenset()
    """Record fields whose values are bytes written as hex (``nsqviz decode -V`` shows
    them as text, escaped where not printable)."""

    typed_schema: tuple[tuple[str, str], ...] = ()
    """Typed columns of the frames table, as ``(name, arrow type name)``: what this
    protocol's analyses join and aggregate on."""

    def typed(self, event: Any) -> dict[str, Any]:
        """Values of :attr:`typed_schema` columns for one command or frame."""
        return {}

    def typed_unit(self, kind: str, name: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Values of :attr:`typed_schema` columns for a command or frame known by its
        fields alone: one the capture cut short (:attr:`Lost.unit`, no event), from what
        its captured head decoded -- nothing the lost rest would change."""
        return {}

    def columnar(self) -> ColumnarFramer | None:
        """Its columnar framer (:class:`ColumnarFramer`), or ``None``: its connections are
        then decoded through its observer for the frames table too."""
        return None

    # -- display filters ------------------------------------------------------------

    filter_fields: tuple[Field, ...] = ()
    """Its display-filter fields, named ``<name>.*`` as its Wireshark dissector registers
    them (the generator declares exactly these)."""

    def record_names(self) -> frozenset[str]:
        """Every name its command, frame and error records can carry (``nsqviz decode
        --filter`` refuses a name no protocol uses)."""
        return frozenset()

    def filter_values(self, record: RecordView) -> Mapping[str, list[Any]]:
        """One record's values of :attr:`filter_fields` (a field absent from the record
        is absent here; a field the unit holds several times has several values), typed
        as the field is: ``str``, ``bytes``, ``int``, ``bool``, ``float`` seconds for times."""
        return {}

    # -- analyses and the doctor ----------------------------------------------------

    analyses: Analyses = Analyses()
    """Its analyses (``nsqviz/<name>/analyses.py``): SQL views over its own rows of the
    frames table, and its hooks into the tables every protocol shares (its columns of
    ``connections``, its error answers); :mod:`nsqviz.sql` says how they are written,
    :mod:`nsqviz.pipeline.definitions` collects them for both engines."""

    report: Report | None = None
    """Its part of ``nsqviz messages``, ``connections`` and ``stats``
    (``nsqviz/<name>/report.py``, :mod:`nsqviz.report` says how), or ``None``: its
    connections then get only the lines every connection has."""

    # -- Wireshark ------------------------------------------------------------------

    dissector: Dissector | None = None
    """Its Wireshark dissector (``nsqviz wireshark`` writes it; tshark-parity tests hold
    it to ``nsqviz decode``), or ``None``."""

    # -- views ------------------------------------------------------------------------

    def timers(self, rows: list[TimerRow]) -> list[TimerSpan]:
        """The timers its units start and stop on these rows (its own records, in time
        order), with lengths only from what the wire says (a capture does not say how
        its servers were started): none by default."""
        return []

    rules: tuple[Rule, ...] = ()
    """Its doctor rules (``nsqviz/<name>/rules.py``): declarative definitions over the
    analyses' tables (:mod:`nsqviz.doctor`), run by the same engines as the analyses
    into the ``findings`` table that ``nsqviz doctor`` reads."""


_BUILTINS: list[Protocol] = []
_EXTRA: dict[str, Protocol] = {}
_BY_MODULE: dict[str, Protocol | None] = {}


def register(protocol: Protocol) -> Protocol:
    """Add a protocol from outside nsqviz after the built-in ones. Returns it."""
    _EXTRA[protocol.name] = protocol
    _BY_MODULE.clear()
    return protocol


def registered() -> tuple[Protocol, ...]:
    """Every known protocol: the built-in ones (imported on first use), then the others."""
    if not _BUILTINS:
        for spec in BUILTIN:
            module, _, attr = spec.partition(":")
            _BUILTINS.append(getattr(importlib.import_module(module), attr))
    return (*_BUILTINS, *(p for p in _EXTRA.values() if p not in _BUILTINS))


def by_name(name: str) -> Protocol:
    """The protocol called ``name``; ``KeyError`` naming the known ones otherwise."""
    for proto in registered():
        if proto.name == name:
            return proto
    known = ", ".join(p.name for p in registered())
    raise KeyError(f"unknown protocol {name!r} (known: {known})")


def of_event(event: Any) -> Protocol | None:
    """The protocol whose package defines the event's class."""
    module = type(event).__module__
    try:
        return _BY_MODULE[module]
    except KeyError:
        pass
    found = None
    for proto in registered():
        if module == proto.package or module.startswith(proto.package + "."):
            found = proto
            break
    _BY_MODULE[module] = found
    return found


def detect(protocols: Iterable[Protocol], direction: str, data: bytes, *, from_start: bool,
           ports: Mapping[str, frozenset[int]], server_port: int,
           answer: bytes = b"") -> tuple[Protocol | None, str]:
    """The protocol most sure a flow is its own, and why; ``None`` and the reasons when
    none claims it. ``ports`` are each protocol's server ports; ``answer`` the server's
    first bytes (:meth:`Protocol.detect`). A tie (two protocols given one port, say)
    goes to the one whose bytes alone still look like it, else to the first."""
    verdicts = []
    reasons = []
    for proto in protocols:
        verdict = proto.detect(direction, data, from_start=from_start,
                               server_port=server_port in ports.get(proto.name, ()),
                               answer=answer)
        if verdict.score:
            verdicts.append((verdict, proto))
        else:
            reasons.append(f"{proto.title}: {verdict.why}")
    if not verdicts:
        return None, "; ".join(reasons)
    top = max(v.score for v, _ in verdicts)
    tied = [(v, p) for v, p in verdicts if v.score == top]
    if len(tied) > 1:
        for verdict, proto in tied:
            if proto.detect(direction, data, from_start=from_start, server_port=False).score:
                return proto, f"{verdict.why}, and the bytes look like it"
    return tied[0][1], tied[0][0].why


def answer_undecided(protocols: Iterable[Protocol], answer: bytes) -> bool:
    """Does some protocol need more of the server's first bytes than ``answer`` to say
    whether they are framed as its server's (:meth:`Protocol.server_hello`)?"""
    return any(proto.server_hello(answer) is None for proto in protocols)


def typed_columns() -> list[tuple[str, str]]:
    """The typed columns of every protocol, each name once (first declaration wins;
    two protocols declaring one name with different types is an error)."""
    out: dict[str, str] = {}
    for proto in registered():
        for name, kind in proto.typed_schema:
            if out.setdefault(name, kind) != kind:
                raise TypeError(f"typed column {name!r} is {out[name]} in one protocol and "
                                f"{kind} in {proto.name}")
    return list(out.items())


def filter_fields() -> dict[str, Field]:
    """Every display-filter field by name: the capture layer's, then every protocol's."""
    return by_abbrev([*CAPTURE_FIELDS, *(f for p in registered() for f in p.filter_fields)])
