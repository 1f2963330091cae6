"""Records data/doctor/lookupd-registration.pcap: what goes wrong between nsqd and
nsqlookupd, for the ``lookupd.registration`` rule of ``nsqviz doctor`` (issue 35) -- the
real nsqd and nsqlookupd v1.3.0 and raw "  V1" peers, captured with tcpdump on lo; then
the evidence (tshark) into data/doctor/expected.json, as ``make_doctor_nsq.py`` does.

Run as root from the repository: ``.venv/bin/python data/make_doctor_lookupd.py``. Every
server listens on a free loopback port chosen before tcpdump starts, so the whole life
of each connection is in the file; it takes about 20 s, because nsqd PINGs its lookupd
every 15 s (a fixed ticker).
"""

from __future__ import annotations

import signal
import socket
import time
import urllib.error
import urllib.request

from doctor_expected import DATA, FIN, Capture, conn, finding, record
from doctor_nsqd import post, publish
from make_captures import Tcpdump
from make_lookupd_captures import LookupdProcess, _talk

from nsqviz.lookupd.codec import ClientConnection
from nsqviz.lookupd.events import Identify, Magic
from nsqviz.nsq.events import Pub
from nsqviz.servers.peers import RealNsqd, require

NAME = "doctor/lookupd-registration.pcap"
PING_AT = 15.0
"""nsqd's first PING to its lookupds, seconds after it started (a fixed ticker)."""
HUNG = 3.5
"""How long nsqlookupd is stopped (SIGSTOP) around that PING: nsqd waits 1 s for an answer."""

REFUSED = [  # (what, bytes after a good magic + IDENTIFY, nsqlookupd's error)
    ("REGISTER of a bad topic name", b"REGISTER bad*topic\n", b"E_BAD_TOPIC"),
    ("REGISTER of a bad channel name", b"REGISTER orders bad*chan\n", b"E_BAD_CHANNEL"),
    ("UNREGISTER without a topic", b"UNREGISTER\n", b"E_INVALID"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def hello(tcp_port: int) -> bytes:
    """A good magic and IDENTIFY, as an nsqd on ``tcp_port`` would send them."""
    codec = ClientConnection()
    return codec.send(Magic()) + codec.send(Identify({
        "broadcast_address": "127.0.0.1", "tcp_port": tcp_port, "http_port": tcp_port + 1,
        "version": "1.3.0"}))


def lookup(http: str, topic: str) -> int:
    """A consumer's ``GET /lookup`` on nsqlookupd's HTTP port: the status code."""
    try:
        return int(urllib.request.urlopen(f"http://{http}/lookup?topic={topic}", timeout=5)
                   .status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def main() -> None:
    """nsqd A registers with nsqlookupd (IDENTIFY, REGISTER orders and orders/audit as they
    are created); three raw peers IDENTIFY and send a REGISTER or UNREGISTER nsqlookupd
    refuses, each closed after the error; nsqd B, started without
    --lookupd-tcp-address, takes PUBs to ``payments``, which it never registers, and a
    consumer's GET /lookup?topic=payments gets 404; nsqlookupd hangs (SIGSTOP) over A's
    PING at 15 s, which goes unanswered -- nsqd gives up after 1 s and closes -- and when
    a new topic is created on A, nsqd reconnects, IDENTIFYs and registers everything
    again."""
    tcp, http, a_port, b_port = (free_port() for _ in range(4))
    lookupd_tcp, lookupd_http = f"127.0.0.1:{tcp}", f"127.0.0.1:{http}"
    dump = Tcpdump(DATA / NAME, [tcp, http, a_port, b_port])
    lookupd = LookupdProcess([str(require("nsqlookupd"))], lookupd_tcp, lookupd_http)
    try:
        with RealNsqd(tcp_address=f"127.0.0.1:{a_port}", lookupd_tcp_address=lookupd_tcp) as a, \
                RealNsqd(tcp_address=f"127.0.0.1:{b_port}") as b:
            started = time.monotonic()
            post(a, "/topic/create?topic=orders")
            post(a, "/channel/create?topic=orders&channel=audit")
            publish(a.tcp_port, Pub("orders", b"order 1"))
            for _, data, _ in REFUSED:
                _talk(hello(20000 + len(data)) + data, tcp)
            payer = publish(b.tcp_port, Pub("payments", b"pay 1"), Pub("payments", b"pay 2"))
            status = lookup(lookupd_http, "payments")
            time.sleep(max(0.0, started + PING_AT - 1.0 - time.monotonic()))
            lookupd.proc.send_signal(signal.SIGSTOP)
            time.sleep(HUNG)
            lookupd.proc.send_signal(signal.SIGCONT)
            time.sleep(0.5)
            post(a, "/topic/create?topic=late")
            time.sleep(1.0)
    finally:
        lookupd.stop()
        print(f"{NAME}: {' / '.join(dump.stop().splitlines()[-3:])}", flush=True)
    evidence(a.tcp_port, b.tcp_address, lookupd_tcp, lookupd_http, payer, status)


def evidence(a_port: int, b_address: str, lookupd: str, http: str, payer: str,
             status: int) -> None:
    cap = Capture(DATA / NAME)
    found = []
    for what, data, code in REFUSED:
        (sent, client), = cap.where(data.split(b"\n")[0] + b"\n", lookupd)
        error = cap.one(code, client, lookupd, "server")
        found.append(finding("lookupd.registration", f"{what}: nsqlookupd answered "
                             f"{code.decode()} and closed", [sent, error], conn(client, lookupd),
                             command=sent, error=error, code=code.decode()))
    nsqd_a = list(dict.fromkeys(c for _, c in cap.where(f'"tcp_port":{a_port}'.encode(),
                                                        lookupd)))
    ping, first = cap.where(b"PING", lookupd)[0]
    fin = cap.flagged(FIN, first, lookupd, "client")
    answered = [p.number for p in cap.of(first, lookupd, "server") if p.number > ping
                and p.payload]
    found.append(finding("lookupd.registration", "nsqd's PING went unanswered (nsqlookupd "
                         f"hung {HUNG} s): nsqd closed after {cap.between(1, ping, fin[0])} s "
                         "and reconnected later, registering everything again",
                         [ping, fin[0]], conn(first, lookupd), ping=ping, nsqd_fin=fin[0],
                         late_answer_packets=answered,
                         nsqd_connections=nsqd_a))
    pubs = cap.find(b"PUB payments", payer, b_address, "client")
    lookups = [n for n, _ in cap.where(b"GET /lookup?topic=payments", http)]
    not_found = [n for n, _ in cap.where(b"404", http)]
    found.append(finding("lookupd.registration", f"topic payments published on {b_address}, "
                         "which never registered with nsqlookupd: no REGISTER payments, and "
                         f"GET /lookup?topic=payments answered {status}",
                         pubs + lookups + not_found, conn(payer, b_address), publishes=pubs,
                         lookup=lookups, lookup_status=status, lookup_answer=not_found,
                         registered_nsqd_tcp_port=a_port))
    record(NAME, "data/make_doctor_lookupd.py", main.__doc__, found,
           not_expected=["nsq.fatal-error", "nsq.publish-refused"])


if __name__ == "__main__":
    main()
