"""The analyses give the same tables in-process (DuckDB over all frames) and in the
pipeline (DuckDB per partition of brokers inside Spark tasks, Spark SQL combining them),
and every definition gives them on Spark SQL alone too -- on every sample capture in
data/, read whole and cut into rotated files."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from nsqviz.pipeline.definitions import tables

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

    from nsqviz.analysis.capture import frames_of

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
    return [tuple(_canon(r[c]) for c in cols) for r in df.to_dict("records")]


def _same(local: dict[str, Any], other: dict[str, Any], engine: str,
          names: list[str] | None = None) -> None:
    """Every table (of ``names``, else of :func:`tables`) has the same rows, compared as
    multisets of canonical cells (equal numbers compare equal whatever their type: pandas
    gives a whole number as a float in a column with nulls)."""
    for name in tables() if names is None else names:
        mine = local[name].to_pandas()
        theirs = other[name].toPandas()
        assert sorted(mine.columns) == sorted(theirs.columns), name
        a, b = Counter(_rows(mine)), Counter(_rows(theirs))
        assert a == b, (f"{name}: only in-process {list((a - b).elements())[:2]}, "
                        f"only {engine} {list((b - a).elements())[:2]}")
        assert len(mine) > 0, name


@pytest.fixture(scope="module")
def in_process(all_frames):
    """Every table in-process (DuckDB over all the frames at once): what both engines'
    tables are held to."""
    from nsqviz.pipeline.on_duckdb import analyse

    return analyse(all_frames)


@pytest.fixture(scope="module")
def frames_table(all_frames, tmp_path_factory) -> str:
    """The frames as a Parquet table, cut in files as a pipeline run writes it (the
    analyses' tasks read each connection's rows from the files that hold them)."""
    import pyarrow.parquet as pq

    path = tmp_path_factory.mktemp("frames")
    for k, lo in enumerate(range(0, all_frames.num_rows, 50_000)):
        pq.write_table(all_frames.slice(lo, 50_000), str(path / f"part-{k:05d}.parquet"))
    return str(path)


@pytest.fixture(scope="module")
def spark_frames(spark, frames_table):
    """The frames on Spark, read once: every view below reads them."""
    frames = spark.read.parquet(frames_table).drop("fields").cache()
    frames.count()
    yield frames
    frames.unpersist()


def test_the_pipeline_gives_the_in_process_tables(spark, in_process, frames_table, tmp_path):
    from nsqviz.pipeline import analyses

    assert len(SAMPLES) >= 20
    analyses.write(spark, frames_table, str(tmp_path))
    written = {name: spark.read.parquet(str(tmp_path / name)) for name in tables()}
    _same(in_process, written, "pipeline")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(tables())


def test_every_view_on_spark_sql_alone_gives_the_same_tables(in_process, spark_frames):
    """The analyses stay in Spark SQL's dialect, every one of them, not only the ones
    Spark SQL runs in the pipeline (those that combine brokers). The doctor's rule views
    are left to the test above (the pipeline runs them on DuckDB in its tasks, the
    findings across brokers on Spark): planned one after another on Spark SQL alone,
    their chains of joins outgrow this session's 2 GB driver (Java heap space)."""
    from nsqviz.doctor.views import views as rule_views
    from nsqviz.pipeline.definitions import definitions, rules, views
    from nsqviz.sql import python_rows

    doctor = {v.name for v in rule_views(rules().values(), "unused:words")}

    spark = spark_frames.sparkSession
    spark_frames.createOrReplaceTempView("frames")
    on_spark = {}
    for name, text in views().items():
        if name in doctor:
            continue
        df = spark.sql(text)
        view = definitions()[name]
        if view.python:  # its SQL on Spark, then its Python over all of that SQL's rows
            df = spark.createDataFrame(python_rows(view, df.toArrow()))
        on_spark[name] = df.cache()
        on_spark[name].count()  # computed now: a later view reads these rows, not the
        # whole chain of views before it again (Spark plans such a chain in minutes)
        on_spark[name].createOrReplaceTempView(name)
    try:
        _same(in_process, on_spark, "Spark SQL",
              [name for name in tables() if name not in doctor])
    finally:
        for df in on_spark.values():
            df.unpersist()
