"""Live decoding: a capture read while it is written prints each record at once, and a
decoder reading for hours holds only the connections still open.

* a real ``tcpdump -i lo`` started by ``nsqviz decode -i lo``, with traffic between the
  embedded broker and a client: each command's record is printed within a second of
  the command being sent;
* a pcap fed packet by packet through a pipe into ``nsqviz decode -``: every record
  comes out before the next packet is written, and the whole output is the file's;
* a long synthetic stream of short (and some abandoned) connections: the decoder's
  tracked flows stay bounded;
* Ctrl-C and a closed output pipe end the process cleanly.
"""

from __future__ import annotations

import io
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nsqviz.capture.decode import SWEEP_EVERY, CaptureDecoder
from nsqviz.capture.files import read_capture
from nsqviz.capture.synth import NsqTalk, pubsub_session
from nsqviz.capture.tcp import LINGER
from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.events import Identify, Magic, Pub, Rdy, Sub
from nsqviz.servers.nsqd.embedded import EmbeddedBroker
from nsqviz.stream.direction import Direction

ROOT = Path(__file__).resolve().parents[2]
LINE_TIMEOUT = 20.0  # seconds to wait for an expected line at all (a loaded machine)


def _decode_process(*args: str, stdin: int | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "nsqviz.cli", "decode", *args],
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)


def _lines(stream: io.BufferedReader) -> queue.Queue[tuple[float, bytes]]:
    """Each line of ``stream`` with the time it was read (b"" at the end)."""
    q: queue.Queue[tuple[float, bytes]] = queue.Queue()

    def pump() -> None:
        for line in iter(stream.readline, b""):
            q.put((time.monotonic(), line))
        q.put((time.monotonic(), b""))

    threading.Thread(target=pump, daemon=True).start()
    return q


def _conversation(writer: PcapWriter, port: int, *, seed: int, messages: int = 12) -> None:
    talk = NsqTalk(None)
    pubsub_session(talk, seed=seed, messages=messages, batch=4)
    conv = TcpConversation(writer, ("10.0.0.2", port), ("10.0.0.1", 4150), mss=700)
    ts = 1_700_000_000.0 + seed
    conv.open(ts)
    for direction, _offset, data in talk.written.writes:
        ts += 0.001
        conv.send(direction, data, ts)
    conv.close(ts)


# ------------------------------------------------------------------ a pipe, slowly


