"""Channels: one consumer group of a topic, where its messages fly and come back.

Each channel hands its messages to one of its subscribed clients at a time, as their
RDY counts allow. A message handed out is *in flight* until the client FINs it, REQs
it, or its timeout passes (then it is requeued and ``attempts`` grows on the next
delivery). ``DPUB`` and ``REQ`` with a delay put it in the channel's *deferred* queue.

In flight, nsqd keeps one priority queue per channel ordered by deadline. Here each
client keeps its in-flight messages in a dict in insertion order: a client's
``msg_timeout`` is fixed once it has subscribed and TOUCH re-inserts at the end, so that
order *is* deadline order, the timeout scan stops at the first message not yet due, and
FIN is a dict delete -- no heap entries left behind by the 99 % of messages that are
FINed in time. A client that disconnects keeps its dict until those messages time out,
as in nsqd.

Everything here runs on the broker's event loop thread, so no locks: a channel
delivers on the loop turn after messages or room arrive (:meth:`Channel.wake`), straight
into the client's output buffer.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
import time
from collections import deque
from collections.abc import Callable
from itertools import repeat
from typing import TYPE_CHECKING, Any, Protocol

from nsqviz.servers.nsqd.backlog import Backlog, backend_name
from nsqviz.servers.nsqd.memqueue import Entry, Run, size_of
from nsqviz.servers.nsqd.message import Batch, BrokerMessage, Delivery, InFlight, flying

if TYPE_CHECKING:
    from nsqviz.servers.nsqd.options import Options

__all__ = ["NOT_IN_FLIGHT", "PUBLISHING_SLICE", "PUMP_SLICE", "Channel", "Consumer", "Owner"]

_seq = itertools.count()

PUMP_SLICE = 128
"""Messages a channel's pump hands out in one event-loop turn beyond those put in that
turn (the rest follow on the next turn): a consumer refilling RDY 2500 from a deep queue
must not stall publishers, which nsqd runs on other goroutines (and cores). Smaller
slices let a publisher's MPUB be read between a draining reader's slices; larger ones
favour the reader and cost less CPU per message (fewer, larger writes).
``benchmarks.broker_load`` shows both sides: with 128, a reader draining a backlog
while writers publish to it keeps about their pace, as with nsqd."""

PUBLISHING_SLICE = 32
""":data:`PUMP_SLICE` while the channel is being published to (a put within
:data:`PUBLISHING_WINDOW`): the messages a publish brings still go out on the next turn,
but the backlog drains in smaller slices, so that a publisher waiting for its OK (every
``bench_writer``/``to_nsq`` connection waits for one before its next MPUB) is read
sooner. With 128 in ``benchmarks.broker_load``'s "both" phase on a deep queue, the
reader took 1.5 to 2.5 messages out for each one the writers put in (nsqd 1.0 to 1.7);
with 32, 1.0 to 1.5 in most runs."""

PUBLISHING_WINDOW = 0.005
"""Seconds after a put during which a channel counts as being published to (longer than
a flooding publisher's round trip, so a steady one keeps it so)."""


NOT_IN_FLIGHT = "ID not in flight"
"""nsqd's reason when a FIN, REQ or TOUCH names a message not in flight on the channel."""

_Room = list[Any]
"""One client's turn in a pump: ``[client, room left, batch taken]`` (a list: the pump
updates it in place)."""


class Consumer(Protocol):
    """What a channel needs from a subscribed connection."""

    in_flight: dict[bytes, InFlight]

    @property
    def sample_rate(self) -> int: ...

    @property
    def msg_timeout(self) -> float: ...

    def room(self) -> int:
        """How many more messages the client may have in flight now (RDY - in flight)."""
        ...

    def deliver(self, batch: list[InFlight]) -> None: ...

    def timed_out(self, msg_id: bytes) -> None: ...

    def abort(self) -> None: ...


class Owner(Protocol):
    """What a channel needs from its topic (:class:`~nsqviz.servers.nsqd.topic.Topic`), named
    here so that the two modules do not import each other."""

    name: str
    broker: Any
    sole_reader: Channel | None
    backlog: Backlog

    def delete_channel(self, name: str) -> None: ...

    def lend(self) -> BrokerMessage | None: ...

    def lend_many(self, n: int) -> tuple[list[Entry], int]: ...


class Channel:
    """One consumer group of a topic: its queue, deferred heap, clients and counters."""

    def __init__(self, topic: Owner, name: str, opts: Options):
        self.topic = topic
        self.name = name
        self.opts = opts
        self.ephemeral = name.endswith("#ephemeral")
        self.backlog = Backlog(backend_name(topic.name, name), opts, self.ephemeral)
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
        self._brought = 0  # messages put since the last pump
        self._put_at = -PUBLISHING_WINDOW  # when messages were last put (monotonic)

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

    def put_batch(self, batch: Batch) -> None:
        self.message_count += len(batch)
        self.backlog.put_batch(batch)
        self.wake(len(batch))

    def put_entries(self, entries: list[Entry], *, copy: bool) -> None:
        """Messages the topic's backlog held in memory (see :meth:`Backlog.put_entries`)."""
        count = size_of(entries)
        self.message_count += count
        self.backlog.put_entries(entries, copy=copy)
        self.wake(count)

    def put_records(self, records: list[bytes]) -> None:
        """Disk records of the topic's backlog (see :meth:`Backlog.put_records`)."""
        self.message_count += len(records)
        self.backlog.put_records(records)
        self.wake(len(records))

    def put_deferred(self, msg: BrokerMessage, delay: float) -> None:
        self.message_count += 1
        self._defer(msg, delay)

    def _defer(self, msg: BrokerMessage, delay: float) -> None:
        heapq.heappush(self.deferred, (time.monotonic() + delay, next(_seq), msg))

    # -- delivering -------------------------------------------------------------

    def wake(self, brought: int = 0) -> None:
        """Pump on the next event-loop turn, once for all that asked in this one: the
        room that several consumers' FINs freed and the messages several publishes put
        go out together, a slice per client (not a pump, a write and a timer each), and
        a publisher's OK goes out before the messages it brought (nsqd's message pumps
        run apart from its command loops). ``brought``: messages just put; that pump
        hands them out on top of :data:`PUMP_SLICE` (:data:`PUBLISHING_SLICE` while
        publishers keep putting), so consumers with room keep pace with the publishers
        as nsqd's do on their own goroutines. Without a running loop (a unit test): at
        once."""
        if brought:
            self._brought += brought
            self._put_at = time.monotonic()
        if self._pump_scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.pump()
            return
        self._pump_scheduled = True
        self._schedule(loop)

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        """Pump on the next event-loop turn, after that turn's reads: a callback for
        "now" runs behind the turn's I/O callbacks, where a ``call_soon`` would run before
        them, so the commands waiting in the sockets (a publisher's next MPUB, the FINs
        that free room) are handled before the deliveries, not after them."""
        loop.call_at(loop.time(), self._pump_again)

    def pump(self) -> None:
        """Hand queued messages to clients with room (RDY above in-flight), a slice each
        in turn, and give each client its share as one batch (one write): up to
        :data:`PUMP_SLICE` (:data:`PUBLISHING_SLICE`) messages and those put since the
        last pump, the rest on the next turn."""
        brought, self._brought = self._brought, 0
        clients = self.clients
        if not clients or self.paused:
            return
        n = len(clients)
        start = self._next % n
        rooms: list[_Room] = []
        for k in range(n):
            client = clients[(start + k) % n]
            room = client.room()
            if room > 0:
                rooms.append([client, room, []])
        if not rooms:
            return
        try:
            loop = asyncio.get_running_loop()
            publishing = brought or time.monotonic() - self._put_at < PUBLISHING_WINDOW
            budget = (PUBLISHING_SLICE if publishing else PUMP_SLICE) + brought
        except RuntimeError:  # no loop to come back on (a unit test): no limit
            loop, budget = None, -1
        shared = self.topic.sole_reader is self
        if any(entry[0].sample_rate for entry in rooms):
            budget = self._deal_one_by_one(rooms, budget,
                                           self._pop_shared if shared else self.backlog.pop)
        else:
            queued = len(self.backlog) + (len(self.topic.backlog) if shared else 0)
            budget = self._deal_slices(rooms, budget, queued,
                                       self._take_shared if shared else self.backlog.take_entries)
        self._next = start + 1  # the next pump starts with the next client
        for client, _, batch in rooms:
            if batch:
                self._hand_out(client, batch)
        if budget == 0 and loop is not None and not self._pump_scheduled:
            self._pump_scheduled = True  # more room, maybe more messages: next turn
            self._schedule(loop)

    @staticmethod
    def _deal_slices(rooms: list[_Room], budget: int, queued: int,
                     take: Callable[[int], tuple[list[Entry], int]]) -> int:
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
                got, taken = take(want)
                entry[2] += got
                entry[1] -= taken
                if budget > 0:
                    budget -= taken
                if taken < want:
                    return -1
                if not budget:
                    return 0
            active = [e for e in active if e[1] > 0]
        return budget

    @staticmethod
    def _deal_one_by_one(rooms: list[_Room], budget: int,
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

    def _take_shared(self, n: int) -> tuple[list[Entry], int]:
        """:meth:`_pop_shared` for up to ``n`` messages at once."""
        entries, taken = self.backlog.take_entries(n)
        if taken < n:
            lent, more = self.topic.lend_many(n - taken)
            self.message_count += more
            entries += lent
            taken += more
        return entries, taken

    def _hand_out(self, client: Consumer, entries: list[Entry]) -> None:
        """Put the messages in flight on ``client`` and send them: a run of a batch as
        one :class:`Delivery`, a message of its own with one more attempt."""
        deadline = time.monotonic() + client.msg_timeout
        in_flight = client.in_flight
        items: list[InFlight] = []
        count = 0
        for entry in entries:
            if isinstance(entry, Run):
                delivery = Delivery(entry.batch, entry.start, entry.stop, deadline)
                in_flight.update(zip(delivery.ids, repeat(delivery)))
                items.append(delivery)
                count += len(delivery.ids)
            else:
                entry.attempts = (entry.attempts + 1) & 0xFFFF  # nsqd's uint16 wraps too
                entry.deadline = deadline
                in_flight[entry.id] = entry
                items.append(entry)
                count += 1
        self.holders.add(client)
        self.in_flight_count += count
        client.deliver(items)

    def _end_in_flight(self, client: Consumer, msg_id: bytes) -> BrokerMessage:
        entry = client.in_flight.pop(msg_id, None)
        if entry is None:
            raise KeyError(NOT_IN_FLIGHT)
        self.in_flight_count -= 1
        return flying(entry, msg_id)

    def finish(self, client: Consumer, msg_ids: list[bytes]) -> list[bytes]:
        """FIN of these messages; returns the ids that were not in flight."""
        pop = client.in_flight.pop
        rest = iter(msg_ids)
        missing: list[bytes] = []
        try:
            deque(map(pop, rest), maxlen=0)  # all of them, in C, unless one is missing
        except KeyError as exc:
            missing.append(exc.args[0])
            missing += [mid for mid in rest if pop(mid, None) is None]
        self.in_flight_count -= len(msg_ids) - len(missing)
        return missing

    def requeue(self, client: Consumer, msg_id: bytes, delay: float) -> None:
        msg = self._end_in_flight(client, msg_id)
        self.requeue_count += 1
        if delay <= 0:
            self._put_back(msg)
            self.wake()
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
            self.message_count += self.backlog.memory.take_all_from(waiting)
        self.backlog.memory.append(msg)

    def touch(self, client: Consumer, msg_id: bytes) -> None:
        entry = client.in_flight.pop(msg_id, None)
        if entry is None:
            raise KeyError(NOT_IN_FLIGHT)
        msg = flying(entry, msg_id)
        msg.deadline = time.monotonic() + client.msg_timeout
        client.in_flight[msg_id] = msg  # re-inserted last: deadlines stay in order

    # -- the periodic scan (nsqd's queueScanLoop) ---------------------------------

    def scan(self, now: float) -> bool:
        """Requeue timed-out in-flight messages and release due deferred ones."""
        dirty = False
        for client in list(self.holders):
            fl = client.in_flight
            expired = []
            for mid, entry in fl.items():
                if entry.deadline > now:
                    break
                expired.append((mid, entry))
            for mid, entry in expired:
                del fl[mid]
                self.in_flight_count -= 1
                self.timeout_count += 1
                client.timed_out(mid)
                self._put_back(flying(entry, mid))
                dirty = True
            if not fl:
                self.holders.discard(client)
        deferred = self.deferred
        while deferred and deferred[0][0] <= now:
            self._put_back(heapq.heappop(deferred)[2])
            dirty = True
        if dirty:
            self.wake()
        return dirty

    # -- lifecycle --------------------------------------------------------------

    def take_all(self) -> list[BrokerMessage]:
        """Every message not yet FINed: in flight, deferred, then queued in memory."""
        out: list[BrokerMessage] = []
        for client in self.holders:
            out.extend(map(flying, client.in_flight.values(), client.in_flight))
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
