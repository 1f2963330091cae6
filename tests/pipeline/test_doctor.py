"""``nsqviz pipeline`` writes the findings ``nsqviz doctor`` gives, word for word, on the
same captures cut into rotated files: rules that combine servers, run by Spark SQL over
the per-broker tasks' rows -- one client's connections to two nsqds (nsq.rdy-hoarding), a
TubeMQ consumer's report to the Master beside the Brokers' refusals (tubemq.rebalance,
tubemq.rpc-error), an nsqd's publishes beside nsqlookupd's answers (lookupd.registration)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark]

DATA = Path(__file__).resolve().parents[2] / "data"


def _cut(src: Path, out: Path, parts: int) -> list[str]:
    from nsqviz.capture.files import Record, read_capture
    from nsqviz.capture.writer import PcapWriter

    records = [r for r in read_capture(str(src)) if isinstance(r, Record)]
    files = [str(out / f"{src.stem}.pcap{k or ''}") for k in range(parts)]
    step = len(records) // parts + 1
    for k, path in enumerate(files):
        with PcapWriter(path, linktype=records[0].linktype) as w:
            for r in records[k * step:(k + 1) * step]:
                w.write(r.ts, r.data, orig_len=r.orig_len)
    return files


def _canon(value: Any) -> Any:
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        value = value.tolist()
    if isinstance(value, float):
        return None if math.isnan(value) else float(f"{value:.12g}")
    if isinstance(value, dict):
        return tuple(sorted((k, _canon(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_canon(v) for v in value)
    return value


@pytest.mark.parametrize(("name", "found", "status"), [
    ("nsq-rdy-hoarding.pcap", {"nsq.rdy-hoarding", "nsq.never-ready", "nsq.guide"}, 0),
    ("tubemq-partition-twice.pcap", {"tubemq.rebalance", "tubemq.rpc-error"}, 0),
    ("lookupd-registration.pcap", {"lookupd.registration"}, 1),  # errors found: exit 1
])
def test_the_pipeline_writes_the_doctors_findings(spark, tmp_path, capsys, name, found,
                                                  status):
    import pyarrow.parquet as pq

    from nsqviz.cli import main
    from nsqviz.pipeline.job import run

    files = _cut(DATA / "doctor" / name, tmp_path, 3)
    run(spark, files, str(tmp_path / "out"), count=False)
    written = pq.read_table(tmp_path / "out" / "findings").to_pylist()
    assert main(["doctor", "--json", *files]) == status
    doctor = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {f["rule"] for f in doctor} >= found
    assert len({p for f in doctor for p in f["packet_files"]}) == 3  # three files named
    keys = ("rule", "severity", "summary", "explanation", "change", "connection",
            "packets", "packet_files", "thresholds")
    assert sorted(_canon([r[k] for k in keys]) for r in written) == \
        sorted(_canon([f[k] for k in keys]) for f in doctor)
    item = ("ts", "file", "packet", "msg_id", "what")
    assert sorted(_canon([[{k: e[k] for k in item} for e in r["evidence"]],
                          json.loads(r["figures"])]) for r in written) == \
        sorted(_canon([[{k: e[k] for k in item} for e in f["evidence"]], f["figures"]])
               for f in doctor)