def test_records_come_out_before_the_next_packet_is_written(tmp_path):
    path = tmp_path / "two.pcap"
    with PcapWriter(path) as w:
        _conversation(w, 40001, seed=1)
        _conversation(w, 40002, seed=2)
    # What each packet completes, from the same decoder reading the whole file (with
    # the TCP FIN/RST records nsqviz decode prints).
    decoder = CaptureDecoder(tcp_records=True)
    expected: dict[int, int] = {}
    for step in decoder.driver.run([path]):
        if step.record is not None:
            expected[step.record.number] = len(decoder.step(step))
    whole = subprocess.run([sys.executable, "-m", "nsqviz.cli", "decode", "--json", str(path)],
                           capture_output=True, check=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.splitlines()
    assert sum(expected.values()) == len(whole) > 20

    raw = path.read_bytes()
    records = [r for r in read_capture(path)]
    proc = _decode_process("--json", "-", stdin=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    lines = _lines(proc.stdout)  # type: ignore[arg-type]
    got: list[bytes] = []
    try:
        proc.stdin.write(raw[:24])
        for i, rec in enumerate(records):
            end = records[i + 1].offset if i + 1 < len(records) else len(raw)
            proc.stdin.write(raw[rec.offset:end])
            proc.stdin.flush()
            for _ in range(expected[rec.number]):
                _, line = lines.get(timeout=LINE_TIMEOUT)  # before the next packet
                assert line, f"output ended waiting for packet {rec.number}'s record"
                got.append(line.rstrip(b"\n"))
            assert lines.empty(), f"packet {rec.number} printed more than it completes"
    finally:
        proc.stdin.close()
    assert proc.wait(timeout=LINE_TIMEOUT) == 0
    assert got == whole


def test_a_closed_output_pipe_ends_the_decoder_cleanly(tmp_path):
    path = tmp_path / "one.pcap"
    with PcapWriter(path) as w:
        _conversation(w, 40001, seed=1, messages=200)
    proc = _decode_process("--json", "-", stdin=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(path.read_bytes()[:4000])
    proc.stdin.flush()
    assert proc.stdout.readline()
    proc.stdout.close()  # `| head -1`
    try:
        proc.stdin.write(path.read_bytes()[4000:])
        proc.stdin.close()
    except BrokenPipeError:
        pass
    assert proc.wait(timeout=LINE_TIMEOUT) == 0
    assert proc.stderr is not None
    assert b"Traceback" not in proc.stderr.read()


# ---------------------------------------------------------- memory over a long stream


def test_a_long_stream_keeps_only_the_open_connections():
    """1,200 connections, one a second: most end with FIN, every tenth is abandoned
    mid-frame (a PUB promising more body than is ever sent). A live decoder holds the
    flows of the last LINGER (closed) and idle_split (abandoned) seconds only."""
    talk = NsqTalk(None)
    pubsub_session(talk, seed=3, messages=4, batch=2)
    writes = talk.written.writes
    abandoned = [(Direction.C2S, 0, b"  V2"),
                 (Direction.C2S, 4, b"PUB t\n\x00\x00\x10\x00" + b"x" * 100)]
    buf = io.BytesIO()
    w = PcapWriter(buf)
    n = 1200
    for i in range(n):
        ts = 1_700_000_000.0 + i
        conv = TcpConversation(w, (f"10.2.{i // 250 % 250}.{i % 250 + 1}", 20000 + i % 30000),
                               ("10.0.0.1", 4150), mss=1448)
        conv.open(ts)
        for direction, _offset, data in (abandoned if i % 10 == 0 else writes):
            conv.send(direction, data, ts)
        if i % 10:
            conv.close(ts)
    buf.seek(0)
    idle = 60.0
    decoder = CaptureDecoder(live=True, idle_split=idle)
    tracker = decoder.driver
    most = {"decoder": 0, "tracker": 0, "pending": 0}
    records = cut_short = 0
    for step in decoder.driver.run([buf]):
        out = decoder.step(step)
        records += len(out)
        cut_short += sum(r.kind == "error" for r in out)
        t = tracker.tracker
        most["decoder"] = max(most["decoder"], len(decoder.flows))
        most["tracker"] = max(most["tracker"], len(t._flows), len(t.flows))
    assert decoder.flow_count == n and decoder.claimed == n
    assert records > n
    # closed ones: the last LINGER + SWEEP_EVERY seconds; abandoned: idle + SWEEP_EVERY
    bound = (LINGER + SWEEP_EVERY + 1) * 0.9 + (idle + SWEEP_EVERY + 1) * 0.1 + 2
    assert most["decoder"] <= bound
    assert most["tracker"] <= bound
    assert not decoder.warnings
    # Each abandoned connection's unfinished PUB was reported when it went idle.
    assert cut_short == n // 10
    # A decoder not live keeps every flow.
    buf.seek(0)
    keeper = CaptureDecoder(idle_split=idle)
    for _ in keeper.decode([buf]):
        pass
    assert len(keeper.flows) == n


# -------------------------------------------------------------------- a real tcpdump


@pytest.mark.skipif(shutil.which("tcpdump") is None,
                    reason="tcpdump is not installed (scripts/sysdeps.sh installs it)")
@pytest.mark.skipif(os.geteuid() != 0, reason="capturing on lo needs root (or CAP_NET_RAW)")
def test_live_capture_prints_each_record_within_a_second():
    tool = "tcpdump"
    with EmbeddedBroker() as broker:
        port = broker.tcp_port
        proc = _decode_process("-i", "lo", "-f", f"tcp port {port}", "--capture-tool",
                               tool, "--json", "--port", f"nsq:{port}")
        assert proc.stdout is not None and proc.stderr is not None
        try:
            while b"listening on" not in proc.stderr.readline():
                assert proc.poll() is None, f"the decoder or {tool} exited"
            lines = _lines(proc.stdout)  # type: ignore[arg-type]
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            codec = ClientConnection()
            latencies = []
            steps = [(Magic(), Identify({"client_id": "live", "feature_negotiation": True})),
                     (Pub("live", b"hello"),), (Pub("live", b"x" * 50000),),
                     (Sub("live", "c"),), (Rdy(5),)]
            for commands in steps:
                sent = time.monotonic()
                sock.sendall(b"".join(codec.send(c) for c in commands))
                names = {type(c).__name__.upper() for c in commands} - {"MAGIC"}
                seen: set[str] = set()
                while not names <= seen:
                    at, line = lines.get(timeout=LINE_TIMEOUT)
                    assert line, "the decoder's output ended"
                    rec = json.loads(line)
                    if rec["kind"] == "command":
                        seen.add(rec["name"])
                        latencies.append(at - sent)
                if names != {"RDY"}:  # the answer, before the next command
                    codec.receive(sock.recv(65536))
            sock.close()
            assert latencies and max(latencies) < 1.0, latencies
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            assert children, "tcpdump is not a child of the decoder"
        finally:
            proc.send_signal(signal.SIGINT)  # Ctrl-C
            code = proc.wait(timeout=LINE_TIMEOUT)
        assert code == 130
        assert b"Traceback" not in proc.stderr.read()
        for pid in children:  # the capture tool ended with the decoder
            assert not Path(f"/proc/{pid}").exists() or \
                "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


@pytest.mark.skipif(shutil.which("tcpdump") is None,
                    reason="tcpdump is not installed (scripts/sysdeps.sh installs it)")
@pytest.mark.skipif(os.geteuid() != 0, reason="capturing on lo needs root (or CAP_NET_RAW)")
def test_live_stats_are_printed_at_ctrl_c():
    with EmbeddedBroker() as broker:
        port = broker.tcp_port
        proc = _decode_process("-i", "lo", "-f", f"tcp port {port}", "--stats", "--json",
                               "--port", f"nsq:{port}")
        assert proc.stdout is not None and proc.stderr is not None
        try:
            while b"listening on" not in proc.stderr.readline():
                assert proc.poll() is None, "the decoder or tcpdump exited"
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            codec = ClientConnection()
            sock.sendall(b"".join(codec.send(c) for c in (Magic(), Pub("live", b"hi"))))
            codec.receive(sock.recv(65536))
            sock.close()
            time.sleep(0.5)  # the packets reach the decoder
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=LINE_TIMEOUT)
    assert proc.returncode == 130
    assert b"Traceback" not in err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["protocol"], r["records"]) for r in rows] == [("nsq", {"command": 2,
                                                                       "frame": 1})]


def test_bad_live_arguments_are_one_line_errors(capsys):
    from nsqviz.cli import main

    assert main(["decode", "-i", "loo"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'loo'" in err and "lo" in err.split("try", 1)[1]
    assert main(["decode", "-f", "tcp", "x.pcap"]) == 2
    assert "-f" in capsys.readouterr().err
    assert main(["decode"]) == 2
    assert "-i IFACE" in capsys.readouterr().err


def test_decode_loads_only_its_own_part(tmp_path):
    """A short live session starts fast: ``nsqviz decode`` imports neither the broker
    nor asyncio (the other sub-commands' parts)."""
    path = tmp_path / "empty.pcap"
    PcapWriter(path).close()
    code = ("import sys; from nsqviz.cli import main; main(['decode', '--json', sys.argv[1]]);"
            " print(sorted(m for m in ('asyncio', 'nsqviz.servers.nsqd', 'nsqviz.pipeline')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]"
