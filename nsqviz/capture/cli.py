"""``nsqviz decode CAPTURE...``: the conversations in pcap/pcapng files, one line a frame.

Modelled on tshark: a one-line summary per command or frame (packet numbers, time since
the first packet, endpoints, direction, name, the fields that matter), ``-V`` for every
field of each beneath it (as ``tshark -V`` prints the packet details), ``--json`` for
one JSON object per line, ``--flow`` and ``--filter`` to narrow it down, ``--stats`` for
per-flow counts in place of the frames (like ``tshark -q -z conv,tcp``). Several files
are one capture set (rotated files) unless ``--each-file``; ``--idle-split`` is the
silence that ends a connection. ``nsqviz pipeline`` takes the same two options, with the
same defaults, and finds the same connections.

Beyond the frames: each response and error names the packet of the command it answers
(``[response to N]``, ``response_to``); a command the server refuses in its state or for
its message id is marked (``[refused: ...]``, judged only on connections seen from their
start); a unit the capture's snaplen cut shows what was captured of it (``[N of M bytes
captured]``, ``cut``); each decoded connection's TCP ``FIN`` and ``RST`` are records of it,
and so is what Wireshark's TCP analysis flags in it (``-Y tcp.analysis.zero_window`` ...):
a zero window (``ZeroWindow``; ``WindowOpen`` where it opens again), a retransmission or
an out-of-order segment (``Retransmission``).

Live: ``-i IFACE [-f BPF]`` captures through tcpdump (or dumpcap)
(:mod:`nsqviz.capture.live`), and ``tcpdump -U -w - | nsqviz decode -`` reads a capture
as it is written; either way each record is printed (and flushed) as soon as its last
packet is read, and connections that end or fall silent are forgotten, so memory stays
bounded however long it runs (unless ``--stats``, which needs every flow's counts).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import stat
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO, TextIO

from nsqviz import compactjson, protocols
from nsqviz.capture import checks
from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.files import CaptureFormatError, PacketWarning
from nsqviz.capture.flowstate import FlowStats
from nsqviz.capture.live import TOOLS, CaptureToolError, LiveCapture
from nsqviz.capture.options import add_capture_set_options, capture_set_options
from nsqviz.records import DecodedRecord, details, json_line, packet_list, summary
from nsqviz.stream.direction import Direction
from nsqviz.usage import damaged_input, help_text, usage_error, warn

__all__ = ["register", "run", "wrap_line"]

_COMMAND = "decode"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        _COMMAND,
        help="decode the NSQ (and every other known protocol's) traffic in captures",
        description=help_text(__doc__),
    )
    p.add_argument("captures", nargs="*", metavar="CAPTURE",
                   help="pcap or pcapng files; - reads one from standard input (also while"
                        " it is written: tcpdump -U -w - | nsqviz decode -)")
    p.add_argument("-i", "--interface", metavar="IFACE",
                   help="capture live from this interface (through tcpdump or dumpcap,"
                        " which need the privilege to capture) instead of reading files")
    p.add_argument("-f", dest="bpf", metavar="BPF",
                   help="with -i: a capture filter in tcpdump's syntax (e.g. 'tcp port"
                        " 4150')")
    p.add_argument("--capture-tool", choices=TOOLS, default=None,
                   help="with -i: the tool that captures (default: the first installed of"
                        f" {', '.join(TOOLS)})")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per line (compact, UTF-8; ts null when unknown)")
    p.add_argument(
        "--flow", action="append", default=[], metavar="F",
        help="only flow F: its index (0-based, like tcp.stream), its client->server label,"
             " or an ip:port of either end (repeatable)",
    )
    p.add_argument(
        "--filter", action="append", default=[], metavar="NAME",
        help="only records with this name (PUB, FrameTypeMessage, E_BAD_TOPIC, FIN ...: an"
             " error code also finds nsqd's error frames) or kind (command, frame, error,"
             " gap, tls, tcp); case-insensitive, repeatable",
    )
    p.add_argument(
        "-Y", "--display-filter", metavar="EXPR", default=None,
        help="only packets that pass this Wireshark display filter (tshark's -Y; fields as"
             " the generated dissectors name them: nsq.command == \"PUB\","
             " nsq.msg.attempts > 1, tubemq.method, frame.number, tcp.stream ...;"
             " `nsqviz fields` lists them)",
    )
    p.add_argument("-V", "--verbose", action="store_true",
                   help="every field of each record on lines of its own, untruncated:"
                        " bytes as text (escaped where not printable), JSON decoded")
    p.add_argument("--width", type=int, default=None, metavar="N",
                   help="wrap lines longer than N characters at field boundaries (a"
                        " continuation line is indented); default: no wrapping")
    p.add_argument("--stats", action="store_true",
                   help="per-flow counts (frames, frames per packet, packets per frame)"
                        " instead of the frames")
    add_capture_set_options(p)
    p.set_defaults(run=run)


def _flow_matcher(specs: list[str]) -> Callable[[DecodedRecord], bool] | None:
    if not specs:
        return None
    ids = {int(s) for s in specs if s.isdigit()}
    texts = [s for s in specs if not s.isdigit()]

    def match(rec: DecodedRecord) -> bool:
        if rec.flow_id in ids:
            return True
        label = rec.flow or ""
        return any(t == label or t in label.split("->") for t in texts)

    return match


def _text_line(rec: DecodedRecord, t0: float) -> str:
    packets = packet_list(rec.packets)
    ts = rec.ts - t0 if not math.isnan(rec.ts) else float("nan")
    if rec.flow is None:
        where = "(capture)"
    else:
        client, server = rec.flow.split("->")
        where = f"{server} -> {client}" if rec.dir == Direction.S2C else f"{client} -> {server}"
    return f"{packets:>14} {ts:11.6f} {where:<44} {rec.kind:<7} {rec.name:<18} {summary(rec)}"


_BOUNDARY = re.compile(r"(?<= )(?=\S)|(?<=,)(?=\")")
"""Where a line may break: before a field after a space (``k=v  k=v``), or before a
JSON key after its comma (``{"a":1,"b":2}``) -- never inside a field."""

_INDENT = " " * 16


def wrap_line(line: str, width: int | None) -> str:
    """``line`` cut into lines of at most ``width`` characters at field boundaries (a
    field longer than the width is kept whole); continuation lines are indented."""
    if width is None or len(line) <= width:
        return line
    pieces = _BOUNDARY.split(line)
    lines, current = [], ""
    for piece in pieces:
        if current.strip() and len(current) + len(piece) > width:
            lines.append(current.rstrip())
            current = _INDENT
        current += piece
    lines.append(current.rstrip())
    return "\n".join(lines)


def _mean_max(histogram: Counter[int]) -> tuple[float, int]:
    n = sum(histogram.values())
    if not n:
        return 0.0, 0
    return sum(v * c for v, c in histogram.items()) / n, max(histogram)


def _stats_dict(s: FlowStats) -> dict[str, Any]:
    fpp_mean, fpp_max = _mean_max(s.frames_per_packet)
    ppf_mean, ppf_max = _mean_max(s.packets_per_frame)
    return {
        "flow": s.flow.label,
        "flow_id": s.flow.id,
        "protocol": s.protocol or None,
        "detected_by": s.why,
        "handshake_seen": s.flow.syn_seen,
        "packets_with_payload": s.packets,
        "bytes": s.payload_bytes,
        "records": s.records,
        "frames_per_packet": {"mean": round(fpp_mean, 3), "max": fpp_max},
        "packets_per_frame": {"mean": round(ppf_mean, 3), "max": ppf_max},
        "retransmitted_bytes": s.retransmitted_bytes,
        "gap_bytes": s.gap_bytes,
        "encrypted_bytes": s.encrypted_bytes,
        "undecoded_bytes": s.undecoded_bytes,
    }


def _print_stats(decoder: CaptureDecoder, out: TextIO, as_json: bool,
                 match: Callable[[DecodedRecord], bool] | None) -> None:
    rows = [s for s in decoder.stats
            if match is None or match(DecodedRecord(0, s.flow.label, None, "", "", {}, (),
                                                    s.flow.id))]
    if as_json:
        for s in rows:
            out.write(compactjson.line(_stats_dict(s)).decode())
        return
    out.write(f"{decoder.packets} packets, {decoder.not_tcp} not TCP,"
              f" {decoder.warning_count} capture warnings, {len(decoder.stats)} TCP flows\n")
    for s in rows:
        d = _stats_dict(s)
        verdict = (protocols.by_name(s.protocol).title if s.protocol
                   else "no known protocol" if s.protocol == "" else "no payload")
        out.write(f"\nflow {d['flow_id']}  {d['flow']}  {verdict}"
                  f"{' (' + s.why + ')' if s.why else ''}"
                  f"{'' if s.flow.syn_seen else '  [capture started mid-connection]'}\n")
        out.write(f"  packets with payload {d['packets_with_payload']}, bytes c2s"
                  f" {d['bytes']['c2s']} s2c {d['bytes']['s2c']}\n")
        rec = d["records"]
        out.write("  " + ", ".join(f"{k} {rec.get(k, 0)}"
                                   for k in ("command", "frame", "error", "gap", "tls")) + "\n")
        out.write(f"  frames per packet: mean {d['frames_per_packet']['mean']:.2f},"
                  f" max {d['frames_per_packet']['max']};"
                  f"  packets per frame: mean {d['packets_per_frame']['mean']:.2f},"
                  f" max {d['packets_per_frame']['max']}\n")
        out.write(f"  retransmitted bytes {d['retransmitted_bytes']}, missing bytes"
                  f" {d['gap_bytes']}, encrypted bytes {d['encrypted_bytes']},"
                  f" undecoded bytes {d['undecoded_bytes']}\n")


def _named(rec: DecodedRecord, names: set[str]) -> bool:
    """``--filter``: the record's name or kind, or the code of the error it carries."""
    code = rec.fields.get("code")
    return (rec.name.lower() in names or rec.kind in names
            or (isinstance(code, str) and code.lower() in names))


