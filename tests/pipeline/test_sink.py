"""The decoding tasks' own Parquet files: whole or absent, a retry replaces its attempt."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

from nsqviz.pipeline.sink import PartWriter, clear, done

SCHEMA = pa.schema([("n", pa.int64())])


def _batch(*values):
    return pa.RecordBatch.from_arrays([pa.array(values, pa.int64())], schema=SCHEMA)


def test_a_part_appears_whole_under_its_name_and_says_what_it_holds(tmp_path):
    out = str(tmp_path / "frames")
    clear(out)
    w = PartWriter(out, "part-1-00003", SCHEMA)
    w.write(_batch(1, 2))
    w.write(_batch(3))
    assert os.listdir(out) != ["part-1-00003.parquet"]  # only the hidden temporary so far
    summary = w.close()
    assert summary.to_pylist() == [{"part": "part-1-00003.parquet", "rows": 3}]
    done(out)
    assert sorted(os.listdir(out)) == ["_SUCCESS", "part-1-00003.parquet"]
    assert pq.read_table(out).column("n").to_pylist() == [1, 2, 3]


def test_a_retried_task_replaces_its_failed_attempt(tmp_path):
    out = str(tmp_path / "frames")
    clear(out)
    failed = PartWriter(out, "part-2-00000", SCHEMA)
    failed.write(_batch(9))
    failed.abort()  # what the source does when decoding raises
    assert os.listdir(out) == []
    for attempt in range(2):  # e.g. a speculative copy finishing too
        w = PartWriter(out, "part-2-00000", SCHEMA)
        w.write(_batch(attempt))
        w.close()
    assert os.listdir(out) == ["part-2-00000.parquet"]
    assert pq.read_table(out).column("n").to_pylist() == [1]


def test_clear_empties_what_a_previous_run_left(tmp_path):
    out = tmp_path / "frames"
    out.mkdir()
    (out / "part-1-00000.parquet").write_bytes(b"old")
    clear(str(out))
    assert os.listdir(out) == []
    clear("file://" + str(tmp_path / "new" / "frames"))
    assert (tmp_path / "new" / "frames").is_dir()
