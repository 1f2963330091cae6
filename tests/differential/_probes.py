"""The differential probe corpus: raw byte probes for nsqd and ``nsqviz broker``.

Every command is built by the grammar (:data:`nsqviz.nsq.grammar.COMMANDS`); a
malformed form is a well-built command with one field replaced, found by its name in
the grammar's layout (:func:`nsqviz.layout.annotate`) -- a topic that is not a name, a
size that lies, a ``\\r\\n`` for the ``\\n`` -- so no probe is hand-packed. The corpus:

* every command, well formed, in every state a client can be in (no magic, after the
  magic, identified, subscribed, ready with a message in flight, closing);
* every malformed form of every field of every command (names, ids, numbers, sizes,
  separators), over-limit bodies, messages, RDY counts and timeouts;
* every command split at every field boundary of its layout, and byte by byte;
* IDENTIFY's negotiations: compression (snappy, deflate, levels, both), TLS (offered,
  required), AUTH (disabled, required, good and bad secrets), out-of-range values.

After the command under test most probes send a *canary* (``NOP`` then a ``PUB``): its
``OK`` shows the connection stayed open and usable, its absence that the server closed.
Topic names are unique per probe, so the probes can run concurrently.
"""

from __future__ import annotations

import itertools
import json
import re

from nsqviz import layout
from nsqviz.nsq import grammar as g
from tests.differential._replay import ID, WAIT, Probe

LIMITS = {
    "max_msg_size": 100,
    "max_body_size": 400,
    "max_rdy_count": 50,
    "max_req_timeout": "10s",
    "max_msg_timeout": "60s",
    "max_heartbeat_interval": "60s",
    "max_output_buffer_size": 65536,
    "max_output_buffer_timeout": "1s",
    "max_deflate_level": 6,
}
"""nsqd flags both servers get: small limits, so over-limit probes stay small."""

AUTH_SECRET = b"open-sesame"

MAGIC = g.MAGIC_V2
FAKE_ID = b"0123456789abcdef"


def build(verb: str, **fields) -> bytes:
    """A command as the grammar builds it."""
    return g.COMMANDS[verb].build(fields)


def identify(doc: dict) -> bytes:
    return build("IDENTIFY", body={"value": doc})


def pub(topic: str, body: bytes = b"x") -> bytes:
    return build("PUB", topic=topic, body=body)


def replace(data: bytes, grammar, path: str, raw: bytes) -> bytes:
    """``data`` with the bytes of the field at ``path`` (dotted) replaced by ``raw``."""
    start, end = span(data, grammar, path)
    return data[:start] + raw + data[end:]


def span(data: bytes, grammar, path: str) -> tuple[int, int]:
    for f in layout.annotate(grammar, data).root.walk():
        if f.dotted == path:
            return f.start, f.end
    raise KeyError(f"no field {path!r} in {data!r}")


def boundaries(data: bytes, grammar) -> list[int]:
    """The offsets inside ``data`` where one leaf field of its layout ends."""
    ends = {f.end for f in layout.annotate(grammar, data).leaves()}
    return sorted(e for e in ends if 0 < e < len(data))


def separators(data: bytes, grammar) -> list[str]:
    """Dotted paths of the layout's ``\\n`` separators."""
    return [f.dotted for f in layout.annotate(grammar, data).leaves()
            if f.kind == "const" and f.raw == b"\n"]


class Corpus:
    """Builds probes; each gets a unique topic (``d<index>``)."""

    def __init__(self) -> None:
        self.probes: list[Probe] = []
        self._n = itertools.count()

    def topic(self) -> str:
        return f"d{next(self._n)}"

    def add(self, name: str, *chunks: bytes, gap: float = 0.02, config: str = "plain") -> None:
        self.probes.append(Probe(name, tuple(c for c in chunks if c), gap, config))

    def canary(self, topic: str) -> bytes:
        """NOP, then a PUB to a topic nobody reads (so no message races its OK)."""
        return build("NOP") + pub(f"{topic}-canary", b"canary")