_BATCH = 32  # lines: fewer system calls, yet small enough to stay in the CPU cache


def _write(out: TextIO, lines: list[Any], flush: bool) -> None:
    """Write ``lines`` and empty the list: text lines each followed by a newline, or
    ``--json``'s, UTF-8 bytes each ended by its newline
    (:func:`nsqviz.records.json_line`), which go to the file beneath ``out`` as they are
    (:func:`_write_lines`), after what was written as text -- or are decoded, for an
    ``out`` with none, such as a :class:`io.StringIO`."""
    if not lines:
        return
    if isinstance(lines[0], bytes):
        binary = getattr(out, "buffer", None)
        if binary is None:
            out.write(b"".join(lines).decode())
        else:
            out.flush()
            _write_lines(binary, lines)
    else:
        out.write("\n".join(lines) + "\n")
    lines.clear()
    if flush:
        out.flush()


_writev = getattr(os, "writev", None)  # POSIX


def _write_lines(binary: BinaryIO, lines: list[bytes]) -> None:
    """``lines`` to ``binary``'s file in one system call that gathers them where they are
    (:func:`os.writev`) -- joined first, they would be copied once more into fresh
    memory, which for ``decode --json`` (a body's hex in each message's line) cost more
    than the writing itself; as many calls as it takes where the file takes part of
    them (a full pipe). A stream with no file (a BytesIO) is written to as usual."""
    try:
        fd = binary.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation
        fd = -1
    if fd < 0 or _writev is None:
        binary.write(b"".join(lines))
        return
    binary.flush()
    pending = lines
    while pending:
        n = _writev(fd, pending)
        done = 0  # lines written whole
        while done < len(pending) and n >= len(pending[done]):
            n -= len(pending[done])
            done += 1
        pending = pending[done:]
        if n:
            pending[0] = pending[0][n:]


