"""Views of a stepping session (:mod:`nsqviz.clients.session`): arrows, hex views, state, in-flight.

This is where a session's steps meet the protocol-free widgets: a frame's bytes are
annotated with the grammar's ``Frame`` and a command's with ``Command``, the labels
come from :mod:`nsqviz.nsq.labels`, and which states and transitions a client has
from the codec. The session itself knows no HTML; in IPython a :class:`Step` is shown
with :func:`step_html` (registered by :mod:`nsqviz`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from nsqviz.clients.session.entries import Step
from nsqviz.clients.session.outcomes import DEFAULT_MSG_TIMEOUT_MS
from nsqviz.layout import annotate
from nsqviz.nsq import events as ev
from nsqviz.nsq import grammar
from nsqviz.nsq.labels import command_label, event_label, short_repr
from nsqviz.nsq.states import Role, diagram
from nsqviz.nsq.timers import timer_spans
from nsqviz.nsq.wire import MAGIC_V2
from nsqviz.palette import name_of_event
from nsqviz.protocols.timers import TimerRow, TimerSpan
from nsqviz.servers.nsqd.options import Options
from nsqviz.widgets.hexview import HexView
from nsqviz.widgets.opener import MAX_OPEN_BYTES, too_long
from nsqviz.widgets.sequence import Arrow, SequenceDiagram
from nsqviz.widgets.statemachine import StateMachineView
from nsqviz.widgets.style import CSS, esc
from nsqviz.widgets.table import TableView

if TYPE_CHECKING:
    from nsqviz.clients.session.nsq import Connection, Session

__all__ = [
    "command_hex",
    "server_options",
    "frame_hex",
    "inflight_view",
    "sequence",
    "state_view",
    "step_hexviews",
    "step_html",
]

def server_options(server: Any) -> Options:
    """The options of a session's server: the embedded broker's own, the real nsqd's
    flags over nsqd's defaults, or nsqd's defaults for a server started elsewhere (what
    the timers of :func:`sequence` take their lengths from)."""
    opts = getattr(server, "opts", None)
    if isinstance(opts, Options):
        return opts
    flags = getattr(server, "flags", None) or {}
    known = {f.name for f in dataclasses.fields(Options)}
    overrides: dict[str, Any] = {k: v for k, v in flags.items()
                                 if k in known and isinstance(v, int | float)}
    return dataclasses.replace(Options(), **overrides)


def sequence(session: Session, *, last: int | None = None, title: str = "",
             timers: bool = True, connections: list[str] | None = None) -> SequenceDiagram:
    """The transcript as a sequence diagram: consumer left, broker centre, others right;
    with ``timers``, NSQ's timers beside the arrows where they act
    (:mod:`nsqviz.nsq.timers`), their lengths from the IDENTIFY exchange, the
    commands' own parameters and the session's server options. ``connections``: only
    these connections' arrows (default: all)."""
    names = [n for n in session.connections if connections is None or n in connections]
    names = names or ["consumer"]
    participants = [names[0], "nsqd", *names[1:]]
    arrows: list[Arrow] = []
    rows: list[TimerRow] = []
    # in the order things happened (a step is recorded when its answer is complete,
    # after a message that reached another connection meanwhile)
    entries = sorted((e for e in session.entries
                      if connections is None or e.connection in connections),
                     key=lambda e: e.t)
    t0 = entries[0].t if entries else 0.0  # times count from the first command

    def row(when: float, conn: str, item: object, from_client: bool) -> None:
        rows.append(TimerRow(len(arrows) - 1, when - t0, conn, item, from_client))

    for entry in entries:
        t = f"{(entry.t - t0) * 1000:.1f} ms"
        if isinstance(entry, Step):
            note = f"{len(entry.sent)} B"
            if entry.refused:
                arrows.append(Arrow(entry.connection, "nsqd",
                                    f"✗ not sent: {entry.refused}"[:60], "error", t=t))
                continue
            if entry.wire_out != entry.sent:
                note += f" ({len(entry.wire_out)} B on the wire)"
            label = command_label(entry.command)
            if entry.note:
                label += f" ({entry.note})"
            arrows.append(Arrow(entry.connection, "nsqd", label, "command", note=note, t=t,
                                name=name_of_event(entry.command) or "",
                                detail=_bytes_html(entry.sent, True, f"→ {label}")))
            row(entry.t, entry.connection, entry.command, True)
            for e in entry.events:
                label, kind = event_label(e)
                size = _size(e)
                n = f"{size} B · {entry.elapsed * 1000:.1f} ms" if size else ""
                arrows.append(Arrow("nsqd", entry.connection, label, kind, note=n,
                                    name=name_of_event(e) or "",
                                    detail=_event_html(e, label)))
                row(entry.t + entry.elapsed, entry.connection, e, False)
        else:
            for e in entry.events:
                label, kind = event_label(e)
                size = _size(e)
                arrows.append(Arrow("nsqd", entry.connection, label, kind,
                                    note=f"{size} B" if size else "", t=t, unasked=True,
                                    name=name_of_event(e) or "",
                                    detail=_event_html(e, label)))
                row(entry.t, entry.connection, e, False)
    spans = timer_spans(rows, server_options(session.broker)) if timers else []
    if last is not None and len(arrows) > last:
        cut = len(arrows) - last
        arrows = arrows[cut:]
        spans = [TimerSpan(max(s.first - cut, 0), None if s.last is None else s.last - cut,
                      s.label, s.name)
                 for s in spans if s.last is None or s.last >= cut]
    return SequenceDiagram(participants, arrows, title=title, spans=spans)


