"""Blocking wrappers for notebooks and scripts: the asyncio client on its own loop thread.

``SyncProducer`` publishes and returns when nsqd answered; ``SyncConsumer`` runs a
:class:`~nsqviz.clients.nsq.Consumer` in the background until :meth:`SyncConsumer.close`.
Both are context managers. Handlers of a SyncConsumer run on the client's thread pool
(plain functions) or loop (``async def``), never on the caller's thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from nsqviz.clients.nsq.consumer import Consumer
from nsqviz.clients.nsq.producer import Producer

__all__ = ["SyncConsumer", "SyncProducer"]

T = TypeVar("T")


class _LoopThread:
    """An event loop on a thread of its own, for the blocking wrappers; stopped once."""

    def __init__(self, name: str):
        self.name = name
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, make: Callable[[], Coroutine[Any, Any, T]], timeout: float | None = None) -> T:
        """Run the coroutine ``make()`` on the loop and wait for its result. After
        :meth:`stop`, a clear error -- and no coroutine made that nobody would await."""
        if self.loop.is_closed():
            raise RuntimeError(f"{self.name}: closed")
        return asyncio.run_coroutine_threadsafe(make(), self.loop).result(timeout)

    def stop(self) -> None:
        """Let what the client left running end (cancelled), then stop and close the loop;
        again: nothing."""
        if self.loop.is_closed():
            return
        try:
            self.run(_settle, 10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()


async def _settle() -> None:
    """Cancel the loop's other tasks and wait until they have ended, as ``asyncio.run``
    does before it closes its loop (a task destroyed while pending is an error logged)."""
    tasks = asyncio.all_tasks() - {asyncio.current_task()}
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()


class SyncProducer:
    """``with SyncProducer("127.0.0.1:4150") as p: p.publish("t", b"x")`` -- arguments
    as :class:`~nsqviz.clients.nsq.Producer`. :meth:`close` may be called more than once (the
    ``with`` block's end closes it too)."""

    def __init__(self, *args: Any, **kwargs: Any):
        self._thread = _LoopThread("nsqviz-producer")
        try:
            self.producer: Producer = self._thread.run(lambda: self._make(args, kwargs))
        except BaseException:
            self._thread.stop()
            raise

    @staticmethod
    async def _make(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Producer:
        return Producer(*args, **kwargs)

    def publish(self, topic: str, body: bytes | str) -> None:
        self._thread.run(lambda: self.producer.publish(topic, body))

    def mpub(self, topic: str, bodies: list[bytes | str], *, split: bool = True) -> int:
        return self._thread.run(lambda: self.producer.mpub(topic, bodies, split=split))

    def dpub(self, topic: str, delay: float, body: bytes | str) -> None:
        self._thread.run(lambda: self.producer.dpub(topic, delay, body))

    def close(self) -> None:
        if self._thread.loop.is_closed():
            return
        try:
            self._thread.run(self.producer.close)
        finally:
            self._thread.stop()

    def __enter__(self) -> SyncProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncConsumer:
    """``with SyncConsumer("t", "c", handler, nsqd_tcp_addresses=...) as c: ...`` --
    arguments as :class:`~nsqviz.clients.nsq.Consumer`; started at once. :meth:`close` may be
    called more than once (the ``with`` block's end closes it too)."""

    def __init__(self, *args: Any, **kwargs: Any):
        self._thread = _LoopThread("nsqviz-consumer")
        self._drained: bool | None = None
        try:
            self.consumer: Consumer = self._thread.run(lambda: self._start(args, kwargs))
        except BaseException:
            self._thread.stop()
            raise

    @staticmethod
    async def _start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Consumer:
        return await Consumer(*args, **kwargs).start()

    def is_starved(self) -> bool:
        return self.consumer.is_starved()

    @property
    def stats(self) -> dict[str, int]:
        return dict(self.consumer.stats)

    def close(self, timeout: float | None = None) -> bool:
        """Graceful close (CLS, CLOSE_WAIT, in-flight answered); True if all were. Again:
        what the first close said."""
        if self._drained is None and not self._thread.loop.is_closed():
            try:
                self._drained = self._thread.run(lambda: self.consumer.close(timeout))
            finally:
                self._thread.stop()
        return bool(self._drained)

    def __enter__(self) -> SyncConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
