"""The capture driver: capture files -> packets -> TCP segments -> flow events.

Every reader of captures -- ``nsqviz decode``, the replay, the Spark pipeline -- runs
this one loop (:func:`~nsqviz.capture.files.read_capture` ->
:func:`~nsqviz.capture.layers.decode_record` -> :class:`~nsqviz.capture.tcp.
FlowTracker`), so the same files give the same connections everywhere. Two options say
what "the same connection" means, with the same defaults everywhere:

* ``continuation`` (default on): the files are one capture set -- ``tcpdump -C``/``-G``
  rotations -- and a connection goes on from one file into the next. Off, each file is a
  capture of its own (unrelated captures, or copies of the same traffic);
* ``idle_split`` (default :data:`IDLE_SPLIT` seconds; ``None``: never): a connection
  silent for longer ends there, and what follows on its 4-tuple is a new (mid-stream)
  connection (NSQ's heartbeats, for one, keep a live connection from being that quiet).

Packet numbers restart in every file, as Wireshark numbers them; inside the driver a
packet is known by :func:`packet_id` (its file's index in the high bits), which is what
the TCP events and the decoders' provenance carry, and :func:`split_packet_id` undoes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, NamedTuple

from nsqviz.capture.files import CaptureWarning, Record, read_capture
from nsqviz.capture.layers import Segment, decode_record, packet_id, split_packet_id
from nsqviz.capture.tcp import FlowTracker, TcpEvent

__all__ = ["IDLE_SPLIT", "CaptureDriver", "Step", "packet_id", "split_packet_id"]

IDLE_SPLIT = 600.0
"""Seconds of silence after which a 4-tuple's next packet starts a new connection."""

_FILE_SHIFT = 40  # as layers.packet_id

Source = str | os.PathLike[str] | BinaryIO


class Step(NamedTuple):
    """One packet of the capture and the flow events it completed.

    ``segment`` is ``None`` for a packet that is not TCP (or a warning); ``warning`` is
    set for a record that could not be read. The driver also yields a step with neither
    at the end of the capture (and of each file, without ``continuation``): its
    ``events`` close the flows still open.
    """

    file_index: int
    record: Record | None
    segment: Segment | None
    warning: CaptureWarning | None
    events: list[TcpEvent]


class CaptureDriver:
    """Reads capture files and tracks their TCP flows; see the module docstring.

    ``server_ports``, ``client_hello`` and ``sent_by_client`` orient flows whose
    handshake was not captured (the protocols' ports, hellos and the look of their
    units: :mod:`nsqviz.protocols`; see :class:`~nsqviz.capture.tcp.FlowTracker`).
    """

    def __init__(self, *, server_ports: Iterable[int] = (),
                 client_hello: Callable[[bytes], bool] | None = None,
                 sent_by_client: Callable[[bytes], bool | None] | None = None,
                 continuation: bool = True, idle_split: float | None = IDLE_SPLIT):
        self.server_ports = frozenset(server_ports)
        self.client_hello = client_hello
        self.sent_by_client = sent_by_client
        self.continuation = continuation
        self.idle_split = idle_split
        self.flows = 0  # flows numbered so far (ids continue across files)
        self.tracker = self._tracker()

    def _tracker(self) -> FlowTracker:
        return FlowTracker(server_ports=self.server_ports, first_id=self.flows,
                           client_hello=self.client_hello, sent_by_client=self.sent_by_client,
                           idle_split=self.idle_split)

    def run(self, sources: Iterable[Source], *, first_index: int = 0) -> Iterator[Step]:
        """Every packet of every file, in file order then packet order."""
        index = first_index - 1
        for index, source in enumerate(sources, first_index):
            yield from self.read(source, index)
            if not self.continuation:
                yield self.finish(index)
        if self.continuation:
            yield self.finish(max(index, first_index))

    def read(self, source: Source, file_index: int) -> Iterator[Step]:
        """The packets of one file, flows left open (see :meth:`finish`)."""
        feed = self.tracker.feed
        shift = file_index << _FILE_SHIFT
        for item in read_capture(source):
            if isinstance(item, CaptureWarning):
                yield Step(file_index, None, None, item, [])
                continue
            seg = decode_record(item)
            if seg is None:
                yield Step(file_index, item, None, None, [])
            elif isinstance(seg, CaptureWarning):
                yield Step(file_index, item, None, seg, [])
            else:
                if shift:
                    seg = seg._replace(number=seg.number | shift)
                yield Step(file_index, item, seg, None, feed(seg))

    def feed(self, seg: Segment) -> list[TcpEvent]:
        """The flow events of one segment whose ``number`` is a :func:`packet_id` --
        for callers that read packets themselves (the pipeline's second stage)."""
        return self.tracker.feed(seg)

    def finish(self, file_index: int = 0) -> Step:
        """End of the capture: close every open flow; a new file starts afresh."""
        events = self.tracker.finish()
        self.flows += self.tracker.numbered
        self.tracker = self._tracker()
        return Step(file_index, None, None, None, events)