def _event_html(event: ev.Event, label: str) -> str:
    """The hex view of a frame nsqd sent, for a click on its arrow; ``""`` for an event
    with no frame of its own (a closed connection)."""
    raw = getattr(event, "raw", None)
    if raw is None or not isinstance(event, ev.Response | ev.Error | ev.Message):
        return ""
    return _bytes_html(raw.data, False, f"← {label}")


@functools.lru_cache(maxsize=512)
def _bytes_html(data: bytes, sent: bool, title: str) -> str:
    """A command's (``sent``) or a frame's hex view as HTML, cached: the stepper redraws
    its whole diagram on every step and every arrival."""
    if not data:
        return ""
    if len(data) > MAX_OPEN_BYTES:
        return too_long(title, len(data), "the step card shows them")
    view = command_hex(data, title) if sent else frame_hex(data, title)
    view.fold_over = MAX_OPEN_BYTES  # opened on purpose: unfolded
    return view.html(with_css=False)


def command_hex(data: bytes, title: str = "") -> HexView:
    """A client-to-server chunk: the magic, or one command."""
    if data == MAGIC_V2:
        return HexView(annotate(grammar.Magic, data), title or "magic")
    return HexView(annotate(grammar.Command, data), title)


def frame_hex(data: bytes, title: str = "") -> HexView:
    return HexView(annotate(grammar.Frame, data), title)


def step_hexviews(step: Step) -> list[HexView]:
    """The command sent and every frame that answered it, each annotated by the grammar."""
    views = []
    if step.sent:
        views.append(command_hex(step.sent, f"→ {command_label(step.command)}"))
    for e in step.events:
        raw = getattr(e, "raw", None)
        if raw is not None and isinstance(e, ev.Response | ev.Error | ev.Message):
            views.append(frame_hex(raw.data, f"← {event_label(e)[0]}"))
    return views


def step_html(step: Step) -> str:
    """One step as a card: what changed in the codec's state, then the bytes both ways."""
    changes = [
        f"{esc(k)}: {esc(_brief(step.before.get(k)))} → <b>{esc(_brief(v))}</b>"
        for k, v in step.after.items()
        if k != "pending" and step.before.get(k) != v
    ]
    head = f"{esc(step.connection)} · {esc(command_label(step.command))}"
    if step.refused:
        body = f'<div class="nv-err">not sent — the codec refuses: {esc(step.refused)}</div>'
        return f'{CSS}<div class="nsqviz nv-card"><div class="nv-title">{head}</div>{body}</div>'
    answered = ", ".join(event_label(e)[0] for e in step.events)
    waited = f"{step.elapsed * 1000:.1f} ms"
    said = (f"answer: {answered} · after {waited}" if answered else
            f"no answer (as expected: nsqd answers it only if it fails) · this tool "
            f"waited {waited} for an error")
    meta = f'<div class="nv-mono nv-muted">{esc(said)}</div>'
    if step.why:
        meta += f'<div class="nv-err">why: {esc(step.why)}</div>'
    state = (
        '<div class="nv-mono">' + "<br>".join(changes) + "</div>"
        if changes else '<div class="nv-mono nv-muted">state unchanged</div>'
    )
    views = "".join(h.html(with_css=False) for h in step_hexviews(step))
    return (
        f'{CSS}<div class="nsqviz nv-card"><div class="nv-title">{head}</div>{meta}{state}'
        f"{views}</div>"
    )


def _size(event: object) -> int:
    """How many bytes an event came in (0: not off the wire)."""
    raw = getattr(event, "raw", None)
    return len(raw.data) if raw is not None else 0


def _brief(value: object) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:59] + "…"


def state_view(conn: Connection) -> StateMachineView:
    snap = conn.codec.snapshot()
    facts = {"rdy": snap["rdy"], "in_flight": len(snap["in_flight"])}
    if snap["compression"]:
        facts["compression"] = snap["compression"]
    if snap["tls"]:
        facts["tls"] = True
    if snap["auth_required"]:
        facts["authenticated"] = snap["authenticated"]
    states, transitions = diagram(Role.CLIENT)
    return StateMachineView(states, transitions, snap["state"], title=f"{conn.name}: state",
                            facts=facts)


def inflight_view(conn: Connection) -> TableView:
    """Messages delivered and not yet FIN'd or REQ'd, with the time left before nsqd
    would requeue them (msg_timeout from IDENTIFY's response, else nsqd's default) -- or,
    once it ran out, that nsqd has taken the message back (the client cannot see that)."""
    features = conn.codec.features or {}
    timeout_ms = int(features.get("msg_timeout") or DEFAULT_MSG_TIMEOUT_MS)
    now = conn.session.now()
    rows = []
    for mid in conn.in_flight:
        msg = conn.messages[mid]
        arrived = conn.arrived_at.get(mid, now)
        left = timeout_ms / 1000 - (now - arrived)
        rows.append({
            "id": mid.decode("ascii", "replace"),
            "attempts": msg.attempts,
            "body": short_repr(msg.body, 30),
            "timeout": f"{timeout_ms} ms",
            "expires in": f"{left * 1000:.1f} ms" if left > 0 else
            f"ran out {-left * 1000:.1f} ms ago: nsqd took it back to deliver again",
        })
    return TableView(["id", "attempts", "body", "timeout", "expires in"], rows,
                     title=f"{conn.name}: in flight", empty="no message in flight")
