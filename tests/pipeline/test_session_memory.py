"""A DuckDB session's memory is bounded by a multiple of its frames table (at least a
floor), and what outgrows it spills to a directory of the session's own, gone when the
session closes."""

from __future__ import annotations

import os
from pathlib import Path

from nsqviz.analysis.capture import frames_of
from nsqviz.pipeline.on_duckdb import MEMORY_FLOOR, MEMORY_PER_FRAMES, Session, memory_limit

DATA = Path(__file__).resolve().parents[2] / "data"


class _Sized:
    def __init__(self, size: int):
        self.size = size

    def get_total_buffer_size(self) -> int:
        return self.size


def test_the_limit_is_the_frames_tables_size_at_least_the_floor():
    assert memory_limit(_Sized(0)) == MEMORY_FLOOR
    assert memory_limit(_Sized(3 * MEMORY_FLOOR)) == 3 * MEMORY_PER_FRAMES * MEMORY_FLOOR


def test_a_session_sets_its_limit_and_removes_its_spill_directory():
    frames = frames_of([str(DATA / "guide-pynsq.pcap")], fields=False)
    session = Session(frames)
    limit, spill = session._con.sql(  # the settings the session made
        "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
    ).fetchall()[0]
    assert limit == f"{memory_limit(frames) / 2**20:.1f} MiB"
    assert os.path.isdir(spill)
    assert session.table("connections").num_rows
    session.close()
    assert not os.path.exists(spill)
