"""The lookup protocol's connection states, as one explicit table (h11's ``_state.py``).

:data:`TRANSITIONS` says, for each state and command, the next state -- or the
:class:`~nsqviz.lookupd.grammar.Refusal` nsqlookupd answers (then closes). Both roles,
the observer, the state diagram and the Wireshark dissector read it; a command missing
from a state's row is one the protocol has no rule for there (nothing moves).
"""

from __future__ import annotations

import enum

from nsqviz.lookupd.events import Command, Identify, Magic, Ping, Register, Unregister
from nsqviz.lookupd.grammar import Refusal

__all__ = ["INITIAL", "State", "TRANSITIONS", "next_state"]


class State(enum.Enum):
    """``INIT`` before the magic, ``CONNECTED`` after it, ``IDENTIFIED`` after IDENTIFY
    (REGISTER/UNREGISTER allowed), ``CLOSED`` after an error or EOF."""

    INIT = "INIT"
    CONNECTED = "CONNECTED"
    IDENTIFIED = "IDENTIFIED"
    CLOSED = "CLOSED"


INITIAL = State.INIT
"""Where a connection seen from its first byte starts."""

TRANSITIONS: dict[tuple[State, type[Command]], State | Refusal] = {
    (State.INIT, Magic): State.CONNECTED,
    (State.CONNECTED, Identify): State.IDENTIFIED,
    (State.CONNECTED, Ping): State.CONNECTED,
    (State.CONNECTED, Register): Refusal.MUST_IDENTIFY,
    (State.CONNECTED, Unregister): Refusal.MUST_IDENTIFY,
    (State.IDENTIFIED, Identify): Refusal.IDENTIFY_AGAIN,
    (State.IDENTIFIED, Register): State.IDENTIFIED,
    (State.IDENTIFIED, Unregister): State.IDENTIFIED,
    (State.IDENTIFIED, Ping): State.IDENTIFIED,
}
"""``(state, command) -> next state``, or the refusal nsqlookupd answers (then closes)."""


def next_state(state: State | None, command: type[Command]) -> State | Refusal | None:
    """What ``command`` leads to from ``state``: the next state, nsqlookupd's refusal,
    or ``None`` when the table has no rule (or the state is not known: ``None``, a
    connection seen from its middle)."""
    if state is None:
        return None
    return TRANSITIONS.get((state, command))
