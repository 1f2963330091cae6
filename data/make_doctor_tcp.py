"""Records data/doctor/tcp-*.pcap and capture-*.pcap: what happens below NSQ -- a peer that
stops reading, lost segments, resets -- and what happens to the capture itself -- a start
in mid-connection, packets tcpdump dropped -- with the real nsqd v1.3.0, one rule of
``nsqviz doctor`` each (issue 35). As ``make_doctor_nsq.py``: one function per file, then
the evidence (tshark) into data/doctor/expected.json.

Run as root from the repository: ``.venv/bin/python data/make_doctor_tcp.py [--only NAME]``.
Lost segments need a path that loses them: this machine's kernel has no netem, so
``retransmission`` routes the traffic through a network namespace of its own whose
queues (tc tbf) are too small for the bursts, and drops what overflows.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from doctor_expected import (
    DATA,
    RST,
    SYN,
    Capture,
    conn,
    finding,
    guide,
    quiet,
    record,
    run,
    tshark,
)
from doctor_nsqd import Client, publish, recorded, subscriber
from make_captures import Tcpdump

from nsqviz.nsq.events import Fin, Mpub, Pub, Rdy
from nsqviz.servers.peers import RealNsqd

MADE_BY = "data/make_doctor_tcp.py --only {}"


def zero_window() -> None:
    """A consumer with a 4 KiB receive buffer (SO_RCVBUF before connecting) subscribes with
    RDY 100 and then stops reading for 5 s while nsqd has 150 messages of 512 bytes for
    it: its kernel advertises a zero window, nsqd's probes find it still closed; then it
    reads the 100 it was sent, FINs them and closes."""
    name = "doctor/tcp-zero-window.pcap"
    body = b"z" * 512
    with recorded(name) as nsqd:
        c = subscriber(nsqd.tcp_port, "bulk", "c", 100, rcvbuf=4096, client_id="stalled")
        producer = publish(nsqd.tcp_port, *[Mpub("bulk", (body,) * 50) for _ in range(3)])
        time.sleep(5.0)
        got = [c.delivery() for _ in range(100)]
        c.send(Rdy(0))
        for d in got:
            c.send(Fin(d.id))
        c.close()
    cap, server, a = Capture(DATA / name), nsqd.tcp_address, c.address
    sent_by = {p.number for p in cap.of(a, server, "client")}
    zero = [n for n in cap.expert("tcp.analysis.zero_window") if n in sent_by]
    probes = [n for n in cap.expert("tcp.analysis.keep_alive")  # Linux probes: old seq, no data
              if n in {p.number for p in cap.of(a, server, "server")}]
    update = [n for n in cap.expert("tcp.analysis.window_update") if n in sent_by
              and n > zero[0]][0]
    brief = [n for n in cap.expert("tcp.analysis.zero_window") if n not in sent_by]
    record(name, MADE_BY.format("zero_window"), zero_window.__doc__, [
        finding("tcp.zero-window", f"the consumer's window stayed at 0 for "
                f"{cap.between(1, zero[0], update)} s while nsqd had up to 100 messages in "
                "flight for it", [zero[0], update], conn(a, server), zero_window=zero,
                probes=probes, window_update=update, seconds=cap.between(1, zero[0], update),
                rdy=100, producer=producer),
        *guide(DATA / name)],
        not_expected=["tcp.retransmission", "tcp.reset", "capture.gap"] + ([quiet(
            "tcp.zero-window", conn(producer, server), f"nsqd's own window touched 0 for under "
            f"a millisecond (packets {', '.join(map(str, brief))}) while it read the 25 KB "
            "MPUBs: ordinary flow control, reopened at once")] if brief else []))


NETNS = ("nsqviz-dc-c", "nsqviz-dc-r", "nsqviz-dc-s")
"""client, router, server: the router's two queues drop what does not fit."""
CLIENT_IP, SERVER_IP = "10.231.1.1", "10.231.2.2"
LOSSY = "tbf rate 20mbit burst 16k limit 12k"
CLONE_NEWNET = 0x40000000


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True)


