"""The timers a protocol's units start and stop, as the replay draws them beside a
diagram's rows (:meth:`nsqviz.protocols.protocol.Protocol.timers`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TimerRow", "TimerSpan"]


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
