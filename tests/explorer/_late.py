"""Waiting until nsqd has taken a message back after its msg_timeout ran out."""

from __future__ import annotations

import json
import time
import urllib.request


def taken_back(session, conn, message, http_address, topic, msg_timeout):
    """Wait until the server's queue scan took ``message`` back (its channel's
    timeout_count in /stats) and the session's own clock says it was held past
    ``msg_timeout``: then nsqd is sure to refuse a FIN or TOUCH of it."""
    deadline = time.monotonic() + 30
    url = f"http://{http_address}/stats?format=json"
    while time.monotonic() < deadline:
        stats = json.loads(urllib.request.urlopen(url, timeout=10).read())
        (chan,) = next(t for t in stats["topics"] if t["topic_name"] == topic)["channels"]
        held = session.now() - conn.arrived_at[message.id]
        if chan["timeout_count"] and held > msg_timeout:
            return
        time.sleep(0.05)
    raise AssertionError(f"the server never took {message.id!r} back")
