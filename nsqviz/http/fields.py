"""The HTTP APIs' display-filter fields: Wireshark's own HTTP dissector's (``http.*``).

nsqd's and nsqlookupd's HTTP is plain HTTP/1.1, which Wireshark dissects itself, so the
fields are those its ``http`` dissector registers, with the types, titles and
descriptions it gives them (tshark 4.0 ``-G fields``), and a filter selects the same
packets in nsqviz and tshark: the request and response lines' parts, the query's
parameters, the headers Wireshark has a field for, the lengths, which request an answer
answers. The filter engine reads a record's values from
:meth:`nsqviz.http.protocol.HttpProtocol.filter_values`; the dissector declares none of
them (they are Wireshark's).
"""

from __future__ import annotations

from nsqviz.fields import Field, FieldType

__all__ = ["FIELDS", "HEADER_FIELDS", "PREFIX"]

PREFIX = "http"
"""The first word of every field name."""

_HEADERS = (
    # header (lower case), field, Wireshark's title and description
    ("content-type", "content_type", "Content-Type", "HTTP Content-Type header"),
    ("content-length", "content_length_header", "Content-Length", "HTTP Content-Length header"),
    ("content-encoding", "content_encoding", "Content-Encoding", "HTTP Content-Encoding header"),
    ("transfer-encoding", "transfer_encoding", "Transfer-Encoding",
     "HTTP Transfer-Encoding header"),
    ("host", "host", "Host", "HTTP Host"),
    ("user-agent", "user_agent", "User-Agent", "HTTP User-Agent header"),
    ("accept", "accept", "Accept", "HTTP Accept"),
    ("accept-encoding", "accept_encoding", "Accept Encoding", "HTTP Accept Encoding"),
    ("connection", "connection", "Connection", "HTTP Connection"),
    ("upgrade", "upgrade", "Upgrade", "HTTP Upgrade header"),
    ("date", "date", "Date", "HTTP Date"),
    ("server", "server", "Server", "HTTP Server"),
    ("location", "location", "Location", "HTTP Location"),
    ("authorization", "authorization", "Authorization", "HTTP Authorization header"),
    ("cache-control", "cache_control", "Cache-Control", "HTTP Cache Control"),
    ("referer", "referer", "Referer", "HTTP Referer"),
    ("cookie", "cookie", "Cookie", "HTTP Cookie"),
    ("set-cookie", "set_cookie", "Set-Cookie", "HTTP Set Cookie"),
)

HEADER_FIELDS: dict[str, str] = {header: field for header, field, _, _ in _HEADERS}
"""The headers Wireshark gives a field of its own (``http.<field>``), by lower-case
name: the field holds the header's value as sent."""


def _f(suffix: str, type_: FieldType, title: str, description: str = "") -> Field:
    return Field(f"{PREFIX}.{suffix}", type_, title, description)


def _fields() -> tuple[Field, ...]:
    s, u = FieldType.STRING, FieldType.UINT32
    return (
        _f("request", FieldType.BOOL, "Request", "TRUE if HTTP request"),
        _f("response", FieldType.BOOL, "Response", "TRUE if HTTP response"),
        _f("request.method", s, "Request Method", "HTTP Request Method"),
        _f("request.uri", s, "Request URI", "HTTP Request-URI"),
        # Wireshark splits the target into path and query only where it has a query
        _f("request.uri.path", s, "Request URI Path", "HTTP Request-URI Path"),
        _f("request.uri.query", s, "Request URI Query", "HTTP Request-URI Query"),
        _f("request.uri.query.parameter", s, "Request URI Query Parameter",
           "HTTP Request-URI Query Parameter"),
        _f("request.version", s, "Request Version", "HTTP Request HTTP-Version"),
        _f("request.full_uri", s, "Full request URI",
           "The full requested URI (including host name)"),
        _f("request.line", s, "Request line"),  # each header line, CRLF included
        _f("response.code", FieldType.UINT16, "Status Code", "HTTP Response Status Code"),
        _f("response.phrase", s, "Response Phrase", "HTTP Response Reason Phrase"),
        _f("response.version", s, "Response Version", "HTTP Response HTTP-Version"),
        _f("response.line", s, "Response line"),
        _f("response_for.uri", s, "Request URI", "HTTP Response For-URI"),
        _f("request_in", FieldType.FRAMENUM, "Request in frame",
           "This packet is a response to the packet with this number"),
        _f("request_number", u, "Request number"),  # its place on its connection
        _f("response_number", u, "Response number"),  # among the final answers
        _f("content_length", FieldType.UINT64, "Content length"),  # the header, a number
        *(_f(field, s, title, description) for _, field, title, description in _HEADERS),
    )


FIELDS: tuple[Field, ...] = _fields()
"""Every HTTP field nsqviz fills, each as Wireshark's ``http`` dissector registers it
(name, type, title, description)."""
