"""The sample captures recorded against the real nsqd (``data/nsqd/``) beside the ones
recorded against the embedded broker (``data/``): the same clients and scenarios, so the
decoder must read both the same -- connection by connection, what the server sent in the
same order and what the client sent the same commands -- apart from nsqd's own values.

Masked as nsqd's own: message ids and timestamps, the version in an IDENTIFY response;
masked as timing: the packet an answer names as its command's (``response_to``).
Left out as timing: heartbeats and the NOPs that answer them (their number follows how
long a run took). The client's commands are compared as a multiset: pynsq FINs and
TOUCHes when its timers fire, relative to when the server's messages came.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from nsqviz.capture.decode import CaptureDecoder

DATA = Path(__file__).resolve().parents[2] / "data"
PAIRS = sorted(p.name for p in (DATA / "nsqd").glob("*.pcap*"))
HEARTBEAT = b"_heartbeat_".hex()


def _connections(path: Path) -> dict[str, dict[str, list[str]]]:
    """``{connection: {"c2s": rows, "s2c": rows}}``; a connection is named after its
    first command past the handshake (``SUB``, ``PUB`` ...), numbered when repeated."""
    decoder = CaptureDecoder()
    flows: dict = {}
    for r in decoder.decode([path]):
        fields = {k: "<masked>" if k in ("id", "timestamp", "response_to") else v
                  for k, v in r.fields.items()}
        data = fields.get("data")
        if r.name == "FrameTypeResponse" and data == HEARTBEAT or r.name == "NOP":
            continue
        if isinstance(data, dict) and "version" in data:
            fields["data"] = {**data, "version": "<masked>"}
        row = f"{r.kind} {r.name} {json.dumps(fields, sort_keys=True, default=str)}"
        flows.setdefault(r.flow, {"c2s": [], "s2c": []})[r.dir].append(row)
    named: dict = {}
    for rows in flows.values():
        first = next((row.split()[1] for row in rows["c2s"]
                      if row.split()[1] not in ("MAGIC", "IDENTIFY")), "none")
        n = sum(name.startswith(first) for name in named)
        named[f"{first}#{n}"] = rows
    return named


def test_both_servers_have_samples_and_a_readme_line():
    assert len(PAIRS) >= 5
    readme = (DATA / "README.md").read_text()
    for name in PAIRS:
        assert (DATA / name).exists(), f"data/nsqd/{name} has no twin in data/"
        assert f"`nsqd/{name}`" in readme


@pytest.mark.parametrize("name", PAIRS)
def test_decoded_alike_apart_from_nsqds_own_values(name):
    ours, nsqd = _connections(DATA / name), _connections(DATA / "nsqd" / name)
    assert set(ours) == set(nsqd)
    for conn in ours:
        assert ours[conn]["s2c"] == nsqd[conn]["s2c"], f"{conn}: server frames differ"
        assert Counter(ours[conn]["c2s"]) == Counter(nsqd[conn]["c2s"]), f"{conn}: commands"
