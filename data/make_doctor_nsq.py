"""Records data/doctor/nsq-*.pcap: the real nsqd v1.3.0 and clients that misbehave on
purpose, one NSQ rule of ``nsqviz doctor`` each (issue 35), captured with tcpdump on lo.

The clients are raw sockets speaking V2 through nsqviz's codec (no library misbehaves
this way on request); each scenario is one function below, named after its file, whose
docstring says what happens. After recording, the function reads the file back
(:mod:`doctor_expected`, with tshark) and writes what the doctor should find -- rule,
connection, packets, ids, counts, seconds -- into data/doctor/expected.json.

Run as root from the repository: ``.venv/bin/python data/make_doctor_nsq.py [--only NAME]``
(the real nsqd: ``$NSQD``, PATH or ``$NSQVIZ_PEERS``; tshark). nsqd listens on free
loopback ports and tcpdump records only its TCP port. Real captures: ports, message ids
and timings differ from run to run; what each file shows does not.
"""

from __future__ import annotations

import os
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from itertools import pairwise

from doctor_expected import DATA, FIN, SYN, Capture, conn, finding, guide, quiet, record, run
from doctor_nsqd import HEARTBEAT, Client, Delivery, publish, recorded, subscriber

from nsqviz.nsq.events import Fin, Mpub, Pub, Rdy, Req, Sub, Touch
from nsqviz.nsq.fastpath import encode_command
from nsqviz.servers.peers import RealNsqd

MADE_BY = "data/make_doctor_nsq.py --only {}"


# -- the scenarios ------------------------------------------------------------------


def msg_timeout() -> None:
    """nsqd --msg-timeout=1s; a consumer (RDY 6) gets six jobs and FINs two at once; the
    handler is slower than msg_timeout on the other four and gives up on their first two
    attempts without an answer: nsqd times each out and delivers it again, attempts 2
    then 3, which is FINed. 4 of 6 messages timed out twice."""
    name = "doctor/nsq-msg-timeout.pcap"
    bodies = [b"job-%d" % i for i in range(6)]
    slow = set(bodies[1:5])
    seen: list[Delivery] = []
    with recorded(name, scanned=(("work", "slow"),), msg_timeout="1s") as nsqd:
        c = subscriber(nsqd.tcp_port, "work", "slow", 6, client_id="slow-worker")
        producer = publish(nsqd.tcp_port, Mpub("work", tuple(bodies)))
        finished = 0
        while finished < len(bodies):
            d = c.delivery()
            seen.append(d)
            if d.body not in slow or d.attempts == 3:
                c.send(Fin(d.id))
                finished += 1
        c.close()
    cap, server = Capture(DATA / name), nsqd.tcp_address
    timed_out = []
    for d0 in [d for d in seen if d.body in slow and d.attempts == 1]:
        packets = [cap.one(d.needle(), c.address, server, "server")
                   for d in seen if d.id == d0.id]
        timed_out.append({"id": d0.id.decode(), "body": d0.body.decode(),
                          "deliveries": packets, "attempts": [1, 2, 3],
                          "fin": cap.one(b"FIN " + d0.id, c.address, server, "client"),
                          "seconds_between_deliveries": [cap.between(1, a, b) for a, b in
                                                         pairwise(packets)]})
    record(name, MADE_BY.format("msg_timeout"), msg_timeout.__doc__, [
        finding("nsq.msg-timeout", "4 of 6 messages timed out in flight (msg_timeout 1 s) "
                "and came back, attempts climbing to 3", [p for t in timed_out
                                                          for p in t["deliveries"]],
                conn(c.address, server), msg_timeout_ms=1000, messages=6,
                timed_out=timed_out, max_attempts=3, producer=producer),
        *guide(DATA / name)],
        not_expected=["nsq.late-answer", "nsq.poison-message", "nsq.fatal-error",
                      "nsq.heartbeat-missed", "tcp.reset"])