@contextmanager
def lossy_path() -> Iterator[Callable[[str], object]]:
    """Three network namespaces -- client, router, server -- joined by veth pairs, the
    router's egress queues (tc tbf, 12 KiB) dropping what overflows: real loss, and
    nobody else's traffic. Yields ``enter(namespace)``, which moves this thread (and
    what it starts or connects from then on) into one of them."""
    c, r, s = NETNS
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/self/ns/net", os.O_RDONLY)

    def enter(ns: str) -> None:
        fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns {ns}")
        finally:
            os.close(fd)

    try:
        for ns in NETNS:
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("link", "add", "c0", "netns", c, "type", "veth", "peer", "name", "rc", "netns", r)
        _ip("link", "add", "s0", "netns", s, "type", "veth", "peer", "name", "rs", "netns", r)
        for ns, dev, address, via in ((c, "c0", CLIENT_IP, "10.231.1.254"),
                                      (s, "s0", SERVER_IP, "10.231.2.254")):
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "route", "add", "default", "via", via)
        for dev, address in (("rc", "10.231.1.254"), ("rs", "10.231.2.254")):
            _ip("-n", r, "addr", "add", f"{address}/24", "dev", dev)
            _ip("-n", r, "link", "set", dev, "up")
            subprocess.run(["tc", "-n", r, "qdisc", "add", "dev", dev, "root", *LOSSY.split()],
                           check=True)
        subprocess.run(["ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1"],
                       check=True)
        yield enter
    finally:
        libc.setns(home, CLONE_NEWNET)
        os.close(home)
        for ns in NETNS:
            subprocess.run(["ip", "netns", "del", ns], check=False)


def retransmission() -> None:
    """The real nsqd in the server namespace, a producer and a consumer in the client
    namespace, the router between them dropping what overflows its 12 KiB queues: the
    producer MPUBs 25 messages of 4 KiB, the consumer (RDY 25) gets and FINs them.
    tcpdump runs on the server's interface: it sees nsqd's segments before the router
    drops some (and their retransmissions), and the holes the client's lost segments
    leave until their retransmissions arrive."""
    name = "doctor/tcp-retransmission.pcap"
    body = b"r" * 4096
    with lossy_path() as enter:
        enter(NETNS[2])
        with RealNsqd(tcp_address=f"{SERVER_IP}:0", http_address=f"{SERVER_IP}:0",
                      https_address=f"{SERVER_IP}:0", broadcast_address=SERVER_IP) as nsqd:
            dump = Tcpdump(DATA / name, nsqd.tcp_port, iface="s0")
            try:
                enter(NETNS[0])
                c = subscriber(nsqd.tcp_port, "lossy", "c", 25, host=SERVER_IP,
                               client_id="far-consumer")
                producer = publish(nsqd.tcp_port, Mpub("lossy", (body,) * 25), host=SERVER_IP)
                got = [c.delivery() for _ in range(25)]
                for d in got:
                    c.send(Fin(d.id))
                c.close()
            finally:
                print(f"{name}: {' / '.join(dump.stop().splitlines()[-3:])}", flush=True)
    cap, server = Capture(DATA / name), nsqd.tcp_address
    found = []
    for who, client in (("consumer", c.address), ("producer", producer)):
        numbers = {p.number for p in cap.of(client, server)}
        again = [n for n in cap.expert("tcp.analysis.retransmission") if n in numbers]
        fast = [n for n in cap.expert("tcp.analysis.fast_retransmission") if n in numbers]
        lost = [n for n in cap.expert("tcp.analysis.lost_segment") if n in numbers]
        if again or fast:
            senders = sorted({"server" if cap.by_number[n].src == server else "client"
                              for n in again + fast})
            found.append(finding("tcp.retransmission", f"{who}'s connection: {len(again)} "
                                 f"retransmissions ({len(fast)} fast) sent by "
                                 f"{' and '.join(senders)}", again + fast, conn(client, server),
                                 retransmissions=again, fast_retransmissions=fast,
                                 previous_segment_not_captured=lost, senders=senders))
    record(name, MADE_BY.format("retransmission"), retransmission.__doc__,
           [*found, *guide(DATA / name)], not_expected=["capture.gap", "tcp.reset"])


