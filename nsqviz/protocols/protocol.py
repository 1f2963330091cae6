"""What nsqviz needs from a protocol: the :class:`Protocol` class, hook by hook (the
package doc of :mod:`nsqviz.protocols` lists them), and what its hooks are given and give
that is not a capture's items (:mod:`nsqviz.protocols.items`), its columnar path
(:mod:`nsqviz.protocols.columnar`) or its timers (:mod:`nsqviz.protocols.timers`): the
record a filter reads (:class:`RecordView`), its Wireshark dissector
(:class:`Dissector`), its parts imported when first read (:class:`Part`)."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload
from typing import Protocol as TypingProtocol

from nsqviz.protocols.detection import Detector

if TYPE_CHECKING:  # what decoding never reads: imported where it is used
    from nsqviz.doctor.rule import Rule
    from nsqviz.fields import Field
    from nsqviz.protocols.columnar import ColumnarFramer
    from nsqviz.protocols.items import ConnectionObserver
    from nsqviz.protocols.timers import TimerRow, TimerSpan
    from nsqviz.report import Report
    from nsqviz.sql import Analyses

__all__ = ["Dissector", "LuaScript", "Part", "Protocol", "RecordView"]


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


T = TypeVar("T")


class Part(Generic[T]):
    """A part of a protocol that decoding does not need -- its analyses, report, rules,
    filter fields -- named ``"module:attribute"`` (as :data:`nsqviz.protocols.BUILTIN`
    names a protocol) and imported when first read, then kept: ``analyses =
    Part("nsqviz.nsq.analyses:ANALYSES")`` in the protocol's class. So the registry's
    protocols cost a capture's decoding no more than detection and their codecs."""

    __slots__ = ("spec", "value")

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.value: T | None = None

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Part[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> T | Part[T]:
        if obj is None:
            return self
        if self.value is None:
            module, _, attr = self.spec.partition(":")
            self.value = getattr(importlib.import_module(module), attr)
        return self.value


class LuaScript(Dissector):
    """A dissector that is one Lua script, ``<name>.lua``, written by the ``render``
    function of the module ``script`` (``nsqviz.<name>.dissector.script``), which is
    imported when the dissector is written, not with the protocol."""

    def __init__(self, script: str) -> None:
        self.script = script

    def files(self, protocol: Protocol) -> dict[str, str]:
        render = importlib.import_module(self.script).render
        return {f"{protocol.name}.lua": render(protocol)}


class Protocol(Detector):
    """One protocol, as the protocol-free parts of nsqviz see it (:mod:`nsqviz.protocols`
    says how its parts plug in); its detection hooks are its :class:`Detector` part."""

    name: str
    """Short name: ``"nsq"``, ``"tubemq"``; the ``protocol`` of its records."""
    title: str
    """How people write it: ``"NSQ"``."""
    package: str
    """The package its events are defined in (``"nsqviz.nsq"``): records find their
    protocol by the module of the event's class."""

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

    @property
    def typed_schema(self) -> tuple[tuple[str, str], ...]:
        """Typed columns of the frames table, as ``(name, arrow type name)``: what this
        protocol's analyses join and aggregate on."""
        return ()

    def typed(self, event: Any) -> dict[str, Any]:
        """Values of :attr:`typed_schema` columns for one command or frame."""
        return {}

    def typed_unit(self, kind: str, name: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Values of :attr:`typed_schema` columns for a command or frame known by its
        fields alone: one the capture cut short (:attr:`~nsqviz.protocols.items.Lost.unit`,
        no event), from what its captured head decoded -- nothing the lost rest would
        change."""
        return {}

    def columnar(self) -> ColumnarFramer | None:
        """Its columnar framer (:class:`~nsqviz.protocols.columnar.ColumnarFramer`), or
        ``None``: its connections are then decoded through its observer for the frames
        table too."""
        return None

    # -- display filters ------------------------------------------------------------

    @property
    def filter_fields(self) -> tuple[Field, ...]:
        """Its display-filter fields, named ``<name>.*`` as its Wireshark dissector
        registers them (the generator declares exactly these)."""
        return ()

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

    @property
    def analyses(self) -> Analyses:
        """Its analyses (``nsqviz/<name>/analyses.py``): SQL views over its own rows of the
        frames table, and its hooks into the tables every protocol shares (its columns of
        ``connections``, its error answers); :mod:`nsqviz.sql` says how they are written,
        :mod:`nsqviz.pipeline.definitions` collects them for both engines. None by
        default. A protocol gives it, as its :attr:`report`, :attr:`rules` and
        :attr:`filter_fields`, as a :class:`Part`: imported when first read, not when a
        capture is decoded."""
        from nsqviz.sql import Analyses
        return Analyses()

    @property
    def report(self) -> Report | None:
        """Its part of ``nsqviz messages``, ``connections`` and ``stats``
        (``nsqviz/<name>/report.py``, :mod:`nsqviz.report` says how), or ``None``: its
        connections then get only the lines every connection has."""
        return None

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

    @property
    def rules(self) -> tuple[Rule, ...]:
        """Its doctor rules (``nsqviz/<name>/rules.py``): declarative definitions over the
        analyses' tables (:mod:`nsqviz.doctor`), run by the same engines as the analyses
        into the ``findings`` table that ``nsqviz doctor`` reads."""
        return ()
