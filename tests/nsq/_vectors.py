"""Hand-written wire bytes and hypothesis strategies shared by the NSQ tests.

The golden bytes are typed out from the layouts in the protocol spec (``shared/seeds``),
never produced by the grammar under test: a ``[ 4-byte size ]`` is written as its four
big-endian bytes, a command line as its ASCII text. The strategies assemble wire bytes
with ``int.to_bytes`` so that they, too, are an oracle independent of the grammar.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

from nsqviz.nsq import grammar as g

ID = b"0123456789abcdef"

# (id, wire, verb, fields expected after parsing, value to build from)
GOLDEN_COMMANDS = [
    ("SUB", b"SUB test chan\n", "SUB", {"topic": "test", "channel": "chan"}, None),
    (
        "SUB-ephemeral",
        b"SUB t.1_-x#ephemeral c#ephemeral\n",
        "SUB",
        {"topic": "t.1_-x#ephemeral", "channel": "c#ephemeral"},
        None,
    ),
    ("PUB", b"PUB t\n\x00\x00\x00\x05hello", "PUB", {"topic": "t", "body": b"hello"}, None),
    (
        "PUB-binary",
        b"PUB events\n\x00\x00\x01\x00" + bytes(range(256)),
        "PUB",
        {"topic": "events", "body": bytes(range(256))},
        None,
    ),
    (
        # body size 17 = 4 (count) + 4 + 2 ("hi") + 4 + 3 ("bye")
        "MPUB",
        b"MPUB t\n\x00\x00\x00\x11\x00\x00\x00\x02\x00\x00\x00\x02hi\x00\x00\x00\x03bye",
        "MPUB",
        {"topic": "t", "body": {"messages": [b"hi", b"bye"]}},
        None,
    ),
    (
        "DPUB",
        b"DPUB t 1500\n\x00\x00\x00\x03abc",
        "DPUB",
        {"topic": "t", "defer_time": 1500, "body": b"abc"},
        None,
    ),
    (
        # 45 bytes of compact JSON, as Go's encoder (and pynsq) write it
        "IDENTIFY",
        b'IDENTIFY\n\x00\x00\x00\x2d{"client_id":"c1","feature_negotiation":true}',
        "IDENTIFY",
        {
            "body": {
                "value": {"client_id": "c1", "feature_negotiation": True},
                "data": b'{"client_id":"c1","feature_negotiation":true}',
            }
        },
        {"body": {"value": {"client_id": "c1", "feature_negotiation": True}}},
    ),
    (
        # whitespace inside the JSON body is kept byte for byte
        "IDENTIFY-spaced",
        b'IDENTIFY\n\x00\x00\x00\x1b{ "snappy" : true ,\n\t"a":1}',
        "IDENTIFY",
        {"body": {"value": {"snappy": True, "a": 1}, "data": b'{ "snappy" : true ,\n\t"a":1}'}},
        {"body": {"data": b'{ "snappy" : true ,\n\t"a":1}'}},
    ),
    ("AUTH", b"AUTH\n\x00\x00\x00\x06secret", "AUTH", {"secret": b"secret"}, None),
    ("RDY", b"RDY 100\n", "RDY", {"count": 100}, None),
    ("RDY-0", b"RDY 0\n", "RDY", {"count": 0}, None),
    ("FIN", b"FIN 0123456789abcdef\n", "FIN", {"id": ID}, None),
    ("REQ", b"REQ 0123456789abcdef 5000\n", "REQ", {"id": ID, "timeout": 5000}, None),
    ("REQ-0", b"REQ 0123456789ABCDEF 0\n", "REQ", {"id": b"0123456789ABCDEF", "timeout": 0}, None),
    ("TOUCH", b"TOUCH 0123456789abcdef\n", "TOUCH", {"id": ID}, None),
    ("CLS", b"CLS\n", "CLS", {}, None),
    ("NOP", b"NOP\n", "NOP", {}, None),
]

# (id, wire, frame type, data expected after parsing)
GOLDEN_FRAMES = [
    ("OK", b"\x00\x00\x00\x06\x00\x00\x00\x00OK", "FrameTypeResponse", b"OK"),
    (
        "heartbeat",
        b"\x00\x00\x00\x0f\x00\x00\x00\x00_heartbeat_",
        "FrameTypeResponse",
        b"_heartbeat_",
    ),
    (
        "CLOSE_WAIT",
        b"\x00\x00\x00\x0e\x00\x00\x00\x00CLOSE_WAIT",
        "FrameTypeResponse",
        b"CLOSE_WAIT",
    ),
    (
        "identify-json",
        b'\x00\x00\x00\x1a\x00\x00\x00\x00{"max_rdy_count":2500}',
        "FrameTypeResponse",
        b'{"max_rdy_count":2500}',
    ),
    (
        "E_INVALID",
        b"\x00\x00\x00\x29\x00\x00\x00\x01E_INVALID cannot SUB in current state",
        "FrameTypeError",
        b"E_INVALID cannot SUB in current state",
    ),
    (
        "E_FIN_FAILED",
        b"\x00\x00\x00\x10\x00\x00\x00\x01E_FIN_FAILED",
        "FrameTypeError",
        b"E_FIN_FAILED",
    ),
    ("empty-response", b"\x00\x00\x00\x04\x00\x00\x00\x00", "FrameTypeResponse", b""),
    (
        # size 35 = 4 (type) + 8 (timestamp) + 2 (attempts) + 16 (id) + 5 (body)
        "message",
        b"\x00\x00\x00\x23\x00\x00\x00\x02"
        b"\x11\x22\x33\x44\x55\x66\x77\x88"
        b"\x00\x01"
        b"0a1b2c3d4e5f6789"
        b"hello",
        "FrameTypeMessage",
        {
            "timestamp": 0x1122334455667788,
            "attempts": 1,
            "id": b"0a1b2c3d4e5f6789",
            "body": b"hello",
        },
    ),
    (
        "message-empty-body",
        b"\x00\x00\x00\x1e\x00\x00\x00\x02\x17\x9a\x4b\x5c\x3d\x00\x00\x00\xff\xffffffffffffffffff",
        "FrameTypeMessage",
        {
            "timestamp": 0x179A4B5C3D000000,
            "attempts": 65535,
            "id": b"ffffffffffffffff",
            "body": b"",
        },
    ),
]

# ------------------------------------------------------------------------ strategies

NAME_CHARS = ".abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
HEX = "0123456789abcdefABCDEF"


def be32(n: int) -> bytes:
    return n.to_bytes(4, "big", signed=True)


@st.composite
def names(draw) -> str:
    """nsqd's rule: [.a-zA-Z0-9_-]+ with an optional #ephemeral, 1..64 in total."""
    ephemeral = draw(st.booleans())
    base = draw(st.text(NAME_CHARS, min_size=1, max_size=54 if ephemeral else 64))
    return base + "#ephemeral" if ephemeral else base


