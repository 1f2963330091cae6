"""Writes data/doctor/expected.json's entries for the *older* sample captures of data/
(nothing is recorded here): which are healthy -- the doctor must stay quiet on them --
and which hold which rule's problem, on purpose (errors.pcap) or as a side effect (a
client that closes with RST, the snaplen of a cut capture, nsqjs's first RDY).

The packets are found the way the ``make_doctor_*.py`` scripts find them (tshark, the
payload bytes; ``nsqviz conformance`` for ``nsq.guide``; ``nsqviz decode --json`` for
TubeMQ); the stories are the ones data/README.md tells of each file.

    .venv/bin/python data/make_doctor_samples.py
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from doctor_expected import (
    DATA,
    FIN,
    RST,
    RULES,
    Capture,
    conn,
    finding,
    guide,
    quiet,
    record,
    rpcs,
    tshark,
)

NOT_FATAL = {b"E_FIN_FAILED", b"E_REQ_FAILED", b"E_TOUCH_FAILED"}
PUBLISH = (b"PUB ", b"MPUB ", b"DPUB ")
ERROR = re.compile(rb"(?<![A-Z_])E_[A-Z_]+")
REDELIVERY = re.compile(rb"\x00\x00\x00\x02.{8}(\x00[\x02-\xff])([0-9a-f]{16})", re.DOTALL)
"""A message frame (type 2) whose attempts is 2 or more: timestamp, attempts, id."""

Finder = Callable[[Capture], list[dict[str, Any]]]


def _lookupds(cap: Capture) -> set[str]:
    """The servers that took nsqlookupd's magic ``"  V1"`` from some client without
    refusing it: nsqlookupd's addresses in this capture."""
    found = set()
    for p in cap.packets:
        client, server = cap.ends(p)
        if p.src == client and p.payload.startswith(b"  V1") and not any(
                b"E_BAD_PROTOCOL" in q.payload for q in cap.of(client, server, "server")):
            found.add(server)
    return found


def errors(cap: Capture) -> list[dict[str, Any]]:
    """Every error frame a server sent that closed the connection: ``nsq.fatal-error``
    (and ``nsq.publish-refused`` after a publish), or ``lookupd.registration`` when the
    server is nsqlookupd -- told by the server, not by this client's magic: a client
    that sends nsqd's magic to nsqlookupd is refused by nsqlookupd (and both servers
    answer a bad magic with the same unframed E_BAD_PROTOCOL)."""
    found = []
    lookupds = _lookupds(cap)
    for p in cap.packets:
        client, server = cap.ends(p)
        match = ERROR.search(p.payload)
        if p.src != server or not match or match.group() in NOT_FATAL:
            continue
        sent = [q for q in cap.of(client, server, "client") if q.number < p.number and q.payload]
        command = sent[-1] if sent else None
        closed = [q.number for q in cap.of(client, server, "server")
                  if q.number >= p.number and q.flags & (FIN | RST)][:1]
        code = match.group().decode()
        lookup = server in lookupds
        text = p.payload[match.start():].split(b"\n")[0][:80].decode("ascii", "replace")
        packets = [*([command.number] if command else []), p.number, *closed]
        if lookup:
            found.append(finding("lookupd.registration", f"nsqlookupd refused: {text}",
                                 packets, conn(client, server), code=code))
            continue
        extra = {"decoded_with": "--port"} if code == "E_BAD_PROTOCOL" else {}
        found.append(finding("nsq.fatal-error", f"{text}; the server closed", packets,
                             conn(client, server), code=code, **extra))
        if command is not None and any(v in command.payload for v in PUBLISH):
            found.append(finding("nsq.publish-refused", text, packets[:2],
                                 conn(client, server), code=code))
    return found


def resets(cap: Capture) -> list[dict[str, Any]]:
    found = []
    for p in cap.packets:
        if not p.flags & RST:
            continue
        client, server = cap.ends(p)
        by = "client" if p.src == client else "server"
        fins = [q.number for q in cap.of(client, server) if q.flags & FIN and q.number < p.number]
        found.append(finding("tcp.reset", f"RST from the {by}" + (
            " after a FIN" if fins else ", no FIN before it"), [p.number],
            conn(client, server), sent_by=by, fin_before=fins))
    return found


def truncated(cap: Capture) -> list[dict[str, Any]]:
    cut = [int(n) for n, in tshark(cap.path, "-Y", "frame.cap_len < frame.len",
                                   "-e", "frame.number")]
    snaplen = max(int(n) for n, in tshark(cap.path, "-e", "frame.cap_len"))
    return [finding("capture.truncated", f"{len(cut)} packets cut by a snaplen of "
                    f"{snaplen} bytes", cut, None, packets_cut=len(cut), snaplen=snaplen)]