# ------------------------------------------------------------------ states x commands

def _states(t: str) -> dict[str, tuple[bytes, ...]]:
    """How to reach each state on topic ``t`` (each step a chunk of its own)."""
    sub = build("SUB", topic=t, channel="c")
    return {
        "init": (MAGIC,),
        "identified": (MAGIC, identify({"client_id": "probe"})),
        "subscribed": (MAGIC, sub),
        "in_flight": (MAGIC, pub(t, b"first"), sub, build("RDY", count=1), WAIT),
        "closing": (MAGIC, sub, build("CLS")),
    }


def _commands(t: str) -> dict[str, bytes]:
    """One well-formed instance of every command (FIN/REQ/TOUCH name the message the
    probe received, or a made-up id where none arrives)."""
    return {
        "NOP": build("NOP"),
        "IDENTIFY": identify({"client_id": "again"}),
        "AUTH": build("AUTH", secret=AUTH_SECRET),
        "SUB": build("SUB", topic=t, channel="other"),
        "PUB": pub(t, b"hello"),
        "MPUB": build("MPUB", topic=t, body={"messages": [b"m1", b"m2"]}),
        "DPUB": build("DPUB", topic=t, defer_time=9000, body=b"later"),
        "RDY": build("RDY", count=2),
        "FIN": b"FIN " + ID + b"\n",
        "REQ": b"REQ " + ID + b" 0\n",
        "TOUCH": b"TOUCH " + ID + b"\n",
        "CLS": build("CLS"),
        "FIN-unknown": build("FIN", id=FAKE_ID),
        "REQ-unknown": build("REQ", id=FAKE_ID, timeout=0),
        "TOUCH-unknown": build("TOUCH", id=FAKE_ID),
    }


def states_by_commands(corpus: Corpus) -> None:
    for state in _states("x"):
        for verb in _commands("x"):
            if verb in ("FIN", "REQ", "TOUCH") and state != "in_flight":
                continue  # no message: the -unknown forms cover these states
            t = corpus.topic()
            steps = _states(t)[state]
            # REQ 0 of the message in flight: it comes back at once (RDY 1, none held)
            back = (WAIT,) if (state, verb) == ("in_flight", "REQ") else ()
            corpus.add(f"state/{state}/{verb}", *steps, _commands(t)[verb], *back,
                       corpus.canary(t))
    for verb, command in _commands("x").items():
        if ID in command:
            continue
        t = corpus.topic()
        # no magic: the command's first four bytes are read as the protocol magic
        corpus.add(f"state/no-magic/{verb}", _commands(t)[verb])
    corpus.add("magic/V1", b"  V1", build("NOP"))
    corpus.add("magic/lowercase", b"  v2", build("NOP"))
    corpus.add("magic/twice", MAGIC, MAGIC, pub(corpus.topic()))
    corpus.add("magic/split", b"  ", b"V2", pub(corpus.topic()))
    corpus.add("magic/only-then-close", b" ")


# ----------------------------------------------------------------- malformed fields

BAD_NAMES = {
    "empty": b"",
    "bang": b"bad!name",
    "slash": b"a/b",
    "too-long": b"n" * 65,
    "64-long": b"n" * 64,
    "hash-not-ephemeral": b"a#b",
    "ephemeral": b"eph#ephemeral",
    "unicode": "主题".encode(),
    "control": b"a\x01b\x7f",
    "not-utf8": b"\xff\xfe",
    "quote-backslash": b'a"b\\c',
    "nbsp": "a\u00a0b".encode(),
    "dot": b".",
}
BAD_NUMBERS = {
    "empty": b"",
    "negative": b"-1",
    "letters": b"abc",
    "plus": b"+5",
    "huge": b"99999999999999999999",
    "leading-zeros": b"007",
    "space-inside": b"1 2",
    "hex": b"0x10",
}
BAD_IDS = {
    "short": FAKE_ID[:15],
    "long": FAKE_ID + b"0",
    "not-hex": b"zzzzzzzzzzzzzzzz",
    "empty": b"",
    "upper": b"0123456789ABCDEF",
}


