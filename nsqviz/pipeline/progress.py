"""Progress of a pipeline run, from Spark's status tracker: on the console or as a bar.

A thread polls ``SparkContext.statusTracker()`` while a run goes on, and the small
files in which the decoding tasks keep the bytes they have read and the frames they
have decoded (:class:`~nsqviz.pipeline.decode.ProgressFile`): bytes, MB/s and frames/s
move while files are being decoded, not only when a file is done. Phases: "decoding"
(stage 1: one task per file, so files done are tasks done; bytes of the files),
"continuing" (stage 2, the connections that cross file boundaries: bytes of their
payload still to decode), "analyses" (Spark's tasks). The sink is
:func:`console` (one line on stderr, rewritten in place) or a :class:`NotebookBar` (an
ipywidgets progress bar that leaves a static HTML summary behind when the run ends, so a
saved notebook shows what happened without a widget).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["NotebookBar", "Progress", "Snapshot", "console"]

_READING = ("decoding", "continuing")  # phases whose tasks report bytes and frames


class Snapshot(NamedTuple):
    """Where a run is: ``phase`` (``"decoding"``, ``"continuing"``, ``"analyses"``,
    ``"done"``), its tasks done of those known, files done (decoding), bytes read (of
    ``total_bytes``: the files', or while continuing the crossing connections'), frames
    decoded so far (the frames table's count once decoding is over), seconds since the
    start."""

    phase: str
    tasks_done: int
    tasks: int
    files_done: int
    files: int
    bytes_done: int
    frames: int | None
    elapsed: float
    total_bytes: int = 0
    decoding_seconds: float = 0.0  # since the first bytes were decoded: what rates use

    def text(self) -> str:
        mb = self.bytes_done / 1e6
        of = f" of {self.total_bytes / 1e6:.1f}" if self.total_bytes else ""
        busy = self.decoding_seconds or self.elapsed
        rate = f", {mb / busy:.1f} MB/s" if busy > 0 and mb else ""
        frames = ""
        if self.frames is not None:
            frames = f", {self.frames} frames ({self.frames / max(busy, 1e-9):.0f}/s)"
        return (f"{self.phase}: files {self.files_done}/{self.files}, {mb:.1f}{of} MB{rate}, "
                f"tasks {self.tasks_done}/{self.tasks}{frames}, {self.elapsed:.0f} s")


NON_TERMINAL_EVERY = 5.0
"""Seconds between progress lines when stderr is not a terminal (a log file, CI)."""


class _Console:
    """One line on stderr: on a terminal rewritten in place (a newline when the run is
    done); elsewhere -- a log, a pipe -- a full line at most every
    :data:`NON_TERMINAL_EVERY` seconds, a change of phase and the end, not a flood of
    carriage returns."""

    def __init__(self) -> None:
        self.last = -math.inf
        self.phase = ""

    def __call__(self, snap: Snapshot) -> None:
        if sys.stderr.isatty():
            end = "\n" if snap.phase == "done" else ""
            print(f"\r{snap.text():<100}", end=end, file=sys.stderr, flush=True)
            return
        now = time.monotonic()
        if snap.phase == self.phase and snap.phase != "done" and \
                now - self.last < NON_TERMINAL_EVERY:
            return
        self.last, self.phase = now, snap.phase
        print(snap.text(), file=sys.stderr, flush=True)


console = _Console()
"""The progress sink ``nsqviz pipeline`` uses."""


class NotebookBar:
    """An ipywidgets bar over the bytes decoded, then the analyses' tasks; at the end, a
    static summary in its place."""

    def __init__(self) -> None:
        import ipywidgets as w
        from IPython.display import display

        self.bar = w.IntProgress(min=0, max=1, description="decoding")
        self.label = w.Label()
        # IPython's display() and HTML() carry no annotations
        self.handle = display(w.HBox([self.bar, self.label]),  # type: ignore[no-untyped-call]
                              display_id=True)

    def __call__(self, snap: Snapshot) -> None:
        if snap.phase == "done":
            from IPython.display import HTML

            frames = "" if snap.frames is None else f", {snap.frames} frames"
            summary = (f"<div class='nv-muted'>decoded {snap.files} capture "
                       f"file(s), {snap.bytes_done / 1e6:.1f} MB{frames}</div>")
            # IPython's HTML() carries no annotations
            self.handle.update(HTML(summary))  # type: ignore[no-untyped-call]
            return
        self.bar.description = snap.phase
        decoding = snap.phase in _READING
        self.bar.max = max(1, snap.total_bytes if decoding else snap.tasks)
        self.bar.value = snap.bytes_done if decoding else snap.tasks_done
        self.label.value = snap.text()


class Progress:
    """Reports a run's :class:`Snapshot` to ``sink`` every ``interval`` seconds."""

    def __init__(self, spark: Any, sizes: list[int], sink: Callable[[Snapshot], None], *,
                 interval: float = 0.5, directory: str | None = None):
        self.tracker = spark.sparkContext.statusTracker()
        self.sizes = sizes
        self.sink = sink
        self.interval = interval
        self.phase = "decoding"
        self.frames: int | None = None
        self.directory = directory  # where the decoding tasks report (None: files only)
        self.reading = directory  # where this phase's tasks report
        self.decoded = (0, 0, 0)  # (bytes, frames, files) the tasks reported
        self.frames_before = 0  # frames of the phases before this one
        self.continuing_bytes = 0
        self.first_bytes: float | None = None  # when they first reported any
        self.decoding_seconds = 0.0
        self.last_bytes = 0  # bytes reported at the last sample that saw them move
        self.started = time.perf_counter()
        self._stages: dict[int, tuple[int, int]] = {}  # stage -> (done, tasks), this phase
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if exc[0] is None:
            self._sample()
            self.phase = "done"
            self.sink(self.snapshot())

    def next_phase(self, phase: str, *, frames: int | None = None,
                   total_bytes: int | None = None) -> None:
        """The run moved on (``frames``: what decoding produced; ``total_bytes``: what
        the ``"continuing"`` phase will decode)."""
        self._sample()
        self.frames_before = self.decoded[1]
        self.decoded = (sum(self.sizes), self.decoded[1], len(self.sizes))
        if frames is not None:
            self.frames = frames
        self.phase = phase
        if phase == "continuing" and self.directory is not None:
            self.reading = os.path.join(self.directory, phase)
            os.makedirs(self.reading, exist_ok=True)
            self.continuing_bytes = total_bytes or 0
            self.decoded = (0, 0, 0)
            self.first_bytes = None  # rates start again with this phase's first bytes
            self.last_bytes = 0
        self._stages.clear()

    def _sample(self) -> None:
        if self.reading is not None and self.phase in _READING:
            from nsqviz.pipeline.decode import read_progress

            self.decoded = read_progress(self.reading)
            now = time.perf_counter()
            if self.first_bytes is None and self.decoded[0]:
                self.first_bytes = now
            if self.first_bytes is not None and self.decoded[0] != self.last_bytes:
                # up to the latest bytes: a finished phase's rate does not decay
                self.decoding_seconds = now - self.first_bytes
                self.last_bytes = self.decoded[0]
        # the stages seen before as well: one that ended between two samples would keep
        # the count of tasks done it had at the last (done 0 of 3 at the end)
        for stage in {*self.tracker.getActiveStageIds(), *self._stages}:
            info = self.tracker.getStageInfo(stage)
            if info is not None:
                self._stages[stage] = (info.numCompletedTasks, info.numTasks)

    def snapshot(self) -> Snapshot:
        done = sum(d for d, _ in self._stages.values())
        tasks = sum(t for _, t in self._stages.values())
        n = len(self.sizes)
        total = sum(self.sizes)
        if self.phase == "decoding" and self.directory is not None:
            n_bytes, frames, files = self.decoded
        elif self.phase == "continuing":
            n_bytes, frames, files = self.decoded[0], self.decoded[1], n
            frames += self.frames_before
            total = self.continuing_bytes
        elif self.phase == "decoding":
            # the scan stages have one task per file; the first of them reads them all
            files = max((d for d, t in self._stages.values() if t == n), default=0)
            n_bytes, frames = sum(self.sizes) * files // max(n, 1), None
        else:
            files, n_bytes, frames = n, sum(self.sizes), self.frames
        return Snapshot(self.phase, done, tasks, files, n, n_bytes, frames,
                        time.perf_counter() - self.started, total,
                        self.decoding_seconds)

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()
            self.sink(self.snapshot())