def midstream(cap: Capture) -> list[dict[str, Any]]:
    starts: dict[frozenset[str], Any] = {}
    for p in cap.packets:
        starts.setdefault(frozenset((p.src, p.dst)), p)
    return [finding("capture.midstream", "the capture starts inside this connection (no SYN)",
                    [p.number], conn(*cap.ends(p)))
            for p in starts.values() if not p.flags & 0x02]


def tubemq_errors(cap: Capture) -> list[dict[str, Any]]:
    by: dict[tuple[str, Any], list[int]] = {}
    for c in rpcs(cap.path):
        if c["kind"] == "frame" and (c["status"] != "SUCCESS" or c["errCode"] not in (200, None)):
            by.setdefault((c["method"], c["errCode"] or c["status"]), []).append(c["packets"][0])
    return [finding("tubemq.rpc-error", f"{method} answered {code} ({len(packets)})", packets,
                    None, method=method, err_code=code, count=len(packets))
            for (method, code), packets in sorted(by.items(), key=str)]


def nsq_guide(cap: Capture) -> list[dict[str, Any]]:
    return guide(cap.path)


QUIET_404 = ("tubemq.rpc-error", None, "GetMessage answered 404 NOT_FOUND (\"The request "
             "offset reached maxOffset!\") is the idle consumer's normal answer: the Java "
             "client ignores it (IGNORE_ERROR_SET)")

CUT = [quiet("capture.gap", None, "the missing bytes are the snaplen's cut: "
              "capture.truncated"),
       quiet("nsq.guide", None, "what the snaplen cut (an IDENTIFY's body, message ids) "
             "is not a client breaking the guide, whatever nsqviz conformance makes of the "
             "cut frames (it fails handshake and in-flight here)")]

SAMPLES: dict[str, tuple[tuple[Finder, ...], list[Any], str]] = {
    # file: (finders, what the doctor must not report, a word on the file)
    "pubsub-pynsq.pcap": ((nsq_guide,), [], "pynsq against the embedded broker: "
                          "healthy but for the guide's CLS rule (pynsq never sends CLS)"),
    "pubsub-pynsq.pcapng": ((nsq_guide,), [], "the same packets as pcapng"),
    "pubsub-any-sll2.pcap": ((nsq_guide,), [], "the pubsub scenario on -i any"),
    "pubsub-nsqjs.pcapng": ((errors, resets, nsq_guide), [], "nsqjs: its Writer's CLS is "
                            "refused (E_INVALID, fatal), both connections end with the "
                            "client's RST, first RDY 5"),
    "small-messages-pynsq.pcap": ((nsq_guide,), [], "healthy: sticky packets"),
    "large-messages-pynsq.pcap": ((nsq_guide,), [], "healthy: a message split over segments"),
    "snappy-pynsq.pcap": ((nsq_guide,), [], "healthy, snappy"),
    "deflate-pynsq.pcap": ((nsq_guide,), [], "healthy, deflate"),
    "tls-pynsq.pcapng": ((nsq_guide,), [], "healthy, encrypted after IDENTIFY"),
    "errors.pcap": ((errors, nsq_guide), [], "errors on purpose (see data/README.md); the "
                    "HTTP request to the NSQ port is NSQ only with --port"),
    "midstream-pynsq.pcap": ((midstream, nsq_guide), [], "starts 25 packets in"),
    "snaplen120-small-messages.pcap": ((truncated,), CUT, "small-messages cut to 120 bytes a "
                                       "packet"),
    "guide-pynsq.pcap": ((nsq_guide,), [], "client-guide scenario, pynsq"),
    "guide-gnsq.pcap": ((nsq_guide,), [], "client-guide scenario, gnsq"),
    "guide-nsqjs.pcap": ((resets, nsq_guide), [], "client-guide scenario, nsqjs (closes "
                         "with RST)"),
    "guide-nsqviz.pcap": ((nsq_guide,), [], "client-guide scenario, nsqviz.clients.nsq"),
    "nsqd/pubsub-pynsq.pcap": ((nsq_guide,), [], "pynsq against the real nsqd"),
    "nsqd/small-messages-pynsq.pcap": ((nsq_guide,), [], "the real nsqd"),
    "nsqd/snappy-pynsq.pcap": ((nsq_guide,), [], "the real nsqd, snappy"),
    "nsqd/deflate-pynsq.pcap": ((nsq_guide,), [], "the real nsqd, deflate"),
    "nsqd/errors.pcap": ((errors, resets, nsq_guide), [], "errors on purpose against the "
                         "real nsqd, which resets the HTTP connection"),
    "nsqd/debugging/debugging.pcap": ((errors, resets, nsq_guide), [], "notebook 07's four "
                                      "consumers in trouble: see the findings added below"),
    "nsqd/refused/bad-values.pcap": ((errors, nsq_guide), [], "values nsqd refuses"),
    "nsqd/refused/max-rdy-count.pcap": ((errors, nsq_guide), [], "RDY 11 above "
                                        "--max-rdy-count=10"),
    "nsqd/snaplen/pubsub-s96.pcap": ((truncated,), CUT, "tcpdump -s 96 of the real nsqd"),
    "lookupd/nsqd-register-real.pcap": ((), [], "healthy registration"),
    "lookupd/lookupd-errors-real.pcap": ((errors,), [], "what nsqlookupd refuses"),
    "lookupd/broker-register-nsqviz.pcap": ((), [], "healthy registration"),
    "tubemq/tubemq-producer-go.pcap": ((), [], "healthy Go producer"),
    "tubemq/tubemq-consumer-rebalance-go.pcap": ((tubemq_errors,), [], "healthy rebalance"),
    "tubemq/tubemq-large-message-go.pcap": ((tubemq_errors,), [quiet(
        "tcp.retransmission", None, "two 99-byte requests resent 4.6 ms after the first "
        "copies by the kernel's tail-loss probe; the receiver's D-SACK shows the first copies "
        "had arrived: spurious, nothing was lost")], "healthy, a 13-block message"),
    "tubemq/tubemq-glued-requests.pcap": ((), [], "healthy, 100 glued requests"),
    "tubemq/tubemq-errors.pcap": ((tubemq_errors,), [], "errors on purpose"),
}


