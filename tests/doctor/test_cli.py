"""``nsqviz doctor`` as a user runs it: its text and JSON, --severity, the exit status, a
capture read from standard input, rotated files, and bad input (one line, exit 2)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nsqviz.cli import main

DATA = Path(__file__).resolve().parents[2] / "data"
DOCTOR = DATA / "doctor"


def _doctor(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "nsqviz.cli", "doctor", *args],
                          capture_output=True, input=stdin, timeout=300)


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict]]:
    code = main(["doctor", "--json", *args])
    return code, [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_text_tells_what_why_what_to_change_with_evidence_and_threshold(capsys):
    assert main(["doctor", str(DOCTOR / "nsq-poison-message.pcap")]) == 0  # a warning
    out = capsys.readouterr().out
    block = out.split("\n\n")[0]
    assert " ".join(block.split()).startswith(  # wrapped to the terminal's width
        "WARNING nsq.poison-message message 18aa9f2a89e69001 of orders/worker delivered 6 "
        "times (attempts 1 to 6): 6 REQ, 0 timeouts, never FINed")
    body = block
    assert "  connection  127.0.0.1:47856->127.0.0.1:35219" in body
    assert "  what        Each delivery failed" in body
    assert "  change      Set the consumer's max attempts" in body
    assert "  evidence    packet 27 " in body and "delivered (attempt 1)" in body
    assert "REQ (delay 100 ms)" in body
    assert "  threshold   POISON_ATTEMPTS = 5 attempts: " in body
    assert out.splitlines()[-1].startswith("1 finding: 0 errors, 1 warning, ")


def test_most_severe_first_and_the_tally(capsys):
    main(["doctor", str(DOCTOR / "nsq-fatal-error.pcap")])
    out = capsys.readouterr().out
    heads = [line.split()[0] for line in out.splitlines()
             if line[:1].isupper() and line.split()[0] in ("ERROR", "WARNING", "INFO")]
    order = {"ERROR": 0, "WARNING": 1, "INFO": 2}
    assert heads == sorted(heads, key=order.__getitem__) and heads[0] == "ERROR"
    assert out.splitlines()[-1] == f"{len(heads)} findings: 5 errors, 0 warnings, " \
                                   f"{heads.count('INFO')} info"


def test_json_has_one_object_per_finding_with_its_packets_and_connection(capsys):
    code, found = _json(capsys, str(DOCTOR / "nsq-publish-refused.pcap"))
    assert code == 1  # errors
    assert found and all(set(f) >= {"rule", "severity", "summary", "explanation", "change",
                                    "packets", "connection", "evidence", "figures",
                                    "thresholds"} for f in found)
    refused = [f for f in found if f["rule"] == "nsq.publish-refused"]
    assert len(refused) == 7
    bad_topic = next(f for f in refused if f["figures"]["code"] == "E_BAD_TOPIC")
    assert bad_topic["connection"] == "127.0.0.1:40548->127.0.0.1:40835"
    assert bad_topic["packets"] == [6, 8] and bad_topic["severity"] == "error"
    assert [e["packet"] for e in bad_topic["evidence"]] == [6, 8]
    assert bad_topic["evidence"][1]["what"].startswith("E_BAD_TOPIC ")
    assert all(isinstance(e["since_start"], float) for e in bad_topic["evidence"])


def test_severity_filters_and_the_exit_status_counts_every_error(capsys):
    code, found = _json(capsys, "--severity", "warning", str(DOCTOR / "nsq-guide.pcap"))
    assert code == 0 and found and {f["severity"] for f in found} == {"warning"}
    code, found = _json(capsys, "--severity", "error", str(DOCTOR / "nsq-guide.pcap"))
    assert code == 0 and found == []
    code, found = _json(capsys, "--severity", "info", str(DOCTOR / "nsq-fatal-error.pcap"))
    assert code == 1 and {f["severity"] for f in found} == {"error", "info"}


def test_a_healthy_capture_says_so_and_exits_0(capsys):
    assert main(["doctor", str(DATA / "guide-nsqviz.pcap")]) == 0
    assert capsys.readouterr().out == ("no findings: no rule of the doctor found a problem "
                                       "in this capture\n")


def test_a_bad_severity_names_the_choices(capsys):
    assert main(["doctor", "--severity", "warn", str(DOCTOR / "nsq-guide.pcap")]) == 2
    err = capsys.readouterr().err
    assert err == ("nsqviz doctor: --severity 'warn': choose from error, warning, info "
                   "(nearest: warning)\n")


def test_unreadable_inputs_are_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "random.pcap").write_bytes(os.urandom(3000))
    (tmp_path / "empty.pcap").write_bytes(b"")
    (tmp_path / "a-directory").mkdir()
    for name in ("random.pcap", "empty.pcap", "a-directory", "missing.pcap"):
        assert main(["doctor", str(tmp_path / name)]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith("nsqviz doctor: ") and err.count("\n") == 1, err


@pytest.mark.parametrize("args", [[], ["-", "x.pcap"], ["-f", "tcp", "x.pcap"]])
def test_bad_arguments_are_usage_errors(args, capsys):
    assert main(["doctor", *args]) == 2
    assert capsys.readouterr().err.startswith("nsqviz doctor: ")


def test_standard_input_gives_the_files_findings():
    path = DOCTOR / "nsq-msg-timeout.pcap"
    piped = _doctor("--json", "-", stdin=path.read_bytes())
    read = _doctor("--json", str(path))
    assert piped.returncode == read.returncode == 0, piped.stderr
    a = [json.loads(line) for line in piped.stdout.splitlines()]
    b = [json.loads(line) for line in read.stdout.splitlines()]
    for f in a + b:  # the one difference: the file's name
        f["packet_files"] = [os.path.basename(p) for p in f["packet_files"]]
        for e in f["evidence"]:
            e["file"] = None
    assert [f["packet_files"] for f in a] == [["-"] * len(f["packets"]) for f in a]
    for f in a + b:
        f["packet_files"] = None
    assert a == b and any(f["rule"] == "nsq.msg-timeout" for f in a)


def test_rotated_files_name_each_packets_file(tmp_path, capsys):
    """The poison message's capture cut in three, as tcpdump -C rotates: the same
    finding, each packet numbered in its own file and the file named."""
    from nsqviz.capture.files import Record, read_capture
    from nsqviz.capture.writer import PcapWriter

    src = DOCTOR / "nsq-poison-message.pcap"
    records = [r for r in read_capture(str(src)) if isinstance(r, Record)]
    cuts = [0, 30, 38, len(records)]
    files = []
    for k, (lo, hi) in enumerate(zip(cuts, cuts[1:], strict=False)):
        files.append(str(tmp_path / f"poison.pcap{k or ''}"))
        with PcapWriter(files[-1], linktype=records[0].linktype) as w:
            for r in records[lo:hi]:
                w.write(r.ts, r.data, orig_len=r.orig_len)
    _, whole = _json(capsys, str(src))
    _, rotated = _json(capsys, *files)
    (a,) = [f for f in whole if f["rule"] == "nsq.poison-message"]
    (b,) = [f for f in rotated if f["rule"] == "nsq.poison-message"]
    assert a["summary"] == b["summary"]
    numbers = [p + cuts[files.index(f)] for p, f in zip(b["packets"], b["packet_files"],
                                                       strict=True)]
    assert numbers == a["packets"]  # the same packets, numbered anew in each file
    assert len(set(b["packet_files"])) == 3
    main(["doctor", "--severity", "warning", *files])
    assert " in poison.pcap1 " in capsys.readouterr().out


def test_the_readmes_example_is_what_the_doctor_prints():
    readme = (DATA.parent / "README.md").read_text()
    command = "$ nsqviz doctor data/doctor/nsq-never-ready.pcap\n"
    shown = readme.split(command, 1)[1].split("```", 1)[0]
    out = subprocess.run([sys.executable, "-m", "nsqviz.cli", "doctor",
                          str(DOCTOR / "nsq-never-ready.pcap")], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "COLUMNS": "100"})
    assert out.stdout == shown


@pytest.mark.skipif(shutil.which("tcpdump") is None,
                    reason="tcpdump is not installed (scripts/sysdeps.sh installs it)")
@pytest.mark.skipif(os.geteuid() != 0, reason="capturing on lo needs root (or CAP_NET_RAW)")
def test_live_capture_is_diagnosed_at_ctrl_c():
    """``-i``: the doctor captures until Ctrl-C, then diagnoses what it saw -- here a
    publish the broker refuses (a bad topic name), which is an error finding (exit 1)."""
    from nsqviz.nsq.client_connection import ClientConnection
    from nsqviz.nsq.events import Identify, Magic
    from nsqviz.servers.nsqd import EmbeddedBroker

    with EmbeddedBroker() as broker:
        port = broker.tcp_port
        proc = subprocess.Popen(
            [sys.executable, "-m", "nsqviz.cli", "doctor", "--json", "-i", "lo", "-f",
             f"tcp port {port}", "--port", f"nsq:{port}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        try:
            while b"listening on" not in proc.stderr.readline():
                assert proc.poll() is None, "the doctor or tcpdump exited"
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            codec = ClientConnection()
            sock.sendall(b"".join(codec.send(c) for c in (
                Magic(), Identify({"client_id": "live"})))
                         + b"PUB bad*topic\n\x00\x00\x00\x01x")  # a name nsqd refuses
            while sock.recv(65536):  # the broker answers, then closes
                pass
            sock.close()
            time.sleep(0.5)  # the packets reach the doctor
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert b"Traceback" not in err
    found = [json.loads(line) for line in out.splitlines()]
    assert {"nsq.publish-refused", "nsq.fatal-error"} <= {f["rule"] for f in found}
    assert all(p == "-" for f in found for p in f["packet_files"])
