"""A simulated Broker's storage: one message log per partition, and each consumer
group's offsets into it, with the real broker's commit rule.

Offsets count in the real broker's index units: every stored message takes one
28-byte index entry, so the offsets a consumer sees are 0, 28, 56, ... as on a real
TubeMQ Broker (``DataStoreUtils``). A group's position in a partition is two numbers, as in
the broker's ``DefaultOffsetManager``:

* ``offset``: what the group has committed;
* ``tmp``: how far the last fetch read past it, not committed yet.

A fetch reads from ``offset`` (so an uncommitted batch is read again: at-least-once);
a fetch with ``lastPackConsumed`` or a commit with ``isConsumed`` first moves ``offset``
by ``tmp``; a rollback, a re-register or a restart drops ``tmp``.

Everything committed survives :meth:`BrokerStore.save` / :meth:`BrokerStore.load`
(a JSON file written atomically); ``tmp`` does not, on purpose.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nsqviz.tubemq.metadata import checksum
from nsqviz.tubemq.tables import ReadStatus

__all__ = [
    "INDEX_UNIT",
    "BrokerStore",
    "GroupOffset",
    "PartitionLog",
    "StoredMessage",
]

INDEX_UNIT = 28
"""Bytes per index entry on a real Broker; offsets move in these steps."""


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One message as the Broker keeps it and hands it out (``TransferedMessage``)."""

    message_id: int
    flag: int
    payload: bytes
    checksum: int
    msg_type: str
    append_time: int  # ms

    def to_json(self) -> dict[str, Any]:
        return {"id": self.message_id, "flag": self.flag, "checksum": self.checksum,
                "msgType": self.msg_type, "time": self.append_time,
                "data": base64.b64encode(self.payload).decode()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StoredMessage:
        return cls(d["id"], d["flag"], base64.b64decode(d["data"]), d["checksum"],
                   d["msgType"], d["time"])


@dataclass
class PartitionLog:
    """The messages of one partition of one topic on one Broker, in append order."""

    messages: list[StoredMessage] = field(default_factory=list)

    @property
    def min_offset(self) -> int:
        return 0

    @property
    def max_offset(self) -> int:
        return len(self.messages) * INDEX_UNIT

    def append(self, message: StoredMessage) -> int:
        """Store ``message``; returns the index offset it was appended at."""
        offset = self.max_offset
        self.messages.append(message)
        return offset

    def read(self, offset: int, max_bytes: int,
             msg_types: frozenset[str] = frozenset()) -> tuple[list[StoredMessage], int]:
        """Messages from ``offset`` up to about ``max_bytes`` of payload (at least one),
        and how many offset units were read. With ``msg_types``, messages of other types
        are read past but not returned (the broker's filtered consumption)."""
        start = offset // INDEX_UNIT
        got: list[StoredMessage] = []
        size = 0
        index = start
        while index < len(self.messages):
            m = self.messages[index]
            if got and size + len(m.payload) > max_bytes:
                break
            index += 1
            if msg_types and m.msg_type not in msg_types:
                continue
            got.append(m)
            size += len(m.payload)
        return got, (index - start) * INDEX_UNIT


@dataclass
class GroupOffset:
    """A consumer group's position in one partition (committed ``offset`` + ``tmp``)."""

    offset: int
    tmp: int = 0

    def commit(self, consumed: bool) -> int:
        """Move the committed offset by what was read (``consumed``) or drop it."""
        if consumed:
            self.offset += self.tmp
        self.tmp = 0
        return self.offset


class BrokerStore:
    """Logs and group offsets of one Broker, keyed by ``(topic, partitionId)``."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self.offsets: dict[tuple[str, str, int], GroupOffset] = {}  # (group, topic, pid)
        self.next_message_id = 1

    def log(self, topic: str, partition_id: int) -> PartitionLog:
        return self.logs.setdefault((topic, partition_id), PartitionLog())

    def group_offset(self, group: str, topic: str, partition_id: int) -> GroupOffset | None:
        return self.offsets.get((group, topic, partition_id))

    def load_offset(self, group: str, topic: str, partition_id: int, read_status: int,
                    req_offset: int) -> GroupOffset:
        """A consumer registers to a partition (``DefaultOffsetManager.loadOffset``): a
        group new to the partition starts at the first offset (:attr:`ReadStatus.NORMAL`)
        or at the max offset (the others); ``MAX_ALWAYS`` always jumps to it; a requested offset
        (bound consumption) is clamped into range. Anything read but not committed is
        dropped."""
        log = self.log(topic, partition_id)
        key = (group, topic, partition_id)
        pos = self.offsets.get(key)
        if pos is None:
            pos = self.offsets[key] = GroupOffset(
                log.min_offset if read_status == ReadStatus.NORMAL else log.max_offset)
        pos.tmp = 0
        if read_status == ReadStatus.MAX_ALWAYS:
            pos.offset = log.max_offset
        elif req_offset >= 0:
            pos.offset = min(max(req_offset, log.min_offset), log.max_offset)
        return pos

    def append(self, topic: str, partition_id: int, *, flag: int, payload: bytes,
               msg_type: str, now_ms: int) -> tuple[StoredMessage, int]:
        message = StoredMessage(self.next_message_id, flag, payload, checksum(payload),
                                msg_type, now_ms)
        self.next_message_id += 1
        return message, self.log(topic, partition_id).append(message)

    # -- persistence ---------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "next_message_id": self.next_message_id,
            "logs": [{"topic": t, "partitionId": p, "messages": [m.to_json() for m in log.messages]}
                     for (t, p), log in sorted(self.logs.items())],
            "offsets": [{"group": g, "topic": t, "partitionId": p, "offset": o.offset}
                        for (g, t, p), o in sorted(self.offsets.items())],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BrokerStore:
        store = cls()
        store.next_message_id = d["next_message_id"]
        for entry in d["logs"]:
            store.logs[(entry["topic"], entry["partitionId"])] = PartitionLog(
                [StoredMessage.from_json(m) for m in entry["messages"]])
        for entry in d["offsets"]:
            store.offsets[(entry["group"], entry["topic"], entry["partitionId"])] = GroupOffset(
                entry["offset"])
        return store

    def save(self, path: Path) -> None:
        """Write everything committed to ``path`` (atomically: a temp file renamed)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        with open(tmp, "w") as f:
            json.dump(self.to_json(), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> BrokerStore:
        """The store saved at ``path``, or an empty one when there is none."""
        if not path.exists():
            return cls()
        with open(path) as f:
            return cls.from_json(json.load(f))
