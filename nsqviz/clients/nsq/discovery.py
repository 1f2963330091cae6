"""Discovery through nsqlookupd, as the client guide asks.

Every poll queries *every* configured lookupd (``GET /lookup?topic=``) at the same time
and takes the union of their producers keyed by ``broadcast_address:tcp_port`` (lookupds
do not share data, so one alone may not know every nsqd). The first poll runs at once;
after that the wait is ``interval`` plus a random ``jitter`` fraction of it, drawn anew
for every poll, so many consumers started together drift apart. A lookupd that fails is
skipped for that poll; the others still count. Times: ``time.monotonic``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable

from nsqviz.nsq.json_object import read_object

__all__ = ["LookupdPoller", "query_lookupd"]

log = logging.getLogger(__name__)


def query_lookupd(address: str, topic: str, timeout: float = 5.0) -> list[str]:
    """``broadcast_address:tcp_port`` of the producers one lookupd knows for ``topic``
    (blocking; ``[]`` for ``TOPIC_NOT_FOUND``)."""
    base = address if address.startswith(("http://", "https://")) else f"http://{address}"
    url = f"{base}/lookup?{urllib.parse.urlencode({'topic': topic})}"
    req = urllib.request.Request(url, headers={"Accept": "application/vnd.nsq; version=1.0"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            doc = read_object(r.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise
    data = doc.get("data", doc)  # nsqlookupd < 1.0 wrapped the answer
    return [f"{p['broadcast_address']}:{p['tcp_port']}" for p in data.get("producers", [])]


class LookupdPoller:
    """Polls ``addresses`` for ``topic`` and calls ``found(set_of_nsqd_addresses)``."""

    def __init__(self, addresses: list[str], topic: str,
                 found: Callable[[set[str]], Awaitable[None] | None], *,
                 interval: float, jitter: float, rng: random.Random | None = None):
        self.addresses = list(addresses)
        self.topic = topic
        self.found = found
        self.interval = interval
        self.jitter = jitter
        self.rng = rng or random.Random()
        self.polls = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def next_wait(self) -> float:
        return self.interval + self.rng.uniform(0, self.jitter * self.interval)

    async def poll(self) -> set[str]:
        results = await asyncio.gather(
            *(asyncio.to_thread(query_lookupd, a, self.topic) for a in self.addresses),
            return_exceptions=True)
        union: set[str] = set()
        for address, result in zip(self.addresses, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("lookupd %s: %s", address, result)
                continue
            union.update(result)
        self.polls += 1
        return union

    async def _run(self) -> None:
        while True:
            nsqds = await self.poll()
            outcome = self.found(nsqds)
            if outcome is not None:
                await outcome
            await asyncio.sleep(self.next_wait())