def _stats_until_done(decoder: CaptureDecoder, records: Iterable[DecodedRecord], out: TextIO,
                      as_json: bool, match: Callable[[DecodedRecord], bool] | None) -> int:
    """``--stats``: read to the end of the capture -- or, live, until Ctrl-C, which
    here means "done, show me" -- then print the per-flow counts."""
    code = 0
    try:
        for _ in records:
            pass
    except KeyboardInterrupt:
        code = 130
    _print_stats(decoder, out, as_json, match)
    return code


def _stdin_is_file() -> bool:
    """Standard input is a regular file (``< capture.pcap``), not a pipe being written."""
    try:
        return stat.S_ISREG(os.fstat(sys.stdin.fileno()).st_mode)
    except (OSError, ValueError):  # closed, or replaced by an object without a descriptor
        return False


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if bool(args.captures) == bool(args.interface):
        return usage_error(_COMMAND, "give capture files (or - for standard input), or"
                                     " -i IFACE; not both")
    if (args.bpf or args.capture_tool) and not args.interface:
        return usage_error(_COMMAND, "-f and --capture-tool go with -i IFACE")
    capture: LiveCapture | None = None
    if args.interface:
        try:
            capture = LiveCapture(args.interface, args.bpf, tool=args.capture_tool)
        except CaptureToolError as exc:
            return usage_error(_COMMAND, str(exc))
    try:
        return _decode(args, out, capture)
    except KeyboardInterrupt:  # Ctrl-C: what was read is printed already
        return 130
    finally:
        if capture is not None:
            capture.stop()


