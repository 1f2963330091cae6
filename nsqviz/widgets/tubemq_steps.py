"""Views of a stepping TubeMQ session (:mod:`nsqviz.clients.session.tubemq`).

A step is shown as a card: the request and the answer side by side -- the frame
(serialNo, listSize, each block's length), the three protobuf messages of the content
and the inner request or response, field by field -- then what changed in the
client's state. A session is shown as a sequence diagram, and the Master's decisions
as a table and as a picture of which consumer holds which partition after each event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

from nsqviz.palette import ordinal_colour
from nsqviz.tubemq.grammar import FrameParts
from nsqviz.tubemq.layout import frame_layout
from nsqviz.widgets.hexview import HexView
from nsqviz.widgets.sequence import Arrow, SequenceDiagram
from nsqviz.widgets.style import CSS, esc, short_value
from nsqviz.widgets.table import TableView

if TYPE_CHECKING:
    from nsqviz.clients.session.tubemq import Step, TubeSession

__all__ = ["fields_text", "history_table", "partition_moves", "sequence", "step_hex",
           "step_html"]

_ENVELOPES = ("RequestBody", "RspResponseBody")  # their bytes: the inner message, shown apart


def fields_text(msg: Message | None, limit: int = 48) -> list[str]:
    """``name: value`` for every field set in ``msg`` (bytes and long values cut)."""
    if msg is None:
        return []
    out = []
    for fd, value in msg.ListFields():
        if fd.message_type is not None and not fd.is_repeated:
            inner = ", ".join(fields_text(value, 30))
            out.append(f"{fd.name} {{{inner}}}")
        elif fd.is_repeated:
            items = [("{" + ", ".join(fields_text(v, 24)) + "}") if fd.message_type
                     else short_value(v, limit) for v in value]
            shown = items[:6] + ([f"… {len(items) - 6} more"] if len(items) > 6 else [])
            out.append(f"{fd.name}: [{', '.join(shown)}]")
        elif isinstance(value, bytes) and msg.DESCRIPTOR.name in _ENVELOPES:
            out.append(f"{fd.name}: {len(value)} bytes (decoded below)")
        elif isinstance(value, bytes):
            out.append(f"{fd.name}: {len(value)} bytes {short_value(value[:24], limit)}")
        else:
            out.append(f"{fd.name}: {short_value(value, limit)}")
    return out


def _side(title: str, event: Any, frame: FrameParts | None) -> str:
    if event is None:
        return (f'<div><div class="nv-title">{esc(title)}</div>'
                '<div class="nv-muted">none</div></div>')
    rows = []
    if frame is not None:
        blocks = ", ".join(str(len(b)) for b in frame.blocks)
        rows.append(f"frame: MsgToken ff7ff4fe · serialNo {frame.serialNo} · "
                    f"listSize {len(frame.blocks)} · block lengths [{blocks}] · "
                    f"{frame.size} bytes")
    for msg in (event.connHeader, event.header, event.body):
        rows.append(f"{msg.DESCRIPTOR.name} {{{', '.join(fields_text(msg))}}}")
    inner = getattr(event, "message", None)
    if inner is not None:
        rows.append(f"<b>{esc(inner.DESCRIPTOR.name)}</b>")
        rows.extend("&nbsp;&nbsp;" + esc(f) for f in fields_text(inner))
    body = "<br>".join(r if r.startswith(("<b>", "&nbsp;")) else esc(r) for r in rows)
    return f'<div><div class="nv-title">{esc(title)}</div><div class="nv-mono">{body}</div></div>'


def step_html(step: Step) -> str:
    """One step as a card: request and answer side by side, then the state change."""
    latency = f" · {step.latency * 1000:.1f} ms" if step.latency is not None else ""
    head = (f"{step.index}. {esc(step.client)} → {esc(step.server)}: "
            f"{esc(step.summary)}{latency}")
    changes = [f"{esc(k)}: {esc(short_value(step.before.get(k), 70))} → "
               f"<b>{esc(short_value(v, 70))}</b>"
               for k, v in step.after.items() if step.before.get(k) != v]
    state = ('<div class="nv-mono">' + "<br>".join(changes) + "</div>" if changes
             else '<div class="nv-mono nv-muted">client state unchanged</div>')
    problems = "".join(f'<div class="nv-err">✗ {esc(v.code)}: {esc(v.reason)}</div>'
                       for v in step.call.violations)
    sides = (_side("request", step.request, step.request_frame)
             + _side("answer", step.answer, step.answer_frame))
    return (f'{CSS}<div class="nsqviz nv-card"><div class="nv-title">{head}</div>{problems}'
            f'<div class="nv-grid">{sides}</div>{state}</div>')


def step_hex(step: Step) -> str:
    """The step's request and answer frames as hex views, every byte by its field
    (token, serialNo, listSize, block lengths, and each protobuf field inside)."""
    views = [HexView(frame_layout(step.call.sent, response=False),
                     f"→ {step.request.name} #{step.serial}").html(with_css=False)]
    if step.call.received:
        answer = step.answer.name if step.answer is not None else "?"
        views.append(HexView(frame_layout(step.call.received, response=True),
                             f"← {answer} #{step.serial}").html(with_css=False))
    return f'{CSS}<div class="nsqviz nv-grid">{"".join(views)}</div>'


def sequence(session: TubeSession, *, last: int | None = None, title: str = "") -> SequenceDiagram:
    """The session's steps as arrows between the clients and the servers."""
    clients = list(session.clients)
    servers = sorted({s.server for s in session.steps}, key=lambda s: (s != "Master", s))
    participants = [clients[0], *servers, *clients[1:]] if clients else servers
    arrows = []
    for step in session.steps[-last:] if last else session.steps:
        arrows.append(Arrow(step.client, step.server, f"{step.request.name} #{step.serial}",
                            "command", note=f"{len(step.call.sent)} B", name=step.request.name))
        if step.answer is not None:
            ms = f" · {step.latency * 1000:.1f} ms" if step.latency is not None else ""
            label = step.summary.split("→ ", 1)[1]
            kind = "response" if step.call.ok else "error"
            arrows.append(Arrow(step.server, step.client, label, kind,
                                note=f"{len(step.call.received)} B{ms}", name=step.answer.name))
    return SequenceDiagram(participants, arrows, title=title)


