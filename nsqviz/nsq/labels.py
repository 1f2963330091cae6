"""How NSQ events read as text: ``SUB orders audit``, ``MSG 0a1b… #1 'hello'``.

Plain text for transcripts, reprs and every view; the views add their own markup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nsqviz.nsq import events as ev
from nsqviz.nsq.commands import BY_EVENT, MAGIC_NAME, BodyKind, ParamKind
from nsqviz.records import SHARED_LABELS

__all__ = ["command_label", "event_label", "short_repr"]


def short_repr(data: bytes, limit: int = 24) -> str:
    text = data.decode("utf-8", "replace")
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def command_label(cmd: ev.Command) -> str:
    """How the command reads on the wire, shortened: ``SUB orders audit``."""
    kind = type(cmd)
    if kind is ev.Magic:
        return f"{MAGIC_NAME} '  V2'"
    spec = BY_EVENT.get(kind)
    if spec is None:
        return kind.__name__
    parts = [spec.verb]
    parts += [_PARAM_TEXT[p.kind](getattr(cmd, p.field)) for p in spec.params]
    if spec.event_body is not None:
        parts.append(_BODY_TEXT[spec.body](getattr(cmd, spec.event_body)))
    return " ".join(parts)


def _keys(data: dict[str, Any]) -> str:
    keys = ",".join(sorted(data)) or "{}"
    return f"{{{keys if len(keys) < 36 else keys[:35] + '…'}}}"


_PARAM_TEXT: dict[ParamKind, Callable[[Any], str]] = {
    ParamKind.NAME: str,
    ParamKind.DECIMAL: str,
    ParamKind.ID: lambda mid: mid.decode("ascii", "replace"),
}
_BODY_TEXT: dict[BodyKind, Callable[[Any], str]] = {
    BodyKind.JSON: _keys,
    BodyKind.SECRET: lambda secret: "●●●●",
    BodyKind.MESSAGE: short_repr,
    BodyKind.MESSAGES: lambda bodies: f"×{len(bodies)}",
}


def event_label(e: ev.Event) -> tuple[str, str]:
    """(label, arrow kind) for something that came from the server."""
    match e:
        case ev.Response() if e.is_heartbeat:
            return "_heartbeat_", "heartbeat"
        case ev.Response(data=d) if d.startswith(b"{"):
            return f"JSON {short_repr(d, 30)}", "response"
        case ev.Response(data=d):
            return d.decode("utf-8", "replace"), "response"
        case ev.Error(data=d):
            return d.decode("utf-8", "replace")[:64], "error"
        case ev.Message(id=i, attempts=a, body=b):
            return f"MSG {i.decode('ascii', 'replace')} #{a} {short_repr(b, 16)}", "message"
        case ev.CompressionStarted(kind=k):
            return f"⇄ {k} from here on", "note"
        case ev.TLSUpgrade():
            return "⇄ TLS handshake", "note"
        case ev.Violation(command=cmd, code=c, text=t) if cmd is not None:
            answer = f"{c} {t}" if c else f"accepted: {t}"
            return f"✗ {command_label(cmd)} — {answer}"[:64], "error"
        case ev.Violation(code=c, text=t):
            return f"✗ {c} {t}"[:48], "error"
        case ev.ConnectionClosed() | ev.Truncated():
            return SHARED_LABELS[type(e)]
    return type(e).__name__, "note"