def late_answer() -> None:
    """nsqd --msg-timeout=1s; a consumer gets three messages, pauses (RDY 0) and answers
    them 1.6 s later -- FIN, REQ and TOUCH after nsqd had already timed them out:
    E_FIN_FAILED, E_REQ_FAILED, E_TOUCH_FAILED (not fatal). It takes them again (RDY 3),
    attempts 2, and FINs them: each was processed twice."""
    name = "doctor/nsq-late-answer.pcap"
    with recorded(name, scanned=(("orders", "late"),), msg_timeout="1s") as nsqd:
        c = subscriber(nsqd.tcp_port, "orders", "late", 3, client_id="late-worker")
        producer = publish(nsqd.tcp_port, Mpub("orders", (b"order-1", b"order-2", b"order-3")))
        first = [c.delivery() for _ in range(3)]
        c.send(Rdy(0))
        time.sleep(1.6)
        errors = []
        for command in (Fin(first[0].id), Req(first[1].id, 0), Touch(first[2].id)):
            c.send(command)
            errors.append(c.reply())
        c.send(Rdy(3))
        again = [c.delivery() for _ in range(3)]
        for d in again:
            c.send(Fin(d.id))
        c.close()
    assert all(e and e[0] == 1 for e in errors), errors
    cap, server, client = Capture(DATA / name), nsqd.tcp_address, c.address
    late = []
    for d, verb, code in zip(first, (b"FIN", b"REQ", b"TOUCH"),
                             (b"E_FIN_FAILED", b"E_REQ_FAILED", b"E_TOUCH_FAILED"), strict=True):
        delivered = cap.one(d.needle(), client, server, "server")
        answer = cap.one(verb + b" " + d.id, client, server, "client")
        refused = cap.find(code, client, server, "server")[0]
        redelivered = cap.one(struct.pack(">H", 2) + d.id, client, server, "server")
        late.append({"id": d.id.decode(), "command": verb.decode(), "error": code.decode(),
                     "delivered": delivered, "answer": answer, "refused": refused,
                     "redelivered": redelivered,
                     "fin_of_redelivery": cap.find(b"FIN " + d.id, client, server, "client")[-1],
                     "answer_after_seconds": cap.between(1, delivered, answer)})
    record(name, MADE_BY.format("late_answer"), late_answer.__doc__, [
        finding("nsq.late-answer", "FIN, REQ and TOUCH sent 1.6 s after delivery "
                "(msg_timeout 1 s): refused E_FIN_FAILED/E_REQ_FAILED/E_TOUCH_FAILED, each "
                "message delivered again (attempts 2) and processed twice",
                [p for x in late for p in (x["answer"], x["refused"], x["redelivered"])],
                conn(client, server), late=late, msg_timeout_ms=1000),
        finding("nsq.msg-timeout", "the same 3 messages timed out in flight and came back "
                "(attempts 2)", [x["redelivered"] for x in late], conn(client, server),
                message_ids=[x["id"] for x in late], max_attempts=2, producer=producer),
        *guide(DATA / name)],
        not_expected=["nsq.fatal-error", "nsq.poison-message", "tcp.reset"])