def debugging(cap: Capture) -> list[dict[str, Any]]:
    """notebook 07's capture: the timed-out message, the starved consumer and the
    consumer nsqd closed for unanswered heartbeats (its E_FIN_FAILED storm is nsq.guide)."""
    found = []
    for p in cap.packets:
        for m in REDELIVERY.finditer(p.payload):
            found.append(finding("nsq.msg-timeout", "the orders/billing message timed out "
                                 "(msg_timeout 1 s) and came back, attempts "
                                 f"{m.group(1)[1]}", [p.number], conn(*cap.ends(p)),
                                 id=m.group(2).decode(), attempts=m.group(1)[1]))
    slow = [p for p in cap.packets if b"SUB jobs slow" in p.payload]
    if slow:
        client, server = cap.ends(slow[0])
        deliveries = cap.find(b"job ", client, server, "server")
        found.append(finding("nsq.starved", "jobs/slow: RDY 1, 20 messages each FINed 0.1 s "
                             "after it came", deliveries, conn(client, server), rdy=1,
                             messages=20))
    pings = [p for p in cap.packets if b"SUB pings c" in p.payload]
    if pings:
        client, server = cap.ends(pings[0])
        beats = cap.find(b"_heartbeat_", client, server, "server")
        fin = cap.flagged(FIN, client, server, "server")[:1]
        found.append(finding("nsq.heartbeat-missed", f"{len(beats)} heartbeats unanswered; "
                             "nsqd closed", [*beats, *fin], conn(client, server)))
    return found


def main() -> None:
    for name, (finders, not_expected, about) in SAMPLES.items():
        cap = Capture(DATA / name)
        found = [f for find in finders for f in find(cap)]
        if name == "nsqd/debugging/debugging.pcap":
            found += debugging(cap)
        idle = [f for f in found if f["rule"] == "tubemq.rpc-error" and f["err_code"] == 404]
        quiet_404 = [quiet(QUIET_404[0], None, QUIET_404[2])] if idle else []
        found = [f for f in found if f not in idle]
        rules = {f["rule"] for f in found}
        record(name, "data/make_doctor_samples.py", about, found,
               not_expected=[*not_expected, *quiet_404, *[r for r in RULES if r not in rules
                                                          and r not in _quieted(not_expected)]])


def _quieted(entries: list[Any]) -> set[str]:
    return {e["rule"] for e in entries if isinstance(e, dict)}


if __name__ == "__main__":
    main()
    print(f"{len(SAMPLES)} samples; see {Path(DATA / 'doctor' / 'expected.json')}")
