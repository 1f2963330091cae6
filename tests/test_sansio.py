"""Every protocol stands on one sans-IO base (:mod:`nsqviz.sansio`): the same shape, one
error family, one meaning for a violation's offsets and words."""

from __future__ import annotations

import ast
import inspect

import pytest

from nsqviz import nsq, sansio, tubemq
from nsqviz.http import events as http_events
from nsqviz.lookupd import codec as lookupd
from nsqviz.lookupd import events as lookupd_events
from nsqviz.lookupd import grammar as lookupd_grammar
from nsqviz.lookupd.observer import Observer as LookupObserver
from nsqviz.nsq import events as nsq_events
from nsqviz.nsq import grammar as nsq_grammar
from nsqviz.nsq import grammar_errors
from nsqviz.tubemq import events as tube_events
from nsqviz.tubemq import grammar as tube_grammar
from nsqviz.tubemq.tables import BEGIN_TOKEN as TUBEMQ_BEGIN_TOKEN

ROLES = [nsq.ClientConnection, nsq.ServerConnection, tubemq.ClientConnection,
         tubemq.ServerConnection, lookupd.ClientConnection, lookupd.ServerConnection]
OBSERVERS = [nsq.Observer, tubemq.Observer, LookupObserver]
GARBAGE = {  # bytes each role cannot frame
    nsq.ClientConnection: b"\x00\x00\x00\x08\x00\x00\x00\x07whatever",
    nsq.ServerConnection: b"  V3",
    tubemq.ClientConnection: b"\x00\x00\x00\x01" + bytes(12),
    tubemq.ServerConnection: b"\x00\x00\x00\x01" + bytes(12),
    lookupd.ClientConnection: b"\xff\xff\xff\xff",
    lookupd.ServerConnection: b"  V3",
}


@pytest.mark.parametrize("role", ROLES, ids=lambda r: f"{r.__module__}.{r.__name__}")
def test_every_role_is_a_sansio_connection_with_the_same_defaults(role):
    assert issubclass(role, sansio.Connection)
    conn = role()
    assert conn.provenance is False and conn.passive is False
    assert isinstance(inspect.getattr_static(role, "closed"), property)
    assert not conn.closed
    events = conn.receive(b"")
    assert type(events[-1]).__name__ == "ConnectionClosed"
    assert conn.closed
    assert conn.receive(b"more") == []


@pytest.mark.parametrize("events", [nsq_events, tube_events, lookupd_events, http_events],
                         ids=lambda m: m.__name__)
def test_every_protocols_events_stand_on_one_base_and_share_the_ends_of_a_stream(events):
    """Each protocol's ``Event`` derives from :class:`nsqviz.sansio.Event`, and its
    ``Truncated`` and ``ConnectionClosed`` are the shared ones, declared once."""
    assert issubclass(events.Event, sansio.Event)
    assert events.Truncated is sansio.Truncated
    assert events.ConnectionClosed is sansio.ConnectionClosed


HEADS = {  # the start of a unit each role reads, too short to frame
    nsq.ClientConnection: b"\x00\x00\x00\x06\x00\x00",
    nsq.ServerConnection: b"  V",
    tubemq.ClientConnection: TUBEMQ_BEGIN_TOKEN + b"\x00",
    tubemq.ServerConnection: TUBEMQ_BEGIN_TOKEN + b"\x00",
    lookupd.ClientConnection: b"\x00\x00\x00\x02O",
    lookupd.ServerConnection: b"  V",
}


@pytest.mark.parametrize("role", ROLES, ids=lambda r: f"{r.__module__}.{r.__name__}")
def test_a_stream_ending_inside_a_unit_is_the_shared_truncated_event(role):
    head = HEADS[role]
    conn = role(provenance=True)
    assert conn.receive(head, segment=7) == []
    *cut, closed = conn.receive(b"")
    assert closed == sansio.ConnectionClosed()
    assert [type(e) for e in cut] == [sansio.Truncated]
    assert (cut[0].offset, cut[0].data) == (0, head)
    assert cut[0].raw is not None and cut[0].raw.sources[0].segment == 7


@pytest.mark.parametrize("observer", OBSERVERS, ids=lambda o: o.__module__)
def test_every_observer_is_a_sansio_observer_keeping_provenance(observer):
    assert issubclass(observer, sansio.Observer)
    obs = observer()
    assert obs.server.provenance and obs.client.provenance
    assert obs.server.passive and obs.client.passive
    assert obs.gap("c2s") == (b"", None)