def heartbeat_missed() -> None:
    """Three consumers ask for a 1 s heartbeat: ``silent`` never answers one -- nsqd
    closes it 2 s after it last heard from it; ``chatty`` never sends NOP but sends RDY 1
    every 0.7 s -- a command in return, which is all nsqd asks (seed 000), so its read
    deadline never passes: not a miss; ``healthy`` answers each heartbeat with NOP."""
    name = "doctor/nsq-heartbeat-missed.pcap"
    ends: dict[str, Client] = {}

    def silent(port: int) -> None:
        c = ends["silent"] = subscriber(port, "pings", "silent", 1, heartbeat_interval=1000)
        while c.frame() is not None:  # heartbeats, unanswered, until nsqd closes
            pass
        c.sock.close()

    def chatty(port: int) -> None:
        c = ends["chatty"] = subscriber(port, "pings", "chatty", 1, heartbeat_interval=1000)
        c.sock.settimeout(0.7)
        for _ in range(6):
            try:
                while c.frame() is not None:
                    pass
            except TimeoutError:
                c.send(Rdy(1))
        c.sock.settimeout(None)
        c.close()

    def healthy(port: int) -> None:
        c = ends["healthy"] = subscriber(port, "pings", "healthy", 1, heartbeat_interval=1000)
        c.idle(4.2)
        c.close()

    with recorded(name) as nsqd:
        threads = [threading.Thread(target=f, args=(nsqd.tcp_port,))
                   for f in (silent, chatty, healthy)]
        for t in threads:
            t.start()
            time.sleep(0.05)
        for t in threads:
            t.join(20)
    cap, server, a = Capture(DATA / name), nsqd.tcp_address, ends["silent"].address
    beats = cap.find(HEARTBEAT, a, server, "server")
    fin = cap.flagged(FIN, a, server, "server")[0]
    record(name, MADE_BY.format("heartbeat_missed"), heartbeat_missed.__doc__, [
        finding("nsq.heartbeat-missed", f"{len(beats)} heartbeats unanswered; nsqd closed the "
                f"connection {cap.between(1, beats[0], fin)} s after the first", [*beats, fin],
                conn(a, server), heartbeats=beats, heartbeat_interval_ms=1000,
                closed_by="nsqd", close_packet=fin),
        *guide(DATA / name)],
        not_expected=["nsq.fatal-error", quiet(
            "nsq.heartbeat-missed", conn(ends["chatty"].address, server),
            "each heartbeat is followed by a RDY: a command in return, as nsqd asks"), quiet(
            "nsq.heartbeat-missed", conn(ends["healthy"].address, server),
            "each heartbeat answered with NOP")])


def never_ready() -> None:
    """A consumer subscribes to jobs/idle and never sends RDY while 30 messages wait; it
    closes (CLS) after 3 s with none delivered. A second consumer of the channel then
    sends RDY 30 and gets all 30 at once -- they were there all along."""
    name = "doctor/nsq-never-ready.pcap"
    bodies = tuple(b"job-%02d" % i for i in range(30))
    with recorded(name) as nsqd:
        idle = subscriber(nsqd.tcp_port, "jobs", "idle", client_id="idle-worker")
        producer = publish(nsqd.tcp_port, Mpub("jobs", bodies))
        time.sleep(3.0)
        idle.close()
        ready = subscriber(nsqd.tcp_port, "jobs", "idle", 30, client_id="ready-worker")
        got = [ready.delivery() for _ in bodies]
        for d in got:
            ready.send(Fin(d.id))
        ready.close()
    cap, server, a = Capture(DATA / name), nsqd.tcp_address, idle.address
    sub = cap.one(b"SUB jobs idle", a, server, "client")
    mpub = cap.one(b"MPUB jobs", producer, server, "client")
    cls = cap.one(b"CLS", a, server, "client")
    first = cap.one(got[0].needle(), ready.address, server, "server")
    record(name, MADE_BY.format("never_ready"), never_ready.__doc__, [
        finding("nsq.never-ready", f"subscribed, never sent RDY; 30 messages waited "
                f"{cap.between(1, mpub, cls)} s until it closed", [sub, mpub, cls],
                conn(a, server), sub=sub, publish=mpub, cls=cls, messages_waiting=30,
                waited_seconds=cap.between(1, mpub, cls), producer=producer,
                delivered_later_to=ready.address, first_delivery_later=first),
        *guide(DATA / name)], not_expected=["nsq.fatal-error", "tcp.reset"])


