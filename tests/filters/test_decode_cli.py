"""``nsqviz decode -Y``, ``--flow`` and ``--filter`` from the command line: the selection,
and one-line errors naming the nearest valid choices, exit status 2."""

from __future__ import annotations

import json
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path
from types import SimpleNamespace

import pytest

from nsqviz.cli import main

ERRORS = Path(__file__).resolve().parents[2] / "data" / "errors.pcap"


def decode(*args: str) -> SimpleNamespace:
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(["decode", *args])
        except SystemExit as exc:  # argparse's own errors
            code = int(exc.code or 0)
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def rows(proc: SimpleNamespace) -> list[dict]:
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_Y_selects_packets_and_prints_all_their_records():  # noqa: N802
    got = rows(decode("--json", str(ERRORS), "-Y", 'nsq.command == "PUB"'))
    assert {r["packets"][-1] for r in got} == {16}
    # the packet is shown whole, as tshark shows it: its other commands too
    assert "PUB" in [r["name"] for r in got] and len(got) > 1
    errors = rows(decode("--json", str(ERRORS), "--display-filter",
                         'nsq.error.code == "E_INVALID" || nsq.violation.fatal'))
    # 40: the HTTP request the broker refused (E_BAD_PROTOCOL, fatal) -- NSQ's connection
    # since the broker answers it in NSQ's framing
    assert {r["packets"][-1] for r in errors} == {4, 30, 34, 40}


def test_Y_composes_with_flow_and_filter():
    got = rows(decode("--json", str(ERRORS), "-Y", "nsq.dir == s2c", "--flow", "0",
                      "--filter", "frame"))
    assert [(r["packets"], r["name"]) for r in got] == [([6], "FrameTypeResponse"),
                                                        ([8], "FrameTypeError")]
    assert {r["flow"] for r in got} == {"127.0.0.1:56344->127.0.0.1:45425"}


def test_filter_E_code_finds_nsqds_error_frames():
    got = rows(decode("--json", str(ERRORS), "--filter", "E_BAD_TOPIC"))
    assert [(r["kind"], r["name"]) for r in got] == [("frame", "FrameTypeError")]
    assert got[0]["fields"]["code"] == "E_BAD_TOPIC"


@pytest.mark.parametrize("args,message", [
    (["-Y", "nsq.comand"], "-Y: nsq.comand is neither a field nor a protocol name (did you"
                           " mean nsq.command"),
    (["-Y", "nsq.command =="], "at character 15"),
    (["--flow", "99"], "--flow 99: no such flow in the capture (nearest: "),
    (["--flow", "127.0.0.1:4150"], "(nearest: 127.0.0.1:45425"),
    (["--filter", "E_BAD_TOPC"], "--filter E_BAD_TOPC: no record kind or name is called that"
                                 " (nearest: E_BAD_TOPIC"),
    (["--filter", "comand"], "(nearest: command)"),
])
def test_values_that_select_nothing_known_are_one_line_errors(args, message):
    proc = decode(str(ERRORS), *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_known_values_absent_from_the_capture_are_not_errors():
    assert rows(decode("--json", str(ERRORS), "--filter", "E_TOUCH_FAILED")) == []
    assert rows(decode("--json", str(ERRORS), "-Y", "tubemq")) == []