def malformed_fields(corpus: Corpus) -> None:
    for bad, raw in BAD_NAMES.items():
        for verb in ("PUB", "MPUB", "DPUB"):
            t = corpus.topic()
            cmd = _commands(t)[verb]
            corpus.add(f"name/{verb}/topic/{bad}", MAGIC,
                       replace(cmd, g.COMMANDS[verb], "topic", raw), corpus.canary(t))
        for field in ("topic", "channel"):
            t = corpus.topic()
            sub = build("SUB", topic=t, channel="c")
            corpus.add(f"name/SUB/{field}/{bad}", MAGIC, replace(sub, g.SUB, field, raw),
                       corpus.canary(t))
    for bad, raw in BAD_NUMBERS.items():
        t = corpus.topic()
        sub = build("SUB", topic=t, channel="c")
        corpus.add(f"number/RDY/{bad}", MAGIC, sub,
                   replace(build("RDY", count=1), g.RDY, "count", raw), corpus.canary(t))
        t = corpus.topic()
        corpus.add(f"number/DPUB/{bad}", MAGIC,
                   replace(build("DPUB", topic=t, defer_time=5, body=b"d"), g.DPUB,
                           "defer_time", raw), corpus.canary(t))
        t = corpus.topic()
        sub = build("SUB", topic=t, channel="c")
        req = build("REQ", id=FAKE_ID, timeout=0)
        corpus.add(f"number/REQ/{bad}", MAGIC, sub, replace(req, g.REQ, "timeout", raw),
                   corpus.canary(t))
    for bad, raw in BAD_IDS.items():
        for verb in ("FIN", "REQ", "TOUCH"):
            t = corpus.topic()
            cmd = _commands(t)[f"{verb}-unknown"]
            corpus.add(f"id/{verb}/{bad}", MAGIC, build("SUB", topic=t, channel="c"),
                       replace(cmd, g.COMMANDS[verb], "id", raw), corpus.canary(t))


def bad_sizes(corpus: Corpus) -> None:
    """Body sizes that lie, are zero, negative, or over the limits."""
    body_commands = {
        "IDENTIFY": lambda t: identify({"client_id": "s"}),
        "AUTH": lambda t: build("AUTH", secret=AUTH_SECRET),
        "PUB": lambda t: pub(t, b"body"),
        "MPUB": lambda t: build("MPUB", topic=t, body={"messages": [b"a", b"bc"]}),
        "DPUB": lambda t: build("DPUB", topic=t, defer_time=9000, body=b"body"),
    }
    sizes = {
        "zero": 0,
        "negative": -1,
        "min-int": -(2**31),
        "one-short": None,  # the true size minus one: the rest is read as a command
        "over-max-body": LIMITS["max_body_size"] + 1,
        "huge": 2**31 - 1,
    }
    for verb, make in body_commands.items():
        grammar = g.COMMANDS[verb]
        size_path = "secret.size" if verb == "AUTH" else "body.size"
        for label, size in sizes.items():
            t = corpus.topic()
            cmd = make(t)
            start, end = span(cmd, grammar, size_path)
            true = int.from_bytes(cmd[start:end], "big")
            value = true - 1 if size is None else size
            raw = value.to_bytes(4, "big", signed=True)
            corpus.add(f"size/{verb}/{label}", MAGIC, replace(cmd, grammar, size_path, raw),
                       corpus.canary(t))
    # MPUB's inner counts and sizes
    for label, path, raw in (
        ("count-zero", "body.data.messages.count", b"\0\0\0\0"),
        ("count-negative", "body.data.messages.count", b"\xff\xff\xff\xff"),
        ("count-too-many", "body.data.messages.count", b"\0\0\0\x03"),
        ("count-too-few", "body.data.messages.count", b"\0\0\0\x01"),
        ("message-size-zero", "body.data.messages[0].size", b"\0\0\0\0"),
        ("message-size-negative", "body.data.messages[0].size", b"\xff\xff\xff\xfe"),
        ("message-size-over", "body.data.messages[1].size", b"\0\0\0\x09"),
        ("message-size-huge", "body.data.messages[1].size", b"\x7f\xff\xff\xff"),
    ):
        t = corpus.topic()
        cmd = build("MPUB", topic=t, body={"messages": [b"a", b"bc"]})
        corpus.add(f"mpub/{label}", MAGIC, replace(cmd, g.MPUB, path, raw), corpus.canary(t))
    per_element_sizes(corpus)
    over = LIMITS["max_msg_size"] + 1
    for label, cmd in (
        ("PUB/over-max-msg", lambda t: pub(t, b"m" * over)),
        ("PUB/at-max-msg", lambda t: pub(t, b"m" * (over - 1))),
        ("DPUB/over-max-msg", lambda t: build("DPUB", topic=t, defer_time=1, body=b"m" * over)),
        ("MPUB/message-over-max-msg",
         lambda t: build("MPUB", topic=t, body={"messages": [b"a", b"m" * over]})),
        ("MPUB/over-max-body",
         lambda t: build("MPUB", topic=t, body={"messages": [b"m" * 90] * 5})),
        ("IDENTIFY/over-max-body", lambda t: identify({"user_agent": "u" * 500})),
        ("AUTH/over-max-body", lambda t: build("AUTH", secret=b"s" * 500)),
    ):
        t = corpus.topic()
        corpus.add(f"limit/{label}", MAGIC, cmd(t), corpus.canary(t))


