"""``nsqviz doctor CAPTURE...``: what is wrong in a capture, in words, with the packets
that prove it.

The doctor runs every rule (:mod:`nsqviz.doctor`: each protocol's, the capture layer's)
over the capture's analyses, in-process, and lists the findings most severe first: the
rule and severity, a one-line summary with the figures; then what happened and why it
matters, what to change, the evidence -- each packet (Wireshark's frame number in its own
file; the file too when there are several), its time since the capture's first record,
its connection, message id and what it shows -- and the thresholds that decided.
``--json`` writes each finding as one JSON object per line. The words are the
``findings`` table's, which ``cap.diagnose()`` and ``nsqviz pipeline`` give too.

Exit status: 0 when no finding is an error, 1 when one is (whatever ``--severity``
shows), 2 for a bad argument or a capture that cannot be read.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import Any, TextIO

from nsqviz.capture.options import add_capture_set_options, capture_set_options
from nsqviz.compactjson import line
from nsqviz.doctor.rule import Severity
from nsqviz.doctor.text import finding_text, tally
from nsqviz.doctor.words import at_least, canonical_figures, connection_of, ordered
from nsqviz.usage import help_text, nearest_hint, usage_error, warn

__all__ = ["register", "run"]

_COMMAND = "doctor"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        _COMMAND, help="what is wrong in a capture: findings in words, with their packets",
        description=help_text(__doc__),
        epilog="Exit status: 0 no finding at error severity, 1 at least one, 2 a bad "
               "argument or a capture that cannot be read.")
    p.add_argument("captures", nargs="*", metavar="CAPTURE",
                   help="pcap/pcapng files, directories or globs (one capture set: rotated "
                        "files belong together); - reads one from standard input, to its "
                        "end or Ctrl-C (tcpdump -U -w - | nsqviz doctor -)")
    p.add_argument("-i", "--interface", metavar="IFACE",
                   help="capture live from this interface (through tcpdump or dumpcap) "
                        "until Ctrl-C, then diagnose what was captured")
    p.add_argument("-f", dest="bpf", metavar="BPF",
                   help="with -i: a capture filter in tcpdump's syntax (e.g. 'tcp port 4150')")
    p.add_argument("--capture-tool", default=None, metavar="TOOL",
                   help="with -i: the tool that captures (tcpdump or dumpcap; default: the "
                        "first installed)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per finding and line: rule, severity, summary, "
                        "explanation, change, connection, packets, evidence, figures ...")
    p.add_argument("--severity", default=Severity.INFO.value, metavar="LEVEL",
                   help="show findings at LEVEL or worse: "
                        f"{', '.join(s.value for s in Severity)} (default: all)")
    add_capture_set_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        level = Severity(args.severity)
    except ValueError:
        return usage_error(_COMMAND, f"--severity {args.severity!r}: choose from "
                           f"{', '.join(s.value for s in Severity)}"
                           + nearest_hint(args.severity, [s.value for s in Severity]))
    if bool(args.captures) == bool(args.interface):
        return usage_error(_COMMAND, "give capture files (or - for standard input), or "
                                     "-i IFACE; not both")
    if (args.bpf or args.capture_tool) and not args.interface:
        return usage_error(_COMMAND, "-f and --capture-tool go with -i IFACE")
    cap = _read(args)
    if isinstance(cap, int):
        return cap
    found = ordered(cap.arrow_table("findings").to_pylist())
    shown = at_least(found, level)
    t0 = cap.t0
    several = len({f for r in shown for f in r["packet_files"]}) > 1
    if args.json:
        for r in shown:
            out.write(line(_json(r, t0)).decode())
    else:
        width = min(shutil.get_terminal_size((100, 24)).columns, 120)
        for k, r in enumerate(shown):
            if k:
                out.write("\n")
            out.write(finding_text(r, t0, several, width))
        out.write(tally(found, shown, level))
    return 1 if any(r["severity"] == Severity.ERROR for r in found) else 0


def _read(args: argparse.Namespace) -> Any:
    """The capture the arguments name (a :class:`~nsqviz.analysis.capture.Capture`), or
    the exit status when it cannot be read."""
    from nsqviz.analysis.capture import Capture

    options = capture_set_options(args)
    if args.interface or args.captures == ["-"]:
        cap = _stream(args, options)
        if isinstance(cap, int):
            return cap
    elif "-" in args.captures:
        return usage_error(_COMMAND, "- (standard input) is a capture of its own: give it "
                                     "alone")
    else:
        try:
            cap = Capture(*args.captures, idle_split=options["idle_split"],
                          ports=options["ports"], fields=False)
        except FileNotFoundError as exc:
            return usage_error(_COMMAND, str(exc))
        if not cap.files:
            return usage_error(_COMMAND, f"no capture file in {', '.join(args.captures)}")
    for warning in cap.warnings:
        warn(_COMMAND, warning)
    if cap.warnings and cap.arrow.num_rows == len(cap.warnings):
        return 2  # nothing but warnings: no capture was read
    return cap


def _stream(args: argparse.Namespace, options: dict[str, Any]) -> Any:
    """Standard input, or a live capture from ``-i``, read to its end or Ctrl-C."""
    import pyarrow as pa

    from nsqviz.analysis.capture import Capture
    from nsqviz.capture.live import CaptureToolError, LiveCapture
    from nsqviz.pipeline.decode import decode_stream
    from nsqviz.records import frame_schema

    capture = None
    if args.interface:
        try:
            capture = LiveCapture(args.interface, args.bpf, tool=args.capture_tool)
        except CaptureToolError as exc:
            return usage_error(_COMMAND, str(exc))
        print(f"nsqviz doctor: capturing on {args.interface}; Ctrl-C to diagnose",
              file=sys.stderr, flush=True)
    try:
        source = capture.stdout if capture is not None else sys.stdin.buffer
        schema = frame_schema()
        keep = [n for n in schema.names if n != "fields"]
        batches = [b.select(keep) for b in decode_stream(
            source, idle_split=options["idle_split"], ports=options["ports"], fields=False)]
        frames = pa.Table.from_batches(batches, schema=pa.schema(
            [schema.field(n) for n in keep]))
    finally:
        failure = None
        if capture is not None:
            # ended by itself: did it fail? Still running: Ctrl-C ended the reading
            if capture.process.poll() is not None:
                failure = capture.failure()
            capture.stop()
    if failure:
        return usage_error(_COMMAND, failure)
    return Capture.of_frames(frames, ["-"])


def _json(r: dict[str, Any], t0: float) -> dict[str, Any]:
    """One finding as ``--json`` writes it."""
    return {
        "rule": r["rule"], "severity": r["severity"], "summary": r["summary"],
        "explanation": r["explanation"], "change": r["change"],
        "connection": r["connection"], "connections": r["connections"],
        "broker": r["server"], "packets": r["packets"], "packet_files": r["packet_files"],
        "ts": r["ts"], "end_ts": r["end_ts"], "msg_ids": r["msg_ids"],
        "evidence": [{"ts": i["ts"], "since_start": None if i["ts"] is None
                      else round(i["ts"] - t0, 6), "file": i["file"], "packet": i["packet"],
                      "connection": connection_of(i["conn_id"]), "msg_id": i["msg_id"],
                      "what": i["what"]} for i in r["evidence"] or ()],
        "figures": canonical_figures(r["figures"]), "thresholds": r["thresholds"],
    }
