"""What a session records: a :class:`Step` per command sent, an :class:`Arrival` per
unasked-for frame.

Kept apart from the session that makes them so that the transcript writers
(:mod:`nsqviz.clients.session.transcript`) read them without importing the session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nsqviz.nsq import events as ev
from nsqviz.nsq.labels import command_label, event_label

__all__ = ["Arrival", "Entry", "Step"]


@dataclass
class Step:
    """One command sent and what came back for it."""

    index: int
    connection: str
    command: ev.Command
    sent: bytes  # the command's bytes as the grammar builds them (before compression)
    wire_out: bytes  # what went into the socket (compressed, if negotiated)
    received: list[tuple[float, bytes]] = field(default_factory=list)  # (t, wire bytes)
    events: list[ev.Event] = field(default_factory=list)
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    t: float = 0.0  # seconds since the session started, when the bytes were written
    elapsed: float = 0.0  # seconds until the step was complete
    refused: str | None = None  # LocalProtocolError text when the codec refused to send
    note: str = ""  # why the session sent it on its own ("answers _heartbeat_")
    why: str = ""  # why nsqd refused it, in words (E_FIN_FAILED: the msg_timeout ran out)

    @property
    def frames(self) -> list[ev.Event]:
        """Frames from the server among the events (responses, errors, messages)."""
        return [e for e in self.events if isinstance(e, ev.Response | ev.Error | ev.Message)]

    def __repr__(self) -> str:  # no times or ports: notebooks store this text
        if self.refused:
            label = command_label(self.command)
            return f"<Step {self.connection}: {label} refused: {self.refused}>"
        got = ", ".join(event_label(e)[0] for e in self.events) or "no answer"
        note = f" ({self.note})" if self.note else ""
        why = f" -- why: {self.why}" if self.why else ""
        return (f"<Step {self.connection}: {command_label(self.command)}{note} -> {got}; "
                f"{self.before.get('state')} -> {self.after.get('state')}{why}>")


@dataclass
class Arrival:
    """Frames that arrived when no step was waiting: pushed messages, heartbeats, EOF."""

    index: int
    connection: str
    t: float
    received: bytes
    events: list[ev.Event]
    after: dict[str, Any]

    def __repr__(self) -> str:
        got = ", ".join(event_label(e)[0] for e in self.events)
        return f"<Arrival {self.connection}: {got}>"


Entry = Step | Arrival
