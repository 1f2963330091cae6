"""What the doctor should find in each capture of data/doctor/, read back from the file
itself and written to data/doctor/expected.json.

The ``make_doctor_*.py`` scripts know what their clients did (which message ids came
back, which command was refused); this module finds the packets that show it. It reads a
capture with **tshark**, not with nsqviz, so the packet numbers are Wireshark's and do
not depend on the decoder the doctor will be built on: :class:`Capture` is every TCP
packet (number, time, addresses, flags, payload), and :meth:`Capture.find` the packets
of one connection whose payload holds some bytes (a message id, an error text, a
command line). tshark's own TCP analysis gives the zero windows and retransmissions.

``expected.json`` maps a file (relative to data/) to what made it and its findings; a
finding names the rule, the connection as ``nsqviz decode`` prints it (client and server
``address:port``), the packets, and the figures (ids, counts, seconds). Each script
updates its own files' entries and leaves the others.

    python data/doctor_expected.py          # writes data/README.md's two tables from it
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent
DOCTOR = DATA / "doctor"
EXPECTED = DOCTOR / "expected.json"

# The real programs (nsqd, nsqlookupd, the Go TubeMQ client): $NSQD-style variables,
# PATH, else $NSQVIZ_PEERS -- which, as in tests/conftest.py, defaults to where this
# project's machines keep them, beside the checkout, when that folder exists.
_MACHINE_PEERS = DATA.parent.parent / "shared" / "peers"
if _MACHINE_PEERS.is_dir():
    os.environ.setdefault("NSQVIZ_PEERS", str(_MACHINE_PEERS))

_FIELDS = ("frame.number", "frame.time_epoch", "ip.src", "tcp.srcport", "ip.dst",
           "tcp.dstport", "tcp.flags", "tcp.window_size", "tcp.seq", "tcp.len", "tcp.payload")

SYN, RST, FIN = 0x02, 0x04, 0x01

RULES = ("nsq.msg-timeout", "nsq.late-answer", "nsq.heartbeat-missed", "nsq.never-ready",
         "nsq.starved", "nsq.rdy-stuck", "nsq.publish-refused", "nsq.fatal-error",
         "nsq.redelivery-late", "nsq.reconnect-churn", "nsq.poison-message", "nsq.backlog",
         "nsq.rdy-hoarding", "nsq.guide", "tcp.zero-window", "tcp.retransmission",
         "tcp.reset", "capture.truncated", "capture.midstream", "capture.gap",
         "lookupd.registration", "tubemq.heartbeat-timeout", "tubemq.rebalance",
         "tubemq.rpc-error")
"""The doctor's catalogue of rule ids (issue 35)."""


@dataclass(frozen=True, slots=True)
class Packet:
    number: int
    time: float
    src: str
    dst: str
    flags: int
    window: int
    seq: int  # relative, as tshark shows it
    length: int
    payload: bytes


def tshark(path: Path, *args: str) -> list[list[str]]:
    """tshark's fields of each packet of ``path`` (``-T fields``), split on tabs."""
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-E", "separator=\t",
                          "-E", "occurrence=f", *args], capture_output=True, text=True,
                         check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


