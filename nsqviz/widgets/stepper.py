"""The session stepper: a control for every command, and the views that grow with it.

:class:`Stepper` wraps a :class:`~nsqviz.clients.session.Session`. ``stepper.do("SUB")`` (what
the SUB button calls) sends one command on the selected connection with the parameters
in the form, then every view is redrawn: the sequence diagram of the whole session, the
selected connection's state machine and in-flight table, and hex views of the last
step's bytes both ways. Arrivals (pushed messages, heartbeats) redraw too, from the
session's reader thread. Everything the widget shows is also available as plain HTML
(:meth:`Stepper.html`) so a saved notebook shows the session without a kernel.
"""

from __future__ import annotations

from typing import Any

from nsqviz.clients.session.entries import Step
from nsqviz.clients.session.nsq import Connection, LocalProtocolError, Session
from nsqviz.clients.session.outcomes import SessionClosed, closed_message
from nsqviz.nsq import events as ev
from nsqviz.nsq.commands import COMMANDS, MAGIC_NAME, BodyKind, ParamKind
from nsqviz.nsq.labels import event_label
from nsqviz.widgets.steps import inflight_view, sequence, state_view, step_hexviews
from nsqviz.widgets.style import CSS, esc, once

__all__ = ["Stepper", "VERBS"]

VERBS = (MAGIC_NAME, *COMMANDS)
"""A button per command of the table, the magic first."""

_FORM = {"topic": "topic", "channel": "channel", "count": "rdy", "timeout": "req_timeout",
         "defer_time": "defer_ms"}
"""The form's field for each parameter of the command table."""


