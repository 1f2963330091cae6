"""AUTH: asking an auth service over HTTP, the way nsqd does.

With ``--auth-http-address`` set, nsqd answers ``auth_required: true`` in IDENTIFY and
on ``AUTH`` makes ``GET http://ADDR/auth?remote_ip=..&tls=..&secret=..&common_name=..``.
The service answers JSON ``{"ttl": seconds, "identity": .., "identity_url": ..,
"authorizations": [{"topic": regex, "channels": [regex..], "permissions":
["subscribe", "publish"]}]}``. A command is allowed when some authorization has the
permission (``publish`` for PUB/MPUB/DPUB, ``subscribe`` for SUB) and its regexes
match the topic and (for SUB) the channel. After ``ttl`` seconds the answer is stale
and nsqd asks again on the next PUB/SUB.
"""

from __future__ import annotations

import re
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from nsqviz.nsq.grammar_errors import BadJSON
from nsqviz.nsq.json_object import read_object

__all__ = ["AuthState", "Authorization", "query_auth"]


@dataclass(frozen=True)
class Authorization:
    topic: str
    channels: tuple[str, ...]
    permissions: tuple[str, ...]

    def is_allowed(self, topic: str, channel: str) -> bool:
        needed = "subscribe" if channel else "publish"
        if needed not in self.permissions:
            return False
        # Go's regexp.MatchString: unanchored search
        if re.search(self.topic, topic) is None:
            return False
        return any(re.search(c, channel) is not None for c in self.channels)


@dataclass
class AuthState:
    identity: str = ""
    identity_url: str = ""
    expires: float = 0.0
    authorizations: list[Authorization] = field(default_factory=list)

    def is_expired(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) >= self.expires

    def is_allowed(self, topic: str, channel: str) -> bool:
        return any(a.is_allowed(topic, channel) for a in self.authorizations)


class AuthError(Exception):
    """The auth service could not be asked or gave an unusable answer (logged, not leaked
    to the client: nsqd only says ``E_AUTH_FAILED AUTH failed``)."""


def query_auth(addresses: list[str], *, remote_ip: str, tls: bool, common_name: str,
               secret: str, connect_timeout: float, request_timeout: float) -> AuthState:
    """Blocking HTTP query; the broker runs it in a worker thread. Tries each address."""
    params = urllib.parse.urlencode({
        "remote_ip": remote_ip,
        "tls": "true" if tls else "false",
        "secret": secret,
        "common_name": common_name,
    })
    errors = []
    for addr in addresses:
        url = addr if addr.startswith(("http://", "https://")) else f"http://{addr}"
        url = f"{url.rstrip('/')}/auth?{params}"
        try:
            with urllib.request.urlopen(url, timeout=connect_timeout + request_timeout) as r:
                status = r.status
                body = r.read()
        except OSError as exc:
            # urllib raises HTTPError (an OSError) for non-2xx answers
            errors.append(f"{addr}: {exc}")
            continue
        if status != 200:
            errors.append(f"{addr}: HTTP {status}")
            continue
        try:
            data = read_object(body)
            auths = [
                Authorization(a["topic"], tuple(a.get("channels") or ()),
                              tuple(a.get("permissions") or ()))
                for a in data.get("authorizations") or []
            ]
            for a in auths:
                re.compile(a.topic)
                for c in a.channels:
                    re.compile(c)
            ttl = float(data.get("ttl", 0))
        except (BadJSON, ValueError, KeyError, TypeError, AttributeError, re.error) as exc:
            errors.append(f"{addr}: bad answer {exc}")
            continue
        return AuthState(str(data.get("identity", "")), str(data.get("identity_url", "")),
                         time.monotonic() + ttl, auths)
    raise AuthError("; ".join(errors) or "no auth address")