ELEMENT_SIZES = {
    "zero": lambda size: 0,
    "negative": lambda size: -1,
    "over-max-msg": lambda size: LIMITS["max_msg_size"] + 1,
}
"""What an element's size field of a body array is set to; the element's bytes stay, so
the body's own size still holds and only the element is at fault."""


def per_element_sizes(corpus: Corpus) -> None:
    """Every size field of every element of a body array (MPUB's messages), at every
    index the layout shows -- an error's text may name the element (nsqd's
    ``invalid message(1) body size 0``), so the first element alone proves nothing."""
    messages = [b"a", b"bc", b"def"]
    cmd = build("MPUB", topic="t", body={"messages": messages})
    paths = [f.dotted for f in layout.annotate(g.MPUB, cmd).root.walk()
             if re.fullmatch(r".*\[\d+\]\.size", f.dotted)]
    assert len(paths) == len(messages), paths
    for path in paths:
        index = path.rsplit("[", 1)[1].split("]")[0]
        for label, size in ELEMENT_SIZES.items():
            t = corpus.topic()
            cmd = build("MPUB", topic=t, body={"messages": messages})
            raw = size(len(messages[int(index)])).to_bytes(4, "big", signed=True)
            corpus.add(f"mpub/message-{index}/size-{label}", MAGIC,
                       replace(cmd, g.MPUB, path, raw), corpus.canary(t))
        t = corpus.topic()  # a message that really is too big, at this index
        big = [b"m" * (LIMITS["max_msg_size"] + 1) if str(i) == index else m
               for i, m in enumerate(messages)]
        corpus.add(f"mpub/message-{index}/too-big", MAGIC,
                   build("MPUB", topic=t, body={"messages": big}), corpus.canary(t))


def limits(corpus: Corpus) -> None:
    """Values just inside and just outside the configured ranges."""
    max_rdy = LIMITS["max_rdy_count"]
    for count in (0, 1, max_rdy, max_rdy + 1, 10**9):
        t = corpus.topic()
        corpus.add(f"limit/RDY/{count}", MAGIC, build("SUB", topic=t, channel="c"),
                   build("RDY", count=count), corpus.canary(t))
    for ms in (0, 1, 10000, 10001, 3600000):
        t = corpus.topic()
        corpus.add(f"limit/DPUB/{ms}", MAGIC,
                   build("DPUB", topic=t, defer_time=ms, body=b"d"), corpus.canary(t))
    for ms in (10001, 3600000):  # REQ clamps an over-long delay instead of refusing it
        t = corpus.topic()
        corpus.add(f"limit/REQ/{ms}", MAGIC, pub(t), build("SUB", topic=t, channel="c"),
                   build("RDY", count=1), b"REQ " + ID + b" %d\n" % ms, corpus.canary(t))


