"""The analyses' two engines -- DuckDB in-process, Spark SQL on the pipeline -- give the
same tables, on every sample capture in data/, read whole and cut into rotated files."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from nsqviz.pipeline.definitions import TABLES

pytestmark = [pytest.mark.spark]

DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLES = sorted(p for pattern in ("*.pcap", "*.pcapng", "*/*.pcap", "*/*/*.pcap")
                 for p in DATA.glob(pattern))


def _rotated(src: Path, out: Path) -> list[str]:
    """``src`` cut into three files of one capture set, as ``tcpdump -C`` would."""
    from nsqviz.capture.files import Record, read_capture
    from nsqviz.capture.writer import PcapWriter

    records = [r for r in read_capture(str(src)) if isinstance(r, Record)]
    files = [str(out / f"{src.stem}.pcap{k or ''}") for k in range(3)]
    cuts = [0, len(records) // 3, 2 * len(records) // 3, len(records)]
    for path, lo, hi in zip(files, cuts, cuts[1:], strict=False):
        with PcapWriter(path, linktype=records[0].linktype) as w:
            for r in records[lo:hi]:
                w.write(r.ts, r.data, orig_len=r.orig_len)
    return files


def _apart(frames: Any, label: str) -> Any:
    """``frames`` with its capture's label in every flow and connection id, so that many
    captures' frames are one table whose brokers and connections never meet."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for column in ("flow", "conn_id"):
        i = frames.schema.get_field_index(column)
        frames = frames.set_column(i, column, pc.binary_join_element_wise(
            pa.scalar(label + "/"), pc.replace_substring(frames[column], "->", f"->{label}/"),
            ""))
    return frames


@pytest.fixture(scope="module")
def all_frames(tmp_path_factory):
    """Every sample's frames, single and rotated, as one Arrow table."""
    import pyarrow as pa

    from nsqviz.analysis.engine import frames_of

    cut = tmp_path_factory.mktemp("rotated")
    parts = []
    for src in SAMPLES:
        name = str(src.relative_to(DATA))
        parts.append(_apart(frames_of([str(src)]), name))
        (cut / name).mkdir(parents=True)
        parts.append(_apart(frames_of(_rotated(src, cut / name)), name + "~rotated"))
    return pa.concat_tables(parts)


def _canon(value: Any) -> Any:
    """A cell as comparable Python: floats to 12 significant digits (the engines may add
    in another order), NaN as None, structs as sorted items, lists as tuples."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, float):
        return None if math.isnan(value) else float(f"{value:.12g}")
    if isinstance(value, dict):
        return tuple(sorted((k, _canon(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_canon(v) for v in value)
    return value


def _rows(df: Any) -> list[tuple[Any, ...]]:
    cols = sorted(df.columns)
    return sorted((tuple(_canon(r[c]) for c in cols) for r in df.to_dict("records")),
                  key=repr)


def test_duckdb_and_spark_give_identical_tables(spark, all_frames, tmp_path):
    from nsqviz.analysis.engine import analyse
    from nsqviz.pipeline import analyses

    assert len(SAMPLES) >= 20
    local = analyse(all_frames)
    import pyarrow.parquet as pq

    pq.write_table(all_frames, str(tmp_path / "frames.parquet"))
    frames = spark.read.parquet(str(tmp_path / "frames.parquet")).drop("fields")
    on_spark = analyses.tables(frames)
    try:
        for name in TABLES:
            mine = local[name].to_pandas()
            theirs = on_spark[name].toPandas()
            assert sorted(mine.columns) == sorted(theirs.columns), name
            a, b = _rows(mine), _rows(theirs)
            cols = sorted(mine.columns)
            only = [(c, x, y) for r, q in zip([r for r in a if r not in b],
                                               [q for q in b if q not in a], strict=False)
                    for c, x, y in zip(cols, r, q, strict=True) if x != y]
            assert a == b, f"{name}: {only[:3]} (column, DuckDB, Spark)"
            assert len(mine) > 0, name
    finally:
        analyses.release(frames)
