"""Proof by tshark for the HTTP APIs: the dissector ``nsqviz wireshark`` writes (Wireshark's
own ``http`` given nsqd's and nsqlookupd's ports), run by the real tshark over the real
captures in data/http/, shows the same messages on the same packets as ``nsqviz decode``,
and every ``http.*`` field nsqviz fills (:data:`nsqviz.http.fields.FIELDS`:
``http.request.method``, ``http.request.uri``, ``http.response.code``,
``http.content_length`` and the rest) has the same values in both -- so ``-Y`` selects
the same messages (tests/filters checks the packets, filter by filter).

Differences allowed, each checked to still be one (:data:`KNOWN`): what Wireshark does
not judge as nsqd's Go server does, and its numbering of answers to pipelined requests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nsqviz.capture.decode import decode_capture
from nsqviz.cli import main as nsqviz_main
from nsqviz.http.fields import FIELDS
from nsqviz.http.protocol import HTTP
from nsqviz.wireshark.tshark import TsharkPdu, find_tshark, tshark_pdus

pytestmark = pytest.mark.skipif(
    find_tshark() is None, reason="tshark is not installed (scripts/sysdeps.sh installs it)"
)

DATA = Path(__file__).resolve().parents[2] / "data" / "http"
SAMPLES = sorted(p.name for p in DATA.glob("*.pcap"))
NAMES = {f.abbrev for f in FIELDS}

KNOWN: dict[str, dict[int, str]] = {
    "edge-cases-real.pcap": {
        40: "the answer to the first of two requests pipelined in one segment: Wireshark "
            "numbers it response 2 (it counts the segment's second request as answered "
            "first)",
        42: "the answer to the second pipelined request: Wireshark numbers it 3 and finds "
            "no request_in for it",
        100: "'GET /ping HTTP/1.1 extra': Go (and h11) refuse the request line, nsqviz "
             "shows an error record; Wireshark shows a request of version 'HTTP/1.1 extra'",
        102: "nsqd's 400 to it: no request to answer in nsqviz (no response_for.uri); "
             "its body runs to the close, so Wireshark's PDU ends with the FIN",
    },
}
"""Packets (the first of a message's) where the two are known to differ, and why."""


@pytest.fixture(scope="module")
def lua_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wireshark")
    assert nsqviz_main(["wireshark", "--out", str(folder), "--protocol", "http"]) == 0
    assert (folder / "http.lua").exists()
    return folder


def _value(v: Any) -> str:
    return str(int(v)) if isinstance(v, bool) else str(v)


def _ours(path: Path) -> dict[tuple, dict[str, list[str]]]:
    """Each HTTP message nsqviz decodes, by (sender -> receiver, first packet, its place
    among the messages starting in that packet): its filter values."""
    out: dict[tuple, dict[str, list[str]]] = {}
    for r in decode_capture(path):
        if r.protocol != "http" or r.kind not in ("command", "frame"):
            continue
        client, server = r.flow.split("->")
        pair = r.flow if r.dir == "c2s" else f"{server}->{client}"
        key = _key(out, pair, r.packets[0])
        out[key] = {k: [_value(v) for v in vs] for k, vs in HTTP.filter_values(r).items()}
    return out


def _theirs(pdus: list[TsharkPdu]) -> dict[tuple, dict[str, list[str]]]:
    out: dict[tuple, dict[str, list[str]]] = {}
    for p in pdus:
        key = _key(out, f"{p.src}->{p.dst}", p.packets[0])
        out[key] = {k: [_value(v) for v in vs] for k, vs in p.fields.items() if k in NAMES}
    return out


def _key(seen: dict[tuple, Any], pair: str, packet: int) -> tuple:
    n = sum(1 for k in seen if k[:2] == (pair, packet))
    return pair, packet, n


@pytest.mark.parametrize("sample", SAMPLES)
def test_tshark_shows_what_nsqviz_decodes_with_the_same_fields(sample, lua_dir):
    ours = _ours(DATA / sample)
    theirs = _theirs(tshark_pdus(DATA / sample, lua_dir, protocol="http"))
    known = KNOWN.get(sample, {})
    assert ours and {k[1] for k in ours} - set(known) == {k[1] for k in theirs} - set(known)
    differ = set()
    for key in sorted(set(ours) | set(theirs)):
        if ours.get(key) != theirs.get(key):
            differ.add(key[1])
            assert key[1] in known, (key, ours.get(key), theirs.get(key))
    assert differ == set(known), f"no longer different: {sorted(set(known) - differ)}"


def test_the_compared_fields_are_there():
    """The fields the issue names are among those compared, and the samples hold each."""
    seen: set[str] = set()
    for sample in SAMPLES:
        for values in _ours(DATA / sample).values():
            seen |= set(values)
    for name in ("http.request.method", "http.request.uri", "http.response.code",
                 "http.content_length", "http.request_in", "http.request.uri.query.parameter"):
        assert name in NAMES and name in seen, name
