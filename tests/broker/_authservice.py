"""A real HTTP auth service for the AUTH tests: answers nsqd's ``GET /auth?...`` by secret
and records every query it got."""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ALLOW = {"topic": "^allowed", "channels": [".*"], "permissions": ["subscribe", "publish"]}
ANSWERS = {
    "good": (200, {"ttl": 1, "identity": "alice", "identity_url": "https://id/alice",
                   "authorizations": [ALLOW]}),
    "pubonly": (200, {"ttl": 60, "identity": "bob",
                      "authorizations": [{**ALLOW, "permissions": ["publish"]}]}),
    "none": (200, {"ttl": 60, "identity": "carol", "authorizations": []}),
    "bad": (403, {"message": "NOT_AUTHORIZED"}),
}


class AuthService:
    def __init__(self):
        self.queries: list[dict] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's naming
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
                service.queries.append({"path": url.path, **query})
                status, body = ANSWERS.get(query.get("secret"), (403, {}))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
