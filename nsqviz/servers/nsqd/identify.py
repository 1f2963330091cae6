"""IDENTIFY on the server side: validate the client's wishes, negotiate features.

The checks, their order and the error texts are nsqd v1.3.0's (``clientV2.Identify``
and ``protocolV2.IDENTIFY``): a value outside its documented range is a fatal
``E_BAD_BODY IDENTIFY <what> (<value>) is invalid``; ``0`` means "the default" and
``-1`` "off" where the spec says so. A JSON value of the wrong type fails the way Go's
``json.Unmarshal`` into nsqd's struct fails: ``IDENTIFY failed to decode JSON body``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nsqviz.nsq.errors import ErrorCode
from nsqviz.nsq.identify_fields import FEATURE_NEGOTIATION_FIELDS, IDENTIFY_FIELDS, IdentifyField
from nsqviz.servers.goflags import VERSION
from nsqviz.servers.nsqd.options import Options

__all__ = ["IdentifyRefused", "Negotiated", "negotiate"]



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


def negotiate(data: dict[str, Any], opts: Options, *, current: Negotiated, tls_available: bool,
              auth_required: bool) -> tuple[Negotiated, dict[str, Any] | None]:
    """Check ``data`` (the IDENTIFY body) and return the new settings and, when the client
    asked for ``feature_negotiation``, the JSON response nsqd would send (keys in nsqd's
    order). Raises :class:`IdentifyRefused`."""
    for f in IDENTIFY_FIELDS.values():
        v = data.get(f.name)
        if f.read and v is not None and (
            not isinstance(v, f.type) or f.type is int and isinstance(v, bool)
        ):  # as Go's json.Unmarshal into nsqd's struct fails
            raise IdentifyRefused(ErrorCode.BAD_BODY, "IDENTIFY failed to decode JSON body")

    def num(key: str) -> int:
        return data.get(key) or 0

    def checked(key: str) -> int:
        """The value of ``key`` (0: absent, nsqd's default), refused out of its range."""
        f = IDENTIFY_FIELDS[key]
        v = num(key)
        if v == 0 or v == f.disable:
            return v
        if not _bound(f, f.nsqd_low, opts) <= v <= _bound(f, f.high, opts):
            raise IdentifyRefused(ErrorCode.BAD_BODY,
                                  f"IDENTIFY {key.replace('_', ' ')} ({v}) is invalid")
        return v

    n = Negotiated(**vars(current))
    n.client_id = data.get("client_id") or ""
    n.hostname = data.get("hostname") or ""
    n.user_agent = data.get("user_agent") or ""
    n.feature_negotiation = bool(data.get("feature_negotiation"))

    # the ranges are IDENTIFY_FIELDS'; the order of the checks is nsqd's
    hb = checked("heartbeat_interval")
    if hb == -1:
        n.heartbeat_interval = 0.0
    elif hb:
        n.heartbeat_interval = hb / 1000
    timeout = checked("output_buffer_timeout")
    if timeout == -1:
        n.output_buffer_timeout = 0.0
    elif timeout:
        n.output_buffer_timeout = timeout / 1000
    size = checked("output_buffer_size")
    if size == -1:
        n.output_buffer_size = 1
        n.output_buffer_timeout = 0.0
    elif size:
        n.output_buffer_size = size
    n.sample_rate = checked("sample_rate")
    mt = checked("msg_timeout")
    if mt:
        n.msg_timeout = mt / 1000

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
        raise IdentifyRefused(ErrorCode.IDENTIFY_FAILED,
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


def _bound(f: IdentifyField, bound: int | str | None, opts: Options) -> float:
    """A range end of ``f``: a number, or the nsqd option that sets it (in ``f.unit``)."""
    assert bound is not None  # the fields negotiate() checks have both ends
    if isinstance(bound, str):
        value: float = getattr(opts, bound)
        return value * 1000 if f.unit == "ms" else value
    return bound
