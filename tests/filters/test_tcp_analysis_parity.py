"""Proof by tshark: ``nsqviz decode -Y`` with a ``tcp.analysis`` field selects the
packets ``tshark -Y`` selects with it, in every connection nsqviz decodes (it shows the
TCP layer's records for those only, as it shows their FINs and RSTs), on every sample
capture and on a written one that holds every kind."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from nsqviz import filters
from nsqviz.capture.decode import CaptureDecoder
from nsqviz.filters.values import packet_key
from tests._tcpcases import write_every_case

pytestmark = pytest.mark.skipif(
    shutil.which("tshark") is None,
    reason="tshark is not installed (scripts/sysdeps.sh installs it)",
)

DATA = Path(__file__).resolve().parents[2] / "data"
CAPTURES = sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*")
                  if p.suffix in (".pcap", ".pcapng"))
FIELDS = ["tcp.analysis.zero_window", "tcp.analysis.retransmission",
          "tcp.analysis.fast_retransmission", "tcp.analysis.spurious_retransmission",
          "tcp.analysis.out_of_order"]


def tshark_selects(path: Path, streams: set[int]) -> list[set[int]]:
    """The packets of ``streams`` tshark flags with each field, in one pass."""
    proc = subprocess.run(
        ["tshark", "-r", str(path), "-Y", " or ".join(FIELDS), "-T", "fields", "-E",
         "separator=,", "-E", "occurrence=f", "-e", "tcp.stream", "-e", "frame.number",
         *(x for f in FIELDS for x in ("-e", f))],
        capture_output=True, text=True, timeout=120, check=True)
    out: list[set[int]] = [set() for _ in FIELDS]
    for line in proc.stdout.splitlines():
        stream, number, *flags = line.split(",")
        if int(stream) in streams:
            for found, flag in zip(out, flags, strict=True):
                if flag:
                    found.add(int(number))
    return out


def assert_same(path: Path) -> int:
    decoder = CaptureDecoder(tcp_records=True)
    records = list(decoder.decode([str(path)]))
    decoded = {s.flow.id for s in decoder.stats if s.protocol}
    theirs = tshark_selects(path, decoded)
    for field, wanted in zip(FIELDS, theirs, strict=True):
        chosen = filters.compile(field).select(records, lambda: decoder.first_ts)
        got = {key[1] for r in chosen if (key := packet_key(r)) is not None}
        assert got == wanted, f"{path.name}: {field}: only nsqviz {sorted(got - wanted)}," \
                              f" only tshark {sorted(wanted - got)}"
    return sum(map(len, theirs))


@pytest.mark.parametrize("capture", CAPTURES)
def test_tcp_analysis_filters_select_what_tshark_selects(capture):
    assert_same(DATA / capture)


def test_every_kind_selects_alike(tmp_path):
    path = tmp_path / "every-case.pcap"
    write_every_case(path)
    assert assert_same(path) >= 6


def test_a_flag_is_only_tested_for_presence():
    for expr in ("tcp.analysis.zero_window == 1", "tcp.analysis.retransmission > 0",
                 "tcp.analysis.out_of_order == tcp.analysis.retransmission"):
        with pytest.raises(filters.FilterError, match="presence"):
            filters.compile(expr)