def starved() -> None:
    """A consumer with RDY 1 and 20 messages waiting FINs each 0.1 s after it came: it
    always has as many in flight as it allows (RDY 1) while the rest wait."""
    name = "doctor/nsq-starved.pcap"
    with recorded(name) as nsqd:
        c = subscriber(nsqd.tcp_port, "jobs", "slow", client_id="slow-worker")
        producer = publish(nsqd.tcp_port, Mpub("jobs", tuple(b"job %d" % i for i in range(20))))
        c.send(Rdy(1))
        got = []
        for _ in range(20):
            got.append(c.delivery())
            time.sleep(0.1)
            c.send(Fin(got[-1].id))
        c.close()
    cap, server, a = Capture(DATA / name), nsqd.tcp_address, c.address
    rdy = cap.one(b"RDY 1", a, server, "client")
    deliveries = [cap.one(d.needle(), a, server, "server") for d in got]
    fins = [cap.one(b"FIN " + d.id, a, server, "client") for d in got]
    busy = sum(cap.between(1, d, f) for d, f in zip(deliveries, fins, strict=True))
    record(name, MADE_BY.format("starved"), starved.__doc__, [
        finding("nsq.starved", f"RDY 1: one message in flight {busy:.2f} s of the "
                f"{cap.between(1, deliveries[0], fins[-1])} s from first delivery to last FIN, "
                "while up to 19 waited", [rdy, *deliveries], conn(a, server), rdy=1,
                rdy_packet=rdy, deliveries=deliveries, fins=fins, messages=20,
                in_flight_seconds=round(busy, 3),
                span_seconds=cap.between(1, deliveries[0], fins[-1]), producer=producer),
        *guide(DATA / name)], not_expected=["nsq.fatal-error", "nsq.msg-timeout"])


def rdy_stuck() -> None:
    """A consumer (RDY 5) gets 5 of 10 messages, fails one -- REQ with a 1 s delay and
    RDY 0, the client guide's backoff -- FINs the other four, and never raises RDY again:
    6 messages (the requeued one included) wait 3 s until it closes."""
    name = "doctor/nsq-rdy-stuck.pcap"
    with recorded(name, scanned=(("jobs", "stuck"),)) as nsqd:
        c = subscriber(nsqd.tcp_port, "jobs", "stuck", 5, client_id="stuck-worker")
        producer = publish(nsqd.tcp_port, Mpub("jobs", tuple(b"job %d" % i for i in range(10))))
        got = [c.delivery() for _ in range(5)]
        c.send(Req(got[0].id, 1000), Rdy(0))
        for d in got[1:]:
            c.send(Fin(d.id))
        time.sleep(3.0)
        c.close()
    cap, server, a = Capture(DATA / name), nsqd.tcp_address, c.address
    req = cap.one(b"REQ " + got[0].id, a, server, "client")
    rdy0 = cap.one(b"RDY 0", a, server, "client")
    cls = cap.one(b"CLS", a, server, "client")
    record(name, MADE_BY.format("rdy_stuck"), rdy_stuck.__doc__, [
        finding("nsq.rdy-stuck", f"RDY 0 after a REQ (backoff) and never raised: 6 messages "
                f"waited {cap.between(1, rdy0, cls)} s", [req, rdy0, cls], conn(a, server),
                req=req, rdy0=rdy0, cls=cls, stuck_seconds=cap.between(1, rdy0, cls),
                messages_waiting=6, requeued_id=got[0].id.decode(), producer=producer),
        *guide(DATA / name)], not_expected=["nsq.fatal-error", "nsq.never-ready"])


TOO_BIG = encode_command(Pub("events", b"x" * 2000))
DISK_FULL = encode_command(Pub("full", b"full-1"))
PUB_REFUSALS = [  # (what, bytes after the magic, nsqd's error code); the codec refuses to
    # build a bad topic name or an MPUB of no message, so those bytes are literal
    ("bad topic", b"PUB bad*topic\n" + struct.pack(">I", 5) + b"hello", b"E_BAD_TOPIC"),
    ("too big", TOO_BIG, b"E_BAD_MESSAGE"),
    ("too big, retried", TOO_BIG, b"E_BAD_MESSAGE"),
    ("no messages", b"MPUB events\n" + struct.pack(">II", 4, 0), b"E_BAD_BODY"),
    ("disk full", DISK_FULL, b"E_PUB_FAILED"),
    ("disk full, retried", DISK_FULL, b"E_PUB_FAILED"),
    ("disk full", encode_command(Mpub("full", (b"m-1", b"m-2"))), b"E_MPUB_FAILED"),
]


