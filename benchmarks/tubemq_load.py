"""Messages/s through the TubeMQ simulator, beside the codec's own ceiling.

The project's asyncio :class:`~nsqviz.clients.tubemq.Producer` sends ``--messages`` 1 KiB
messages (``--window`` sends in flight) and its :class:`~nsqviz.clients.tubemq.Consumer`
fetches and commits them all back:

* **through the simulator**: ``nsqviz tubemq-sim`` as its own process (a Master and two
  Brokers of two partitions) on free loopback ports -- sockets, the server's codec, the
  model;
* **echo** (the baseline, same run): the same client classes, whose connections hand each
  request's bytes to an in-process :class:`~nsqviz.tubemq.codec.ServerConnection` and
  decode a fixed answer built by the codec -- no socket, no model: what the codec and the
  client cost by themselves, the ceiling for the first figure.

Run: ``.venv/bin/python -m benchmarks.tubemq_load [--messages 10000] [--window 64]``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import subprocess
import sys
import time
from typing import Any

from nsqviz.clients.tubemq import Consumer, Producer
from nsqviz.clients.tubemq.rpc import AsyncChannel, Call, request_message
from nsqviz.tubemq.codec import ServerConnection
from nsqviz.tubemq.events import Request, Response
from nsqviz.tubemq.messages import make_response
from nsqviz.tubemq.metadata import checksum
from nsqviz.tubemq.protos import MESSAGES

TOPIC = "bench"
BODY = b"x" * 1024
BATCH = 256  # messages per GetMessage answer in the echo (the simulator's 256 KiB)


def _ok(**fields: Any) -> dict[str, Any]:
    return {"success": True, "errCode": 200, "errMsg": "OK!", **fields}


_PARTS = [f"@g#1:127.0.0.1:1#{TOPIC}:{p}" for p in range(2)]
_FETCHED = [{"messageId": i, "checkSum": checksum(BODY), "payLoadData": BODY, "flag": 0}
            for i in range(BATCH)]
ECHO = {  # method -> its answer's fields, whatever was asked (the event: see _answer)
    "producerRegisterP2M": _ok(brokerCheckSum=1, brokerInfos=["1:127.0.0.1:1"]),
    "producerHeartbeatP2M": _ok(brokerCheckSum=1, topicInfos=[f"{TOPIC}#1:2:1#1048576"]),
    "producerCloseClientP2M": _ok(),
    "sendMessageP2B": _ok(messageId=1, appendTime=0, appendOffset=0),
    "consumerRegisterC2M": _ok(),
    "consumerHeartbeatC2M": _ok(),
    "consumerCloseClientC2M": _ok(),
    "consumerRegisterC2B": _ok(currOffset=0, maxOffset=0),
    "getMessagesC2B": _ok(messages=_FETCHED, currOffset=0, maxOffset=0),
    "consumerCommitC2B": _ok(currOffset=0, maxOffset=0),
}


class EchoChannel(AsyncChannel):
    """A connection whose server is the codec's server role in the same process."""

    async def connect(self) -> EchoChannel:
        self.server = ServerConnection(provenance=False)
        self.events_sent = False
        return self

    async def call(self, method: str, message: Any, *, timeout: float = 15.0,
                   **envelope: Any) -> Call:
        if not hasattr(self, "server"):
            await self.connect()
        info, msg = request_message(method, message)
        now = time.perf_counter()
        request, data = self.codec.request(info.id, msg, now=now, **{**self.envelope, **envelope})
        call = Call(request, data, t=now)
        for event in self.server.receive(data, now=now):
            if isinstance(event, Request):
                answer = self.server.send(make_response(event, self._answer(info.name, event)),
                                          now=now)
                for got in self.codec.receive(answer, now=time.perf_counter()):
                    if isinstance(got, Response):
                        call.answer = got
        return call

    def _answer(self, name: str, request: Request):
        fields = dict(ECHO[name])
        if name == "consumerHeartbeatC2M" and not self.events_sent:  # hand out partitions
            self.events_sent = True
            who = f"{request.message.clientId}"
            fields["event"] = {"rebalanceId": 1, "opType": 10,
                               "subscribeInfo": [who + p for p in _PARTS]}
        return MESSAGES[request.info.response](**fields)

    async def close(self) -> None:
        return None


async def produce(producer_class, master: str, n: int, window: int) -> float:
    producer = await producer_class(master, [TOPIC], heartbeat_interval=3600).start()
    start = time.perf_counter()
    for i in range(0, n, window):
        await asyncio.gather(*(producer.send(TOPIC, BODY) for _ in range(min(window, n - i))))
    elapsed = time.perf_counter() - start
    await producer.close()
    return n / elapsed


async def consume(consumer_class, master: str, n: int) -> float:
    consumer = await consumer_class(master, "bench", [TOPIC], heartbeat_interval=3600).start()
    got = 0
    start = time.perf_counter()
    while got < n:
        batch = await consumer.fetch()
        if batch is None:
            raise RuntimeError(f"only {got} of {n} messages came back")
        got += len(batch.messages)
        await consumer.commit(batch)
    elapsed = time.perf_counter() - start
    await consumer.close()
    return got / elapsed


class _Echo:
    producer = type("EchoProducer", (Producer,), {"channel": EchoChannel})
    consumer = type("EchoConsumer", (Consumer,), {"channel": EchoChannel})


def run_simulator() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "nsqviz.cli", "tubemq-sim", "--master-port",
                             "0", "--broker-port", "0", "--topic", TOPIC, "--log-level",
                             "warn"], stdout=subprocess.PIPE, text=True)
    master = re.search(r"listening on (\S+)", proc.stdout.readline()).group(1)
    for _ in range(2):
        proc.stdout.readline()
    return proc, master


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=10000)
    ap.add_argument("--window", type=int, default=64, help="sends in flight")
    args = ap.parse_args(argv)
    n = args.messages
    echo_in = asyncio.run(produce(_Echo.producer, "echo:0", n, args.window))
    echo_out = asyncio.run(consume(_Echo.consumer, "echo:0", n))
    proc, master = run_simulator()
    try:
        sim_in = asyncio.run(produce(Producer, master, n, args.window))
        sim_out = asyncio.run(consume(Consumer, master, n))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    print(f"{n} messages of {len(BODY)} bytes, {args.window} sends in flight")
    print(f"{'':28}{'simulator':>12}{'echo (codec)':>14}{'ratio':>8}")
    for label, sim, echo in (("produced (msgs/s)", sim_in, echo_in),
                             ("consumed+committed (msgs/s)", sim_out, echo_out)):
        print(f"{label:28}{sim:12,.0f}{echo:14,.0f}{sim / echo:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