def _decode(args: argparse.Namespace, out: TextIO, capture: LiveCapture | None) -> int:
    live = capture is not None or ("-" in args.captures and not _stdin_is_file())
    decoder = CaptureDecoder(**capture_set_options(args), live=live and not args.stats,
                             tcp_records=True)
    match = _flow_matcher(args.flow)
    names = {n.lower() for n in args.filter}
    try:
        display = checks.display_filter(getattr(args, "display_filter", None))
    except checks.UsageError as exc:
        return usage_error(_COMMAND, str(exc))
    seen = checks.Seen() if args.flow or names else None
    # Lines go out in small batches (with PYTHONUNBUFFERED every write is a system call;
    # one large write costs more, its text being copied and encoded in fresh memory), or
    # each at once, flushed, when decoding live.
    batch: list[Any] = []  # text lines, or --json's UTF-8 lines
    keep = batch.append
    limit = 1 if live else _BATCH
    t0: float | None = None
    sources = ([capture.stdout] if capture is not None
               else [sys.stdin.buffer if c == "-" else c for c in args.captures])
    try:
        records: Iterable[DecodedRecord] = decoder.decode(sources)
        if seen is not None:
            records = seen.watch(records)
        if args.stats:
            code = _stats_until_done(decoder, records, out, args.json, match)
            return code or _damaged(decoder) or _unmatched(args, seen, decoder)
        if display is not None:
            records = display.select(records, lambda: decoder.first_ts)
        as_json, width = args.json, args.width
        for rec in records:
            if match is not None and rec.flow is not None and not match(rec):
                continue
            if names and not _named(rec, names):
                continue
            if as_json:
                keep(json_line(rec))
            else:
                if t0 is None and not math.isnan(rec.ts):
                    t0 = decoder.first_ts if decoder.first_ts is not None else rec.ts
                keep(wrap_line(_text_line(rec, t0 or 0.0), width))
                if args.verbose:
                    batch.extend(f"{_INDENT}{line}" for line in details(rec))
            if len(batch) >= limit:
                _write(out, batch, live)
        _write(out, batch, live)
        failure = capture.failure() if capture is not None else None
        if failure:
            warn(_COMMAND, failure)
            return 1
        if not decoder.claimed:
            ports = ", ".join(f"{n} {sorted(p)}" for n, p in decoder.ports.items())
            warn(_COMMAND, f"no known protocol in {decoder.flow_count} TCP flows (a server"
                 f" on another port than {ports}, and no handshake captured? try --port P;"
                 " --stats lists the flows)")
    except CaptureFormatError as exc:
        failure = capture.failure() if capture is not None else None
        return usage_error(_COMMAND, str(failure or exc))
    except FileNotFoundError as exc:
        return usage_error(_COMMAND, f"{exc.filename}: no such file")
    except BrokenPipeError:  # `nsqviz decode x.pcap | head`
        sys.stderr.close()
        return 0
    return _damaged(decoder) or _unmatched(args, seen, decoder)


def _damaged(decoder: CaptureDecoder) -> int:
    """0, or 2 after saying what could not be read: the rule of the analyses too
    (:func:`~nsqviz.usage.damaged_input`); the problems are records of the output as
    well, where they are in the capture."""
    damage = [w for w in decoder.warnings if not isinstance(w, PacketWarning)]
    if not damage:
        return 0
    return damaged_input(_COMMAND, [f"packet {w.number} (file offset {w.offset}): {w.reason}"
                                    for w in damage])


def _unmatched(args: argparse.Namespace, seen: checks.Seen | None,
               decoder: CaptureDecoder) -> int:
    """``--flow`` or ``--filter`` values that matched nothing known: exit 2, naming the
    nearest choices."""
    if seen is not None:
        problem = seen.unmatched(args.flow, args.filter, decoder.stats, _flow_matcher)
        if problem:
            return usage_error(_COMMAND, problem)
    return 0