def publish_refused() -> None:
    """nsqd --max-msg-size=1024 --mem-queue-size=0, whose topic ``full`` writes to a full
    disk (its diskqueue file is a link to /dev/full): one connection per publish --
    PUB bad*topic (E_BAD_TOPIC), PUB of 2000 bytes twice (E_BAD_MESSAGE), MPUB of 0
    messages (E_BAD_BODY), PUB to ``full`` twice (E_PUB_FAILED: no space left on
    device), MPUB to ``full`` (E_MPUB_FAILED) -- each fatal: nsqd closes -- then one PUB
    that succeeds."""
    name = "doctor/nsq-publish-refused.pcap"
    done = []
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink("/dev/full", os.path.join(tmp, "full.diskqueue.000000.dat"))
        with recorded(name, data_path=tmp, max_msg_size=1024, mem_queue_size=0) as nsqd:
            for what, data, code in PUB_REFUSALS:
                p = Client(nsqd.tcp_port)
                p.raw(data)
                answer = p.reply()
                assert answer and code in answer[1], (what, answer)
                done.append((what, p.address, code, p.reply() is None))
                p.sock.close()
                time.sleep(0.1)
            ok = publish(nsqd.tcp_port, Pub("events", b"fine"))
    cap, server = Capture(DATA / name), nsqd.tcp_address
    refused = []
    for (what, client, code, closed), (_, data, _) in zip(done, PUB_REFUSALS, strict=True):
        command = cap.one(data.split(b"\n")[0] + b"\n", client, server, "client")
        error = cap.one(code, client, server, "server")
        refused.append({"case": what, "client": client, "command": command, "error": error,
                        "code": code.decode(), "closed_by_nsqd": closed,
                        "server_fin": cap.flagged(FIN, client, server, "server")})
    record(name, MADE_BY.format("publish_refused"), publish_refused.__doc__, [
        finding("nsq.publish-refused", f"{what}: {r['code']}" + (" (the same publish "
                "retried on a new connection)" if "retried" in what else ""),
                [r["command"], r["error"]], conn(r["client"], server), **r)
        for (what, *_), r in zip(done, refused, strict=True)] + [
        finding("nsq.fatal-error", f"nsqd closed the connection after {r['code']}",
                [r["command"], r["error"], *r["server_fin"][:1]], conn(r["client"], server),
                code=r["code"], command=r["command"], error=r["error"])
        for r in refused] + guide(DATA / name),
        not_expected=["nsq.msg-timeout"])
    print(f"  the good PUB: {ok}")


FATAL = [  # (what, bytes after the magic, the error nsqd answers)
    ("SUB twice", b"SUB a b\nSUB a b\n", b"E_INVALID cannot SUB in current state"),
    ("RDY before SUB", b"RDY 1\n", b"E_INVALID cannot RDY in current state"),
    ("IDENTIFY with a body that is not JSON", b"IDENTIFY\n" + struct.pack(">I", 9) + b"{not json",
     b"E_BAD_BODY IDENTIFY failed to decode JSON body"),
    ("RDY above max_rdy_count", b"SUB a b\nRDY 3000\n", b"E_INVALID RDY count 3000 out of range"),
    ("an unknown command", b"READY 1\n", b"E_INVALID invalid command READY"),
]


