"""Issue 33 item 5: display filters no expression can hang or crash.

* ``matches`` runs on a linear-time engine: the ReDoS pattern ``(a+)+$`` on a 64-character
  topic, which never ended in ``nsqviz decode -Y`` and ``cap.filter``, finishes (tshark:
  0.3 s), selecting what tshark selects;
* integer literals are checked as tshark checks them -- the same words, the same
  position (tshark's caret), the same literals accepted: a value past the field's type,
  2^64, 10^4000 and a 5,000-digit number (a ValueError traceback before);
* a byte that is not UTF-8 in a quoted string is taken as tshark takes it (a
  UnicodeEncodeError traceback before), and outside quotes is a one-line error;
* every bad expression is one line naming its position.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nsqviz import filters
from nsqviz.capture.synth import NsqTalk
from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.nsq import events as ev
from nsqviz.wireshark.tshark import find_tshark

TOPIC = "a" * 63 + "-"  # 64 characters: (a+)+$ backtracks over every split of the a's
REDOS = 'nsq.topic matches "(a+)+$"'
TERMINATES = 60.0
"""A generous bound for "it ends at all" (a backtracking engine: longer than the universe)."""

ROOT = Path(__file__).resolve().parents[2]
tshark = pytest.mark.skipif(find_tshark() is None,
                            reason="tshark is not installed (scripts/sysdeps.sh installs it)")


@pytest.fixture(scope="module")
def long_topic(tmp_path_factory) -> Path:
    """A capture whose client publishes to (and subscribes to) the 64-character topic."""
    path = tmp_path_factory.mktemp("redos") / "long-topic.pcap"
    with PcapWriter(path) as w:
        conv = TcpConversation(w, ("127.0.0.1", 40001), ("127.0.0.1", 4150), mss=1400)
        conv.open(1.0)
        talk = NsqTalk(conv, ts=1.0)
        talk.say(ev.Magic(), ev.Pub(TOPIC, b"hello"))
        talk.answer(ev.Response(b"OK"))
        talk.say(ev.Sub(TOPIC, "c"))
        talk.answer(ev.Response(b"OK"))
        conv.close(talk.ts + 0.001)
    return path


def _run(*argv: str | bytes, timeout: float = TERMINATES) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nsqviz.cli", *argv], capture_output=True,
                          timeout=timeout, cwd=ROOT)


def test_redos_filter_ends_in_decode(long_topic):
    """``(a+)+$`` against a topic of 63 a's and a dash: no match, found in linear time
    (main: never ended). The bound is only "it ends"; the benchmark measures."""
    proc = _run("decode", "-Y", REDOS, str(long_topic))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b""  # no topic ends in a's
    matched = _run("decode", "-Y", 'nsq.topic matches "(a+)+-$"', str(long_topic))
    assert matched.returncode == 0 and b" PUB " in matched.stdout and b" SUB " in matched.stdout


def test_redos_filter_ends_in_the_python_api():
    """``cap.filter`` and :func:`nsqviz.filters.compile` run the same engine."""
    values = {"nsq.topic": [TOPIC, "a" * 64]}
    code = f"from nsqviz import filters; print(filters.compile({REDOS!r}).matches({values!r}))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=TERMINATES)
    assert proc.stdout.strip() == "True", proc.stderr  # the second topic matches


@tshark
def test_redos_filter_selects_what_tshark_selects(long_topic, tmp_path):
    from nsqviz.wireshark.generate import tshark_args, write_dissectors

    write_dissectors(tmp_path, ["nsq"])
    for expr in (REDOS, 'nsq.topic matches "^(a+)+-"'):
        theirs = subprocess.run(["tshark", *tshark_args(tmp_path), "-r", str(long_topic),
                                 "-Y", expr, "-T", "fields", "-e", "frame.number"],
                                capture_output=True, text=True, timeout=TERMINATES)
        ours = _run("decode", "--json", "-Y", expr, str(long_topic))
        packets = {json.loads(line)["packets"][-1] for line in ours.stdout.splitlines()}
        assert packets == {int(n) for n in theirs.stdout.split()}, expr


# ------------------------------------------------------------------ integer literals

BIG = "1" + "0" * 5000
REFUSED = [
    ("nsq.msg.attempts == 65536", '"65536" too big for this field, maximum 65535'),
    ("nsq.msg.attempts == 0x10000", '"0x10000" too big for this field, maximum 65535'),
    ("frame.number == 4294967296", '"4294967296" too big for this field, maximum 4294967295'),
    ("nsq.body_size == 2147483648", '"2147483648" too big for this field, maximum 2147483647'),
    ("nsq.body_size == -2147483649", '"2147483649" too big for this field, maximum 2147483647'),
    ("nsq.count == 18446744073709551616", '"18446744073709551616" causes an integer overflow'),
    ("nsq.msg.timestamp == 9223372036854775808",
     '"9223372036854775808" causes an integer overflow'),
    ("nsq.count == 1" + "0" * 4000, "causes an integer overflow"),  # 10^4000
    ("nsq.count == " + BIG, "causes an integer overflow"),  # 5,001 digits
    ("nsq.count == -" + BIG, "causes an integer overflow"),
    ("nsq.count == 0x" + "f" * 40, "causes an integer overflow"),
    ("nsq.count == 08", '"08" is not a valid number'),
    ("nsq.count == 1.5", '"1.5" is not a valid number'),
    ("nsq.count == 12abc", '"12abc" is not a valid number'),
]
ACCEPTED = ["nsq.count == 18446744073709551615", "nsq.msg.attempts == 0xffff",
            "nsq.msg.attempts == -1", "nsq.count == 0b101", "nsq.count == 00",
            "nsq.body_size == -2147483647", "nsq.msg.timestamp == -9223372036854775807",
            'nsq.topic == "\\xff"', 'nsq.topic contains "caf\\xc3"']


@pytest.mark.parametrize("expr,words", REFUSED, ids=[e[:40] for e, _ in REFUSED])
def test_integer_literals_are_checked_as_tshark_checks_them(expr, words):
    with pytest.raises(filters.FilterError) as info:
        filters.compile(expr)
    message = str(info.value)
    assert words in message and "\n" not in message
    assert len(message) < 400  # a 5,000-digit number is quoted in part, not whole
    digits_at = expr.index("== ") + 3 + expr[expr.index("== ") + 3:].startswith("-")
    assert info.value.position == digits_at  # after a minus sign, as tshark's caret


@pytest.mark.parametrize("expr", ACCEPTED)
def test_literals_tshark_takes_are_taken(expr):
    filters.compile(expr)


def _tshark_says(expr: str, folder: Path) -> tuple[int, str, int | None]:
    """(exit status, first line of the error, caret position) of ``tshark -Y expr``."""
    from nsqviz.wireshark.generate import tshark_args

    proc = subprocess.run(["tshark", *tshark_args(folder), "-r",
                           str(ROOT / "data" / "pubsub-pynsq.pcap"), "-c", "1", "-Y", expr],
                          capture_output=True, text=True, timeout=TERMINATES)
    lines = [line for line in proc.stderr.splitlines() if "Running as" not in line]
    caret = next((line.index("^") - 4 for line in lines if line.strip().startswith("^")),
                 None)
    return proc.returncode, lines[0] if lines else "", caret


@tshark
def test_literal_checks_agree_with_tshark(tmp_path):
    """The same literals refused with the same words at the same place, and the same
    accepted, by the real tshark with the generated dissector (the long ones aside: the
    command line repeats them whole)."""
    from nsqviz.wireshark.generate import write_dissectors

    write_dissectors(tmp_path, ["nsq"])
    for expr, words in REFUSED:
        if len(expr) > 100:
            continue
        code, said, caret = _tshark_says(expr, tmp_path)
        with pytest.raises(filters.FilterError) as info:
            filters.compile(expr)
        assert code != 0 and said == f"tshark: {info.value.reason}.", expr
        assert words in said and info.value.position == caret, expr
    for expr in ACCEPTED:
        assert _tshark_says(expr, tmp_path)[0] == 0, expr


# ---------------------------------------------------------------- strings, one line

def test_bytes_that_are_not_utf8_from_the_command_line(long_topic):
    """Inside quotes a byte is taken as it is (tshark too); outside, one line naming it."""
    inside = _run("decode", "-Y", b'nsq.topic == "caf\xe9"', str(long_topic))
    assert inside.returncode == 0 and b"Traceback" not in inside.stderr
    outside = _run("decode", "-Y", b"nsq.topic == \xff", str(long_topic))
    assert outside.returncode == 2
    assert outside.stderr.count(b"\n") == 1 and b"byte 0xff" in outside.stderr
    assert b"at character 14" in outside.stderr


@pytest.mark.parametrize("expr", [
    'nsq.topic == "\udcff"', 'nsq.topic matches "\udcc3\udca9"', 'nsq.msg.body == "\udcff"',
    'nsq.topic == "\ud800"', 'nsq.topic contains "\U0001f600"',
])
def test_any_character_in_a_quoted_string_compiles(expr):
    filters.compile(expr)


@pytest.mark.parametrize("expr,position", [
    ('nsq.topic matches "x(?=y)"', 20), ('nsq.topic matches "(a)\\\\1"', 22),
    ('nsq.topic matches "a{2000}"', 20), ("nsq.topic matches ((", 18),
    ("nsq.count == " + BIG + " and nsq", 13), ('nsq.topic == "open', 13),
])
def test_bad_expressions_are_one_line_naming_the_position(expr, position):
    with pytest.raises(filters.FilterError) as info:
        filters.compile(expr)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400
    assert info.value.position == position, str(info.value)
