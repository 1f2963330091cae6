"""The broker in-process: its own event loop on a background thread.

For notebooks and tests: ``with EmbeddedBroker() as b: ... b.tcp_address`` starts a
broker on free loopback ports, and leaving the block stops it gracefully (with a
``data_path``, queued, deferred and in-flight messages are written to disk, so a new
``EmbeddedBroker`` on the same path gets them back).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from concurrent.futures import Future

from nsqviz.broker.options import Options
from nsqviz.broker.server import Broker

__all__ = ["EmbeddedBroker"]


class EmbeddedBroker:
    """A running broker on a daemon thread. Options as keyword arguments (nsqd's names
    with underscores: ``msg_timeout=2.0``, ``data_path=...``)."""

    def __init__(self, opts: Options | None = None, **overrides):
        base = opts or Options(tcp_address="127.0.0.1:0", http_address="127.0.0.1:0")
        self.opts = dataclasses.replace(base, **overrides)
        self.broker: Broker | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def tcp_address(self) -> str:
        return self.broker.tcp_address

    @property
    def http_address(self) -> str:
        return self.broker.http_address

    @property
    def tcp_port(self) -> int:
        return self.broker.tcp_port

    @property
    def http_port(self) -> int:
        return self.broker.http_port

    def start(self) -> EmbeddedBroker:
        started: Future = Future()
        self.loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.broker = Broker(self.opts)
            try:
                self.loop.run_until_complete(self.broker.start())
            except BaseException as exc:  # report start-up failures to the caller
                started.set_exception(exc)
                return
            started.set_result(None)
            self.loop.run_forever()
            self.loop.run_until_complete(self.loop.shutdown_default_executor())

        self._thread = threading.Thread(target=run, name="nsqviz-broker", daemon=True)
        self._thread.start()
        started.result(timeout=30)
        return self

    def stop(self) -> None:
        if self.loop is None or self._thread is None:
            return
        if self.broker is not None and self.loop.is_running():
            asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(timeout=60)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()
        self.loop = None
        self._thread = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