class Capture:
    """A capture's TCP packets as tshark numbers them."""

    def __init__(self, path: Path):
        self.path = path
        self.packets: list[Packet] = []
        for row in tshark(path, "-Y", "tcp", *[a for f in _FIELDS for a in ("-e", f)]):
            number, when, src, sport, dst, dport, flags, window, seq, length, payload = row
            self.packets.append(Packet(int(number), float(when), f"{src}:{sport}",
                                       f"{dst}:{dport}", int(flags, 16), int(window or 0),
                                       int(seq), int(length), bytes.fromhex(payload)))
        self.start = self.packets[0].time if self.packets else 0.0
        self.by_number = {p.number: p for p in self.packets}

    def time(self, number: int) -> float:
        """Seconds since the capture's first packet (``frame.time_relative``)."""
        return round(self.by_number[number].time - self.start, 6)

    def between(self, seconds: float, first: int, last: int) -> float:
        return round(self.by_number[last].time - self.by_number[first].time, 3)

    def of(self, client: str, server: str, sender: str | None = None) -> list[Packet]:
        """The packets of one connection (``sender``: "client", "server" or both)."""
        ends = {"client": {(client, server)}, "server": {(server, client)},
                None: {(client, server), (server, client)}}[sender]
        return [p for p in self.packets if (p.src, p.dst) in ends]

    def find(self, needle: bytes, client: str, server: str, sender: str | None = None) -> list[int]:
        """Numbers of the connection's packets whose payload holds ``needle``."""
        return [p.number for p in self.of(client, server, sender) if needle in p.payload]

    def where(self, needle: bytes, server: str) -> list[tuple[int, str]]:
        """(packet, client address) of every packet to or from ``server`` holding
        ``needle``, when the script does not know the client's port."""
        return [(p.number, p.dst if p.src == server else p.src) for p in self.packets
                if server in (p.src, p.dst) and needle in p.payload]

    def one(self, needle: bytes, client: str, server: str, sender: str | None = None) -> int:
        """The first packet holding ``needle`` (it must be there)."""
        found = self.find(needle, client, server, sender)
        if not found:
            raise LookupError(f"{self.path.name}: {needle!r} not in {client} <-> {server}")
        return found[0]

    def flagged(self, flag: int, client: str, server: str, sender: str | None = None) -> list[int]:
        return [p.number for p in self.of(client, server, sender) if p.flags & flag]

    def expert(self, display_filter: str) -> list[int]:
        """Packets tshark's TCP analysis flags (e.g. ``tcp.analysis.zero_window``)."""
        return [int(row[0]) for row in tshark(self.path, "-Y", display_filter,
                                              "-e", "frame.number")]

    def gaps(self, client: str, server: str) -> list[dict[str, Any]]:
        """Bytes of the connection never captured (not even retransmitted later): the
        holes between the sequence ranges seen, each direction, with the packet after."""
        holes = []
        for sender in ("client", "server"):
            packets = sorted(self.of(client, server, sender), key=lambda p: p.seq)
            end = None
            for p in packets:
                if end is not None and p.seq > end:
                    holes.append({"sender": sender, "bytes": p.seq - end, "packet": p.number,
                                  "seq": end})
                flags = 1 if p.flags & (SYN | FIN) else 0
                end = max(end if end is not None else 0, p.seq + p.length + flags)
        return sorted(holes, key=lambda h: h["packet"])

    def ends(self, packet: Packet) -> tuple[str, str]:
        """(client, server) of a packet's connection: the client sent the SYN; without
        one, the side with the higher (ephemeral) port."""
        if not hasattr(self, "_clients"):
            self._clients = {frozenset((p.src, p.dst)): p.src for p in self.packets
                             if p.flags & SYN and not p.flags & 0x10}
        client = self._clients.get(frozenset((packet.src, packet.dst)))
        if client is None:
            client = max((packet.src, packet.dst), key=lambda a: int(a.rpartition(":")[2]))
        return client, packet.dst if client == packet.src else packet.src

    def connections(self, server_port: int) -> list[str]:
        """Client addresses that opened a connection to ``server_port`` (SYN), in order."""
        return [p.src for p in self.packets
                if p.flags & SYN and not p.flags & 0x10 and p.dst.endswith(f":{server_port}")]


def conn(client: str, server: str) -> dict[str, str]:
    return {"client": client, "server": server}


def finding(rule: str, what: str, packets: Iterable[int], connection: dict[str, str] | None,
            **facts: Any) -> dict[str, Any]:
    """One thing the doctor should report: ``rule``, in words ``what``, its packets."""
    return {"rule": rule, "what": what, "connection": connection,
            "packets": sorted(set(packets)), **facts}


def guide(path: Path) -> list[dict[str, Any]]:
    """``nsq.guide``: each client-guide rule ``nsqviz conformance`` fails on ``path``, as
    the doctor will report it (the conformance checker is that rule's definition, so
    here nsqviz, not tshark, says which packets)."""
    out = subprocess.run([sys.executable, "-m", "nsqviz.cli", "conformance", "--json",
                          str(path)], capture_output=True, text=True)
    report = json.loads(out.stdout)
    found = []
    for flow, results in report["connections"].items():
        client, _, server = flow.partition("->")
        found += [finding("nsq.guide", f"{r['rule']}: {r['detail']}", r["packets"],
                          conn(client, server), guide_rule=r["rule"], source="nsqviz conformance")
                  for r in results if r["status"] == "fail"]
    found += [finding("nsq.guide", f"{r['rule']}: {r['detail']}", r["packets"], None,
                      guide_rule=r["rule"], source="nsqviz conformance")
              for r in report["overall"] if r["status"] == "fail"]
    return found