def separators_and_spelling(corpus: Corpus) -> None:
    for verb in g.COMMANDS:
        t = corpus.topic()  # one topic for the variants: none of them subscribes to it
        cmd = _commands(t).get(verb, b"")
        if ID in cmd or not cmd:
            continue
        grammar = g.COMMANDS[verb]
        prefix = (MAGIC, build("SUB", topic=t, channel="c")) if verb == "RDY" else (MAGIC,)
        for path in separators(cmd, grammar)[:1]:
            corpus.add(f"crlf/{verb}", *prefix, replace(cmd, grammar, path, b"\r\n"),
                       corpus.canary(t))
            corpus.add(f"no-newline/{verb}", *prefix, replace(cmd, grammar, path, b""),
                       corpus.canary(t))
            corpus.add(f"no-newline-then-close/{verb}", *prefix,
                       replace(cmd, grammar, path, b""))
        if b" " in cmd.split(b"\n")[0]:
            line_end = cmd.index(b"\n")
            corpus.add(f"double-space/{verb}", *prefix,
                       cmd.replace(b" ", b"  ", 1), corpus.canary(t))
            corpus.add(f"trailing-space/{verb}", *prefix,
                       cmd[:line_end] + b" " + cmd[line_end:], corpus.canary(t))
            corpus.add(f"extra-param/{verb}", *prefix,
                       cmd[:line_end] + b" extra" + cmd[line_end:], corpus.canary(t))
        else:
            corpus.add(f"extra-param/{verb}", *prefix,
                       cmd[:len(verb)] + b" extra" + cmd[len(verb):], corpus.canary(t))
        corpus.add(f"lowercase/{verb}", *prefix, verb.lower().encode() + cmd[len(verb):],
                   corpus.canary(t))
        corpus.add(f"verb-only/{verb}", *prefix, verb.encode() + b"\n", corpus.canary(t))
    for label, line in (("empty-line", b"\n"), ("unknown", b"HELLO\n"), ("space", b" \n"),
                        ("crlf-only", b"\r\n"), ("binary", b"\x00\x01\x02\n"),
                        ("pub-no-topic", b"PUB\n")):
        t = corpus.topic()
        corpus.add(f"line/{label}", MAGIC, line, corpus.canary(t))
    t = corpus.topic()
    corpus.add("line/long-no-newline", MAGIC, b"PUB " + b"t" * 5000)


def splits(corpus: Corpus) -> None:
    """Commands in pieces: at every field boundary, and one byte at a time."""
    for verb in ("IDENTIFY", "AUTH", "SUB", "PUB", "MPUB", "DPUB", "RDY", "CLS", "NOP",
                 "FIN", "REQ", "TOUCH"):
        t = corpus.topic()
        grammar = g.COMMANDS[verb]
        cmd = _commands(t)[verb if verb not in ("FIN", "REQ", "TOUCH") else f"{verb}-unknown"]
        prefix = ((MAGIC, build("SUB", topic=t, channel="c"))
                  if verb in ("RDY", "CLS", "FIN", "REQ", "TOUCH") else (MAGIC,))
        cuts = boundaries(cmd, grammar)
        for cut in cuts:
            corpus.add(f"split/{verb}/at-{cut}", *prefix, cmd[:cut], cmd[cut:],
                       corpus.canary(t), gap=0.01)
        pieces = [cmd[a:b] for a, b in zip([0, *cuts], [*cuts, len(cmd)], strict=True)]
        corpus.add(f"split/{verb}/every-field", *prefix, *pieces, corpus.canary(t), gap=0.005)
        corpus.add(f"split/{verb}/bytewise", *prefix, *(bytes([b]) for b in cmd),
                   corpus.canary(t), gap=0.002)
    # two commands glued into one write, and a command glued to the magic
    t = corpus.topic()
    corpus.add("glued/magic-pub", MAGIC + pub(t), corpus.canary(t))
    corpus.add("glued/pub-pub-pub", MAGIC, pub(corpus.topic()) * 3)
    t = corpus.topic()
    corpus.add("glued/sub-rdy-after-pub", MAGIC, pub(t, b"one") + pub(t, b"two"),
               build("SUB", topic=t, channel="c") + build("RDY", count=5), WAIT, WAIT)


