"""Topics and channels: where messages wait, fan out, fly and come back.

The model is nsqd's: a topic copies every message to each of its channels; each
channel hands its messages to one of its subscribed clients at a time, as their RDY
counts allow. A message handed out is *in flight* until the client FINs it, REQs it,
or its timeout passes (then it is requeued and ``attempts`` grows on the next
delivery). ``DPUB`` and ``REQ`` with a delay put it in the channel's *deferred* queue.
Messages beyond ``--mem-queue-size`` go to a :class:`DiskQueue` (not for
``#ephemeral`` names: nsqd drops those, and so do we).

In flight, nsqd keeps one priority queue per channel ordered by deadline. Here each
client keeps its in-flight messages in a dict in insertion order: a client's
``msg_timeout`` is fixed once it has subscribed and TOUCH re-inserts at the end, so that
order *is* deadline order, the timeout scan stops at the first message not yet due, and
FIN is a dict delete -- no heap entries left behind by the 99 % of messages that are
FINed in time. A client that disconnects keeps its dict until those messages time out,
as in nsqd.

Everything here runs on the broker's event loop thread, so no locks: a channel
delivers synchronously, straight into the client's output buffer.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from nsqviz.broker.diskqueue import DiskQueue
from nsqviz.broker.message import BrokerMessage, decode_record, encode_record

if TYPE_CHECKING:
    from nsqviz.broker.options import Options

__all__ = ["Channel", "Consumer", "Topic", "backend_name"]

_seq = itertools.count()

PUMP_SLICE = 64
"""Messages one pump hands out before it lets the event loop run (the rest follow on the
next turn): a consumer refilling RDY 2500 from a deep queue must not stall publishers,
which nsqd runs on other goroutines (and cores). Smaller slices let a publisher's MPUB
be read between a draining reader's slices; larger ones favour the reader and cost less
CPU per message when it is alone (``benchmarks.broker_load`` shows both sides)."""

DRAIN_SLICE = 512
"""Messages a topic hands on to its channels per event-loop turn while it drains the
backlog that waited for its first channel (nsqd's topic pump does this concurrently)."""


class Consumer(Protocol):
    """What a channel needs from a subscribed connection."""

    in_flight: dict[bytes, BrokerMessage]
    sample_rate: int
    msg_timeout: float

    def room(self) -> int:
        """How many more messages the client may have in flight now (RDY - in flight)."""
        ...

    def deliver(self, batch: list[BrokerMessage]) -> None: ...

    def timed_out(self, msg: BrokerMessage) -> None: ...

    def abort(self) -> None: ...


def backend_name(topic: str, channel: str | None = None) -> str:
    """nsqd names a channel's disk queue ``topic:channel``."""
    return topic if channel is None else f"{topic}:{channel}"


class _Backlog:
    """Memory first, then disk: the queue behind a topic or a channel."""

    def __init__(self, name: str, opts: Options, ephemeral: bool):
        self.memory: deque[BrokerMessage] = deque()
        self.limit = opts.mem_queue_size
        self.disk: DiskQueue | None = None
        self.dropped = 0
        if opts.data_path and not ephemeral:
            self.disk = DiskQueue(
                name, opts.data_path,
                max_bytes_per_file=opts.max_bytes_per_file,
                min_msg_size=26, max_msg_size=opts.max_msg_size + 26,
                sync_every=opts.sync_every,
            )
        elif not ephemeral:
            self.limit = None  # no data path: an embedded broker keeps everything in memory

    def __len__(self) -> int:
        return len(self.memory) + (self.disk.depth if self.disk else 0)

    @property
    def backend_depth(self) -> int:
        return self.disk.depth if self.disk else 0

    def put(self, msg: BrokerMessage) -> None:
        if self.limit is None or len(self.memory) < self.limit:
            self.memory.append(msg)
        elif self.disk is not None:
            self.disk.put(encode_record(msg))
        else:
            self.dropped += 1  # ephemeral: nsqd's dummy backend discards

    def put_many(self, msgs: list[BrokerMessage]) -> None:
        """Memory up to the limit, the rest to disk in one write (done before the
        publish's OK is sent)."""
        if self.limit is None or len(self.memory) + len(msgs) <= self.limit:
            self.memory.extend(msgs)
            return
        room = max(0, self.limit - len(self.memory))
        self.memory.extend(msgs[:room])
        if self.disk is not None:
            self.disk.put_many([encode_record(m) for m in msgs[room:]])
        else:
            self.dropped += len(msgs) - room  # ephemeral: nsqd's dummy backend discards

    def put_records(self, records: list[bytes]) -> None:
        """Disk records moved here from another backlog: decoded only as far as they fit
        in memory, the rest written to disk as they are."""
        room = len(records) if self.limit is None else max(0, self.limit - len(self.memory))
        self.memory.extend(decode_record(r) for r in records[:room])
        if room >= len(records):
            return
        if self.disk is not None:
            self.disk.put_many(records[room:])
        else:
            self.dropped += len(records) - room

    def take(self, n: int) -> tuple[list[BrokerMessage], list[bytes]]:
        """Up to ``n`` messages off the front: those in memory, then raw disk records
        (not decoded: a move to another backlog writes them back as they are)."""
        memory = self.memory
        msgs = [memory.popleft() for _ in range(min(n, len(memory)))]
        records: list[bytes] = []
        if self.disk is not None:
            get = self.disk.get
            while len(msgs) + len(records) < n:
                data = get()
                if data is None:
                    break
                records.append(data)
        return msgs, records

    def pop_many(self, n: int) -> list[BrokerMessage]:
        """Up to ``n`` messages off the front, in order (memory, then disk)."""
        memory = self.memory
        popleft = memory.popleft
        msgs = [popleft() for _ in range(min(n, len(memory)))]
        if self.disk is not None:
            get = self.disk.get
            while len(msgs) < n and (data := get()) is not None:
                msgs.append(decode_record(data))
        return msgs

    def pop(self) -> BrokerMessage | None:
        if self.memory:
            return self.memory.popleft()
        if self.disk is not None:
            data = self.disk.get()
            if data is not None:
                return decode_record(data)
        return None

    def spill(self, msgs) -> None:
        """Write messages to disk regardless of the memory limit (graceful stop)."""
        assert self.disk is not None
        self.disk.put_many(encode_record(m) for m in msgs)

    def close(self) -> None:
        if self.disk is not None:
            self.spill(self.memory)
            self.memory.clear()
            self.disk.close()

    def delete(self) -> None:
        self.memory.clear()
        if self.disk is not None:
            self.disk.delete()


class Channel:
    """One consumer group of a topic: its queue, deferred heap, clients and counters."""

    def __init__(self, topic: Topic, name: str, opts: Options):
        self.topic = topic
        self.name = name
        self.opts = opts
        self.ephemeral = name.endswith("#ephemeral")
        self.backlog = _Backlog(backend_name(topic.name, name), opts, self.ephemeral)
        self.deferred: list[tuple[float, int, BrokerMessage]] = []
        self.clients: list[Consumer] = []
        self.holders: set[Consumer] = set()  # clients (even gone ones) with in-flight msgs
        self.in_flight_count = 0
        self.message_count = 0
        self.requeue_count = 0
        self.timeout_count = 0
        self.paused = False
        self._next = 0  # round robin: the client to try first
        self._pump_scheduled = False

    # -- stats ------------------------------------------------------------------

    @property
    def depth(self) -> int:
        return len(self.backlog)

    @property
    def deferred_count(self) -> int:
        return len(self.deferred)

    # -- clients ----------------------------------------------------------------

    def add_client(self, client: Consumer) -> None:
        self.clients.append(client)

    def remove_client(self, client: Consumer) -> None:
        """A client left. Its in-flight messages stay until they time out, as in nsqd."""
        if client in self.clients:
            self.clients.remove(client)
            self._next = 0
        if self.ephemeral and not self.clients:
            self.topic.delete_channel(self.name)

    # -- putting ----------------------------------------------------------------

    def put(self, msg: BrokerMessage) -> None:
        self.message_count += 1
        self.backlog.put(msg)
        self._pump_after_put()

    def put_many(self, msgs: list[BrokerMessage]) -> None:
        self.message_count += len(msgs)
        self.backlog.put_many(msgs)
        self._pump_after_put()

    def put_records(self, records: list[bytes]) -> None:
        """Disk records of the topic's backlog (see :meth:`_Backlog.put_records`)."""
        self.message_count += len(records)
        self.backlog.put_records(records)
        self._pump_after_put()

    def _pump_after_put(self) -> None:
        held = self.topic.broker.held_pumps
        if held is None:
            self.pump()
        else:
            held.add(self)  # a publish in progress: deliver after its OK is out

    def put_deferred(self, msg: BrokerMessage, delay: float) -> None:
        self.message_count += 1
        self._defer(msg, delay)

    def _defer(self, msg: BrokerMessage, delay: float) -> None:
        msg.deliver_at = time.monotonic() + delay
        heapq.heappush(self.deferred, (msg.deliver_at, next(_seq), msg))

    # -- delivering -------------------------------------------------------------

    def pump(self) -> None:
        """Hand queued messages to clients with room (RDY above in-flight), a slice each
        in turn, and give each client its share as one batch (one write)."""
        clients = self.clients
        if not clients or self.paused:
            return
        n = len(clients)
        start = self._next % n
        rooms = []
        for k in range(n):
            client = clients[(start + k) % n]
            room = client.room()
            if room > 0:
                rooms.append([client, room, []])
        if not rooms:
            return
        try:
            loop = asyncio.get_running_loop()
            budget = PUMP_SLICE
        except RuntimeError:  # no loop to come back on (a unit test): no limit
            loop, budget = None, -1
        shared = self.topic.sole_reader is self
        if any(entry[0].sample_rate for entry in rooms):
            budget = self._deal_one_by_one(rooms, budget,
                                           self._pop_shared if shared else self.backlog.pop)
        else:
            queued = len(self.backlog) + (len(self.topic.backlog) if shared else 0)
            budget = self._deal_slices(rooms, budget, queued,
                                       self._pop_many_shared if shared else self.backlog.pop_many)
        self._next = start + 1  # the next pump starts with the next client
        for client, _, batch in rooms:
            if batch:
                self._hand_out(client, batch)
        if budget == 0 and loop is not None and not self._pump_scheduled:
            self._pump_scheduled = True  # more room, maybe more messages: next turn
            loop.call_soon(self._pump_again)

    @staticmethod
    def _deal_slices(rooms: list[list], budget: int, queued: int,
                     take: Callable[[int], list[BrokerMessage]]) -> int:
        """Each client with room takes a slice off the queue in turn, its share of the
        ``budget`` (negative: no limit) or of the ``queued`` messages if fewer -- one call
        per slice, not per message. Returns what is left of the budget, negative once the
        queue ran dry."""
        active = rooms
        while active and budget:
            per = max(1, (queued if budget < 0 else min(budget, queued)) // len(active))
            for entry in active:
                want = min(entry[1], per) if budget < 0 else min(entry[1], per, budget)
                queued -= want
                got = take(want)
                entry[2] += got
                entry[1] -= len(got)
                if budget > 0:
                    budget -= len(got)
                if len(got) < want:
                    return -1
                if not budget:
                    return 0
            active = [e for e in active if e[1] > 0]
        return budget

    @staticmethod
    def _deal_one_by_one(rooms: list[list], budget: int,
                         pop: Callable[[], BrokerMessage | None]) -> int:
        """As :meth:`_deal_slices`, a message at a time, for sampling clients (nsqd drops
        a message a sampling client skips)."""
        active = rooms
        while active and budget:
            for entry in active:
                if not budget:
                    break
                budget -= 1
                msg = pop()
                if msg is None:
                    return -1
                rate = entry[0].sample_rate
                if rate and random.randrange(100) > rate:
                    continue
                entry[2].append(msg)
                entry[1] -= 1
            active = [e for e in active if e[1] > 0]
        return budget

    def _pump_again(self) -> None:
        self._pump_scheduled = False
        self.pump()

    def _pop_shared(self) -> BrokerMessage | None:
        """As the topic's only channel while it drains: our own queue (requeued and
        timed-out messages), then straight from the topic's backlog -- nothing copied."""
        msg = self.backlog.pop()
        if msg is None:
            msg = self.topic.lend()
            if msg is not None:
                self.message_count += 1
        return msg

    def _pop_many_shared(self, n: int) -> list[BrokerMessage]:
        """:meth:`_pop_shared` for up to ``n`` messages at once."""
        msgs = self.backlog.pop_many(n)
        if len(msgs) < n:
            lent = self.topic.lend_many(n - len(msgs))
            self.message_count += len(lent)
            msgs += lent
        return msgs

    def _hand_out(self, client: Consumer, batch: list[BrokerMessage]) -> None:
        deadline = time.monotonic() + client.msg_timeout
        in_flight = client.in_flight
        for msg in batch:
            msg.attempts += 1
            msg.client = client
            msg.deadline = deadline
            in_flight[msg.id] = msg
        self.holders.add(client)
        self.in_flight_count += len(batch)
        client.deliver(batch)

    def _end_in_flight(self, client: Consumer, msg_id: bytes) -> BrokerMessage:
        msg = client.in_flight.pop(msg_id, None)
        if msg is None:
            raise KeyError("ID not in flight")
        self.in_flight_count -= 1
        return msg

    def finish(self, client: Consumer, msg_id: bytes) -> None:
        self._end_in_flight(client, msg_id)

    def requeue(self, client: Consumer, msg_id: bytes, delay: float) -> None:
        msg = self._end_in_flight(client, msg_id)
        self.requeue_count += 1
        if delay <= 0:
            self._put_back(msg)
            self.pump()
        else:
            self._defer(msg, delay)

    def _put_back(self, msg: BrokerMessage) -> None:
        """A requeued, timed-out or due deferred message goes behind every message
        queued for the channel, as nsqd's ``c.put`` puts it (in memory, even if full).
        While this channel reads the topic's backlog in place, the topic's messages
        waiting in memory are queued for it too (nsqd's topic pump would have moved
        them into the channel already): they become the channel's own first."""
        waiting = self.topic.backlog.memory
        if self.topic.sole_reader is self and waiting:
            self.message_count += len(waiting)
            self.backlog.memory.extend(waiting)
            waiting.clear()
        self.backlog.memory.append(msg)

    def touch(self, client: Consumer, msg_id: bytes) -> None:
        msg = client.in_flight.pop(msg_id, None)
        if msg is None:
            raise KeyError("ID not in flight")
        msg.deadline = time.monotonic() + client.msg_timeout
        client.in_flight[msg_id] = msg  # re-inserted last: deadlines stay in order

    # -- the periodic scan (nsqd's queueScanLoop) ---------------------------------

    def scan(self, now: float) -> bool:
        """Requeue timed-out in-flight messages and release due deferred ones."""
        dirty = False
        for client in list(self.holders):
            fl = client.in_flight
            expired = []
            for msg in fl.values():
                if msg.deadline > now:
                    break
                expired.append(msg)
            for msg in expired:
                del fl[msg.id]
                self.in_flight_count -= 1
                self.timeout_count += 1
                client.timed_out(msg)
                self._put_back(msg)
                dirty = True
            if not fl:
                self.holders.discard(client)
        deferred = self.deferred
        while deferred and deferred[0][0] <= now:
            msg = heapq.heappop(deferred)[2]
            msg.deliver_at = 0.0
            self._put_back(msg)
            dirty = True
        if dirty:
            self.pump()
        return dirty

    # -- lifecycle --------------------------------------------------------------

    def take_all(self) -> list[BrokerMessage]:
        """Every message not yet FINed: in flight, deferred, then queued in memory."""
        out: list[BrokerMessage] = []
        for client in self.holders:
            out.extend(client.in_flight.values())
            client.in_flight.clear()
        self.holders.clear()
        self.in_flight_count = 0
        out.extend(m for _, _, m in sorted(self.deferred, key=lambda t: t[0]))
        self.deferred.clear()
        return out

    def close(self) -> None:
        """Graceful stop: write in-flight, deferred and queued messages to disk (nsqd's
        flush); without a data path there is nowhere to keep them."""
        pending = self.take_all()
        if self.backlog.disk is not None:
            self.backlog.spill(pending)
            self.backlog.close()

    def delete(self) -> None:
        """Deleted (HTTP or last client of an ephemeral channel): its messages go, and
        its clients are disconnected, as nsqd's channel exit closes them."""
        clients, self.clients = self.clients, []
        for client in clients:
            client.abort()
        self.take_all()
        self.backlog.delete()


class Topic:
    """A named stream of messages, copied to every channel."""

    def __init__(self, broker, name: str, opts: Options):
        self.broker = broker
        self.name = name
        self.opts = opts
        self.ephemeral = name.endswith("#ephemeral")
        self.channels: dict[str, Channel] = {}
        self.backlog = _Backlog(backend_name(name), opts, self.ephemeral)
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

    def put(self, msg: BrokerMessage, defer: float = 0.0) -> None:
        self.message_count += 1
        self.message_bytes += len(msg.body)
        if not self.channels or self.draining:
            if defer > 0:
                self.pending_deferred.append((msg, defer))
            else:
                self.backlog.put(msg)  # behind what waits already
                if self.sole_reader is not None:
                    self.sole_reader._pump_after_put()
            return
        self._fan_out(msg, defer)

    def put_many(self, msgs: list[BrokerMessage]) -> None:
        """MPUB: all or nothing -- the bodies were validated before we get here."""
        self.message_count += len(msgs)
        self.message_bytes += sum(len(m.body) for m in msgs)
        if not self.channels or self.draining:
            self.backlog.put_many(msgs)
            if self.sole_reader is not None:
                self.sole_reader._pump_after_put()
            return
        first = True
        for ch in list(self.channels.values()):
            ch.put_many(msgs if first else [m.copy() for m in msgs])
            first = False

    def _fan_out(self, msg: BrokerMessage, defer: float) -> None:
        first = True
        for ch in list(self.channels.values()):
            m = msg if first else msg.copy()
            first = False
            if defer > 0:
                ch.put_deferred(m, defer)
            else:
                ch.put(m)

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
            self.sole_reader.pump()
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

    def lend_many(self, n: int) -> list[BrokerMessage]:
        """:meth:`lend` for up to ``n`` messages at once."""
        msgs = self.backlog.pop_many(n)
        if len(msgs) < n:
            self.sole_reader = None
            self._drained()
        return msgs

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
        msgs, records = self.backlog.take(DRAIN_SLICE)
        for i, ch in enumerate(channels):
            if msgs:
                ch.put_many(msgs if i == 0 else [m.copy() for m in msgs])
            if records:
                ch.put_records(records)
        if len(msgs) + len(records) == DRAIN_SLICE:
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

