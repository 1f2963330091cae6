"""The JSON vocabularies of NSQ V2: the IDENTIFY body's keys with the spec's ranges and
defaults, and the keys of nsqd's feature-negotiation and AUTH answers (re-exported by
:mod:`nsqviz.nsq.grammar`)."""

from __future__ import annotations

__all__ = ["AUTH_RESPONSE_FIELDS", "FEATURE_NEGOTIATION_FIELDS", "IDENTIFY_FIELDS", "IdentifyField"]

Bound = int | str | None
"""A range end: a number, the name of the nsqd option that sets it, or none."""


class IdentifyField:
    """One key of the IDENTIFY JSON body, with the spec's range and default.

    ``low``/``high`` bound the accepted values; either may name the nsqd option that
    sets it (e.g. ``"max_heartbeat_interval"``), in ``unit`` (``"ms"``: the option is a
    duration). ``disable`` is the value that switches the feature off (``-1``), where the
    spec has one, and ``disabled`` what nsqd v1.3.0 then does; ``0`` always means "nsqd's
    default". nsqd refuses a value out of range with E_BAD_BODY, except where it
    ``clamps`` it into the range; ``nsqd_low`` is the lower bound nsqd v1.3.0 enforces
    where it differs from the spec's. ``read``: nsqd v1.3.0 reads the key at all (the
    deprecated ids it ignores).
    """

    __slots__ = ("name", "type", "default", "low", "nsqd_low", "high", "disable", "disabled",
                 "unit", "clamps", "read", "since", "doc")

    def __init__(self, name: str, type_: type, default: str | int | bool, *,
                 low: Bound = None, nsqd_low: Bound = None, high: Bound = None,
                 disable: int | None = None, disabled: str = "", unit: str = "",
                 clamps: bool = False, read: bool = True, since: str = "", doc: str = ""):
        self.name, self.type, self.default = name, type_, default
        self.low, self.high, self.disable, self.disabled = low, high, disable, disabled
        self.nsqd_low = low if nsqd_low is None else nsqd_low
        self.unit, self.clamps, self.read = unit, clamps, read
        self.since, self.doc = since, doc

    def __repr__(self) -> str:
        return f"IdentifyField({self.name!r})"


IDENTIFY_FIELDS: dict[str, IdentifyField] = {
    f.name: f
    for f in (
        IdentifyField("client_id", str, "", doc="identifier used to disambiguate this client"),
        IdentifyField("hostname", str, "", doc="hostname where the client is deployed"),
        IdentifyField("feature_negotiation", bool, False, since="0.2.19",
                      doc="client accepts a JSON response of negotiated features"),
        IdentifyField("heartbeat_interval", int, "client_timeout/2", low=1000,
                      high="max_heartbeat_interval", disable=-1, unit="ms", since="0.2.19",
                      disabled="no heartbeats and no read deadline; SUB is then refused "
                               "(E_INVALID)",
                      doc="milliseconds between heartbeats"),
        IdentifyField("output_buffer_size", int, 16384, low=64, high="max_output_buffer_size",
                      disable=-1, since="0.2.21",
                      disabled="no buffer: every frame is written at once (size 1, and "
                               "output_buffer_timeout 0)",
                      doc="bytes nsqd buffers before writing to this client"),
        IdentifyField("output_buffer_timeout", int, 250, low=1,
                      nsqd_low="min_output_buffer_timeout", high="max_output_buffer_timeout",
                      disable=-1, unit="ms", since="0.2.21",
                      disabled="no timed flush (0): buffered messages go out when the buffer "
                               "fills, when the client's RDY is used up, or with the next "
                               "response frame (a heartbeat)",
                      doc="milliseconds after which buffered data is flushed"),
        IdentifyField("tls_v1", bool, False, since="0.2.22", doc="upgrade this connection to TLS"),
        IdentifyField("snappy", bool, False, since="0.2.23", doc="snappy-compress the stream"),
        IdentifyField("deflate", bool, False, since="0.2.23", doc="deflate-compress the stream"),
        IdentifyField("deflate_level", int, 6, low=1, high="max_deflate_level", clamps=True,
                      since="0.2.23",
                      doc="deflate compression level"),
        IdentifyField("sample_rate", int, 0, low=0, high=99, since="0.2.25",
                      doc="deliver this percentage of messages (0 disables sampling)"),
        IdentifyField("user_agent", str, "<client_library_name>/<version>", since="0.2.25",
                      doc="agent string, in the spirit of HTTP"),
        IdentifyField("msg_timeout", int, "msg_timeout", low=1000, high="max_msg_timeout",
                      unit="ms", since="0.2.28",
                      doc="server-side message timeout for this client (ms)"),
        IdentifyField("short_id", str, "", read=False,
                      doc="deprecated (0.2.28): use client_id"),
        IdentifyField("long_id", str, "", read=False, doc="deprecated (0.2.28): use hostname"),
    )
}
"""The IDENTIFY body's keys as the spec documents them."""

FEATURE_NEGOTIATION_FIELDS: tuple[str, ...] = (
    "max_rdy_count",
    "version",
    "max_msg_timeout",
    "msg_timeout",
    "tls_v1",
    "deflate",
    "deflate_level",
    "max_deflate_level",
    "snappy",
    "sample_rate",
    "auth_required",
    "output_buffer_size",
    "output_buffer_timeout",
)
"""Keys of nsqd's IDENTIFY response when ``feature_negotiation`` is set, in nsqd's order."""

AUTH_RESPONSE_FIELDS: tuple[str, ...] = ("identity", "identity_url", "permission_count")
"""Keys of the JSON an AUTH success returns, in nsqd's order."""