def reset() -> None:
    """Two resets in mid-session. A consumer (RDY 200) reads 5 of the 200 messages of
    512 bytes nsqd is sending it, then closes with SO_LINGER 0: its kernel sends RST
    while nsqd still has data in flight. A producer sends ``PUB bad*topic`` with a 40 KB
    body in one write: nsqd answers E_BAD_TOPIC and closes with most of the body unread,
    so its kernel resets the connection."""
    name = "doctor/tcp-reset.pcap"
    with recorded(name) as nsqd:
        c = subscriber(nsqd.tcp_port, "stream", "c", 200, client_id="aborter")
        producer = publish(nsqd.tcp_port, Mpub("stream", (b"s" * 512,) * 200))
        for _ in range(5):
            c.delivery()
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.sock.close()
        time.sleep(0.3)
        bad = Client(nsqd.tcp_port)
        try:
            bad.raw(b"PUB bad*topic\n" + struct.pack(">I", 40_000) + b"b" * 40_000)
            answer = bad.reply()
        except OSError as exc:
            answer = exc
        bad.sock.close()
        time.sleep(0.3)
    cap, server = Capture(DATA / name), nsqd.tcp_address
    client_rst = cap.flagged(RST, c.address, server, "client")
    server_rst = cap.flagged(RST, bad.address, server, "server")
    error = cap.find(b"E_BAD_TOPIC", bad.address, server, "server")
    record(name, MADE_BY.format("reset"), reset.__doc__, [
        finding("tcp.reset", "the consumer reset its connection (SO_LINGER 0) after reading 5 "
                "of 200 messages, nsqd still sending", client_rst[:1],
                conn(c.address, server), sent_by="client", rst=client_rst, producer=producer),
        finding("tcp.reset", "nsqd reset the connection: it closed after E_BAD_TOPIC with "
                "most of the 40 KB body unread", server_rst[:1], conn(bad.address, server),
                sent_by="server", rst=server_rst, error=error, answer_seen=repr(answer)[:80]),
        finding("nsq.fatal-error", "PUB bad*topic: E_BAD_TOPIC, nsqd closed", [*error,
                *server_rst[:1]], conn(bad.address, server), code="E_BAD_TOPIC"),
        finding("nsq.publish-refused", "PUB bad*topic: E_BAD_TOPIC", error,
                conn(bad.address, server), code="E_BAD_TOPIC"),
        *guide(DATA / name)], not_expected=["tcp.retransmission", "tcp.zero-window"])


def midstream() -> None:
    """A consumer and a producer connect, IDENTIFY and SUB before tcpdump starts; then the
    producer publishes 10 messages and the consumer FINs them, and a second consumer
    connects with its whole handshake in the capture. The first two connections start
    mid-stream: no SYN, no magic, no IDENTIFY. (nsqd listens on a port the OS picked,
    higher than its clients' here: ``nsqviz decode`` takes it for the client's side
    unless told ``--port``.)"""
    name = "doctor/capture-midstream.pcap"
    with RealNsqd() as nsqd:
        early = subscriber(nsqd.tcp_port, "late", "c", 10, client_id="early")
        p = Client(nsqd.tcp_port, {"client_id": "early-producer"})
        dump = Tcpdump(DATA / name, nsqd.tcp_port)
        try:
            p.send(Mpub("late", tuple(b"m-%d" % i for i in range(10))))
            p.reply()
            for _ in range(10):
                early.send(Fin(early.delivery().id))
            whole = subscriber(nsqd.tcp_port, "late", "c", 1, client_id="whole")
            whole.idle(0.3)
            for c in (early, whole):
                c.close()
            p.close(cls=False)
        finally:
            print(f"{name}: {' / '.join(dump.stop().splitlines()[-3:])}", flush=True)
    cap, server = Capture(DATA / name), nsqd.tcp_address
    record(name, MADE_BY.format("midstream"), midstream.__doc__, [
        finding("capture.midstream", f"{who}: the capture starts in the middle of the "
                "connection (no SYN, no magic, no IDENTIFY)", [cap.of(a, server)[0].number],
                conn(a, server), first_packet=cap.of(a, server)[0].number,
                syn_seen=bool(cap.flagged(SYN, a, server)),
                decoded_with=f"--port {nsqd.tcp_port}")
        for who, a in (("consumer", early.address), ("producer", p.address))],
        not_expected=["capture.gap", "nsq.fatal-error", "tcp.reset"])


GAP_BUFFER, GAP_SNAPLEN = 384, 65600
"""tcpdump's kernel buffer in ``gap``, KiB: less than the burst it sleeps through. The
snaplen still keeps every loopback segment whole (65,483 bytes of payload at most) but
lets libpcap cut that buffer into 128 KiB blocks (with -s 0 one block would be 512 KiB,
and a single block loses packets even while tcpdump is awake)."""


