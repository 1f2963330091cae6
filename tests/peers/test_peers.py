"""Finding the real NSQ programs: given path, environment variable, PATH, $NSQVIZ_PEERS."""

from __future__ import annotations

import socket
import stat

import pytest

from nsqviz.servers import peers
from nsqviz.servers.peers import NsqdProcess, PeerNotFound, env_var, find, require
from tests.conftest import peer


def _fake(directory, name):
    path = directory / name
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def nowhere(monkeypatch, tmp_path):
    """No program anywhere: empty PATH, no variables, no shared directory."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    for name in peers.PEERS:
        monkeypatch.delenv(env_var(name), raising=False)
    monkeypatch.delenv(peers.PEERS_DIR_VARIABLE, raising=False)
    return tmp_path


def test_variable_names():
    assert env_var("nsqd") == "NSQD"
    assert env_var("nsq_tail") == "NSQ_TAIL"
    assert env_var("tubemq-producer") == "TUBEMQ_PRODUCER"


def test_missing_program_says_how_to_provide_it(nowhere):
    assert find("nsqd") is None
    with pytest.raises(PeerNotFound, match=r"real nsqd not found: set \$NSQD"):
        require("nsqd")


def test_order_given_then_variable_then_path_then_peers_folder(nowhere, monkeypatch):
    shared, on_path, by_env, given = (nowhere / d for d in ("shared", "bin", "env", "given"))
    for d in (shared, on_path, by_env, given):
        d.mkdir()
    monkeypatch.setenv(peers.PEERS_DIR_VARIABLE, str(shared))
    assert find("to_nsq") is None
    _fake(shared, "to_nsq")
    assert find("to_nsq") == shared / "to_nsq"
    _fake(on_path, "to_nsq")
    monkeypatch.setenv("PATH", str(on_path))
    assert find("to_nsq") == on_path / "to_nsq"
    monkeypatch.setenv("TO_NSQ", str(_fake(by_env, "to_nsq")))
    assert find("to_nsq") == by_env / "to_nsq"
    assert find("to_nsq", _fake(given, "to_nsq")) == given / "to_nsq"


def test_a_named_path_that_is_not_a_program_is_an_error(nowhere, monkeypatch):
    monkeypatch.setenv("NSQD", str(nowhere / "missing"))
    with pytest.raises(PeerNotFound, match=r"\$NSQD .*missing' is not an executable"):
        find("nsqd")
    with pytest.raises(PeerNotFound, match="given path"):
        find("nsqd", nowhere / "other")


def test_unknown_name():
    with pytest.raises(ValueError, match="unknown program 'nsqadmin'"):
        find("nsqadmin")


def test_argv_spells_nsqd_flags():
    nsqd = NsqdProcess(["nsqd"], data_path="/d", mem_queue_size=100, tls_required=True,
                       e2e_processing_latency_percentile=[0.5, 0.9])
    argv = nsqd.argv()
    assert argv[:2] == ["nsqd", "--data-path=/d"]
    assert "--tcp-address=127.0.0.1:0" in argv
    assert "--mem-queue-size=100" in argv and "--tls-required" in argv
    assert argv[-2:] == ["--e2e-processing-latency-percentile=0.5",
                         "--e2e-processing-latency-percentile=0.9"]


def test_argv_spells_durations_in_seconds_as_go_durations():
    # Options (and a Session's broker options) hold durations in seconds; nsqd wants units
    argv = NsqdProcess(["nsqd"], data_path="/d", msg_timeout=1.0, client_timeout=2,
                       max_req_timeout="10s").argv()
    assert "--msg-timeout=1000ms" in argv and "--client-timeout=2000ms" in argv
    assert "--max-req-timeout=10s" in argv


def test_real_nsqd_starts_on_free_ports_and_speaks_v2(real_nsqd):
    with socket.create_connection(("127.0.0.1", real_nsqd.tcp_port), timeout=5) as s:
        s.sendall(b"  V2NOP\n")  # NOP has no answer; a bad command does
        s.sendall(b"BOGUS\n")
        answer = s.recv(100)
    assert answer.endswith(b"E_INVALID invalid command BOGUS")
    assert any("nsqd v" in line for line in real_nsqd.log)


def test_the_peers_fixture_finds_the_tools():
    for name in ("nsqd", "nsqlookupd", "to_nsq", "nsq_tail", "bench_writer", "bench_reader"):
        assert peer(name).name == name


def test_nsqviz_broker_runs_the_same_way_with_the_same_flags(tmp_path):
    with NsqdProcess.nsqviz(data_path=str(tmp_path), max_rdy_count=7) as ours:
        s = socket.create_connection(("127.0.0.1", ours.tcp_port), timeout=5)
        s.sendall(b"  V2SUB t c\nRDY 8\n")
        answer = b""
        while chunk := s.recv(100):  # nsqd closes after a fatal error
            answer += chunk
        s.close()
    assert answer.endswith(b"E_INVALID RDY count 8 out of range 0-7")
