"""The fuzz targets under hypothesis, with the small budget ``make test`` allows
(``make fuzz`` runs them for long under atheris; without atheris it runs this file with
``NSQVIZ_FUZZ_EXAMPLES`` raised): random bytes, and real or valid
inputs mutated -- flipped, cut, spliced, grown. Every input that once failed a target
(``regressions/``) is replayed first."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsqviz.lookupd import grammar as lookupd_grammar
from nsqviz.nsq import events as ev
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.server_connection import ServerConnection
from nsqviz.tubemq import grammar as tube_grammar
from tests.differential.test_http_framing import CASES as HTTP_CASES
from tests.fuzz.targets import LOOKUPD_INFO, TARGETS, capture_seeds, filter_seeds, regressions


def _nsq_seeds() -> list[bytes]:
    """Valid NSQ bytes of both directions, built by the codec."""
    c, s = ClientConnection(), ServerConnection()
    cmds = [ev.Magic(), ev.Identify({"client_id": "f", "heartbeat_interval": 1000}),
            ev.Sub("topic", "channel"), ev.Rdy(10), ev.Pub("t", b"body"),
            ev.Mpub("t", (b"a", b"bb")), ev.Dpub("t", 100, b"x"),
            ev.Fin(b"0123456789abcdef"), ev.Req(b"0123456789abcdef", 10),
            ev.Touch(b"0123456789abcdef"), ev.Nop(), ev.Cls(), ev.Auth(b"secret")]
    out = [c.send(cmd, check=False) for cmd in cmds]
    frames = [ev.Response(b"OK"), ev.Error(b"E_INVALID bad"),
              ev.Message(1_700_000_000_000_000_000, 1, b"0123456789abcdef", b"hello")]
    out += [s.send(f, check=False) for f in frames]
    return out


def _lookupd_seeds() -> list[bytes]:
    """Valid ``"  V1"`` bytes of both directions, built by the grammar."""
    body = json.dumps(LOOKUPD_INFO).encode()
    commands = [lookupd_grammar.MAGIC_V1,
                b"IDENTIFY\n" + len(body).to_bytes(4, "big") + body,
                b"REGISTER t c\n", b"UNREGISTER t\n", b"PING\n"]
    answers = [lookupd_grammar.Response.build(a) for a in
               (b"OK", b'{"tcp_port":4160,"http_port":4161,"version":"1.3.0",'
                       b'"broadcast_address":"l","hostname":"l"}', b"E_INVALID x")]
    return commands + answers


def _http_seeds() -> list[bytes]:
    """Requests of the HTTP framing cases (good and bad), aimed at the target's routes."""
    return [b"".join(parts).replace(b"/pub?topic=framing", b"/post").replace(b"/ping", b"/get")
            for parts in HTTP_CASES.values() if sum(map(len, parts)) < 4096]


def _json_seeds() -> list[bytes]:
    return [json.dumps(LOOKUPD_INFO).encode(), b'{"a":[1,2.5e3,{"b":null}],"c":"\\u00e9"}',
            b"[" * 300 + b"]" * 300, b'{"d":' + b"[" * 300 + b"]" * 300 + b"}"]


def _tubemq_seeds() -> list[bytes]:
    return [tube_grammar.frame_bytes(7, bytes(range(40))),
            tube_grammar.frame_bytes(1, b"\x08\x01\x10\x02" * 3)]


def _mutate(args) -> bytes:
    data, edits = args
    data = bytearray(data)
    for pos, op, blob in edits:
        p = pos % (len(data) + 1)
        if op == 0 and data:  # flip bits
            data[p % len(data)] ^= blob[0] if blob else 0xFF
        elif op == 1:  # cut a run
            del data[p : p + 1 + (blob[0] if blob else 7) % 64]
        elif op == 2:  # insert bytes
            data[p:p] = blob
        elif op == 3:  # end early
            del data[p:]
        else:  # a copy of a part elsewhere (sticky / repeated frames)
            data[p:p] = data[: len(blob) * 8]
    return bytes(data)


_NO_PREFIX = st.just(b"")


def mutated(seeds: list[bytes], prefix: st.SearchStrategy[bytes] = _NO_PREFIX):
    edits = st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 4),
                               st.binary(max_size=8)), max_size=8)
    return st.tuples(prefix, st.tuples(st.sampled_from(seeds), edits).map(_mutate)).map(
        lambda t: t[0] + t[1])


def _joined(seeds: list[bytes]):
    return st.lists(st.sampled_from(seeds), min_size=1, max_size=12).map(b"".join)


BUDGET = settings(max_examples=int(os.environ.get("NSQVIZ_FUZZ_EXAMPLES", "600")),
                  deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_role_prefix = st.binary(min_size=2, max_size=2)

STRATEGIES = {
    "nsq_grammar": st.one_of(st.binary(max_size=300), mutated(_nsq_seeds())),
    "nsq_codec": st.one_of(st.binary(max_size=600),
                           mutated(_nsq_seeds(), _role_prefix),
                           st.tuples(_role_prefix, _joined(_nsq_seeds())).map(
                               lambda t: t[0] + t[1])),
    "tubemq_grammar": st.one_of(st.binary(max_size=300), mutated(_tubemq_seeds())),
    "tubemq_codec": st.one_of(st.binary(max_size=600), mutated(_tubemq_seeds(), _role_prefix)),
    "capture": mutated(capture_seeds()),
    "json_object": st.one_of(st.binary(max_size=300), mutated(_json_seeds())),
    "lookupd_grammar": st.one_of(st.binary(max_size=300), mutated(_lookupd_seeds())),
    "lookupd_codec": st.one_of(st.binary(max_size=600),
                               mutated(_lookupd_seeds(), _role_prefix),
                               st.tuples(_role_prefix, _joined(_lookupd_seeds())).map(
                                   lambda t: t[0] + t[1])),
    "display_filter": st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode),
                                mutated(filter_seeds()),
                                st.lists(st.sampled_from(filter_seeds()), min_size=1,
                                         max_size=4).map(b" and ".join)),
    "http": st.one_of(st.binary(max_size=600), mutated(_http_seeds(), st.binary(min_size=1,
                                                                               max_size=1)),
                      st.tuples(st.binary(min_size=1, max_size=1),
                                _joined(_http_seeds())).map(lambda t: t[0] + t[1])),
}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_regressions_stay_fixed(name):
    for data in regressions(name):
        TARGETS[name](data)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_fuzz_target(name):
    target = TARGETS[name]

    @BUDGET
    @given(data=STRATEGIES[name])
    def run(data):
        target(data)

    run()
