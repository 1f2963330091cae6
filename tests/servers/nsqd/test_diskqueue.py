"""The disk queue after a kill: what was written is found again, however stale the
metadata; a torn last record is cut off with a warning; reading follows positions."""

from __future__ import annotations

import logging
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.servers.nsqd.diskqueue import DiskQueue
from nsqviz.servers.nsqd.message import HEADER_SIZE, RECORD_START, BrokerMessage, encode_record


def _queue(path, **kw) -> DiskQueue:
    opts = {"max_bytes_per_file": 1000, "min_msg_size": 1, "max_msg_size": 500,
            "sync_every": 2500, **kw}
    return DiskQueue("t:c", str(path), **opts)


def _kill(q: DiskQueue) -> None:
    """What SIGKILL leaves: the kernel closes the files; nothing is synced or saved."""
    q._close_writer()
    q._close_reader()


def _drain(q: DiskQueue) -> list[bytes]:
    return q.get_many(1 << 30)


def test_records_written_before_any_sync_survive_a_kill(tmp_path):
    q = _queue(tmp_path, max_bytes_per_file=10_000)
    records = [b"%03d" % i * 10 for i in range(50)]
    q.put_many(records[:25])
    q.put_many([records[25]])
    q.put_many(records[26:])
    assert not (tmp_path / "t:c.diskqueue.meta.dat").exists()
    _kill(q)
    again = _queue(tmp_path, max_bytes_per_file=10_000)
    assert again.depth == 50
    assert _drain(again) == records


def test_stale_metadata_does_not_strand_records(tmp_path):
    """The metadata said depth 0 and a write position far behind the file: reading
    follows what the files hold (issue 14: 102 records stranded after a restart)."""
    q = _queue(tmp_path, max_bytes_per_file=10_000)
    q.put_many([b"a" * 20] * 10)
    q.sync()
    q.put_many([b"b" * 20] * 10)  # not in the metadata
    _kill(q)
    (tmp_path / "t:c.diskqueue.meta.dat").write_text("0\n0,0\n0,24\n")
    again = _queue(tmp_path, max_bytes_per_file=10_000)
    assert _drain(again) == [b"a" * 20] * 10 + [b"b" * 20] * 10
    assert again.depth == 0


