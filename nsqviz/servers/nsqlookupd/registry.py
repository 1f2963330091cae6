"""nsqlookupd's registration database: which nsqd has which topics and channels.

A registration is ``(category, key, subkey)``: ``("client", "", "")`` for every
identified nsqd, ``("topic", T, "")`` and ``("channel", T, C)``. Each holds the
producers (nsqd peers) that registered it. A peer's ``last_update`` is refreshed by
IDENTIFY and PING; /lookup and /nodes leave out peers silent for longer than the
inactive-producer timeout, and /lookup also those tombstoned less than the tombstone
lifetime ago. Times are ``time.monotonic()`` seconds, passed in by the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

__all__ = ["Peer", "Producer", "Registry", "Registration"]

Registration = tuple[str, str, str]

K = TypeVar("K")

PEER_FIELDS = ("remote_address", "hostname", "broadcast_address", "tcp_port", "http_port",
               "version")
"""The keys of a producer in /lookup and /nodes answers, in nsqlookupd v1.3.0's order."""


@dataclass(eq=False)
class Peer:
    """One identified nsqd connection (nsqlookupd's ``PeerInfo``)."""

    id: str
    info: dict[str, Any]
    last_update: float

    def json(self) -> dict[str, Any]:
        blank = {"tcp_port": 0, "http_port": 0}
        return {k: self.info.get(k, blank.get(k, "")) for k in PEER_FIELDS}


@dataclass(eq=False, slots=True)
class Producer:
    """A peer in one registration, with that registration's tombstone."""

    peer: Peer
    tombstoned_at: float | None = None

    def is_tombstoned(self, lifetime: float, now: float) -> bool:
        return self.tombstoned_at is not None and now - self.tombstoned_at < lifetime


@dataclass
class Registry:
    """The registrations and their producers, with nsqlookupd's lookups.

    nsqlookupd scans its whole map for a wildcard lookup and for a peer's registrations,
    so ``/nodes`` costs it (nsqd peers x registrations); here every lookup an endpoint
    makes is answered from an index kept beside the map -- registrations by category,
    by (category, key), and each peer's producers -- so each endpoint costs what it
    answers. Lists come in the order the registrations were made (nsqlookupd's come in
    Go's map order, which is random), so no answer costs a sort either."""

    inactive_producer_timeout: float = 300.0
    tombstone_lifetime: float = 45.0
    _map: dict[Registration, dict[str, Producer]] = field(default_factory=dict)
    _by_category: dict[str, dict[Registration, None]] = field(default_factory=dict)
    _by_key: dict[tuple[str, str], dict[Registration, None]] = field(default_factory=dict)
    _by_peer: dict[str, dict[Registration, Producer]] = field(default_factory=dict)

    # -- changes -----------------------------------------------------------------

    def add_registration(self, key: Registration) -> None:
        self._producers(key)

    def add_producer(self, key: Registration, peer: Peer) -> bool:
        producers = self._producers(key)
        if peer.id in producers:
            return False
        producers[peer.id] = self._by_peer.setdefault(peer.id, {})[key] = Producer(peer)
        return True

    def remove_producer(self, key: Registration, peer_id: str) -> tuple[bool, int]:
        """Remove a peer from a registration: (was it there, how many are left)."""
        producers = self._map.get(key)
        if producers is None:
            return False, 0
        removed = producers.pop(peer_id, None) is not None
        if removed:
            self._unindex_peer(peer_id, key)
        return removed, len(producers)

    def remove_registration(self, key: Registration) -> None:
        producers = self._map.pop(key, None)
        if producers is None:
            return
        for peer_id in producers:
            self._unindex_peer(peer_id, key)
        _unindex(self._by_category, key[0], key)
        _unindex(self._by_key, (key[0], key[1]), key)

    def remove_peer(self, peer_id: str) -> None:
        """A peer disconnected: it leaves every registration (which stay)."""
        for key in self._by_peer.pop(peer_id, {}):
            self._map[key].pop(peer_id, None)

    def tombstone(self, topic: str, node: str, now: float) -> None:
        """Hide the producer ``broadcast_address:http_port`` of ``topic`` for a while."""
        for p in self.find_producers("topic", topic, ""):
            if f"{p.peer.info.get('broadcast_address')}:{p.peer.info.get('http_port')}" == node:
                p.tombstoned_at = now

    def _producers(self, key: Registration) -> dict[str, Producer]:
        producers = self._map.get(key)
        if producers is None:
            producers = self._map[key] = {}
            self._by_category.setdefault(key[0], {})[key] = None
            self._by_key.setdefault((key[0], key[1]), {})[key] = None
        return producers

    def _unindex_peer(self, peer_id: str, key: Registration) -> None:
        mine = self._by_peer.get(peer_id)
        if mine is not None:
            mine.pop(key, None)
            if not mine:
                del self._by_peer[peer_id]

    # -- lookups -------------------------------------------------------------------

    def find_registrations(self, category: str, key: str, subkey: str) -> list[Registration]:
        """Registrations matching the pattern (``"*"`` matches anything)."""
        if key != "*" and subkey != "*":
            exact = (category, key, subkey)
            return [exact] if exact in self._map else []
        if key != "*":
            found = self._by_key.get((category, key), {})
        else:
            found = self._by_category.get(category, {})
        if subkey == "*":
            return list(found)
        return [r for r in found if r[2] == subkey]

    def find_producers(self, category: str, key: str, subkey: str) -> list[Producer]:
        if key != "*" and subkey != "*":
            return list(self._map.get((category, key, subkey), {}).values())
        seen: dict[str, Producer] = {}
        for r in self.find_registrations(category, key, subkey):
            for pid, p in self._map[r].items():
                seen.setdefault(pid, p)
        return list(seen.values())

    def registrations_of(self, peer_id: str) -> Mapping[Registration, Producer]:
        """The registrations a peer is a producer of, each with that producer (a live
        view: copy what is read across awaits)."""
        return MappingProxyType(self._by_peer.get(peer_id, {}))

    def active(self, producers: list[Producer], now: float, *,
               tombstones: bool = True) -> list[Producer]:
        """Producers heard from within the inactive timeout (and, with ``tombstones``,
        not tombstoned within the tombstone lifetime)."""
        lifetime = self.tombstone_lifetime if tombstones else 0.0
        return [
            p for p in producers
            if now - p.peer.last_update <= self.inactive_producer_timeout
            and not p.is_tombstoned(lifetime, now)
        ]


def _unindex(index: dict[K, dict[Registration, None]], at: K, key: Registration) -> None:
    """Take ``key`` out of ``index[at]``, and the entry itself once it is empty."""
    keys = index[at]
    keys.pop(key, None)
    if not keys:
        del index[at]