def fatal_error() -> None:
    """One connection per fatal client error, each answered and then closed by nsqd: SUB
    twice, RDY before SUB, an IDENTIFY body that is not JSON, RDY 3000 (above nsqd's
    max_rdy_count 2500), an unknown command ``READY``."""
    name = "doctor/nsq-fatal-error.pcap"
    done = []
    with recorded(name) as nsqd:
        for what, data, text in FATAL:
            c = Client(nsqd.tcp_port)
            c.raw(data)
            answers = [c.reply(), c.reply()]
            assert any(a and text in a[1] for a in answers if a), (what, answers)
            done.append((what, c.address, text))
            c.sock.close()
            time.sleep(0.1)
    cap, server = Capture(DATA / name), nsqd.tcp_address
    found = []
    for (what, client, text), (_, data, _) in zip(done, FATAL, strict=True):
        command = cap.one(data.split(b"\n")[-2] if data.endswith(b"\n") else data[:8],
                          client, server, "client")
        error = cap.one(text, client, server, "server")
        fin = cap.flagged(FIN, client, server, "server")[0]
        found.append(finding("nsq.fatal-error", f"{what}: {text.decode()}; nsqd closed",
                             [command, error, fin], conn(client, server), command=command,
                             error=error, server_fin=fin, code=text.split()[0].decode()))
    record(name, MADE_BY.format("fatal_error"), fatal_error.__doc__,
           [*found, *guide(DATA / name)], not_expected=["nsq.publish-refused"])


def redelivery_late() -> None:
    """A consumer subscribes to a new channel right after nsqd started and REQs three
    messages with a 200 ms delay. nsqd's queue scan, which moves due messages out of a
    channel's deferred queue, reads its list of channels every 5 s
    (QueueScanRefreshInterval): this channel is not in it yet, so the three come back
    about 4 s after they were due."""
    name = "doctor/nsq-redelivery-late.pcap"
    with recorded(name) as nsqd:
        c = subscriber(nsqd.tcp_port, "retry", "c", 3, client_id="retry-worker")
        producer = publish(nsqd.tcp_port, Mpub("retry", (b"r-1", b"r-2", b"r-3")))
        first = [c.delivery() for _ in range(3)]
        for d in first:
            c.send(Req(d.id, 200))
        again = [c.delivery() for _ in range(3)]
        for d in again:
            c.send(Fin(d.id))
        c.close()
    cap, server, a = Capture(DATA / name), nsqd.tcp_address, c.address
    late = []
    for d in first:
        req = cap.one(b"REQ " + d.id, a, server, "client")
        back = cap.one(struct.pack(">H", 2) + d.id, a, server, "server")
        late.append({"id": d.id.decode(), "req": req, "delay_ms": 200, "redelivered": back,
                     "late_seconds": round(cap.between(1, req, back) - 0.2, 3)})
    record(name, MADE_BY.format("redelivery_late"), redelivery_late.__doc__, [
        finding("nsq.redelivery-late", "REQ with a 200 ms delay; redelivered "
                + ", ".join(f"{x['late_seconds']} s" for x in late) + " after it was due",
                [p for x in late for p in (x["req"], x["redelivered"])], conn(a, server),
                requeues=late, producer=producer),
        *guide(DATA / name)], not_expected=["nsq.fatal-error", "nsq.msg-timeout"])


def reconnect_churn() -> None:
    """A producer (client_id ``orders-api``) that opens a connection for each message:
    magic, IDENTIFY, PUB, OK, close -- 20 times in about 3 s."""
    name = "doctor/nsq-reconnect-churn.pcap"
    clients = []
    with recorded(name) as nsqd:
        for i in range(20):
            p = Client(nsqd.tcp_port, {"client_id": "orders-api", "hostname": "web-1"})
            p.send(Pub("orders", b"order %d" % i))
            p.reply()
            clients.append(p.address)
            p.close(cls=False)
            time.sleep(0.15)
    cap, server = Capture(DATA / name), nsqd.tcp_address
    syns = [cap.flagged(SYN, a, server, "client")[0] for a in clients]
    record(name, MADE_BY.format("reconnect_churn"), reconnect_churn.__doc__, [
        finding("nsq.reconnect-churn", f"client_id orders-api opened {len(syns)} connections "
                f"in {cap.between(1, syns[0], syns[-1])} s, one PUB each", syns, None,
                client_id="orders-api", hostname="web-1", connections=clients, syns=syns,
                seconds=cap.between(1, syns[0], syns[-1])),
        *guide(DATA / name)], not_expected=["nsq.fatal-error", "tcp.reset"])


