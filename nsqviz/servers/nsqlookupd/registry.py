"""nsqlookupd's registration database: which nsqd has which topics and channels.

A registration is ``(category, key, subkey)``: ``("client", "", "")`` for every
identified nsqd, ``("topic", T, "")`` and ``("channel", T, C)``. Each holds the
producers (nsqd peers) that registered it. A peer's ``last_update`` is refreshed by
IDENTIFY and PING; /lookup and /nodes leave out peers silent for longer than the
inactive-producer timeout, and /lookup also those tombstoned less than the tombstone
lifetime ago. Times are ``time.monotonic()`` seconds, passed in by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Peer", "Producer", "Registry", "Registration"]

Registration = tuple[str, str, str]

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


@dataclass(eq=False)
class Producer:
    """A peer in one registration, with that registration's tombstone."""

    peer: Peer
    tombstoned_at: float | None = None

    def is_tombstoned(self, lifetime: float, now: float) -> bool:
        return self.tombstoned_at is not None and now - self.tombstoned_at < lifetime


@dataclass
class Registry:
    """The registrations and their producers, with nsqlookupd's lookups."""

    inactive_producer_timeout: float = 300.0
    tombstone_lifetime: float = 45.0
    _map: dict[Registration, dict[str, Producer]] = field(default_factory=dict)

    # -- changes -----------------------------------------------------------------

    def add_registration(self, key: Registration) -> None:
        self._map.setdefault(key, {})

    def add_producer(self, key: Registration, peer: Peer) -> bool:
        producers = self._map.setdefault(key, {})
        if peer.id in producers:
            return False
        producers[peer.id] = Producer(peer)
        return True

    def remove_producer(self, key: Registration, peer_id: str) -> tuple[bool, int]:
        """Remove a peer from a registration: (was it there, how many are left)."""
        producers = self._map.get(key)
        if producers is None:
            return False, 0
        removed = producers.pop(peer_id, None) is not None
        return removed, len(producers)

    def remove_registration(self, key: Registration) -> None:
        self._map.pop(key, None)

    def remove_peer(self, peer_id: str) -> None:
        """A peer disconnected: it leaves every registration (which stay)."""
        for key in self.registrations_of(peer_id):
            self.remove_producer(key, peer_id)

    def tombstone(self, topic: str, node: str, now: float) -> None:
        """Hide the producer ``broadcast_address:http_port`` of ``topic`` for a while."""
        for p in self.find_producers("topic", topic, ""):
            if f"{p.peer.info.get('broadcast_address')}:{p.peer.info.get('http_port')}" == node:
                p.tombstoned_at = now

    # -- lookups -------------------------------------------------------------------

    def find_registrations(self, category: str, key: str, subkey: str) -> list[Registration]:
        """Registrations matching the pattern (``"*"`` matches anything), sorted."""
        return sorted(
            r for r in self._map
            if r[0] == category and key in ("*", r[1]) and subkey in ("*", r[2])
        )

    def find_producers(self, category: str, key: str, subkey: str) -> list[Producer]:
        seen: dict[str, Producer] = {}
        for r in self.find_registrations(category, key, subkey):
            for pid, p in self._map[r].items():
                seen.setdefault(pid, p)
        return list(seen.values())

    def registrations_of(self, peer_id: str) -> list[Registration]:
        return sorted(r for r, producers in self._map.items() if peer_id in producers)

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
