"""What nsqviz needs from a protocol, and the registry of the protocols it knows.

A protocol is one package, ``nsqviz/<name>/``, that owns everything about itself, and
one :class:`Protocol` instance in it, registered here. The capture decoder, the records,
the display filters, the palette, the views and the replay, both analyses engines, the
Spark pipeline, ``nsqviz wireshark`` and the site's reference never name a protocol:
they ask this package (:func:`registered`, :func:`by_name`, :func:`of_event`).

Its modules:

===========================  ===========================================================
``nsqviz.protocols``         the registry: :data:`BUILTIN`, :func:`register`,
                             :func:`registered`, :func:`by_name`, :func:`of_event`, and
                             what every protocol's parts add up to
                             (:func:`typed_columns`, :func:`filter_fields`)
``protocols/protocol.py``    the :class:`Protocol` class, hook by hook; :class:`Part`,
                             :class:`Dissector`, :class:`RecordView`
``protocols/detection.py``   its detection hooks (:class:`Detector`), the verdicts
                             (:class:`Detection`) and the choice between protocols
                             (:func:`~nsqviz.protocols.detection.detect`)
``protocols/items.py``       what its capture observer tells the capture layer
                             (:class:`Item`, :class:`ItemKind`, :class:`Lost`,
                             :class:`ConnectionObserver`)
``protocols/columnar.py``    its optional path straight to the frames table's columns
                             (:class:`ColumnarFramer`)
``protocols/timers.py``      the timers the replay draws (:class:`TimerRow`,
                             :class:`TimerSpan`)
===========================  ===========================================================

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

* **detection** -- :attr:`~Detector.server_ports`, :meth:`~Detector.client_hello` (the
  bytes only its client sends first), :meth:`~Detector.starts_hello`,
  :meth:`~Detector.server_hello` (how its server frames its first answer, a refusal of
  another protocol's hello too), :meth:`~Detector.looks_like` (mid-connection),
  :attr:`~Detector.detection_words`; :meth:`~Detector.detect` scores them alike for every
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
capture's flows are offered to every registered protocol
(:func:`~nsqviz.protocols.detection.detect`), records find
their protocol from the event's class (:func:`of_event`), the palette colours every
protocol's names, the frames table gets every protocol's typed columns
(:func:`typed_columns`), :func:`filter_fields` lists every field,
:mod:`nsqviz.pipeline.definitions` collects every protocol's analyses and
:mod:`nsqviz.wireshark.generate` every dissector.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from nsqviz.fields import CAPTURE_FIELDS, Field, by_abbrev

if TYPE_CHECKING:
    from nsqviz.protocols.protocol import Protocol

__all__ = ["BUILTIN", "by_name", "filter_fields", "of_event", "register", "registered",
           "typed_columns"]

BUILTIN = (
    "nsqviz.nsq.protocol:NSQ",
    "nsqviz.tubemq.protocol:TUBEMQ",
    "nsqviz.lookupd.protocol:LOOKUPD",
    "nsqviz.http.protocol:HTTP",
)
"""The protocols nsqviz ships, in detection order (``module:attribute``)."""


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
