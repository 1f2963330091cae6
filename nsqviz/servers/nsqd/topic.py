"""Topics: a named stream of messages, copied to every one of its channels (nsqd's model).

A topic without a channel keeps its messages in its own backlog; when the first channel
arrives it drains them to it a slice per event-loop turn.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from nsqviz.servers.nsqd.backlog import Backlog, backend_name
from nsqviz.servers.nsqd.channel import Channel
from nsqviz.servers.nsqd.memqueue import Entry, size_of
from nsqviz.servers.nsqd.message import Batch, BrokerMessage

if TYPE_CHECKING:
    from nsqviz.servers.nsqd.options import Options

__all__ = ["DRAIN_SLICE", "Topic"]

DRAIN_SLICE = 512
"""Messages a topic hands on to its channels per event-loop turn while it drains the
backlog that waited for its first channel (nsqd's topic pump does this concurrently)."""


class Topic:
    """A named stream of messages, copied to every channel."""

    def __init__(self, broker: Any, name: str, opts: Options):
        self.broker = broker
        self.name = name
        self.opts = opts
        self.ephemeral = name.endswith("#ephemeral")
        self.channels: dict[str, Channel] = {}
        self.backlog = Backlog(backend_name(name), opts, self.ephemeral)
        self.pending_deferred: list[tuple[BrokerMessage, float]] = []
        self.message_count = 0
        self.message_bytes = 0
        self.paused = False
        self.draining = False  # the backlog is being handed to the channels
        self.sole_reader: Channel | None = None  # the one channel reading it in place

    @property
    def depth(self) -> int:
        return len(self.backlog) + len(self.pending_deferred)

    def get_channel(self, name: str) -> Channel:
        ch = self.channels.get(name)
        if ch is None:
            ch = self.channels[name] = Channel(self, name, self.opts)
            self.broker.channel_created(self, ch)
            if not self.broker.loading:  # at start-up: once all channels exist
                self.drain_backlog()
        return ch

    def delete_channel(self, name: str) -> None:
        ch = self.channels.pop(name, None)
        if ch is not None and ch is self.sole_reader:
            self.sole_reader = None
            self.draining = False  # no channel left: the backlog waits here again
        if ch is not None:
            ch.delete()
            self.broker.channel_deleted(self, ch)
        if self.ephemeral and not self.channels:
            self.broker.delete_topic(self.name)

    def publish(self, batch: Batch, defer: float = 0.0) -> None:
        """A publish's messages (MPUB: all or nothing -- the bodies were validated before
        we get here), to every channel, or to the backlog while there is none yet (or
        it is still draining: new messages queue up behind it)."""
        if not len(batch):
            return
        self.message_count += len(batch)
        self.message_bytes += batch.size
        if defer > 0:
            for msg in batch.messages(0, len(batch)):
                if not self.channels or self.draining:
                    self.pending_deferred.append((msg, defer))
                else:
                    self._fan_out(msg, defer)
            return
        if not self.channels or self.draining:
            self.backlog.put_batch(batch)  # behind what waits already
            if self.sole_reader is not None:
                self.sole_reader.wake(len(batch))
            return
        for ch in list(self.channels.values()):
            ch.put_batch(batch)  # shared: each channel's queue keeps its own place in it

    def _fan_out(self, msg: BrokerMessage, defer: float) -> None:
        """A deferred message to every channel (a copy each but the first)."""
        first = True
        for ch in list(self.channels.values()):
            ch.put_deferred(msg if first else msg.copy(), defer)
            first = False

    def drain_backlog(self) -> None:
        """Messages that waited for a first channel go to the channels, without holding
        up the SUB that created one, however long the backlog. A single channel reads
        the backlog in place (:meth:`lend`; nothing is copied); with more channels it is
        copied to each, a slice per event-loop turn (without a running loop -- at
        start-up, in a unit test -- all at once). Until it is done, new messages queue
        up behind it."""
        if not self.channels:
            return
        if not self.draining and not len(self.backlog):
            self._drained()  # only deferred messages waited: their timers start now
            return
        if self.draining and (self.sole_reader is None or len(self.channels) == 1):
            return  # already on its way
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self.draining = True
        if len(self.channels) == 1 and loop is not None:
            (self.sole_reader,) = self.channels.values()
            self.sole_reader.wake()
            return
        self.sole_reader = None  # a second channel: from here on each gets a copy
        if loop is not None:
            loop.call_soon(self._drain_more, loop)
            return
        while self._drain_slice():
            pass

    def lend(self) -> BrokerMessage | None:
        """The next waiting message, for the topic's only channel (see
        :meth:`drain_backlog`); None, and the drain is over, once none is left."""
        msg = self.backlog.pop()
        if msg is None:
            self.sole_reader = None
            self._drained()
        return msg

    def lend_many(self, n: int) -> tuple[list[Entry], int]:
        """:meth:`lend` for up to ``n`` messages at once (and how many they are)."""
        entries, taken = self.backlog.take_entries(n)
        if taken < n:
            self.sole_reader = None
            self._drained()
        return entries, taken

    def _drained(self) -> None:
        self.draining = False
        pending, self.pending_deferred = self.pending_deferred, []
        for msg, defer in pending:
            self._fan_out(msg, defer)

    def _drain_more(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.draining and self._drain_slice():
            loop.call_soon(self._drain_more, loop)

    def _drain_slice(self) -> bool:
        """Hand on up to :data:`DRAIN_SLICE` messages; True while more are left."""
        channels = list(self.channels.values())
        if not channels:  # every channel went while draining: the rest waits here again
            self.draining = False
            return False
        entries, records = self.backlog.take(DRAIN_SLICE)
        for i, ch in enumerate(channels):
            if entries:
                ch.put_entries(entries, copy=i > 0)
            if records:
                ch.put_records(records)
        if size_of(entries) + len(records) == DRAIN_SLICE:
            return True
        self._drained()
        return False

    def close(self) -> None:
        self.draining = False  # what is left of the backlog stays in the topic's queue
        self.sole_reader = None
        if self.backlog.disk is not None:
            self.backlog.spill(m for m, _ in self.pending_deferred)
        self.pending_deferred.clear()
        for ch in self.channels.values():
            ch.close()
        self.backlog.close()

    def delete(self) -> None:
        self.draining = False
        self.sole_reader = None
        for ch in list(self.channels.values()):
            ch.delete()
        self.channels.clear()
        self.backlog.delete()
