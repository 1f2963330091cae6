"""From a session's transcript to the views: labels, arrows, hex views, state, in-flight.

This is where NSQ meets the protocol-free widgets: it knows that a ``Sub`` reads
``SUB orders audit``, that a frame's bytes are annotated with the grammar's ``Frame``
and a command's with ``Command``, and which states and transitions a client has. The
widgets only draw what it hands them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsqviz.layout import annotate
from nsqviz.nsq import events as ev
from nsqviz.nsq import grammar
from nsqviz.widgets.hexview import HexView
from nsqviz.widgets.sequence import Arrow, SequenceDiagram
from nsqviz.widgets.statemachine import StateMachineView
from nsqviz.widgets.table import TableView

if TYPE_CHECKING:
    from nsqviz.session.client import Connection, Session, Step

__all__ = [
    "CLIENT_STATES",
    "CLIENT_TRANSITIONS",
    "command_hex",
    "command_label",
    "event_label",
    "frame_hex",
    "inflight_view",
    "sequence",
    "state_view",
    "step_hexviews",
    "step_html",
]

CLIENT_STATES = ["INIT", "CONNECTED", "SUBSCRIBED", "CLOSING", "CLOSED"]
CLIENT_TRANSITIONS = [
    ("INIT", "CONNECTED", "magic"),
    ("CONNECTED", "SUBSCRIBED", "SUB → OK"),
    ("SUBSCRIBED", "CLOSING", "CLS"),
    ("CLOSING", "CLOSED", "EOF"),
    ("CONNECTED", "CLOSED", "fatal E_*"),
]
"""The client's states as the codec tracks them (nsqd's stateInit/Subscribed/Closing)."""


def _short(data: bytes, limit: int = 24) -> str:
    text = data.decode("utf-8", "replace")
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def command_label(cmd: ev.Command) -> str:
    """How the command reads on the wire, shortened: ``SUB orders audit``."""
    match cmd:
        case ev.Magic():
            return "magic '  V2'"
        case ev.Identify(data=data):
            keys = ",".join(sorted(data)) or "{}"
            return f"IDENTIFY {{{keys if len(keys) < 36 else keys[:35] + '…'}}}"
        case ev.Auth():
            return "AUTH ●●●●"
        case ev.Sub(topic=t, channel=c):
            return f"SUB {t} {c}"
        case ev.Pub(topic=t, body=b):
            return f"PUB {t} {_short(b)}"
        case ev.Mpub(topic=t, bodies=bs):
            return f"MPUB {t} ×{len(bs)}"
        case ev.Dpub(topic=t, defer_time=d, body=b):
            return f"DPUB {t} {d} {_short(b)}"
        case ev.Rdy(count=n):
            return f"RDY {n}"
        case ev.Fin(id=i):
            return f"FIN {i.decode('ascii', 'replace')}"
        case ev.Req(id=i, timeout=t):
            return f"REQ {i.decode('ascii', 'replace')} {t}"
        case ev.Touch(id=i):
            return f"TOUCH {i.decode('ascii', 'replace')}"
        case ev.Cls():
            return "CLS"
        case ev.Nop():
            return "NOP"
    return type(cmd).__name__


def event_label(e: ev.Event) -> tuple[str, str]:
    """(label, arrow kind) for something that came from the server."""
    match e:
        case ev.Response() if e.is_heartbeat:
            return "_heartbeat_", "heartbeat"
        case ev.Response(data=d) if d.startswith(b"{"):
            return f"JSON {_short(d, 30)}", "response"
        case ev.Response(data=d):
            return d.decode("utf-8", "replace"), "response"
        case ev.Error(data=d):
            return d.decode("utf-8", "replace")[:64], "error"
        case ev.Message(id=i, attempts=a, body=b):
            return f"MSG {i.decode('ascii', 'replace')} #{a} {_short(b, 16)}", "message"
        case ev.CompressionStarted(kind=k):
            return f"⇄ {k} from here on", "note"
        case ev.TLSUpgrade():
            return "⇄ TLS handshake", "note"
        case ev.Violation(code=c, text=t):
            return f"✗ {c} {t}"[:48], "error"
        case ev.ConnectionClosed():
            return "FIN (connection closed)", "error"
        case ev.Truncated():
            return "✗ stream ended inside a frame", "error"
    return type(e).__name__, "note"


def sequence(session: Session, *, last: int | None = None, title: str = "") -> SequenceDiagram:
    """The transcript as a sequence diagram: consumer left, broker centre, others right."""
    from nsqviz.session.client import Step

    names = list(session.connections) or ["consumer"]
    participants = [names[0], "nsqd", *names[1:]]
    arrows: list[Arrow] = []
    for entry in list(session.entries):
        t = f"{entry.t * 1000:.1f} ms"
        if isinstance(entry, Step):
            note = f"{len(entry.sent)} B"
            if entry.refused:
                arrows.append(Arrow(entry.connection, "nsqd",
                                    f"✗ not sent: {entry.refused}"[:60], "error", t=t))
                continue
            if entry.wire_out != entry.sent:
                note += f" ({len(entry.wire_out)} B on the wire)"
            arrows.append(Arrow(entry.connection, "nsqd", command_label(entry.command),
                                "command", note=note, t=t))
            for e in entry.events:
                label, kind = event_label(e)
                size = len(e.raw.data) if getattr(e, "raw", None) is not None else 0
                n = f"{size} B · {entry.elapsed * 1000:.1f} ms" if size else ""
                arrows.append(Arrow("nsqd", entry.connection, label, kind, note=n))
        else:
            for e in entry.events:
                label, kind = event_label(e)
                size = len(e.raw.data) if getattr(e, "raw", None) is not None else 0
                arrows.append(Arrow("nsqd", entry.connection, label, kind,
                                    note=f"{size} B" if size else "", t=t, unasked=True))
    if last is not None:
        arrows = arrows[-last:]
    return SequenceDiagram(participants, arrows, title=title)


def command_hex(data: bytes, title: str = "") -> HexView:
    """A client-to-server chunk: the magic, or one command."""
    if data == grammar.MAGIC_V2:
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
    from nsqviz.widgets.style import CSS, esc

    changes = [
        f"{esc(k)}: {esc(_brief(step.before.get(k)))} → <b>{esc(_brief(v))}</b>"
        for k, v in step.after.items()
        if k != "pending" and step.before.get(k) != v
    ]
    head = f"{esc(step.connection)} · {esc(command_label(step.command))}"
    if step.refused:
        body = f'<div class="nv-err">not sent — the codec refuses: {esc(step.refused)}</div>'
        return f'{CSS}<div class="nsqviz nv-card"><div class="nv-title">{head}</div>{body}</div>'
    answered = ", ".join(event_label(e)[0] for e in step.events) or "no answer (as expected)"
    meta = (
        f'<div class="nv-mono nv-muted">answer: {esc(answered)} · '
        f"{step.elapsed * 1000:.1f} ms</div>"
    )
    state = (
        '<div class="nv-mono">' + "<br>".join(changes) + "</div>"
        if changes else '<div class="nv-mono nv-muted">state unchanged</div>'
    )
    views = "".join(h.html(with_css=False) for h in step_hexviews(step))
    return (
        f'{CSS}<div class="nsqviz nv-card"><div class="nv-title">{head}</div>{meta}{state}'
        f"{views}</div>"
    )


def _brief(value) -> str:
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
    return StateMachineView(CLIENT_STATES, CLIENT_TRANSITIONS, snap["state"],
                            title=f"{conn.name}: state", facts=facts)


def inflight_view(conn: Connection) -> TableView:
    """Messages delivered and not yet FIN'd or REQ'd, with the time left before nsqd
    would requeue them (msg_timeout from IDENTIFY's response, else nsqd's 60 s)."""
    features = conn.codec.features or {}
    timeout_ms = int(features.get("msg_timeout") or 60000)
    now = conn.session.now()
    rows = []
    for mid in conn.in_flight:
        msg = conn.messages[mid]
        arrived = conn.arrived_at.get(mid, now)
        left = max(0.0, timeout_ms / 1000 - (now - arrived))
        rows.append({
            "id": mid.decode("ascii", "replace"),
            "attempts": msg.attempts,
            "body": _short(msg.body, 30),
            "timeout": f"{timeout_ms} ms",
            "expires in": f"{left * 1000:.1f} ms",
        })
    return TableView(["id", "attempts", "body", "timeout", "expires in"], rows,
                     title=f"{conn.name}: in flight", empty="no message in flight")