def negotiation(corpus: Corpus) -> None:
    """IDENTIFY's features: values in and out of range, compression, TLS and AUTH."""
    cases = {
        "empty": {},
        "feature-negotiation": {"feature_negotiation": True},
        "unknown-field": {"feature_negotiation": True, "shoe_size": 42},
        "heartbeat-disabled": {"feature_negotiation": True, "heartbeat_interval": -1},
        "heartbeat-too-small": {"feature_negotiation": True, "heartbeat_interval": 999},
        "heartbeat-too-big": {"feature_negotiation": True, "heartbeat_interval": 60001},
        "heartbeat-wrong-type": {"feature_negotiation": True, "heartbeat_interval": "1000"},
        "output-buffer-disabled": {"feature_negotiation": True, "output_buffer_size": -1},
        "output-buffer-too-small": {"feature_negotiation": True, "output_buffer_size": 10},
        "output-buffer-too-big": {"feature_negotiation": True, "output_buffer_size": 65537},
        "output-timeout-disabled": {"feature_negotiation": True, "output_buffer_timeout": -1},
        "output-timeout-too-big": {"feature_negotiation": True, "output_buffer_timeout": 1001},
        "sample-rate-ok": {"feature_negotiation": True, "sample_rate": 50},
        "sample-rate-too-big": {"feature_negotiation": True, "sample_rate": 101},
        "sample-rate-negative": {"feature_negotiation": True, "sample_rate": -1},
        "msg-timeout-ok": {"feature_negotiation": True, "msg_timeout": 30000},
        "msg-timeout-too-big": {"feature_negotiation": True, "msg_timeout": 60001},
        "msg-timeout-too-small": {"feature_negotiation": True, "msg_timeout": 999},
        "user-agent": {"feature_negotiation": True, "user_agent": "probe/1.0"},
        "deflate-level-zero": {"feature_negotiation": True, "deflate": True,
                               "deflate_level": 0},
        "deflate-level-too-big": {"feature_negotiation": True, "deflate": True,
                                  "deflate_level": 7},
        "snappy-and-deflate": {"feature_negotiation": True, "snappy": True, "deflate": True},
        "tls-unavailable": {"feature_negotiation": True, "tls_v1": True},
        "no-negotiation-but-deflate": {"deflate": True},
    }
    for label, doc in cases.items():
        t = corpus.topic()
        corpus.add(f"identify/{label}", MAGIC, identify(doc), corpus.canary(t))
    for label, body in (("not-json", b"{nope"), ("json-array", b"[1,2]"),
                        ("json-string", b'"s"'), ("trailing", b'{"a":1} x')):
        t = corpus.topic()
        cmd = identify({"a": 1})
        raw = len(body).to_bytes(4, "big") + body
        corpus.add(f"identify/{label}", MAGIC, replace(cmd, g.IDENTIFY, "body", raw),
                   corpus.canary(t))
    t = corpus.topic()
    corpus.add("identify/twice", MAGIC, identify({}), identify({}), corpus.canary(t))
    # compression: everything after the negotiation is compressed by the replay
    for kind, extra in (("deflate", {"deflate": True, "deflate_level": 3}),
                        ("snappy", {"snappy": True})):
        doc = {"feature_negotiation": True, **extra}
        t = corpus.topic()
        corpus.add(f"compression/{kind}/pubsub", MAGIC, identify(doc), pub(t, b"squeezed"),
                   build("SUB", topic=t, channel="c"), build("RDY", count=1),
                   b"FIN " + ID + b"\n", corpus.canary(t))
        corpus.add(f"compression/{kind}/error-inside", MAGIC, identify(doc),
                   build("RDY", count=1), corpus.canary(t))
        t = corpus.topic()
        corpus.add(f"compression/{kind}/split", MAGIC, identify(doc), *(
            pub(t, b"piece")[i:i + 3] for i in range(0, len(pub(t, b"piece")), 3)),
            corpus.canary(t), gap=0.005)
    for kind in ("deflate", "snappy"):
        t = corpus.topic()
        corpus.add(f"compression/{kind}/disabled", MAGIC,
                   identify({"feature_negotiation": True, kind: True}), corpus.canary(t),
                   config="nocompress")
    # AUTH
    t = corpus.topic()
    corpus.add("auth/disabled", MAGIC, build("AUTH", secret=AUTH_SECRET), corpus.canary(t))
    for label, chunks in (
        ("good", (identify({"feature_negotiation": True}), build("AUTH", secret=AUTH_SECRET))),
        ("bad-secret", (identify({"feature_negotiation": True}),
                        build("AUTH", secret=b"wrong"))),
        ("before-identify", (build("AUTH", secret=AUTH_SECRET),)),
        ("pub-without-auth", (identify({"feature_negotiation": True}),)),
        ("sub-without-auth", (identify({}), b"SUB t c\n")),
        ("twice", (identify({"feature_negotiation": True}), build("AUTH", secret=AUTH_SECRET),
                   build("AUTH", secret=AUTH_SECRET))),
        ("empty-secret", (identify({}), b"AUTH\n\0\0\0\0")),
        # AUTH and the command it is for in one write: nsqd reads the command after
        # the auth service answered
        ("pipelined-pub", (identify({"feature_negotiation": True}),
                           build("AUTH", secret=AUTH_SECRET) + pub(corpus.topic()))),
        ("pipelined-sub-rdy", (identify({"feature_negotiation": True}),
                               build("AUTH", secret=AUTH_SECRET)
                               + build("SUB", topic=corpus.topic(), channel="c")
                               + build("RDY", count=1))),
        ("pipelined-bad-secret", (identify({"feature_negotiation": True}),
                                  build("AUTH", secret=b"wrong") + pub(corpus.topic()))),
        ("pipelined-twice", (identify({"feature_negotiation": True}),
                             build("AUTH", secret=AUTH_SECRET)
                             + build("AUTH", secret=AUTH_SECRET))),
    ):
        t = corpus.topic()
        corpus.add(f"auth/{label}", MAGIC, *chunks, corpus.canary(t), config="auth")
    # TLS
    tls = identify({"feature_negotiation": True, "tls_v1": True})
    corpus.add("tls/upgrade", MAGIC, tls, corpus.canary(corpus.topic()), config="tls")
    corpus.add("tls/upgrade-then-deflate", MAGIC,
               identify({"feature_negotiation": True, "tls_v1": True, "deflate": True}),
               corpus.canary(corpus.topic()), config="tls")
    corpus.add("tls/not-asked", MAGIC, identify({"feature_negotiation": True}),
               corpus.canary(corpus.topic()), config="tls")
    for label, chunks in (
        ("pub-before-tls", (pub(corpus.topic()),)),
        ("identify-without-tls", (identify({"feature_negotiation": True}),
                                  pub(corpus.topic()))),
        ("upgrade", (tls, pub(corpus.topic()))),
        ("sub-before-tls", (build("SUB", topic=corpus.topic(), channel="c"),)),
        ("nop-before-tls", (build("NOP"),)),
    ):
        t = corpus.topic()
        corpus.add(f"tls-required/{label}", MAGIC, *chunks, corpus.canary(t),
                   config="tls-required")


