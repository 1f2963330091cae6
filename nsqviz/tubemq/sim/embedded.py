"""The simulator in-process: its own event loop on a background thread.

For notebooks and tests: ``with EmbeddedSim(topics=("demo",)) as sim: ... sim.master_address``
starts a Master and two Brokers on free loopback ports, and leaving the block stops
them gracefully (with a ``data_path``, every stored message and committed offset is
written out, so a new ``EmbeddedSim`` on the same path gets them back).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

from nsqviz.tubemq.sim.cluster import SimConfig
from nsqviz.tubemq.sim.server import SimServer

__all__ = ["EmbeddedSim"]


class EmbeddedSim:
    """A running simulator on a daemon thread. :class:`SimConfig` fields as keywords;
    ports default to free ones (0), not to 8715/8123."""

    def __init__(self, config: SimConfig | None = None, **fields: Any):
        if config is None:
            fields.setdefault("master_port", 0)
            fields.setdefault("broker_ports", (0, 0))
            config = SimConfig(**fields)
        elif fields:
            raise TypeError("give a SimConfig or its fields, not both")
        self.config = config
        self.server: SimServer | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def master_address(self) -> str:
        return self.server.master_address

    @property
    def broker_addresses(self) -> list[str]:
        return self.server.broker_addresses

    @property
    def simulation(self):
        """The model (:class:`~nsqviz.tubemq.sim.state.Simulation`): Master, Brokers, stores.
        Read it through :meth:`call` while the simulator runs."""
        return self.server.sim

    def call(self, fn, *args):
        """Run ``fn(*args)`` on the simulator's loop (to read or change its state safely)."""
        async def run():
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=30)

    def start(self) -> EmbeddedSim:
        started: Future = Future()
        self.loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.server = SimServer(self.config)
            try:
                self.loop.run_until_complete(self.server.start())
            except BaseException as exc:  # report start-up failures to the caller
                started.set_exception(exc)
                return
            started.set_result(None)
            self.loop.run_forever()

        self._thread = threading.Thread(target=run, name="nsqviz-tubemq-sim", daemon=True)
        self._thread.start()
        started.result(timeout=30)
        return self

    def stop(self) -> None:
        if self.loop is None or self._thread is None:
            return
        if self.server is not None and self.loop.is_running():
            asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(timeout=60)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()
        self.loop = None
        self._thread = None

    def __enter__(self) -> EmbeddedSim:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
