"""The auth service the AUTH tests talk to: the notebook's real HTTP one
(:class:`nsqviz.servers.authd.AuthService`), answering from a fixed table of secrets
that covers what a single grant cannot say (a 200 with no authorizations, say)."""

from __future__ import annotations

from typing import Any

from nsqviz.servers.authd import AuthService as _Service

ALLOW = {"topic": "^allowed", "channels": [".*"], "permissions": ["subscribe", "publish"]}
ANSWERS = {
    "good": (200, {"ttl": 1, "identity": "alice", "identity_url": "https://id/alice",
                   "authorizations": [ALLOW]}),
    "pubonly": (200, {"ttl": 60, "identity": "bob",
                      "authorizations": [{**ALLOW, "permissions": ["publish"]}]}),
    "none": (200, {"ttl": 60, "identity": "carol", "authorizations": []}),
    "bad": (403, {"message": "NOT_AUTHORIZED"}),
}


class AuthService(_Service):
    """Started on creation; ``queries`` is every request it got, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.start()

    def answer(self, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        return ANSWERS.get(query.get("secret"), (403, {}))

    @property
    def queries(self) -> list[dict[str, str]]:
        return self.requests

    def close(self) -> None:
        self.stop()