def orders(corpus: Corpus) -> None:
    """Commands in an order the protocol does not expect."""
    for label, steps in (
        ("rdy-before-sub", lambda t: (build("RDY", count=1),)),
        ("cls-before-sub", lambda t: (build("CLS"),)),
        ("cls-twice", lambda t: (build("SUB", topic=t, channel="c"), build("CLS"),
                                 build("CLS"))),
        ("sub-twice", lambda t: (build("SUB", topic=t, channel="c"),
                                 build("SUB", topic=t, channel="c"))),
        ("rdy-after-cls", lambda t: (build("SUB", topic=t, channel="c"), build("CLS"),
                                     build("RDY", count=1))),
        ("pub-after-cls", lambda t: (build("SUB", topic=t, channel="c"), build("CLS"),
                                     pub(t))),
        ("identify-after-sub", lambda t: (build("SUB", topic=t, channel="c"),
                                          identify({}))),
        ("fin-twice", lambda t: (pub(t), build("SUB", topic=t, channel="c"),
                                 build("RDY", count=1), b"FIN " + ID + b"\n",
                                 b"FIN " + ID + b"\n")),
        ("touch-then-fin", lambda t: (pub(t), build("SUB", topic=t, channel="c"),
                                      build("RDY", count=1), b"TOUCH " + ID + b"\n",
                                      b"FIN " + ID + b"\n")),
        ("req-then-redelivered", lambda t: (pub(t, b"again"), build("SUB", topic=t, channel="c"),
                                            build("RDY", count=1), WAIT, b"REQ " + ID + b" 0\n",
                                            WAIT)),
        ("rdy-zero-holds", lambda t: (pub(t), build("SUB", topic=t, channel="c"),
                                      build("RDY", count=0))),
        ("mpub-then-rdy-2", lambda t: (build("MPUB", topic=t, body={"messages": [b"a", b"b",
                                                                                  b"c"]}),
                                       build("SUB", topic=t, channel="c"),
                                       build("RDY", count=2), WAIT, WAIT)),
        ("ephemeral-channel", lambda t: (pub(t), build("SUB", topic=t, channel="c#ephemeral"),
                                         build("RDY", count=1), WAIT)),
        ("ephemeral-topic", lambda t: (pub(t + "#ephemeral"),
                                       build("SUB", topic=t + "#ephemeral", channel="c"),
                                       build("RDY", count=1), WAIT)),
    ):
        t = corpus.topic()
        corpus.add(f"order/{label}", MAGIC, *steps(t), corpus.canary(t))
    requeue_orders(corpus)