def gap() -> None:
    """tcpdump with a 384 KiB buffer, stopped (SIGSTOP) for 1.5 s while a producer MPUBs
    1000 messages of 1 KiB and a consumer (RDY 1000) receives them: the kernel drops what
    tcpdump's buffer cannot hold, so about a megabyte of each connection is never
    captured. Then tcpdump goes on (SIGCONT), the consumer FINs everything and both
    close. A buffer this small loses a few packets even while tcpdump runs (in
    immediate mode each of its three blocks goes to tcpdump with a packet or two in
    it): the capture also misses bits of the handshakes and of the FINs -- as a real
    capture that fell behind does."""
    name = "doctor/capture-gap.pcap"
    body = b"g" * 1024
    with RealNsqd() as nsqd:
        dump = Tcpdump(DATA / name, nsqd.tcp_port, snaplen=GAP_SNAPLEN, buffer=GAP_BUFFER)
        try:
            c = subscriber(nsqd.tcp_port, "burst", "c", 1000, client_id="gap-consumer")
            p = Client(nsqd.tcp_port, {"client_id": "gap-producer"})
            time.sleep(0.3)  # the handshakes are written out
            dump.proc.send_signal(signal.SIGSTOP)
            for _ in range(10):
                p.send(Mpub("burst", (body,) * 100))
                p.reply()
            got = [c.delivery() for _ in range(1000)]
            time.sleep(1.5)
            dump.proc.send_signal(signal.SIGCONT)
            time.sleep(0.5)  # tcpdump writes out what its buffer held
            for d in got:
                c.send(Fin(d.id))
            c.close()
            p.close(cls=False)
        finally:
            summary = dump.stop().splitlines()
            print(f"{name}: {' / '.join(summary[-3:])}", flush=True)
    cap, server = Capture(DATA / name), nsqd.tcp_address
    found = []
    for who, a in (("consumer", c.address), ("producer", p.address)):
        holes = cap.gaps(a, server)
        if holes:
            found.append(finding("capture.gap", f"{who}'s connection: "
                                 f"{sum(h['bytes'] for h in holes)} bytes in {len(holes)} "
                                 "holes never captured", [h["packet"] for h in holes],
                                 conn(a, server), holes=holes))
    record(name, MADE_BY.format("gap"), gap.__doc__, found, not_expected=[
        "tcp.retransmission", "capture.midstream",
        quiet("nsq.guide", conn(c.address, server), "the FINs answer messages delivered "
              "inside the gap: the capture cannot show them in flight, which does not make "
              "them answers for ids not in flight (nsqviz conformance's in-flight rule "
              "fails them)")])
    print(f"  tcpdump: {summary[-1]}")


SNAPLEN = 100
"""tcpdump -s in ``truncated``: 34 bytes of TCP payload after loopback's 66 of headers."""


def truncated() -> None:
    """``tcpdump -s 100``: a consumer (IDENTIFY with feature negotiation, RDY 5) and a
    producer that PUBs five messages of 120 bytes; the consumer FINs them. Every packet
    longer than 100 bytes -- the IDENTIFY and its JSON answer, each PUB, each message
    frame -- keeps only its first 100."""
    name = "doctor/capture-truncated.pcap"
    with RealNsqd() as nsqd:
        dump = Tcpdump(DATA / name, nsqd.tcp_port, snaplen=SNAPLEN)
        try:
            c = subscriber(nsqd.tcp_port, "cut", "c", 5, client_id="cut-consumer")
            producer = publish(nsqd.tcp_port, *[Pub("cut", b"%03d-" % i + b"t" * 116)
                                                for i in range(5)])
            for _ in range(5):
                c.send(Fin(c.delivery().id))
            c.close()
        finally:
            print(f"{name}: {' / '.join(dump.stop().splitlines()[-3:])}", flush=True)
    cut = [int(n) for n, in tshark(DATA / name, "-Y", "frame.cap_len < frame.len",
                                   "-e", "frame.number")]
    record(name, MADE_BY.format("truncated"), truncated.__doc__, [
        finding("capture.truncated", f"{len(cut)} packets cut to the snaplen of {SNAPLEN} "
                "bytes", cut, None, snaplen=SNAPLEN, packets_cut=len(cut),
                connections=[conn(c.address, nsqd.tcp_address),
                             conn(producer, nsqd.tcp_address)])],
        not_expected=[quiet("capture.gap", None, "the missing bytes are the snaplen's cut: "
                            "capture.truncated"),
                      quiet("nsq.guide", None, "what the snaplen cut is not a client "
                            "breaking the guide")])


SCENARIOS: dict[str, Callable[[], None]] = {f.__name__: f for f in (
    zero_window, retransmission, reset, midstream, gap, truncated)}


if __name__ == "__main__":
    run(__doc__, SCENARIOS)