def history_table(history: list[Any], names: dict[str, str] | None = None) -> TableView:
    """The Master's decisions, one row each (``names``: consumer id -> short name)."""
    names = names or {}
    rows = []
    for e in history:
        row = {"what": type(e).__name__, "consumer": names.get(e.consumer_id, e.consumer_id)}
        if hasattr(e, "rebalance_id"):
            row["rebalanceId"] = e.rebalance_id
        if hasattr(e, "op_type"):
            row["opType"] = f"{e.op_type} {e.op_name}"
        if hasattr(e, "partitions"):
            row["partitions"] = ", ".join(e.partitions)
        if hasattr(e, "held"):
            row["partitions"] = "holds " + (", ".join(e.held) or "nothing")
        if hasattr(e, "reason"):
            row["partitions"] = e.reason
        rows.append(row)
    return TableView(["what", "consumer", "rebalanceId", "opType", "partitions"], rows,
                     title="the Master's decisions")


def partition_moves(history: list[Any], partitions: list[str],
                    names: dict[str, str] | None = None) -> str:
    """A grid: one row per reported event, one column per partition, each cell the
    consumer holding it then -- partitions moving between consumers as the rows go down."""
    names = names or {}
    holder: dict[str, str] = {}
    colour: dict[str, str] = {}
    head = "".join(f"<th>{esc(p)}</th>" for p in partitions)
    rows = []
    for e in history:
        name = names.get(e.consumer_id, e.consumer_id)
        if type(e).__name__ == "RebalanceDone":
            for p, who in list(holder.items()):
                if who == name and p not in e.held:
                    del holder[p]
            for p in e.held:
                holder[p] = name
        elif type(e).__name__ == "ConsumerLeft":
            holder = {p: w for p, w in holder.items() if w != name}
        else:
            continue
        label = (f"{name} reports event {e.rebalance_id}" if hasattr(e, "rebalance_id")
                 else f"{name} left ({e.reason})")
        cells = []
        for p in partitions:
            who = holder.get(p, "")
            if who and who not in colour:
                colour[who] = ordinal_colour(len(colour))
            style = f' style="background:{colour[who]}"' if who else ""
            cells.append(f'<td class="nv-mono"{style}>{esc(who or "—")}</td>')
        rows.append(f'<tr><td class="nv-mono">{esc(label)}</td>{"".join(cells)}</tr>')
    return (f'{CSS}<div class="nsqviz nsqviz-table"><div class="nv-title">who holds which '
            f'partition</div><table class="nv-table"><tr><th>after</th>{head}</tr>'
            f'{"".join(rows)}</table></div>')