class Stepper:
    """Controls + views over a session. Plain methods first; ``widget()`` builds the UI."""

    def __init__(self, session: Session | None = None, *, topic: str = "orders",
                 channel: str = "audit", body: str = "hello", connection: str = "consumer"):
        self.session = session or Session()
        self.params: dict[str, Any] = {
            "topic": topic, "channel": channel, "body": body, "count": 3, "rdy": 1,
            "defer_ms": 1000, "req_timeout": 0, "secret": "", "id": None, "check": True,
            "identify": {"feature_negotiation": True, "heartbeat_interval": 30000,
                         "client_id": "nsqviz"},
        }
        self.selected = connection
        self.status = ""
        self.reopened = ""  # said loudly once: a closed connection was replaced
        self._ui: dict[str, Any] | None = None
        self.session.on_change(lambda _s: self._refresh())

    # -- plain API -------------------------------------------------------------------

    def connection(self, name: str | None = None) -> Connection:
        name = name or self.selected
        conn = self.session.connections.get(name)
        if conn is None or conn.closed:
            why = _why_closed(self.session, name) if conn is not None else ""
            conn = self.session.connect(name)
            if why:
                self.reopened = (f"⚠ connection {name!r} had been closed ({why}); a new one "
                                 f"was opened and sent the magic")
                conn.magic()
        return conn

    def do(self, verb: str, **params: Any) -> Step | None:
        """Send one command on the selected connection; refusals go to :attr:`status`."""
        p = {**self.params, **params}
        check = p["check"]
        if verb != MAGIC_NAME and verb not in COMMANDS:
            raise ValueError(f"unknown command {verb!r}; one of {', '.join(VERBS)}")
        try:
            conn = self.connection()
            step = conn.step(self._command(conn, verb, p), check=check)
        except SessionClosed as exc:
            self.reopened = ""
            self.status = f"⚠ {exc}"
            self._refresh()
            return None
        except LocalProtocolError as exc:
            self.reopened = ""
            self.status = f"not sent — the codec refuses: {exc} (untick “check” to send anyway)"
            self._refresh()
            return None
        except OSError as exc:
            self.status = f"socket error: {exc}"
            self._refresh()
            return None
        said = [label for label, _ in map(event_label, step.events)]
        answer = ", ".join(said) if said else "no answer (none expected unless it fails)"
        if step.why:
            answer += f" -- why: {step.why}"
        self.status = f"{self.reopened + ' · ' if self.reopened else ''}{verb} → {answer}"
        self.reopened = ""
        self._refresh()
        return step

    def _command(self, conn: Connection, verb: str, p: dict[str, Any]) -> ev.Command:
        """The command ``verb`` with the form's values, built from the command table."""
        if verb == MAGIC_NAME:
            return ev.Magic()
        spec = COMMANDS[verb]
        values = [
            conn.message_id(p["id"]) if param.kind is ParamKind.ID else p[_FORM[param.field]]
            for param in spec.params
        ]
        if spec.body is BodyKind.JSON:
            values.append(dict(p["identify"]))
        elif spec.body is BodyKind.SECRET:
            values.append(p["secret"].encode())
        elif spec.body is BodyKind.MESSAGE:
            values.append(p["body"].encode())
        elif spec.body is BodyKind.MESSAGES:
            values.append(tuple(f"{p['body']} {i}".encode() for i in range(1, p["count"] + 1)))
        return spec.event(*values)

    def html(self) -> str:
        """Everything the stepper shows, as one static HTML block."""
        return CSS + '<div class="nsqviz nsqviz-stepper">' + self._views_html() + "</div>"

    def _status_html(self) -> str:
        if not self.status:
            return ""
        loud = self.status.startswith(("⚠", "not sent", "socket")) or " E_" in self.status
        return (f'<div class="nv-mono {"nv-err" if loud else ""}" style="margin:4px 0">'
                f"{esc(self.status)}</div>")

    def _views_html(self, with_status: bool = True) -> str:
        seq = sequence(self.session, last=40, title="session").html(with_css=False)
        side = ""
        for name, conn in self.session.connections.items():
            side += state_view(conn).html(with_css=False)
            if name == "consumer" or conn.in_flight:
                side += inflight_view(conn).html(with_css=False)
        hexes = ""
        sent = [s for s in self.session.steps() if s.sent]  # from buttons or from code
        if sent:
            hexes = "".join(
                f'<div class="nv-card">{h.html(with_css=False)}</div>'
                for h in step_hexviews(sent[-1])
            )
            hexes = f'<div class="nv-title">last step, byte by byte</div>{hexes}'
        status = self._status_html() if with_status else ""
        return (
            # the diagram takes the row's width (it scales to it), the state cards wrap
            # under it when the row is narrower than both
            f'{status}<div class="nv-grid"><div class="nv-card" style="flex:1 1 560px;'
            f'min-width:0">{seq}</div>'
            f'<div class="nv-card">{side}</div></div>{hexes}'
        )

    def text(self) -> str:
        lines = [sequence(self.session).text()]
        lines += [state_view(c).text() for c in self.session.connections.values()]
        if self.status:
            lines.append(self.status)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(self.widget()._repr_mimebundle_() or {})
        bundle["text/html"] = once(self.static_html())
        bundle["text/plain"] = self.static_text()
        return bundle

    def static_html(self) -> str:
        """What a saved notebook shows without a kernel: the controls as they stand
        (greyed: they need a kernel) above everything :meth:`html` shows."""
        chips = "".join(f'<span class="nv-chip nv-mono">{esc(v)}</span>' for v in VERBS)
        p = self.params
        form = (f"connection {self.selected} · topic {p['topic']!r} · channel "
                f"{p['channel']!r} · body {p['body']!r} · RDY {p['rdy']} · "
                f"heartbeat_interval {p['identify']['heartbeat_interval']} ms")
        controls = (
            '<div class="nv-card"><div class="nv-title">session stepper '
            '<span class="nv-muted">· buttons work with a running kernel</span></div>'
            f'<div class="nv-legend">{chips}</div><div class="nv-mono nv-muted">'
            f"{esc(form)}</div></div>"
        )
        return (CSS + '<div class="nsqviz nsqviz-stepper">' + controls + self._views_html()
                + "</div>")

    def static_text(self) -> str:
        """The text form of :meth:`static_html`."""
        steps = len(self.session.steps())
        head = (f"session stepper ({', '.join(VERBS)}; buttons need a running kernel), "
                f"connection {self.selected}, {steps} step{'s' * (steps != 1)} so far")
        return head + ("\n" + self.text() if steps else "")

    # -- the ipywidgets UI -----------------------------------------------------------

    def widget(self) -> Any:
        if self._ui is not None:
            return self._ui["root"]
        import ipywidgets as w

        lay = w.Layout(width="auto")
        small = w.Layout(width="190px")
        wide = {"description_width": "initial"}
        ui: dict[str, Any] = {}
        ui["conn"] = w.ToggleButtons(options=["consumer", "publisher"], value=self.selected,
                                     description="connection")
        ui["check"] = w.Checkbox(value=True, description="check (codec refuses misuse)",
                                 indent=False)
        ui["topic"] = w.Text(self.params["topic"], description="topic", layout=small)
        ui["channel"] = w.Text(self.params["channel"], description="channel", layout=small)
        ui["body"] = w.Text(self.params["body"], description="body", layout=small)
        ui["count"] = w.BoundedIntText(3, min=1, max=100, description="MPUB ×", layout=small)
        ui["defer_ms"] = w.BoundedIntText(1000, min=0, max=3_600_000, description="defer ms",
                                          layout=small)
        ui["rdy"] = w.BoundedIntText(1, min=0, max=2500, description="RDY", layout=small)
        ui["id"] = w.Dropdown(options=[], description="message", layout=w.Layout(width="260px"))
        ui["req_timeout"] = w.BoundedIntText(0, min=0, max=3_600_000, description="REQ ms",
                                             layout=small)
        ui["secret"] = w.Password(description="secret", layout=small)
        ui["fn"] = w.Checkbox(True, description="feature_negotiation", indent=False)
        ui["hb"] = w.BoundedIntText(30000, min=-1, max=60000, description="heartbeat_interval",
                                    layout=w.Layout(width="230px"), style=wide)
        ui["snappy"] = w.Checkbox(False, description="snappy", indent=False, layout=lay)
        ui["deflate"] = w.Checkbox(False, description="deflate", indent=False, layout=lay)
        ui["tls"] = w.Checkbox(False, description="tls_v1", indent=False, layout=lay)
        buttons = []
        for verb in VERBS:
            b = w.Button(description=verb, layout=w.Layout(width="auto", min_width="62px"),
                         button_style="primary" if verb in ("magic", "IDENTIFY", "SUB", "RDY")
                         else "")
            b.on_click(lambda _b, v=verb: self._clicked(v))
            buttons.append(b)
        ui["buttons"] = buttons
        ui["views"] = w.HTML()
        ui["status"] = w.HTML()
        ui["root"] = w.VBox([
            w.HBox([ui["conn"], ui["check"]]),
            w.HBox(buttons, layout=w.Layout(flex_flow="row wrap")),
            ui["status"],
            w.HBox([ui["topic"], ui["channel"], ui["body"], ui["count"], ui["defer_ms"]],
                   layout=w.Layout(flex_flow="row wrap")),
            w.HBox([ui["rdy"], ui["id"], ui["req_timeout"], ui["secret"]],
                   layout=w.Layout(flex_flow="row wrap")),
            w.HBox([w.Label("IDENTIFY:"), ui["fn"], ui["hb"], ui["snappy"], ui["deflate"],
                    ui["tls"]], layout=w.Layout(flex_flow="row wrap")),
            ui["views"],
        ])
        ui["root"].add_class("nsqviz-stepper-widget")
        ui["conn"].observe(lambda c: self._select(c["new"]), names="value")
        self._ui = ui
        self._refresh()
        return ui["root"]

    def _select(self, name: str) -> None:
        self.selected = name
        self._refresh()

    def _clicked(self, verb: str) -> None:
        ui = self._ui
        assert ui is not None, "clicked before the controls were built"
        ident = {"feature_negotiation": ui["fn"].value, "heartbeat_interval": ui["hb"].value,
                 "client_id": "nsqviz"}
        for key in ("snappy", "deflate"):
            if ui[key].value:
                ident[key] = True
        if ui["tls"].value:
            ident["tls_v1"] = True
        self.params.update(
            topic=ui["topic"].value, channel=ui["channel"].value, body=ui["body"].value,
            count=ui["count"].value, defer_ms=ui["defer_ms"].value, rdy=ui["rdy"].value,
            req_timeout=ui["req_timeout"].value, secret=ui["secret"].value,
            id=(ui["id"].value.encode() if ui["id"].value else None),
            check=ui["check"].value, identify=ident,
        )
        self.do(verb)

    def _refresh(self) -> None:
        ui = self._ui
        if ui is None:
            return
        ui["views"].value = (CSS + '<div class="nsqviz nsqviz-stepper">'
                             + self._views_html(with_status=False) + "</div>")
        ui["status"].value = f'<div class="nsqviz">{self._status_html()}</div>'
        # a closed session sends nothing: its buttons say so instead of looking live
        closed = closed_message("session", self.session.made) if self.session.closed else ""
        for b in ui["buttons"]:
            b.disabled = bool(closed)
            b.tooltip = closed or b.description
        conn = self.session.connections.get(self.selected)
        ids = [m.decode() for m in conn.in_flight] if conn is not None else []
        if list(ui["id"].options) != ids:
            chosen = ui["id"].value
            ui["id"].options = ids
            ui["id"].value = chosen if chosen in ids else (ids[0] if ids else None)


def _why_closed(session: Session, name: str) -> str:
    """What the transcript says ended connection ``name``: nsqd's error, or EOF."""
    for entry in reversed(session.entries):
        if entry.connection != name:
            continue
        for e in reversed(entry.events):
            label, kind = event_label(e)
            if kind == "error" and type(e).__name__ != "ConnectionClosed":
                return f"nsqd answered {label}"
    return "nsqd closed it: no heartbeat answered within two intervals, or the server went away"
