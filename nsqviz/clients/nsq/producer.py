"""The asyncio Producer: PUB, MPUB and DPUB to a pool of nsqd with failover and retry.

Publishes go to the first nsqd of ``nsqd_tcp_addresses`` that is up; a publish that fails
because the connection is lost (or cannot be opened) is retried on the next one, up to
``retries`` times, with a short growing pause -- so a writer survives an nsqd restart.
nsqd's refusals (``E_BAD_TOPIC``, ``E_MPUB_FAILED`` ...) are raised as
:class:`~nsqviz.clients.nsq.conn.NSQError` and not retried, as they would be refused again.

Sizes are checked before anything is sent, against nsqd's defaults or the given
``max_msg_size``/``max_body_size``: an empty or too large message raises
:class:`MessageTooBig`/`ValueError` naming its index; an MPUB whose body would pass
``max_body_size`` is split into several MPUBs in order (``split=False`` raises instead;
a split batch is no longer atomic).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, cast

from nsqviz.clients.nsq.config import Config
from nsqviz.clients.nsq.conn import ConnectionFailed, NSQConnection, NSQError
from nsqviz.nsq.events import Command, Dpub, Mpub, Pub
from nsqviz.nsq.framing import DEFAULT_MAX_BODY_SIZE, DEFAULT_MAX_MSG_SIZE
from nsqviz.nsq.grammar_errors import BadSize

__all__ = ["MessageTooBig", "Producer", "split_mpub"]

log = logging.getLogger(__name__)


_BYTES = {bytes}
"""What a batch made only of bytes holds (checked without a Python-level step per
message: the usual batch, and the one a publishing hot loop sends)."""


class MessageTooBig(ValueError):
    """A message is larger than nsqd accepts (it would answer ``E_BAD_MESSAGE``)."""


def split_mpub(bodies: list[bytes], *, max_msg_size: int = DEFAULT_MAX_MSG_SIZE,
               max_body_size: int = DEFAULT_MAX_BODY_SIZE) -> list[list[bytes]]:
    """Batches of ``bodies`` whose MPUB bodies (``4 + sum(4 + len)``) fit ``max_body_size``.

    Raises ValueError for an empty batch or message and :class:`MessageTooBig` for a
    message over ``max_msg_size`` (or too big for any MPUB), naming its index.
    """
    if not bodies:
        raise ValueError("MPUB needs at least one message")
    sizes = list(map(len, bodies))
    whole = 4 + 4 * len(sizes) + sum(sizes)
    # the usual case, checked without a loop per message (and without looking for the
    # largest message when the whole body fits max_msg_size: each of them does then)
    if all(sizes) and whole <= max_body_size and (
            whole <= max_msg_size or max(sizes) <= max_msg_size):
        return [list(bodies)]
    batches: list[list[bytes]] = [[]]
    size = 4
    for i, body in enumerate(bodies):
        if not body:
            raise ValueError(f"message {i} is empty (nsqd refuses empty messages)")
        if len(body) > max_msg_size:
            raise MessageTooBig(f"message {i} is {len(body)} bytes > max_msg_size "
                                f"{max_msg_size}")
        need = 4 + len(body)
        if 4 + need > max_body_size:
            raise MessageTooBig(f"message {i} ({len(body)} bytes) cannot fit an MPUB body of "
                                f"max_body_size {max_body_size}")
        if size + need > max_body_size:
            batches.append([])
            size = 4
        batches[-1].append(body)
        size += need
    return batches


class Producer:
    """Publish to ``nsqd_tcp_addresses`` (one string or a list: a failover pool).

    ``async with Producer("127.0.0.1:4150") as p: await p.publish("t", b"x")``.
    Options: :class:`Config` fields as keywords, or ``config=``.
    """

    def __init__(self, nsqd_tcp_addresses: list[str] | str, *, retries: int = 3,
                 retry_delay: float = 0.1, max_msg_size: int = DEFAULT_MAX_MSG_SIZE,
                 max_body_size: int = DEFAULT_MAX_BODY_SIZE, config: Config | None = None,
                 **options: Any):
        if isinstance(nsqd_tcp_addresses, str):
            nsqd_tcp_addresses = [nsqd_tcp_addresses]
        if not nsqd_tcp_addresses:
            raise ValueError("give at least one nsqd address")
        self.addresses = list(nsqd_tcp_addresses)
        self.retries = retries
        self.retry_delay = retry_delay
        self.max_msg_size = max_msg_size
        self.max_body_size = max_body_size
        self.config = config or Config.from_kwargs(**options)
        self._conn: NSQConnection | None = None
        self._current = 0
        self._lock: asyncio.Lock | None = None
        self.failovers = 0

    async def __aenter__(self) -> Producer:
        await self.connection()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connection(self) -> NSQConnection:
        """The open connection, (re)connecting along the pool as needed."""
        if self._conn is not None and self._conn.is_open:
            return self._conn
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._conn is not None and self._conn.is_open:
                return self._conn
            last: BaseException | None = None
            for k in range(len(self.addresses)):
                address = self.addresses[(self._current + k) % len(self.addresses)]
                conn = NSQConnection(address, self.config)
                try:
                    await conn.connect()
                except (ConnectionError, NSQError, TimeoutError) as exc:
                    await conn.close(cls=False)
                    last = exc
                    continue
                if k:
                    self.failovers += 1
                self._current = (self._current + k) % len(self.addresses)
                self._conn = conn
                return conn
            raise ConnectionFailed(f"no nsqd reachable of {self.addresses}: {last}")

    async def _publish(self, cmd: Command) -> None:
        delay = self.retry_delay
        for attempt in range(self.retries + 1):
            try:
                conn = self._conn
                if conn is None or not conn.is_open:
                    conn = await self.connection()
                await conn.command(cmd)
                return
            except ConnectionError as exc:
                if attempt == self.retries:
                    raise
                log.info("publish failed (%s): retrying on the next nsqd", exc)
                self._current = (self._current + 1) % len(self.addresses)
                await asyncio.sleep(delay)
                delay *= 2

    def _check(self, body: bytes | str, i: int = 0) -> bytes:
        if isinstance(body, str):
            body = body.encode()
        if not body:
            raise ValueError(f"message {i} is empty (nsqd refuses empty messages)")
        if len(body) > self.max_msg_size:
            raise MessageTooBig(f"message {i} is {len(body)} bytes > max_msg_size "
                                f"{self.max_msg_size}")
        return body

    async def publish(self, topic: str, body: bytes | str) -> None:
        """PUB one message; returns when nsqd answered OK."""
        await self._publish(Pub(topic, self._check(body)))

    async def mpub(self, topic: str, bodies: list[bytes | str], *, split: bool = True) -> int:
        """MPUB ``bodies`` (split into several MPUBs if one would be too big); returns the
        number of MPUB commands sent."""
        try:
            # one pass in C: only bytes-like messages join (a str raises), and the joined
            # length is the messages' size -- in place of a pass for their types and
            # another for their sizes, the usual batch's only look at its messages
            # before the codec encodes them (a publishing hot loop pays it per MPUB)
            whole = 4 + 4 * len(bodies) + len(b"".join(cast("list[bytes]", bodies)))
        except TypeError:
            whole = 0
        if bodies and 0 < whole <= min(self.max_body_size, self.max_msg_size):
            # one MPUB, and no message in it can be over max_msg_size; an empty one is
            # refused by the codec before anything is sent, and named below
            with contextlib.suppress(BadSize):
                await self._publish(Mpub(topic, tuple(cast("list[bytes]", bodies))))
                return 1
        if set(map(type, bodies)) <= _BYTES:
            data = cast("list[bytes]", bodies)  # split_mpub copies it
        else:
            data = [b.encode() if isinstance(b, str) else b for b in bodies]
        batches = split_mpub(data, max_msg_size=self.max_msg_size,
                             max_body_size=self.max_body_size)
        if len(batches) > 1 and not split:
            raise MessageTooBig(f"{len(data)} messages need {len(batches)} MPUBs "
                                f"(max_body_size {self.max_body_size}); pass split=True")
        for batch in batches:
            await self._publish(Mpub(topic, tuple(batch)))
        return len(batches)

    async def dpub(self, topic: str, delay: float, body: bytes | str) -> None:
        """DPUB: deliver ``body`` after ``delay`` seconds."""
        await self._publish(Dpub(topic, int(delay * 1000), self._check(body)))

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close(cls=False)
            self._conn = None