def poison_message() -> None:
    """A consumer (RDY 1) FINs ``ok-1`` and ``ok-2`` but fails ``poison`` every time: REQ
    with a 100 ms delay, six times (attempts 1 to 6), never FINed; then it closes."""
    name = "doctor/nsq-poison-message.pcap"
    with recorded(name, scanned=(("orders", "worker"),)) as nsqd:
        c = subscriber(nsqd.tcp_port, "orders", "worker", 1, client_id="poisoned")
        producer = publish(nsqd.tcp_port, Mpub("orders", (b"ok-1", b"poison", b"ok-2")))
        poison: list[Delivery] = []
        while len(poison) < 6:
            d = c.delivery()
            if d.body == b"poison":
                poison.append(d)
                c.send(Req(d.id, 100))
            else:
                c.send(Fin(d.id))
        c.close()
    cap, server, a = Capture(DATA / name), nsqd.tcp_address, c.address
    deliveries = [cap.one(d.needle(), a, server, "server") for d in poison]
    reqs = cap.find(b"REQ " + poison[0].id, a, server, "client")
    record(name, MADE_BY.format("poison_message"), poison_message.__doc__, [
        finding("nsq.poison-message", f"message {poison[0].id.decode()} REQ'd 6 times, "
                "attempts 1 to 6, never FINed", [*deliveries, *reqs], conn(a, server),
                id=poison[0].id.decode(), body="poison", deliveries=deliveries, reqs=reqs,
                attempts=[d.attempts for d in poison], finished=False, producer=producer),
        *guide(DATA / name)], not_expected=["nsq.fatal-error", "nsq.msg-timeout"])


def backlog() -> None:
    """A producer MPUBs 10 messages every 0.1 s for 3 s (about 100/s); the only consumer
    (RDY 2) takes 50 ms per message (about 20/s): deliveries fall further behind the
    publishes all along, and most of the 300 are still queued when it closes."""
    name = "doctor/nsq-backlog.pcap"
    got: list[Delivery] = []
    with recorded(name) as nsqd:
        c = subscriber(nsqd.tcp_port, "clicks", "counter", 2, client_id="counter")
        stop = threading.Event()

        def consume() -> None:
            while not stop.is_set():
                got.append(c.delivery())
                time.sleep(0.05)
                c.send(Fin(got[-1].id))

        worker = threading.Thread(target=consume)
        worker.start()
        p = Client(nsqd.tcp_port, {"client_id": "click-producer"})
        for i in range(30):
            p.send(Mpub("clicks", tuple(b"click %d-%d" % (i, j) for j in range(10))))
            p.reply()
            time.sleep(0.1)
        stop.set()
        worker.join(5)
        c.send(Rdy(0))
        c.close()
        producer = p.address
        p.close(cls=False)
    cap, server, a = Capture(DATA / name), nsqd.tcp_address, c.address
    mpubs = cap.find(b"MPUB clicks", producer, server, "client")
    deliveries = [cap.one(d.needle(), a, server, "server") for d in got]
    record(name, MADE_BY.format("backlog"), backlog.__doc__, [
        finding("nsq.backlog", f"300 messages published in {cap.between(1, mpubs[0], mpubs[-1])}"
                f" s, {len(got)} delivered; {300 - len(got)} still queued at the end",
                [mpubs[0], mpubs[-1], deliveries[0], deliveries[-1]], conn(a, server),
                topic="clicks", channel="counter", published=300, delivered=len(got),
                publishes=mpubs, rdy=2, producer=producer),
        finding("nsq.starved", "in flight pinned at RDY 2 while messages queued",
                deliveries[:2], conn(a, server), rdy=2),
        *guide(DATA / name)], not_expected=["nsq.fatal-error"])