class _Records(logging.Handler):
    """The diskqueue logger's records, caught on that logger itself: the suite's other
    tests (servers started in-process, libraries that configure logging) may change the
    root logger's level and handlers, which pytest's caplog reads."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def diskqueue_log():
    logger = logging.getLogger("nsqviz.servers.nsqd.diskqueue")
    records, disabled, level = _Records(), logger.disabled, logger.level
    logger.addHandler(records)
    logger.disabled, logger.level = False, logging.WARNING
    yield records
    logger.removeHandler(records)
    logger.disabled, logger.level = disabled, level


def test_torn_last_record_is_cut_off_with_a_warning_and_writing_goes_on(tmp_path, diskqueue_log):
    q = _queue(tmp_path)
    q.put_many([b"x" * 10, b"y" * 10])
    _kill(q)
    path = tmp_path / "t:c.diskqueue.000000.dat"
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x00\x14" + b"z" * 7)  # a 20-byte record cut after 7 bytes
    again = _queue(tmp_path)
    assert "11 bytes of a torn record at offset 28" in diskqueue_log.text
    assert (tmp_path / "t:c.diskqueue.000000.dat.bad").read_bytes() == b"\x00\x00\x00\x14zzzzzzz"
    again.put_many([b"w" * 5])
    assert _drain(again) == [b"x" * 10, b"y" * 10, b"w" * 5]
    _kill(again)
    assert _drain(_queue(tmp_path)) == [b"x" * 10, b"y" * 10, b"w" * 5]


def test_failed_write_leaves_no_partial_record(tmp_path):
    q = _queue(tmp_path)
    q.put_many([b"ok" * 5])
    fd = q._fd
    os.close(fd)
    q._fd = os.open(os.devnull, os.O_RDONLY)  # any write now fails
    try:
        q.put_many([b"no" * 5])
    except OSError:
        pass
    else:
        raise AssertionError("the write should have failed")
    os.close(q._fd)
    q._fd = None
    assert (q.write_pos, q.depth) == (14, 1)
    assert _drain(_queue(tmp_path)) == [b"ok" * 5]


def test_metadata_is_replaced_atomically(tmp_path):
    q = _queue(tmp_path)
    q.put_many([b"m" * 10])
    q.sync()
    assert (tmp_path / "t:c.diskqueue.meta.dat").read_text() == "1\n0,0\n0,14\n"
    assert not (tmp_path / "t:c.diskqueue.meta.dat.tmp").exists()
    (tmp_path / "t:c.diskqueue.meta.dat.tmp").write_text("half a wri")  # a killed save
    assert _drain(_queue(tmp_path)) == [b"m" * 10]


def test_sync_every_fsyncs_and_saves_metadata(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    q = _queue(tmp_path, sync_every=3)
    q.put_many([b"a"] * 2)
    assert not synced and q.dirty
    q.put_many([b"b"])
    assert synced and not q.dirty
    assert (tmp_path / "t:c.diskqueue.meta.dat").read_text().startswith("3\n")


ops = st.lists(st.one_of(
    st.tuples(st.just("put"), st.integers(1, 40)),
    st.tuples(st.just("get"), st.integers(1, 40)),
    st.just(("sync", 0)),
    st.just(("kill", 0)),
    st.just(("close", 0)),
    st.tuples(st.just("torn"), st.integers(1, 30)),
), max_size=30)


@settings(max_examples=60, deadline=None)
@given(ops=ops)
def test_nothing_written_is_lost_whatever_the_interleaving(tmp_path_factory, ops):
    """Any sequence of writes, reads, syncs, kills (no close), clean reopens and torn
    tails: after the last reopen the queue yields every record not yet read, in order,
    preceded at most by records read since the last metadata save (redelivered, as
    nsqd does), and nothing else."""
    path = tmp_path_factory.mktemp("dq")
    q = _queue(path, max_bytes_per_file=300, sync_every=7)
    written: list[bytes] = []
    read = 0
    seq = 0
    for op, n in ops:
        if op == "put":
            batch = []
            for _ in range(n % 5 + 1):
                batch.append(b"%06d" % seq * (seq % 4 + 1))
                seq += 1
            q.put_many(batch)
            written += batch
        elif op == "get":
            got = q.get_many(n)
            assert got == written[read:read + len(got)]
            assert len(got) == min(n, len(written) - read)
            read += len(got)
        elif op == "sync":
            q.sync()
        elif op == "close":
            q.close()
            q = _queue(path, max_bytes_per_file=300, sync_every=7)
        elif op == "kill":
            _kill(q)
            q = _queue(path, max_bytes_per_file=300, sync_every=7)
            # the new reader may start at the last saved read position
            rest = _drain(q)
            assert rest == written[len(written) - len(rest):]
            assert len(rest) >= len(written) - read
            read = len(written)
        else:  # a write cut short by the kill: never acknowledged
            _kill(q)
            fnum = q.write_file
            with open(path / f"t:c.diskqueue.{fnum:06d}.dat", "ab") as f:
                f.write(b"\x00\x00\x00\x30" + b"t" * (n % 40))
            q = _queue(path, max_bytes_per_file=300, sync_every=7)
            rest = _drain(q)
            assert rest == written[len(written) - len(rest):]
            assert len(rest) >= len(written) - read
            read = len(written)
    assert _drain(q) == written[read:]


def _message_queue(path) -> DiskQueue:
    return DiskQueue("t:c", str(path), max_bytes_per_file=1 << 20, min_msg_size=HEADER_SIZE,
                     max_msg_size=HEADER_SIZE + 300, record_start=RECORD_START)


@settings(max_examples=80, deadline=None)
@given(bodies=st.lists(st.binary(min_size=1, max_size=60), min_size=1, max_size=12),
       data=st.data())
def test_a_damaged_record_is_set_aside_and_the_others_read(tmp_path_factory, bodies, data):
    """One record's id made no hex, or its size changed to any value that does not end
    on another record's boundary (a size that does cannot be told from a long record
    without a checksum), nor -- for the last record -- makes it a shorter whole record
    (a header and part of its body) whose cut-off bytes end the file: that is what a
    crash in the middle of writing leaves after a good record, cut off as a torn tail.
    Every other record is read, in order, once, and the damaged
    record's bytes are what the .bad file holds -- whether the damage is found when the
    queue is opened or while it is read."""
    path = tmp_path_factory.mktemp("dq")
    records = [encode_record(BrokerMessage(b"%016x" % i, b, i)) for i, b in enumerate(bodies)]
    q = _message_queue(path)
    q.put_many(records)
    q.close()
    k = data.draw(st.integers(0, len(records) - 1))
    starts = [sum(4 + len(r) for r in records[:i]) for i in range(len(records) + 1)]
    damaged = bytearray(_size_prefixed(records[k]))
    if data.draw(st.booleans()):
        damaged[14 + data.draw(st.integers(0, 15))] = ord(data.draw(st.sampled_from("g-Z \x00")))
    else:
        last = k == len(records) - 1
        size = data.draw(st.integers(0, 2**31 - 1).filter(
            lambda n: starts[k] + 4 + n not in starts and n != len(records[k])
            and not (last and HEADER_SIZE <= n < len(records[k]))))
        damaged[0:4] = size.to_bytes(4, "big")
    queue_file = path / "t:c.diskqueue.000000.dat"
    content = bytearray(queue_file.read_bytes())
    content[starts[k] : starts[k + 1]] = damaged
    queue_file.write_bytes(bytes(content))
    again = _message_queue(path)
    assert _drain(again) == records[:k] + records[k + 1 :]
    assert (path / "t:c.diskqueue.000000.dat.bad").read_bytes() == bytes(damaged)


def _size_prefixed(record: bytes) -> bytes:
    return len(record).to_bytes(4, "big") + record
