"""Records data/doctor/healthy-*.pcap: busy but healthy traffic with the real nsqd v1.3.0
that the doctor must stay quiet on (issue 35: "a doctor that cries wolf is worse than
none"): go-nsq 1.1.0 (the official Go client, as the NSQ release's ``to_nsq`` and
``nsq_tail``), and ``nsqviz.clients.nsq``, which follows every rule of the client guide.

Run as root from the repository: ``.venv/bin/python data/make_doctor_healthy.py [--only NAME]``.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable

from doctor_expected import DATA, RULES, Capture, conn, guide, record, run
from doctor_nsqd import recorded

from nsqviz.clients.nsq import Consumer, ExponentialBackoff, Message, Producer
from nsqviz.servers.peers import require

LINES = 600


def go_nsq() -> None:
    """to_nsq publishes 600 lines at 200 a second; nsq_tail (max-in-flight 50, heartbeat
    every 1 s) receives, prints and FINs every one and answers each heartbeat. go-nsq
    breaks two rules of the client guide here (nsq.guide): its first RDY is its whole
    max-in-flight, and nsq_tail exits once it has printed -n messages without CLS."""
    name = "doctor/healthy-go-nsq.pcap"
    with recorded(name) as nsqd:
        tail = subprocess.Popen([str(require("nsq_tail")), "--nsqd-tcp-address",
                                 nsqd.tcp_address, "--topic", "busy", "--channel", "tail",
                                 "--max-in-flight", "50", "--consumer-opt",
                                 "heartbeat_interval,1s", "-n", str(LINES)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        subprocess.run([str(require("to_nsq")), "--nsqd-tcp-address", nsqd.tcp_address,
                        "--topic", "busy", "--rate", "200"],
                       input="".join(f"event {i}\n" for i in range(LINES)), text=True,
                       check=True, timeout=60, capture_output=True)
        printed = tail.communicate(timeout=60)[0].splitlines()
    assert len(printed) == LINES, len(printed)
    found = guide(DATA / name)
    record(name, "data/make_doctor_healthy.py --only go_nsq", go_nsq.__doc__, found,
           not_expected=[r for r in RULES if r != "nsq.guide"])
    heartbeats(name, nsqd.tcp_address)


def nsqviz_client() -> None:
    """nsqviz.clients.nsq's Producer MPUBs 300 messages in batches of 10 over 3 s; its
    Consumer (max_in_flight 20, heartbeat every 1 s) handles each in 5 ms, fails one
    once (REQ, backoff: RDY 0, then RDY 1 to test the waters, then back to 20), FINs
    the rest and closes with CLS and CLOSE_WAIT. The channel exists before, so nsqd's
    queue scan redelivers the REQ on time."""
    name = "doctor/healthy-nsqviz-client.pcap"
    handled: list[bytes] = []

    async def handler(message: Message) -> bool:
        await asyncio.sleep(0.005)
        handled.append(message.body)
        return not (message.body == b"m-150" and message.attempts == 1)

    async def run(address: str) -> None:
        async with Consumer("steady", "c", handler, nsqd_tcp_addresses=address,
                            max_in_flight=20, heartbeat_interval=1, requeue_delay=0,
                            backoff_strategy=ExponentialBackoff(0.2)), \
                Producer(address) as producer:
            for i in range(0, 300, 10):
                await producer.mpub("steady", [b"m-%d" % j for j in range(i, i + 10)])
                await asyncio.sleep(0.1)
            while len(set(handled)) < 300:
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.5)

    with recorded(name, scanned=(("steady", "c"),)) as nsqd:
        asyncio.run(run(nsqd.tcp_address))
    record(name, "data/make_doctor_healthy.py --only nsqviz_client", nsqviz_client.__doc__,
           guide(DATA / name), not_expected=RULES)
    heartbeats(name, nsqd.tcp_address)


def heartbeats(name: str, server: str) -> None:
    cap = Capture(DATA / name)
    for a in cap.connections(int(server.rpartition(":")[2])):
        print(f"  {conn(a, server)}: heartbeats "
              f"{len(cap.find(b'_heartbeat_', a, server, 'server'))}, "
              f"NOPs {len(cap.find(b'NOP', a, server, 'client'))}")


SCENARIOS: dict[str, Callable[[], None]] = {f.__name__: f for f in (go_nsq, nsqviz_client)}


if __name__ == "__main__":
    run(__doc__, SCENARIOS)