def rdy_hoarding() -> None:
    """Two nsqds with 20 messages each on events; one consumer (client_id ``hoarder``)
    connects to both but gives all its RDY (10) to the first and RDY 0 to the second:
    the first's 20 are delivered and FINed, the second's 20 wait 2 s until it closes."""
    name = "doctor/nsq-rdy-hoarding.pcap"
    with RealNsqd() as b, recorded(name, ports=lambda a: [a.tcp_port, b.tcp_port]) as a:
        who = {"client_id": "hoarder", "hostname": "worker-1"}
        busy = subscriber(a.tcp_port, "events", "c", 10, **who)
        idle = subscriber(b.tcp_port, "events", "c", 0, **who)
        pa = publish(a.tcp_port, Mpub("events", tuple(b"a-%d" % i for i in range(20))))
        pb = publish(b.tcp_port, Mpub("events", tuple(b"b-%d" % i for i in range(20))))
        for _ in range(20):
            busy.send(Fin(busy.delivery().id))
            time.sleep(0.02)
        time.sleep(2.0)
        busy.close()
        idle.close()
    cap = Capture(DATA / name)
    rdy10 = cap.one(b"RDY 10", busy.address, a.tcp_address, "client")
    rdy0 = cap.one(b"RDY 0", idle.address, b.tcp_address, "client")
    waiting = cap.one(b"MPUB events", pb, b.tcp_address, "client")
    cls = cap.one(b"CLS", idle.address, b.tcp_address, "client")
    record(name, MADE_BY.format("rdy_hoarding"), rdy_hoarding.__doc__, [
        finding("nsq.rdy-hoarding", f"client hoarder: RDY 10 on {a.tcp_address}, RDY 0 on "
                f"{b.tcp_address} where 20 messages waited {cap.between(1, waiting, cls)} s",
                [rdy10, rdy0, waiting, cls], conn(idle.address, b.tcp_address),
                client_id="hoarder", hoarding=conn(busy.address, a.tcp_address),
                rdy_hoarding=10, rdy_idle=0, messages_waiting=20,
                waited_seconds=cap.between(1, waiting, cls), producers=[pa, pb]),
        *guide(DATA / name)], not_expected=["nsq.fatal-error"])


def guide_rules() -> None:
    """A consumer that breaks the client guide (seed 002) against nsqd: SUB without
    IDENTIFY, a first RDY of 100 (not 1), RDY 100 sent again after every FIN (not only
    at 0 or below 25 %), a FIN of an id it was never given, and a close without CLS."""
    name = "doctor/nsq-guide.pcap"
    with recorded(name) as nsqd:
        c = Client(nsqd.tcp_port)
        c.send(Sub("guide", "c"))
        c.reply()
        c.send(Rdy(100))
        producer = publish(nsqd.tcp_port, Mpub("guide", tuple(b"g-%d" % i for i in range(5))))
        for _ in range(5):
            c.send(Fin(c.delivery().id), Rdy(100))
        c.send(Fin(b"%016x" % 0xbad))
        c.reply()
        c.sock.close()
    record(name, MADE_BY.format("guide_rules"), guide_rules.__doc__,
           guide(DATA / name), not_expected=["nsq.fatal-error"])
    print(f"  consumer {c.address}, producer {producer}")


SCENARIOS: dict[str, Callable[[], None]] = {f.__name__: f for f in (
    msg_timeout, late_answer, heartbeat_missed, never_ready, starved, rdy_stuck,
    publish_refused, fatal_error, redelivery_late, reconnect_churn, poison_message, backlog,
    rdy_hoarding, guide_rules)}


if __name__ == "__main__":
    run(__doc__, SCENARIOS)
