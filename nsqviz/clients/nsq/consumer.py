"""The asyncio Consumer: seed 002's client guide, rule by rule.

* **Discovery** -- ``lookupd_http_addresses``: every lookupd polled each time, union by
  ``broadcast_address:tcp_port``, ``lookupd_poll_interval`` plus fresh jitter per poll
  (:mod:`nsqviz.clients.nsq.discovery`). A connection found by discovery that is lost is
  re-opened only when a later poll still lists its nsqd; ``nsqd_tcp_addresses`` are
  re-dialled after ``reconnect_interval``, doubling up to ``max_reconnect_interval``.
* **Connection** -- magic, IDENTIFY with ``feature_negotiation`` (TLS, snappy/deflate,
  AUTH, ``sample_rate``, ``msg_timeout``), SUB, then **RDY 1**.
* **RDY** -- each connection's share is ``max_in_flight // num_conns`` (at least 1,
  at most its nsqd's ``max_rdy_count``, 2500 if IDENTIFY negotiated nothing); the sum of
  the RDY counts sent never exceeds ``max_in_flight`` (lowering comes before raising).
  After each message the share is re-sent when the count left is 0 or under 25 % of
  the last one sent. (Since nsqd 0.3 RDY means "this many in flight", so the re-send
  changes nothing on nsqd's side; the rule is kept because the guide states it.) With
  ``max_in_flight < num_conns`` only ``max_in_flight`` connections hold RDY 1; every
  ``rdy_redistribute_interval`` those idle for ``low_rdy_idle_timeout`` give it to
  others, so every nsqd is eventually read -- RDY follows where messages are.
* **Messages** -- the handler (``async def`` run as a task, or a plain function run in
  a thread so that it can block) returns True/None for FIN, False or raises for REQ
  (with backoff); a message delivered more than ``max_attempts`` times goes to
  ``giving_up`` and is FIN'd. Heartbeats are answered by the connection before any
  handler runs (:mod:`nsqviz.clients.nsq.conn`).
* **Backoff** -- a failure outside a backoff period counts (``n += 1``), sends RDY 0 to
  every connection and waits ``backoff_strategy(n)``; then one connection gets RDY 1
  ("test the waters"); its result moves ``n`` down (success) or up (failure), and at
  ``n == 0`` every connection gets its share again. Results during the wait are not
  counted. A tester that gets no message for ``low_rdy_idle_timeout`` hands its RDY 1
  to another connection (its nsqd may be empty; a library that keeps it there stays
  in backoff for good).
* **Starvation** -- :meth:`is_starved`.
* **Close** -- :meth:`close` sends CLS on every connection, waits for ``CLOSE_WAIT``
  and for the in-flight messages to be answered (up to ``drain_timeout``), then
  closes; :attr:`closed` is the completion signal.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import time
import types
import weakref
from collections.abc import Callable, Coroutine, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from nsqviz.clients.nsq.config import Config
from nsqviz.clients.nsq.conn import ConnectionFailed, NSQConnection, NSQError
from nsqviz.clients.nsq.discovery import LookupdPoller
from nsqviz.clients.nsq.message import Message
from nsqviz.nsq.events import Error, Fin, Rdy, Req
from nsqviz.nsq.events import Message as MessageFrame
from nsqviz.sansio import LocalProtocolError

__all__ = ["Consumer", "rdy_share"]


def rdy_share(max_in_flight: int, connections: int, max_rdy_count: int) -> int:
    """The RDY each of a consumer's ``connections`` gets (the client guide's rule):
    ``max_in_flight`` shared evenly, at least 1, at most the nsqd's ``max_rdy_count``
    (in plain comparisons: a consumer asks after every message)."""
    share = max_in_flight // (connections or 1)
    if share > max_rdy_count:
        share = max_rdy_count
    return share if share > 1 else 1


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], waiting_on: Any) -> Generator[Any, Any, Any]:
    """Continue a coroutine that was started by hand and is waiting on ``waiting_on``:
    what a task runs for the part of an eagerly started handler after its first wait."""
    try:
        while True:
            try:
                sent = yield waiting_on
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                waiting_on = coro.throw(exc)
            else:
                waiting_on = coro.send(sent)
    except StopIteration as done:
        return done.value

log = logging.getLogger(__name__)

Handler = Callable[[Message], Any]
_RECENT = 4096  # answered messages remembered for nsqd's late refusals


class Consumer:
    """Consume ``topic``/``channel`` with ``handler``. Options: :class:`Config` fields as
    keywords (``max_in_flight=100``, ``lookupd_poll_interval=15`` ...), or ``config=``.

    ``async with Consumer(...) as c:`` starts it and closes it gracefully on exit;
    or ``await c.start()`` ... ``await c.close()``.
    """

    def __init__(
        self,
        topic: str,
        channel: str,
        handler: Handler,
        *,
        nsqd_tcp_addresses: Sequence[str] | str = (),
        lookupd_http_addresses: Sequence[str] | str = (),
        giving_up: Callable[[Message], Any] | None = None,
        concurrency: int = 1,
        drain_timeout: float = 30.0,
        rng: random.Random | None = None,
        config: Config | None = None,
        **options: Any,
    ):
        if isinstance(nsqd_tcp_addresses, str):
            nsqd_tcp_addresses = [nsqd_tcp_addresses]
        if isinstance(lookupd_http_addresses, str):
            lookupd_http_addresses = [lookupd_http_addresses]
        if not nsqd_tcp_addresses and not lookupd_http_addresses:
            raise ValueError("give nsqd_tcp_addresses or lookupd_http_addresses")
        self.topic = topic
        self.channel = channel
        self.handler = handler
        self.config = config or Config.from_kwargs(**options)
        self.nsqd_tcp_addresses = list(nsqd_tcp_addresses)
        self.lookupd_http_addresses = list(lookupd_http_addresses)
        self.giving_up = giving_up
        self.drain_timeout = drain_timeout
        self.rng = rng or random.Random()
        self.conns: dict[str, NSQConnection] = {}
        self.stats = {"received": 0, "finished": 0, "requeued": 0, "given_up": 0,
                      "refused": 0, "connections": 0}
        self.backoff_level = 0  # consecutive failures the backoff is computed from
        self._backoff_timer: asyncio.TimerHandle | None = None
        self._testing: NSQConnection | None = None
        self._is_async = inspect.iscoroutinefunction(handler)
        self._executor = None if self._is_async else ThreadPoolExecutor(concurrency)
        self._unanswered: set[Message] = set()
        # answered messages, to tie a late E_FIN_FAILED to its message: weakly, since
        # only whoever still holds a message can see it (keeping thousands of answered
        # messages alive cost a quarter of a busy consumer's time, in allocation and GC)
        self._recent: dict[bytes, weakref.ref[Message]] = {}
        self._older: dict[bytes, weakref.ref[Message]] = {}
        self._answer = self._answered  # one bound method for every message, not one each
        self._connecting: set[str] = set()
        self._closing = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._poller: LookupdPoller | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed: asyncio.Future[bool] | None = None

    # -- life cycle -------------------------------------------------------------------

    async def start(self) -> Consumer:
        self._loop = asyncio.get_running_loop()
        self.closed = self._loop.create_future()
        for address in self.nsqd_tcp_addresses:
            self._spawn(self._keep_connected(address))
        if self.lookupd_http_addresses:
            cfg = self.config
            self._poller = LookupdPoller(
                self.lookupd_http_addresses, self.topic, self._discovered,
                interval=cfg.lookupd_poll_interval, jitter=cfg.lookupd_poll_jitter,
                rng=self.rng)
            self._poller.start()
        self._spawn(self._redistribute_loop())
        return self

    async def __aenter__(self) -> Consumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "start() first"
        return self._loop

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = self._running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self, timeout: float | None = None) -> bool:
        """Graceful stop: CLS everywhere, wait for CLOSE_WAIT and for in-flight messages
        to be answered (at most ``timeout``, default ``drain_timeout``), close.
        Returns True if every in-flight message was answered."""
        closed = self.closed
        assert closed is not None, "start() first"
        if self._closing:
            await asyncio.shield(closed)
            return closed.result()
        self._closing = True
        if self._poller is not None:
            self._poller.stop()
        for task in list(self._tasks):
            task.cancel()
        if self._backoff_timer is not None:
            self._backoff_timer.cancel()
        conns = list(self.conns.values())
        await asyncio.gather(*(c.cls() for c in conns), return_exceptions=True)
        drained = await self.drain(self.drain_timeout if timeout is None else timeout)
        for conn in conns:
            await conn.close(cls=False)
        if self._executor is not None:
            self._executor.shutdown(wait=False)
        closed.set_result(drained)
        return drained

    async def drain(self, timeout: float) -> bool:
        """Wait until every message handed to the handler is answered (True) or
        ``timeout`` passes (False)."""
        end = time.monotonic() + timeout
        while self._unanswered and time.monotonic() < end:
            await asyncio.sleep(0.01)
        return not self._unanswered

    # -- connections ----------------------------------------------------------------

    async def _discovered(self, nsqds: set[str]) -> None:
        new = [a for a in sorted(nsqds) if a not in self.conns and a not in self._connecting]
        await asyncio.gather(*(self._connect(a) for a in new), return_exceptions=True)

    async def _keep_connected(self, address: str) -> None:
        """A directly given nsqd: connect, and re-connect with doubling delays."""
        cfg = self.config
        delay = cfg.reconnect_interval
        while not self._closing:
            try:
                conn = await self._connect(address)
                delay = cfg.reconnect_interval
                await asyncio.shield(conn.closed)
            except (ConnectionError, NSQError, TimeoutError) as exc:
                log.info("nsqviz.clients.nsq: %s: %s", address, exc)
            if self._closing:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, cfg.max_reconnect_interval)

    async def _connect(self, address: str) -> NSQConnection:
        self._connecting.add(address)
        conn = NSQConnection(address, self.config, on_message=self._on_message,
                             on_close=self._on_close, on_refused=self._on_refused)
        try:
            await conn.connect(self.topic, self.channel)
        except BaseException:
            await conn.close(cls=False)
            raise
        finally:
            self._connecting.discard(address)
        if self._closing:
            await conn.close()
            raise ConnectionFailed("consumer closing")
        self.conns[address] = conn
        self.stats["connections"] += 1
        self._rebalance(new=conn)
        return conn

    def _on_close(self, conn: NSQConnection, exc: BaseException | None) -> None:
        if self.conns.get(conn.address) is conn:
            del self.conns[conn.address]
            if self._testing is conn:
                self._testing = None
            if not self._closing:
                self._rebalance()

    # -- RDY ------------------------------------------------------------------------

    def total_rdy(self) -> int:
        return sum(c.rdy for c in self.conns.values())

    def _share(self, conn: NSQConnection) -> int:
        return rdy_share(self.config.max_in_flight, len(self.conns), conn.max_rdy_count)

    def _send_rdy(self, conn: NSQConnection, count: int) -> bool:
        """Send RDY ``count`` if the sum over connections stays within max_in_flight."""
        count = min(count, conn.max_rdy_count)
        others = self.total_rdy() - conn.rdy
        if count > 0 and others + count > self.config.max_in_flight:
            return False
        try:
            conn.send(Rdy(count))
        except (ConnectionError, LocalProtocolError):
            return False
        return True

    def _rebalance(self, new: NSQConnection | None = None) -> None:
        """Bring every connection to its share: lower first (so the sum never exceeds
        max_in_flight), then raise; a new connection starts at RDY 1."""
        if self._closing or self.backoff_level > 0:
            return  # in backoff: RDY 0 everywhere, the tester excepted
        conns = list(self.conns.values())
        if self.config.max_in_flight < len(conns):
            for c in conns:  # at most one each; the periodic redistribution moves them
                if c.rdy > 1:
                    self._send_rdy(c, 1)
            if new is not None:
                self._send_rdy(new, 1)
            return
        for c in conns:
            if c is not new and c.rdy > self._share(c):
                self._send_rdy(c, self._share(c))
        if new is not None:
            self._send_rdy(new, 1)  # the guide: start every connection at 1
        for c in conns:
            if c is not new and 0 < c.rdy < self._share(c):
                self._send_rdy(c, self._share(c))

    def _maybe_update_rdy(self, conn: NSQConnection) -> None:
        """After a message: re-send the share when the count left is 0 or < 25 % of the
        last RDY sent, or when the share grew."""
        if self.backoff_level > 0 or self._closing or not conn.is_open:
            return
        if self.config.max_in_flight < len(self.conns):
            return  # RDY 1 at most, moved by the redistribution
        share = self._share(conn)
        left = conn.rdy - conn.received_since_rdy
        if left <= 0 or left < conn.rdy / 4 or conn.rdy < share:
            self._send_rdy(conn, share)

    async def _redistribute_loop(self) -> None:
        interval = self.config.rdy_redistribute_interval
        while True:
            await asyncio.sleep(interval)
            self.redistribute()

    def redistribute(self) -> None:
        """With fewer RDY than connections: take RDY from connections idle longer than
        ``low_rdy_idle_timeout`` and give RDY 1 to connections that have none."""
        conns = list(self.conns.values())
        now = time.monotonic()
        idle = self.config.low_rdy_idle_timeout
        if self.backoff_level > 0 and not self._closing:
            self._move_tester(conns, now, idle)
            return
        if self._closing or self.config.max_in_flight >= len(conns):
            return
        for c in conns:
            if c.rdy > 0 and now - max(c.last_message_at, c.rdy_sent_at) > idle:
                self._send_rdy(c, 0)
        waiting = [c for c in conns if c.rdy == 0]
        self.rng.shuffle(waiting)
        for c in waiting:
            if self.total_rdy() >= self.config.max_in_flight:
                break
            self._send_rdy(c, 1)

    def _move_tester(self, conns: list[NSQConnection], now: float, idle: float) -> None:
        """In backoff, the RDY 1 that tests the waters moves on when its connection has
        had no message for ``low_rdy_idle_timeout`` (its nsqd may simply be empty)."""
        t = self._testing
        if self._backoff_timer is not None or t is None:
            return
        if now - max(t.last_message_at, t.rdy_sent_at) <= idle:
            return
        others = [c for c in conns if c is not t and c.is_open]
        if not others:
            return
        self._send_rdy(t, 0)
        self._testing = self.rng.choice(others)
        self._send_rdy(self._testing, 1)

    def is_starved(self) -> bool:
        """True if a connection has in flight 85 % or more of its last RDY (the guide's
        signal for a batching handler to process its batch now)."""
        return any(c.in_flight > 0 and c.in_flight >= 0.85 * c.rdy
                   for c in self.conns.values())

    # -- backoff --------------------------------------------------------------------

    def _result(self, conn: NSQConnection, success: bool) -> None:
        if success and self.backoff_level == 0:
            return  # the usual case: not in backoff, and nothing to count
        if self.config.backoff_disabled or self._backoff_timer is not None:
            return  # during the backoff wait results do not count
        if success:
            self.backoff_level -= 1
        else:
            self.backoff_level += 1
        self._testing = None
        if self.backoff_level == 0:
            self._rebalance()  # recovered: every connection back to its share
            for c in list(self.conns.values()):
                if c.rdy == 0:
                    self._send_rdy(c, self._share(c))
            return
        for c in list(self.conns.values()):
            if c.rdy != 0:
                self._send_rdy(c, 0)
        strategy = self.config.backoff_strategy
        assert strategy is not None  # Config fills in the default
        wait = strategy(self.backoff_level)
        self._backoff_timer = self._running_loop().call_later(wait, self._test_the_waters)

    def _test_the_waters(self) -> None:
        self._backoff_timer = None
        conns = [c for c in self.conns.values() if c.is_open]
        if not conns or self._closing:
            return
        self._testing = self.rng.choice(conns)
        self._send_rdy(self._testing, 1)

    # -- messages ---------------------------------------------------------------------

    def _on_message(self, conn: NSQConnection, event: MessageFrame) -> None:
        msg = Message(event, conn, self.config, self._answer, conn.last_recv)
        self.stats["received"] += 1
        max_attempts = self.config.max_attempts
        if max_attempts and msg.attempts > max_attempts:
            self.stats["given_up"] += 1
            if self.giving_up is not None:
                try:
                    self.giving_up(msg)
                except Exception:
                    log.exception("giving_up callback failed for %r", msg)
            msg.responded = True
            self._answered(msg, Fin(msg.id), None)
            return
        self._unanswered.add(msg)
        if self._is_async:
            self._run_async(msg)
        else:
            fut = self._running_loop().run_in_executor(self._executor, self.handler, msg)

            def ran(f: asyncio.Future[Any], m: Message = msg) -> None:
                self._settle(m, f.exception(), None if f.exception() else f.result())

            fut.add_done_callback(ran)

    def _run_async(self, msg: Message) -> None:
        """Run an ``async def`` handler eagerly: up to its first real wait it runs right
        here (most handlers finish without waiting, and need no task); if it waits, the
        rest of it continues as a task."""
        coro = self.handler(msg)
        try:
            waiting_on = coro.send(None)
        except StopIteration as done:
            self._settle(msg, None, done.value)
            return
        except Exception as exc:  # the handler failed: requeue (with backoff)
            self._settle(msg, exc, None)
            return
        task = self._running_loop().create_task(_resume(coro, waiting_on))

        def ran(t: asyncio.Task[Any], m: Message = msg) -> None:
            self._settle(m, t.exception() if not t.cancelled() else None,
                         None if t.cancelled() or t.exception() else t.result())

        task.add_done_callback(ran)

    def _settle(self, msg: Message, exc: BaseException | None, result: Any) -> None:
        """The handler returned ``result`` (or raised ``exc``): FIN, or REQ with backoff."""
        if msg.responded or (msg.async_ and exc is None):
            return
        if exc is not None:
            log.warning("handler failed for %r: %r", msg, exc)
        if exc is None and result is not False:
            msg.finish()
        else:
            msg.requeue()

    def _answered(self, msg: Message, cmd: Fin | Req, success: bool | None) -> None:
        """A FIN or REQ for ``msg``: send it on its connection, then RDY and backoff."""
        self._unanswered.discard(msg)
        self._recent[msg.id] = weakref.ref(msg)
        if len(self._recent) > _RECENT:  # two generations: O(1), the last _RECENT at least
            self._older, self._recent = self._recent, {}
        conn = msg.conn
        if type(cmd) is Fin:
            self.stats["finished"] += 1
        else:
            self.stats["requeued"] += 1
        if not conn.is_open:
            return  # nsqd requeues it when it times out
        conn.send(cmd)
        conn.in_flight -= 1
        if success is not None:
            self._result(conn, success)
        self._maybe_update_rdy(conn)

    def _on_refused(self, conn: NSQConnection, error: Error, message_id: bytes | None) -> None:
        """nsqd refused a FIN/REQ/TOUCH (the message timed out first): tell the message."""
        self.stats["refused"] += 1
        msg = None
        if message_id is not None:
            held = self._recent.get(message_id) or self._older.get(message_id)
            msg = held() if held is not None else None  # None: nobody holds it any more
        if msg is None:
            msg = next((m for m in self._unanswered if m.id == message_id), None)
        if msg is not None:
            msg.refused = error
        log.info("nsqd %s refused: %s %s", conn.address, error.code, error.text)
