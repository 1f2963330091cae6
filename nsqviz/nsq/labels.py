"""How NSQ events read as text: ``SUB orders audit``, ``MSG 0a1b… #1 'hello'``.

Plain text for transcripts, reprs and every view; the views add their own markup.
"""

from __future__ import annotations

from nsqviz.nsq import events as ev

__all__ = ["command_label", "event_label", "short_repr"]


def short_repr(data: bytes, limit: int = 24) -> str:
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
            return f"PUB {t} {short_repr(b)}"
        case ev.Mpub(topic=t, bodies=bs):
            return f"MPUB {t} ×{len(bs)}"
        case ev.Dpub(topic=t, defer_time=d, body=b):
            return f"DPUB {t} {d} {short_repr(b)}"
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
        case ev.Violation(code=c, text=t):
            return f"✗ {c} {t}"[:48], "error"
        case ev.ConnectionClosed():
            return "TCP close (end of stream)", "error"
        case ev.Truncated():
            return "✗ stream ended inside a frame", "error"
    return type(e).__name__, "note"
