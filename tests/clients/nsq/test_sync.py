"""The blocking wrappers own their event loop: closing twice (``close()`` inside the
``with`` block, then the block's end) is quiet, using one after it is a clear error, and
nothing is left running -- checked in a fresh interpreter under ``python -W error -X dev``,
where an un-awaited coroutine, a task destroyed while pending or a closed loop would
print or fail."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nsqviz.servers.nsqd import EmbeddedBroker

SCRIPT = """
import logging
import sys
import time

from nsqviz.clients.nsq import SyncConsumer, SyncProducer

# -X dev's asyncio debug mode also reports each callback that ran longer than 0.1 s
# ("Executing <Task ...> took 0.149 seconds"): on a loaded machine that is the machine's
# time, not something left running; its errors (a task destroyed while pending, an
# exception never retrieved) still print
logging.getLogger("asyncio").addFilter(
    lambda record: not str(record.msg).startswith("Executing "))

address = sys.argv[1]
with SyncProducer(address) as p:
    p.publish("t", b"x")
    p.close()
    p.close()
    try:
        p.publish("t", b"y")
    except RuntimeError as exc:
        print("after close:", exc)
got = []
with SyncConsumer("t", "c", lambda m: got.append(m.body), nsqd_tcp_addresses=address) as c:
    end = time.monotonic() + 10
    while not got and time.monotonic() < end:
        time.sleep(0.01)
    first = c.close()
    assert c.close() is first, "a second close says what the first said"
with SyncConsumer("t", "c2", lambda m: None, nsqd_tcp_addresses=address):
    pass
print("got", got)
"""


@pytest.fixture
def broker():
    b = EmbeddedBroker().start()
    yield b
    b.stop()


def test_close_inside_the_with_block_then_leaving_it_is_quiet(broker):
    done = subprocess.run([sys.executable, "-W", "error", "-X", "dev", "-c", SCRIPT,
                           broker.tcp_address], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines() == ["after close: nsqviz-producer: closed", "got [b'x']"]