message_ids = st.text(HEX, min_size=16, max_size=16).map(str.encode)
bodies = st.binary(min_size=1, max_size=300)


@st.composite
def decimals(draw) -> tuple[int, bytes]:
    """(value, spelling): mostly canonical, sometimes with leading zeros as nsqd allows."""
    n = draw(st.integers(0, 2**31 - 1))
    spelling = b"0" * draw(st.sampled_from([0, 0, 0, 1, 3])) + str(n).encode()
    # what the grammar gives back: an int, or an int that remembers a non-canonical spelling
    value = g.Spelled(spelling) if len(spelling) > 1 and spelling[:1] == b"0" else n
    return value, spelling


def canonical(fields: dict) -> bool:
    """No decimal in ``fields`` is spelled with leading zeros."""
    return not any(isinstance(v, g.Spelled) for v in fields.values())


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=12), json_values, max_size=6)
_ws = st.text(" \t\r\n", max_size=3)


@st.composite
def json_texts(draw) -> tuple[dict, bytes]:
    """A JSON object and one of its many spellings: any whitespace, escaped or raw UTF-8."""
    obj = draw(json_objects)
    indent = draw(st.none() | st.sampled_from(["", " ", "\t", "  "]))
    item_sep = draw(_ws) + "," + draw(_ws)
    key_sep = draw(_ws) + ":" + draw(_ws)
    text = json.dumps(
        obj,
        indent=indent,
        separators=(item_sep, key_sep),
        ensure_ascii=draw(st.booleans()),
    )
    return obj, (draw(_ws) + text + draw(_ws)).encode()


