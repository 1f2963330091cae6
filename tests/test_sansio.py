"""NSQ and TubeMQ stand on one sans-IO base (:mod:`nsqviz.sansio`): the same shape."""

from __future__ import annotations

import ast
import inspect

import pytest

from nsqviz import nsq, sansio, tubemq
from nsqviz.nsq import grammar as nsq_grammar
from nsqviz.nsq import grammar_errors
from nsqviz.tubemq import grammar as tube_grammar

ROLES = [nsq.ClientConnection, nsq.ServerConnection, tubemq.ClientConnection,
         tubemq.ServerConnection]
OBSERVERS = [nsq.Observer, tubemq.Observer]
GARBAGE = {  # bytes each role cannot frame
    nsq.ClientConnection: b"\x00\x00\x00\x08\x00\x00\x00\x07whatever",
    nsq.ServerConnection: b"  V3",
    tubemq.ClientConnection: b"\x00\x00\x00\x01" + bytes(12),
    tubemq.ServerConnection: b"\x00\x00\x00\x01" + bytes(12),
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


def test_one_error_family():
    for error in (nsq_grammar.GrammarError, tube_grammar.GrammarError, tube_grammar.BadToken,
                  grammar_errors.UnknownCommand):
        assert issubclass(error, sansio.GrammarError)
        assert issubclass(error, sansio.ProtocolError)
    assert nsq.LocalProtocolError is tubemq.LocalProtocolError is sansio.LocalProtocolError
    assert nsq.ProtocolError is tubemq.ProtocolError is sansio.ProtocolError
    with pytest.raises(sansio.LocalProtocolError):
        nsq.ClientConnection().send(nsq.Sub("t", "c"))
    with pytest.raises(sansio.LocalProtocolError):
        tubemq.ClientConnection().request(99)


def _private_reaches(cls: type) -> list[str]:
    """``other._name`` inside ``cls``: a private attribute of something not ``self``."""
    tree = ast.parse(inspect.getsource(inspect.getmodule(cls)))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
                and n.name == cls.__name__)
    return [ast.unparse(n) for n in ast.walk(node) if isinstance(n, ast.Attribute)
            and n.attr.startswith("_") and not n.attr.startswith("__")
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
