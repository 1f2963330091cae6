"""nsqd's error codes, and the exceptions the NSQ codec raises.

:class:`ErrorCode` is the one list of the ``E_*`` codes nsqd v1.3.0 sends in a
FrameTypeError: the code, whether nsqd closes the connection after it, and why it is
sent. Every module that answers, judges or displays an nsqd error reads it from here.
"""

from __future__ import annotations

import enum

__all__ = [
    "ErrorCode",
    "go_quote",
    "not_in_flight",
]


class ErrorCode(enum.StrEnum):
    """An nsqd error code; ``ErrorCode.INVALID == "E_INVALID"``.

    ``fatal``: nsqd closes the connection after sending it (all but three).
    ``why``: when nsqd sends it.
    """

    fatal: bool
    why: str

    def __new__(cls, code: str, fatal: bool, why: str) -> ErrorCode:
        member = str.__new__(cls, code)
        member._value_ = code
        member.fatal = fatal
        member.why = why
        return member

    INVALID = ("E_INVALID", True,
               "unknown verb, wrong number of parameters, a value out of range, or a "
               "command the connection's state does not allow")
    BAD_PROTOCOL = ("E_BAD_PROTOCOL", True, "the first 4 bytes are not the magic '  V2'")
    BAD_BODY = ("E_BAD_BODY", True,
                "a body (IDENTIFY, AUTH, MPUB) of a bad size, not JSON, or out of range")
    BAD_TOPIC = ("E_BAD_TOPIC", True, "a topic name outside [.a-zA-Z0-9_-]{1,64}")
    BAD_CHANNEL = ("E_BAD_CHANNEL", True, "a channel name outside [.a-zA-Z0-9_-]{1,64}")
    BAD_MESSAGE = ("E_BAD_MESSAGE", True, "a message of a bad size or too big")
    PUB_FAILED = ("E_PUB_FAILED", True, "the topic could not take the message")
    MPUB_FAILED = ("E_MPUB_FAILED", True, "the topic could not take the messages")
    DPUB_FAILED = ("E_DPUB_FAILED", True, "the topic could not take the deferred message")
    FIN_FAILED = ("E_FIN_FAILED", False, "FIN of an id this client does not have in flight")
    REQ_FAILED = ("E_REQ_FAILED", False, "REQ of an id this client does not have in flight")
    TOUCH_FAILED = ("E_TOUCH_FAILED", False,
                    "TOUCH of an id this client does not have in flight")
    AUTH_FIRST = ("E_AUTH_FIRST", True, "SUB or a publish before AUTH, when auth is on")
    AUTH_FAILED = ("E_AUTH_FAILED", True, "the auth service could not be asked")
    AUTH_DISABLED = ("E_AUTH_DISABLED", True, "AUTH sent to an nsqd without auth service")
    UNAUTHORIZED = ("E_UNAUTHORIZED", True,
                    "the secret grants nothing, or not this topic and channel")
    IDENTIFY_FAILED = ("E_IDENTIFY_FAILED", True,
                       "IDENTIFY asked for both compressions, or the TLS handshake failed")
    SUB_FAILED = ("E_SUB_FAILED", True, "the channel cannot take another consumer")

    @classmethod
    def failed(cls, verb: str) -> ErrorCode:
        """``E_<verb>_FAILED``: what nsqd answers when a verb's action fails."""
        code = f"E_{verb}_FAILED"
        return next(member for member in cls if member.value == code)

    def frame(self, text: str = "") -> bytes:
        """The data of the FrameTypeError nsqd sends: ``E_CODE text``."""
        return f"{self.value} {text}".encode() if text else self.value.encode()


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
               "\t": "\\t", "\v": "\\v", '"': '\\"', "\\": "\\\\"}


def go_quote(token: bytes | str) -> str:
    """Go's ``%q`` of a string (``strconv.Quote``), which nsqd uses to quote bad names:
    printable characters as they are (Unicode too), the C escapes, ``\\xNN`` for other
    ASCII and for each byte that is not UTF-8, ``\\uNNNN``/``\\UNNNNNNNN`` for the rest."""
    text = token.decode("utf-8", "surrogateescape") if isinstance(token, bytes) else token
    out = ['"']
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def not_in_flight(verb: str, message_id: bytes) -> tuple[ErrorCode, str]:
    """nsqd's non-fatal answer to FIN, REQ or TOUCH of an id this client does not hold."""
    mid = message_id.decode(errors="replace")  # nsqd echoes the bytes it got
    return ErrorCode.failed(verb), f"{verb} {mid} failed ID not in flight"