def _line(*parts: bytes) -> bytes:
    return b" ".join(parts) + b"\n"


@st.composite
def command_vectors(draw, verb: str) -> tuple[bytes, dict]:
    """(wire bytes, the fields they carry) for one command, assembled by hand."""
    if verb == "SUB":
        t, c = draw(names()), draw(names())
        return _line(b"SUB", t.encode(), c.encode()), {"topic": t, "channel": c}
    if verb == "PUB":
        t, b = draw(names()), draw(bodies)
        return _line(b"PUB", t.encode()) + be32(len(b)) + b, {"topic": t, "body": b}
    if verb == "MPUB":
        t, bs = draw(names()), draw(st.lists(bodies, min_size=1, max_size=8))
        inner = be32(len(bs)) + b"".join(be32(len(b)) + b for b in bs)
        wire = _line(b"MPUB", t.encode()) + be32(len(inner)) + inner
        return wire, {"topic": t, "body": {"messages": bs}}
    if verb == "DPUB":
        t, (d, ds), b = draw(names()), draw(decimals()), draw(bodies)
        wire = _line(b"DPUB", t.encode(), ds) + be32(len(b)) + b
        return wire, {"topic": t, "defer_time": d, "body": b}
    if verb == "IDENTIFY":
        obj, text = draw(json_texts())
        return b"IDENTIFY\n" + be32(len(text)) + text, {"body": {"value": obj, "data": text}}
    if verb == "AUTH":
        s = draw(bodies)
        return b"AUTH\n" + be32(len(s)) + s, {"secret": s}
    if verb == "RDY":
        n, ns = draw(decimals())
        return _line(b"RDY", ns), {"count": n}
    if verb in ("FIN", "TOUCH"):
        i = draw(message_ids)
        return _line(verb.encode(), i), {"id": i}
    if verb == "REQ":
        i, (n, ns) = draw(message_ids), draw(decimals())
        return _line(b"REQ", i, ns), {"id": i, "timeout": n}
    if verb in ("CLS", "NOP"):
        return verb.encode() + b"\n", {}
    raise AssertionError(verb)


VERBS = [
    "IDENTIFY",
    "AUTH",
    "SUB",
    "PUB",
    "MPUB",
    "DPUB",
    "RDY",
    "FIN",
    "REQ",
    "TOUCH",
    "CLS",
    "NOP",
]


@st.composite
def frame_vectors(draw) -> tuple[bytes, str, object]:
    """(wire bytes, frame type, data) for one frame from nsqd, assembled by hand."""
    kind = draw(st.sampled_from(["FrameTypeResponse", "FrameTypeError", "FrameTypeMessage"]))
    if kind == "FrameTypeMessage":
        ts = draw(st.integers(-(2**63), 2**63 - 1))
        attempts = draw(st.integers(0, 2**16 - 1))
        mid = draw(message_ids)
        body = draw(st.binary(max_size=300))
        data = ts.to_bytes(8, "big", signed=True) + attempts.to_bytes(2, "big") + mid + body
        value = {"timestamp": ts, "attempts": attempts, "id": mid, "body": body}
        return be32(4 + len(data)) + be32(2) + data, kind, value
    data = draw(st.binary(max_size=300))
    return be32(4 + len(data)) + be32(0 if kind == "FrameTypeResponse" else 1) + data, kind, data


def frame_stream(frames: list[tuple[bytes, str, object]]) -> bytes:
    return b"".join(f[0] for f in frames)


def subset(expected, actual) -> bool:
    """``expected`` (plain dicts/lists) matches ``actual`` (construct Containers) where given."""
    if isinstance(expected, dict) and type(actual) is dict:  # a decoded JSON value: exact
        return expected == actual
    if isinstance(expected, dict):
        return all(k in actual and subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return len(expected) == len(actual) and all(map(subset, expected, actual))
    if isinstance(expected, int) and not isinstance(expected, bool):
        # a decimal parameter: same value, and the same spelling where it was not canonical
        return (
            expected == actual
            and isinstance(actual, int)
            and getattr(expected, "spelling", None) == getattr(actual, "spelling", None)
        )
    return expected == actual and type(expected) is type(actual)
