"""The NSQ V2 connection state machine, as one explicit table (h11's ``_state.py``).

:data:`TRANSITIONS` says, for each role and state, which events are allowed and which
state each leads to; an event missing from a state's row is refused, with the one
template of :func:`refusal`. The server row is nsqd's ``protocolV2``: IDENTIFY, AUTH and
SUB only before SUB, RDY/FIN/REQ/TOUCH only after it, CLS only while subscribed, the
publishing commands and NOP always. The client row is the same less what nsqd would
silently ignore (RDY after CLS). From every open state a fatal error (an ``E_*`` nsqd
closes after, or a violation it would answer with one) and the end of the stream lead
to ``CLOSED``. The codec (all roles), the broker (through the codec) and the state
diagram read this table; nothing else lists states or transitions.
"""

from __future__ import annotations

import enum

from nsqviz import sansio
from nsqviz.nsq import events as ev
from nsqviz.nsq.commands import name_of

__all__ = [
    "CLOSERS",
    "IGNORED_BY_NSQD",
    "TRANSITIONS",
    "Role",
    "State",
    "allowed_states",
    "diagram",
    "refusal",
]


class State(enum.Enum):
    """Where a connection is, in nsqd's terms.

    ``INIT`` is before the magic; ``CONNECTED`` is nsqd's ``stateInit`` (IDENTIFY, AUTH,
    SUB and publishing allowed); ``SUBSCRIBED`` and ``CLOSING`` are nsqd's
    ``stateSubscribed`` and ``stateClosing``; ``CLOSED`` follows a fatal error or EOF.
    """

    INIT = "INIT"
    CONNECTED = "CONNECTED"
    SUBSCRIBED = "SUBSCRIBED"
    CLOSING = "CLOSING"
    CLOSED = "CLOSED"


class Role(enum.Enum):
    """Whose rules: the client's (what it may send) or nsqd's (what it accepts)."""

    CLIENT = "client"
    SERVER = "server"


INIT, CONNECTED, SUBSCRIBED, CLOSING, CLOSED = State

CLOSERS: tuple[type[sansio.Event], ...] = (ev.Error, ev.ConnectionClosed)
"""Events that close the connection from any open state: a fatal error, the end."""

_CLOSE = dict.fromkeys(CLOSERS, CLOSED)

_NSQD: dict[State, dict[type[sansio.Event], State]] = {
    INIT: {ev.Magic: CONNECTED, **_CLOSE},
    CONNECTED: {
        ev.Identify: CONNECTED, ev.Auth: CONNECTED, ev.Sub: SUBSCRIBED,
        ev.Pub: CONNECTED, ev.Mpub: CONNECTED, ev.Dpub: CONNECTED, ev.Nop: CONNECTED, **_CLOSE,
    },
    SUBSCRIBED: {
        ev.Rdy: SUBSCRIBED, ev.Fin: SUBSCRIBED, ev.Req: SUBSCRIBED, ev.Touch: SUBSCRIBED,
        ev.Cls: CLOSING, ev.Pub: SUBSCRIBED, ev.Mpub: SUBSCRIBED, ev.Dpub: SUBSCRIBED,
        ev.Nop: SUBSCRIBED, **_CLOSE,
    },
    CLOSING: {
        ev.Rdy: CLOSING, ev.Fin: CLOSING, ev.Req: CLOSING, ev.Touch: CLOSING,
        ev.Pub: CLOSING, ev.Mpub: CLOSING, ev.Dpub: CLOSING, ev.Nop: CLOSING, **_CLOSE,
    },
    CLOSED: {},
}

IGNORED_BY_NSQD: frozenset[tuple[State, type[sansio.Event]]] = frozenset({(CLOSING, ev.Rdy)})
"""Accepted by nsqd without effect, so a client must not send them."""

TRANSITIONS: dict[Role, dict[State, dict[type[sansio.Event], State]]] = {
    Role.SERVER: _NSQD,
    Role.CLIENT: {
        state: {e: nxt for e, nxt in row.items() if (state, e) not in IGNORED_BY_NSQD}
        for state, row in _NSQD.items()
    },
}
"""``TRANSITIONS[role][state][event class]`` is the next state; missing means refused."""


def refusal(role: Role, verb: str, state: State) -> str:
    """The one text for a command its state does not allow.

    For the server it is nsqd's (``cannot SUB in current state``, sent as E_INVALID);
    the client's own refusal names the state and what it would allow instead.
    """
    if role is Role.SERVER:
        return f"cannot {verb} in current state"
    allowed = [name_of(e) for e in TRANSITIONS[role][state] if e not in CLOSERS]
    hint = "allowed: " + ", ".join(allowed) if allowed else "the connection is closed"
    return f"cannot {verb} in state {state.value} ({hint})"


def allowed_states(role: Role, event: type[sansio.Event]) -> frozenset[State]:
    """The states in which ``role``'s table allows ``event``."""
    return frozenset(s for s, row in TRANSITIONS[role].items() if event in row)


_CLOSER_LABELS = {ev.Error: "fatal E_*", ev.ConnectionClosed: "EOF"}


def diagram(role: Role = Role.CLIENT) -> tuple[list[str], list[tuple[str, str, str]]]:
    """``role``'s states and the transitions between different states, read from
    :data:`TRANSITIONS`: ``(from, to, label)`` with the events that lead there."""
    edges: dict[tuple[State, State], list[str]] = {}
    for state, row in TRANSITIONS[role].items():
        for event, nxt in row.items():
            if nxt is not state:
                label = _CLOSER_LABELS.get(event) or name_of(event)
                edges.setdefault((state, nxt), []).append(label)
    return [s.value for s in State], [
        (src.value, dst.value, " / ".join(labels)) for (src, dst), labels in edges.items()
    ]
