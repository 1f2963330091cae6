"""A server in-process: its own event loop on a background daemon thread.

The embedded broker, lookupd and TubeMQ simulator are asyncio servers with ``async
start()``/``stop()``; notebooks and tests want them as ``with ...:`` blocks that a
synchronous caller can enter. :class:`BackgroundServer` is that wrapper, written once:
the server object is made *on* its loop's thread (so everything it creates belongs to
that loop), start-up failures are raised in the caller, and leaving the block stops the
server gracefully before the loop ends. :class:`ListeningServer` adds what the broker and
the lookupd share: options with keyword overrides, and the TCP and HTTP addresses.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Generic, Protocol, Self, TypeVar

__all__ = ["BackgroundServer", "ListeningServer"]


class _Server(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


S = TypeVar("S", bound=_Server)


class _Listening(_Server, Protocol):
    tcp_port: int
    http_port: int

    @property
    def tcp_address(self) -> str: ...
    @property
    def http_address(self) -> str: ...


L = TypeVar("L", bound=_Listening)


class BackgroundServer(Generic[S]):
    """Runs the server that :meth:`make_server` builds on a loop of its own.

    Subclasses name the thread and build their server; ``self.server`` is it while it
    runs (``None`` before :meth:`start` and after a failed start)."""

    thread_name = "nsqviz-server"
    stop_timeout = 60.0

    def _running(self) -> S:
        """The server, which runs (an error before :meth:`start`)."""
        assert self.server is not None, "not started"
        return self.server

    def __init__(self) -> None:
        self.server: S | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def make_server(self) -> S:
        raise NotImplementedError

    def start(self) -> Self:
        started: Future[None] = Future()
        loop = self.loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            self.server = self.make_server()
            try:
                loop.run_until_complete(self.server.start())
            except BaseException as exc:  # report start-up failures to the caller
                started.set_exception(exc)
                return
            started.set_result(None)
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_default_executor())

        self._thread = threading.Thread(target=run, name=self.thread_name, daemon=True)
        self._thread.start()
        started.result(timeout=30)
        return self

    @property
    def running(self) -> bool:
        """Started and not stopped yet."""
        return self._thread is not None

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the server's loop (to read or change its state safely)."""
        async def run() -> Any:
            return fn(*args)
        assert self.loop is not None, "not started"
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=30)

    def stop(self) -> None:
        if self.loop is None or self._thread is None:
            return
        if self.server is not None and self.loop.is_running():
            asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(
                timeout=self.stop_timeout)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()
        self.loop = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ListeningServer(BackgroundServer[L]):
    """A :class:`BackgroundServer` for a server built from an options dataclass that
    listens on TCP and HTTP (the broker, the lookupd): ``opts`` (else
    :meth:`default_options`, free loopback ports) with keyword overrides, and the
    server's addresses and ports while it runs."""

    def __init__(self, opts: Any = None, **overrides: Any) -> None:
        super().__init__()
        self.opts = dataclasses.replace(opts or self.default_options(), **overrides)

    def default_options(self) -> Any:
        raise NotImplementedError

    @property
    def tcp_address(self) -> str:
        return self._running().tcp_address

    @property
    def http_address(self) -> str:
        return self._running().http_address

    @property
    def tcp_port(self) -> int:
        return self._running().tcp_port

    @property
    def http_port(self) -> int:
        return self._running().http_port
