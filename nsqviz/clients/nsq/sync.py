"""Blocking wrappers for notebooks and scripts: the asyncio client on its own loop thread.

``SyncProducer`` publishes and returns when nsqd answered; ``SyncConsumer`` runs a
:class:`~nsqviz.clients.nsq.Consumer` in the background until :meth:`SyncConsumer.close`.
Both are context managers. Handlers of a SyncConsumer run on the client's thread pool
(plain functions) or loop (``async def``), never on the caller's thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from nsqviz.clients.nsq.consumer import Consumer
from nsqviz.clients.nsq.producer import Producer

__all__ = ["SyncConsumer", "SyncProducer"]

T = TypeVar("T")


class _LoopThread:
    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class SyncProducer:
    """``with SyncProducer("127.0.0.1:4150") as p: p.publish("t", b"x")`` -- arguments
    as :class:`~nsqviz.clients.nsq.Producer`."""

    def __init__(self, *args: Any, **kwargs: Any):
        self._thread = _LoopThread("nsqviz-producer")
        self.producer: Producer = self._thread.run(self._make(args, kwargs))

    @staticmethod
    async def _make(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Producer:
        return Producer(*args, **kwargs)

    def publish(self, topic: str, body: bytes | str) -> None:
        self._thread.run(self.producer.publish(topic, body))

    def mpub(self, topic: str, bodies: list[bytes | str], *, split: bool = True) -> int:
        return self._thread.run(self.producer.mpub(topic, bodies, split=split))

    def dpub(self, topic: str, delay: float, body: bytes | str) -> None:
        self._thread.run(self.producer.dpub(topic, delay, body))

    def close(self) -> None:
        self._thread.run(self.producer.close())
        self._thread.stop()

    def __enter__(self) -> SyncProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncConsumer:
    """``with SyncConsumer("t", "c", handler, nsqd_tcp_addresses=...) as c: ...`` --
    arguments as :class:`~nsqviz.clients.nsq.Consumer`; started at once."""

    def __init__(self, *args: Any, **kwargs: Any):
        self._thread = _LoopThread("nsqviz-consumer")
        self.consumer: Consumer = self._thread.run(self._start(args, kwargs))

    @staticmethod
    async def _start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Consumer:
        return await Consumer(*args, **kwargs).start()

    def is_starved(self) -> bool:
        return self.consumer.is_starved()

    @property
    def stats(self) -> dict[str, int]:
        return dict(self.consumer.stats)

    def close(self, timeout: float | None = None) -> bool:
        """Graceful close (CLS, CLOSE_WAIT, in-flight answered); True if all were."""
        drained = self._thread.run(self.consumer.close(timeout))
        self._thread.stop()
        return drained

    def __enter__(self) -> SyncConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
