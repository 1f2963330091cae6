"""Progress while files are being decoded, from what the tasks report (no Spark needed)."""

from __future__ import annotations

from types import SimpleNamespace

from nsqviz.pipeline.decode import ProgressFile
from nsqviz.pipeline.progress import Progress


class _Tracker:
    def getActiveStageIds(self):  # noqa: N802 - Spark's name
        return []


def test_bytes_frames_and_files_move_while_a_file_is_decoded(tmp_path):
    spark = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=_Tracker))
    snaps = []
    progress = Progress(spark, [100, 200], snaps.append, directory=str(tmp_path))
    first, second = ProgressFile(str(tmp_path / "0")), ProgressFile(str(tmp_path / "1"))
    first.update(40, 7)
    second.update(150, 30)
    progress._sample()
    snap = progress.snapshot()
    assert (snap.bytes_done, snap.frames, snap.files_done) == (190, 37, 0)
    assert "files 0/2" in snap.text() and "37 frames" in snap.text()
    first.update(100, 9, done=True)
    progress._sample()
    snap = progress.snapshot()
    assert (snap.bytes_done, snap.frames, snap.files_done, snap.total_bytes) == (250, 39, 1, 300)
    progress.next_phase("analyses", frames=41)
    assert progress.snapshot()[3:7] == (2, 2, 300, 41)


def test_the_crossing_connections_count_their_own_bytes_and_add_their_frames(tmp_path):
    """Stage 2 ("continuing") reports the payload it decodes of what crossed file
    boundaries, in a directory of its own; its frames add to stage 1's."""
    spark = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=_Tracker))
    progress = Progress(spark, [100, 200], lambda snap: None, directory=str(tmp_path))
    ProgressFile(str(tmp_path / "0")).update(100, 10, done=True)
    ProgressFile(str(tmp_path / "1")).update(200, 20, done=True)
    progress._sample()
    progress.next_phase("continuing", total_bytes=80)
    ProgressFile(str(tmp_path / "continuing" / "0")).update(30, 5)
    progress._sample()
    snap = progress.snapshot()
    assert snap.phase == "continuing"
    assert (snap.bytes_done, snap.total_bytes, snap.frames, snap.files_done) == (30, 80, 35, 2)
    assert snap.text().startswith("continuing: files 2/2") and "35 frames" in snap.text()


def test_a_rate_stops_where_the_bytes_stopped(tmp_path, monkeypatch):
    """Once a phase's tasks have reported their last bytes, waiting for the next phase
    does not make its MB/s decay."""
    import nsqviz.pipeline.progress as progress_module

    clock = [100.0]
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: clock[0])
    spark = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=_Tracker))
    progress = Progress(spark, [100], lambda snap: None, directory=str(tmp_path))
    report = ProgressFile(str(tmp_path / "0"), interval=0)
    report.update(10, 1)
    progress._sample()
    clock[0] += 2
    report.update(50, 5, done=True)
    progress._sample()
    assert progress.snapshot().decoding_seconds == 2
    clock[0] += 30  # the driver plans the next stage
    progress._sample()
    assert progress.snapshot().decoding_seconds == 2


def test_console_off_a_terminal_writes_a_line_per_phase_not_a_flood(monkeypatch):
    """Piped into a log, ten snapshots of one phase in a moment are one line; a new phase
    and the end each get theirs, with no carriage returns."""
    import io

    from nsqviz.pipeline import progress

    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    sink = progress._Console()
    for phase, n in (("decoding", 10), ("analyses", 3), ("done", 1)):
        for k in range(n):
            sink(progress.Snapshot(phase, k, n, 0, 1, k, None, 0.1 * k))
    lines = err.getvalue().splitlines()
    assert len(lines) == 3 and "\r" not in err.getvalue()


def test_a_stage_that_ended_between_two_samples_counts_all_its_tasks():
    """Spark lists a stage as active only while it runs: one that ends between two
    samples is still counted, with its tasks done as Spark last gives them."""
    stages = {7: [0, 3]}
    active = [7]

    class Tracker:
        def getActiveStageIds(self):  # noqa: N802 - Spark's name
            return list(active)

        def getStageInfo(self, stage):  # noqa: N802
            done, tasks = stages[stage]
            return SimpleNamespace(numCompletedTasks=done, numTasks=tasks)

    spark = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=Tracker))
    progress = Progress(spark, [100], lambda snap: None)
    progress.next_phase("analyses", frames=10)
    progress._sample()
    assert progress.snapshot()[1:3] == (0, 3)
    stages[7][0] = 3
    active.clear()  # it ended before the next sample
    progress._sample()
    assert progress.snapshot()[1:3] == (3, 3)