def rpcs(path: Path) -> list[dict[str, Any]]:
    """Each TubeMQ request and response of ``path`` as ``nsqviz decode --json`` reads it:
    flow, kind (command or frame), name, method, serialNo, status, errCode, the inner
    message, packets. (tshark has no TubeMQ dissector of its own: these packet numbers
    are nsqviz's, checked by the scripts against what the simulator decided.)"""
    out = subprocess.run([sys.executable, "-m", "nsqviz.cli", "decode", "--json", str(path)],
                         capture_output=True, text=True, check=True).stdout
    calls = []
    for line in out.splitlines():
        r = json.loads(line)
        fields = r.get("fields", {})
        if r["kind"] not in ("command", "frame") or "serialNo" not in fields:
            continue
        message = fields.get("message") or {}
        calls.append({"flow": r["flow"], "kind": r["kind"], "name": r["name"],
                      "method": fields.get("method"), "serialNo": fields["serialNo"],
                      "status": fields.get("ResponseHeader", {}).get("status"),
                      "errCode": message.get("errCode"), "message": message,
                      "packets": r["packets"]})
    return calls


def quiet(rule: str, connection: dict[str, str], why: str) -> dict[str, Any]:
    """A connection that may look like ``rule`` but is not: the doctor must stay quiet."""
    return {"rule": rule, "connection": connection, "why": why}


def record(name: str, made_by: str, about: str, findings: list[dict[str, Any]],
           not_expected: Iterable[str | dict[str, Any]] = ()) -> None:
    """Write ``name``'s entry (a path relative to data/) into expected.json.

    ``not_expected``: what the doctor must not report here (crying wolf) -- a rule id
    (nowhere in the file) or :func:`quiet` (not on that connection)."""
    path = DATA / name
    entries = json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {}
    entries[name] = {"made_by": made_by, "about": " ".join(about.split()),
                     "packets": count_packets(path), "findings": findings,
                     "not_expected": list(not_expected)}
    EXPECTED.parent.mkdir(parents=True, exist_ok=True)
    EXPECTED.write_text(json.dumps(dict(sorted(entries.items())), indent=1) + "\n")
    rules = ", ".join(sorted({f["rule"] for f in findings})) or "healthy"
    print(f"{name}: {entries[name]['packets']} packets, {rules}", flush=True)


def count_packets(path: Path) -> int:
    return len(tshark(path, "-e", "frame.number"))


def run(doc: str, scenarios: dict[str, Callable[[], None]]) -> None:
    """A recording script's command line: every scenario, or those ``--only`` names."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=sorted(scenarios), metavar="NAME",
                        help=f"one scenario (repeat): {', '.join(scenarios)}")
    for name in parser.parse_args().only or scenarios:
        scenarios[name]()


def table(entries: dict[str, Any]) -> str:
    """data/README.md's table of data/doctor/: file, rule, what happened, packets."""
    lines = ["| file | rule | what happened | packets |", "|---|---|---|---|"]
    for name, entry in entries.items():
        if not name.startswith("doctor/"):
            continue
        shown_here = [f for f in entry["findings"]
                      if f["rule"] != "nsq.guide" or name == "doctor/nsq-guide.pcap"]
        for f in shown_here or [{"rule": "(healthy)", "what": entry["about"], "packets": []}]:
            shown = f["packets"][:8]
            more = f" (+{len(f['packets']) - 8})" if len(f["packets"]) > 8 else ""
            lines.append(f"| `{name}` | `{f['rule']}` | {f['what']} | "
                         f"{', '.join(map(str, shown))}{more} |")
    return "\n".join(lines)


def samples(entries: dict[str, Any]) -> str:
    """data/README.md's table of the older samples: healthy, or which rules they show."""
    lines = ["| file | the doctor should report | and must not report |", "|---|---|---|"]
    for name, entry in entries.items():
        if name.startswith("doctor/"):
            continue
        rules = sorted({f["rule"] for f in entry["findings"]})
        quiet = sorted({q["rule"] for q in entry["not_expected"] if isinstance(q, dict)})
        lines.append(f"| `{name}` | {', '.join(f'`{r}`' for r in rules) or 'nothing (healthy)'}"
                     f" | every other rule{''.join(f'; `{q}` (see why)' for q in quiet)} |")
    return "\n".join(lines)


def refresh_readme(entries: dict[str, Any]) -> None:
    """Put both tables into data/README.md in place of the ones there."""
    readme = DATA / "README.md"
    text = readme.read_text()
    for new in (table(entries), samples(entries)):
        head = new.split("\n", 1)[0]
        start = text.index(head)
        end = text.find("\n\n", start)
        text = text[:start] + new + (text[end:] if end >= 0 else "\n")
    readme.write_text(text)


if __name__ == "__main__":
    refresh_readme(json.loads(EXPECTED.read_text()))
