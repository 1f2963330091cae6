"""IDENTIFY on the server side: validate the client's wishes, negotiate features.

The checks, their order and the error texts are nsqd v1.3.0's (``clientV2.Identify``
and ``protocolV2.IDENTIFY``): a value outside its documented range is a fatal
``E_BAD_BODY IDENTIFY <what> (<value>) is invalid``; ``0`` means "the default" and
``-1`` "off" where the spec says so. A JSON value of the wrong type fails the way Go's
``json.Unmarshal`` into nsqd's struct fails: ``IDENTIFY failed to decode JSON body``.
"""

from __future__ import annotations

from dataclasses import dataclass

from nsqviz.broker.options import VERSION, Options
from nsqviz.nsq.grammar import FEATURE_NEGOTIATION_FIELDS

__all__ = ["IdentifyRefused", "Negotiated", "negotiate"]

_STR = ("client_id", "hostname", "user_agent")
_BOOL = ("feature_negotiation", "tls_v1", "snappy", "deflate")
_INT = ("heartbeat_interval", "output_buffer_size", "output_buffer_timeout", "deflate_level",
        "sample_rate", "msg_timeout")


class IdentifyRefused(Exception):
    """A fatal error for IDENTIFY: ``code`` and ``text`` as nsqd sends them."""

    def __init__(self, code: str, text: str):
        super().__init__(f"{code} {text}")
        self.code = code
        self.text = text


@dataclass
class Negotiated:
    """What the connection runs with after IDENTIFY (times in seconds; 0 = off)."""

    client_id: str
    hostname: str
    user_agent: str
    heartbeat_interval: float
    output_buffer_size: int
    output_buffer_timeout: float
    sample_rate: int
    msg_timeout: float
    feature_negotiation: bool
    tls_v1: bool = False
    snappy: bool = False
    deflate: bool = False
    deflate_level: int = 6


def negotiate(data: dict, opts: Options, *, current: Negotiated, tls_available: bool,
              auth_required: bool) -> tuple[Negotiated, dict | None]:
    """Check ``data`` (the IDENTIFY body) and return the new settings and, when the client
    asked for ``feature_negotiation``, the JSON response nsqd would send (keys in nsqd's
    order). Raises :class:`IdentifyRefused`."""
    for key in _STR:
        if key in data and not isinstance(data[key], str) and data[key] is not None:
            raise IdentifyRefused("E_BAD_BODY", "IDENTIFY failed to decode JSON body")
    for key in _BOOL:
        if key in data and not isinstance(data[key], bool) and data[key] is not None:
            raise IdentifyRefused("E_BAD_BODY", "IDENTIFY failed to decode JSON body")
    for key in _INT:
        v = data.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise IdentifyRefused("E_BAD_BODY", "IDENTIFY failed to decode JSON body")

    def num(key: str) -> int:
        return data.get(key) or 0

    n = Negotiated(**vars(current))
    n.client_id = data.get("client_id") or ""
    n.hostname = data.get("hostname") or ""
    n.user_agent = data.get("user_agent") or ""
    n.feature_negotiation = bool(data.get("feature_negotiation"))

    hb = num("heartbeat_interval")
    if hb == -1:
        n.heartbeat_interval = 0.0
    elif hb == 0:
        pass
    elif 1000 <= hb <= opts.max_heartbeat_interval * 1000:
        n.heartbeat_interval = hb / 1000
    else:
        raise IdentifyRefused("E_BAD_BODY", f"IDENTIFY heartbeat interval ({hb}) is invalid")

    timeout = num("output_buffer_timeout")
    if timeout == -1:
        n.output_buffer_timeout = 0.0
    elif timeout == 0:
        pass
    elif (opts.min_output_buffer_timeout * 1000 <= timeout
          <= opts.max_output_buffer_timeout * 1000):
        n.output_buffer_timeout = timeout / 1000
    else:
        raise IdentifyRefused("E_BAD_BODY",
                              f"IDENTIFY output buffer timeout ({timeout}) is invalid")
    size = num("output_buffer_size")
    if size == -1:
        n.output_buffer_size = 1
        n.output_buffer_timeout = 0.0
    elif size == 0:
        pass
    elif 64 <= size <= opts.max_output_buffer_size:
        n.output_buffer_size = size
    else:
        raise IdentifyRefused("E_BAD_BODY", f"IDENTIFY output buffer size ({size}) is invalid")

    rate = num("sample_rate")
    if not 0 <= rate <= 99:
        raise IdentifyRefused("E_BAD_BODY", f"IDENTIFY sample rate ({rate}) is invalid")
    n.sample_rate = rate

    mt = num("msg_timeout")
    if mt == 0:
        pass
    elif 1000 <= mt <= opts.max_msg_timeout * 1000:
        n.msg_timeout = mt / 1000
    else:
        raise IdentifyRefused("E_BAD_BODY", f"IDENTIFY msg timeout ({mt}) is invalid")

    if not n.feature_negotiation:
        return n, None

    n.tls_v1 = tls_available and bool(data.get("tls_v1"))
    n.deflate = opts.deflate and bool(data.get("deflate"))
    level = 6
    if n.deflate and num("deflate_level") > 0:
        level = num("deflate_level")
    n.deflate_level = min(level, opts.max_deflate_level)
    n.snappy = opts.snappy and bool(data.get("snappy"))
    if n.deflate and n.snappy:
        raise IdentifyRefused("E_IDENTIFY_FAILED",
                              "cannot enable both deflate and snappy compression")
    values = {
        "max_rdy_count": opts.max_rdy_count,
        "version": VERSION,
        "max_msg_timeout": int(opts.max_msg_timeout * 1000),
        "msg_timeout": int(n.msg_timeout * 1000),
        "tls_v1": n.tls_v1,
        "deflate": n.deflate,
        "deflate_level": n.deflate_level,
        "max_deflate_level": opts.max_deflate_level,
        "snappy": n.snappy,
        "sample_rate": n.sample_rate,
        "auth_required": auth_required,
        "output_buffer_size": n.output_buffer_size,
        "output_buffer_timeout": int(n.output_buffer_timeout * 1000),
    }
    return n, {key: values[key] for key in FEATURE_NEGOTIATION_FIELDS}