PUBLISH_WAYS = {
    "pub": lambda t, bodies: tuple(pub(t, b) for b in bodies),
    "mpub": lambda t, bodies: (build("MPUB", topic=t, body={"messages": list(bodies)}),),
}
"""How the queued messages got there: one PUB each, or one MPUB."""


def requeue_orders(corpus: Corpus) -> None:
    """Where a message put back into the queue goes, against every shape of what is
    already queued: 1 to 3 messages, published one by one or at once, before the
    channel exists (its topic's backlog waits for it) or after (each is copied to it).
    The probe REQs the first message with timeout 0; with RDY 1, the one delivered next
    is the one at the head of the queue after the requeue."""
    for n in (1, 2, 3):
        bodies = [b"m%d" % i for i in range(n)]
        for way, publish in PUBLISH_WAYS.items():
            for when in ("topic-first", "channel-first"):
                t = corpus.topic()
                sub = build("SUB", topic=t, channel="c")
                before = (*publish(t, bodies), sub) if when == "topic-first" else (
                    sub, *publish(t, bodies))
                corpus.add(f"order/requeue-0/{n}-queued/{way}/{when}", MAGIC, *before,
                           build("RDY", count=1), WAIT, b"REQ " + ID + b" 0\n", WAIT,
                           corpus.canary(t))


def corpus() -> list[Probe]:
    """All probes, named uniquely."""
    c = Corpus()
    for part in (states_by_commands, malformed_fields, bad_sizes, limits,
                 separators_and_spelling, splits, negotiation, orders):
        part(c)
    names = [p.name for p in c.probes]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"probe names are not unique: {sorted(duplicates)}")
    return c.probes


def describe_corpus(probes: list[Probe]) -> str:
    counts: dict[str, int] = {}
    for p in probes:
        counts[p.name.split("/")[0]] = counts.get(p.name.split("/")[0], 0) + 1
    return json.dumps(counts)
