"""What a feature-negotiation lesson needs beside the broker: an auth service, a cert.

:class:`AuthService` is a tiny HTTP server speaking nsqd's auth protocol
(``GET /auth?remote_ip=&tls=&secret=&common_name=`` -> JSON with ``ttl``,
``identity``, ``identity_url`` and ``authorizations``), so a notebook can start one, point
the broker's ``auth_http_address`` at it and show AUTH succeed and fail.
:func:`self_signed_certificate` makes a throwaway certificate with the ``openssl``
command line so the broker can offer ``tls_v1``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from nsqviz.servers.listen import LOOPBACK

__all__ = ["AuthService", "Grant", "self_signed_certificate"]


@dataclass(frozen=True)
class Grant:
    """What one secret may do: nsqd's ``authorizations`` entry (regexes, permissions)."""

    identity: str
    topic: str = ".*"
    channels: tuple[str, ...] = (".*",)
    permissions: tuple[str, ...] = ("subscribe", "publish")
    ttl: int = 3600


@dataclass
class AuthService:
    """An nsqd auth service on loopback and a free port; records every request."""

    grants: dict[str, Grant] = field(default_factory=dict)
    requests: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None

    @property
    def address(self) -> str:
        assert self._server is not None, "start() it first"
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def answer(self, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """What the service says to one request: 200 + authorizations, or 403."""
        grant = self.grants.get(query.get("secret", ""))
        if grant is None:
            return 403, {"message": "NOT_AUTHORIZED"}
        return 200, {
            "ttl": grant.ttl,
            "identity": grant.identity,
            "identity_url": f"https://example.invalid/users/{grant.identity}",
            "authorizations": [{
                "topic": grant.topic,
                "channels": list(grant.channels),
                "permissions": list(grant.permissions),
            }],
        }

    def start(self) -> AuthService:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                url = urllib.parse.urlsplit(self.path)
                # keep empty values: nsqd sends common_name= without TLS, and the record
                # should show what it sent
                query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
                service.requests.append({"path": url.path, **query})
                status, doc = service.answer(query) if url.path == "/auth" else (404, {})
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # keep notebook output clean
                pass

        self._server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="nsqviz-auth",
                         daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> AuthService:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def self_signed_certificate(directory: str | Path, name: str = "nsqd") -> tuple[Path, Path]:
    """Write ``NAME.crt`` and ``NAME.key`` (RSA 2048, CN=127.0.0.1, one day) with openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("the openssl command is needed to make a certificate")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert, key