@pytest.mark.parametrize("role", ROLES, ids=lambda r: f"{r.__module__}.{r.__name__}")
def test_a_peers_violation_names_code_field_reason_and_offset(role):
    events = role().receive(GARBAGE[role])
    violations = [e for e in events if type(e).__name__ == "Violation"]
    assert violations, events
    v: sansio.Violation = violations[0]
    assert v.offset == 0 and v.reason and v.fatal
    assert isinstance(v.code, str) and (v.field is None or isinstance(v.field, str))


def test_role_classes_are_named_alike():
    """Every protocol package names its roles ``ClientConnection``/``ServerConnection``
    and its capture observer ``Observer``."""
    assert sorted({r.__name__ for r in ROLES}) == ["ClientConnection", "ServerConnection"]
    assert {o.__name__ for o in OBSERVERS} == {"Observer"}


FIELD_AT_FAULT = [  # (role, bytes, where the unit starts, where the field at fault goes wrong)
    (nsq.ServerConnection, b"  V2PUB bad*topic\n\x00\x00\x00\x01x", 4, 4 + len(b"PUB bad")),
    (lookupd.ServerConnection, b"  V1PING\nREGISTER t b@d\n", 9, 9 + len(b"REGISTER t b")),
    (tubemq.ServerConnection,
     tube_grammar.BEGIN_TOKEN + bytes(4) + b"\x00\x00\x0f\xa0", 0, 8),  # listSize 4000
]


@pytest.mark.parametrize(("role", "data", "start", "at"), FIELD_AT_FAULT,
                         ids=lambda x: getattr(x, "__module__", None))
def test_offset_is_the_units_start_and_field_offset_the_fields(role, data, start, at):
    """One meaning in every protocol: ``offset`` is where the unit the violation is about
    starts, ``field_offset`` where the field at fault does; every record shows both, with
    the same keys (:func:`nsqviz.sansio.violation_fields`)."""
    v = next(e for e in role().receive(data) if type(e).__name__ == "Violation")
    assert (v.offset, v.field_offset) == (start, at)
    assert v.field and v.reason and v.text
    shown = sansio.violation_fields(v)
    assert list(shown) == ["code", "text", "fatal", "field", "reason", "offset", "field_offset"]
    assert (shown["offset"], shown["field_offset"]) == (start, at)


def test_one_error_family():
    for error in (nsq_grammar.GrammarError, tube_grammar.GrammarError, tube_grammar.BadToken,
                  grammar_errors.UnknownCommand, lookupd_grammar.LookupError_):
        assert issubclass(error, sansio.GrammarError)
        assert issubclass(error, sansio.ProtocolError)
    assert nsq.LocalProtocolError is tubemq.LocalProtocolError is sansio.LocalProtocolError
    assert nsq.ProtocolError is tubemq.ProtocolError is sansio.ProtocolError
    with pytest.raises(sansio.LocalProtocolError):
        nsq.ClientConnection().send(nsq.Sub("t", "c"))
    with pytest.raises(sansio.LocalProtocolError):
        tubemq.ClientConnection().request(99)
    with pytest.raises(sansio.LocalProtocolError):
        lookupd.ClientConnection().send(lookupd.Ping())


_NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make"}
"""A named tuple's public methods, underscored only to stay out of its fields' way."""


def _private_reaches(cls: type) -> list[str]:
    """``other._name`` inside ``cls``: a private attribute of something not ``self``
    (a named tuple's own API aside)."""
    tree = ast.parse(inspect.getsource(inspect.getmodule(cls)))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
                and n.name == cls.__name__)
    return [ast.unparse(n) for n in ast.walk(node) if isinstance(n, ast.Attribute)
            and n.attr.startswith("_") and not n.attr.startswith("__")
            and n.attr not in _NAMEDTUPLE_API
            and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))]


@pytest.mark.parametrize("observer", OBSERVERS, ids=lambda o: o.__module__)
def test_no_observer_reaches_into_a_roles_private_methods(observer):
    assert _private_reaches(observer) == []


def test_the_private_reach_finder_sees_one():
    class Peeking:
        def look(self, other):
            return other._secret

    Peeking.__module__ = __name__
    assert _private_reaches(Peeking) == ["other._secret"]
