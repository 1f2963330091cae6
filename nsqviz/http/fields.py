"""The HTTP APIs' display-filter fields: Wireshark's own HTTP dissector's (``http.*``).

nsqd's and nsqlookupd's HTTP is plain HTTP/1.1, which Wireshark dissects itself, so the
fields are those its ``http`` dissector registers, with the types it gives them (tshark
4.0 ``-G fields``), and a filter selects the same packets in nsqviz and tshark: the
request and response lines' parts, the query's parameters, the headers Wireshark has a
field for, the lengths, which request an answer answers. The filter engine reads a
record's values from :meth:`nsqviz.http.protocol.HttpProtocol.filter_values`; the
dissector declares none of them (they are Wireshark's).
"""

from __future__ import annotations

from nsqviz.fields import Field, FieldType

__all__ = ["FIELDS", "HEADER_FIELDS", "PREFIX"]

PREFIX = "http"
"""The first word of every field name."""

HEADER_FIELDS: dict[str, str] = {
    "content-type": "content_type",
    "content-length": "content_length_header",
    "content-encoding": "content_encoding",
    "transfer-encoding": "transfer_encoding",
    "host": "host",
    "user-agent": "user_agent",
    "accept": "accept",
    "accept-encoding": "accept_encoding",
    "connection": "connection",
    "upgrade": "upgrade",
    "date": "date",
    "server": "server",
    "location": "location",
    "authorization": "authorization",
    "cache-control": "cache_control",
    "referer": "referer",
    "cookie": "cookie",
    "set-cookie": "set_cookie",
}
"""The headers Wireshark gives a field of its own (``http.<field>``), by lower-case
name: the field holds the header's value as sent."""


def _f(suffix: str, type_: FieldType, title: str, description: str = "") -> Field:
    return Field(f"{PREFIX}.{suffix}", type_, title, description)


def _fields() -> tuple[Field, ...]:
    s, u = FieldType.STRING, FieldType.UINT32
    return (
        _f("request", FieldType.BOOL, "Request", "The unit is a request"),
        _f("response", FieldType.BOOL, "Response", "The unit is a response"),
        _f("request.method", s, "Request Method"),
        _f("request.uri", s, "Request URI", "The request-target as sent: /pub?topic=orders"),
        _f("request.uri.path", s, "Request URI Path"),
        _f("request.uri.query", s, "Request URI Query", "What follows the ?"),
        _f("request.uri.query.parameter", s, "Request URI Query Parameter",
           "Each name=value of the query, as sent"),
        _f("request.version", s, "Request Version", "HTTP/1.1"),
        _f("request.full_uri", s, "Full request URI", "http://Host/request-target"),
        _f("request.line", s, "Request line", "Each header line of a request, CRLF included"),
        _f("response.code", FieldType.UINT16, "Status Code"),
        _f("response.phrase", s, "Response Phrase"),
        _f("response.version", s, "Response Version"),
        _f("response.line", s, "Response line", "Each header line of a response"),
        _f("response_for.uri", s, "Request URI",
           "The full URI of the request a response answers"),
        _f("request_in", FieldType.FRAMENUM, "Request in frame",
           "The packet the request a response answers completed in"),
        _f("request_number", u, "Request number", "The request's place on its connection"),
        _f("response_number", u, "Response number",
           "The response's place among the final answers on its connection"),
        _f("content_length", FieldType.UINT64, "Content length",
           "The Content-Length header's value, as a number"),
        *(_f(field, s, name.title()) for name, field in HEADER_FIELDS.items()),
    )


FIELDS: tuple[Field, ...] = _fields()
"""Every HTTP field nsqviz fills, each as Wireshark's ``http`` dissector types it."""
