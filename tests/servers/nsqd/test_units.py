"""Unit tests of the broker's parts that need no sockets: disk records, the disk queue,
IDENTIFY negotiation, options."""

from __future__ import annotations

import gc
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsqviz.nsq import grammar
from nsqviz.servers.goflags import parse_duration
from nsqviz.servers.nsqd.diskqueue import DiskQueue
from nsqviz.servers.nsqd.identify import IdentifyRefused, Negotiated, negotiate
from nsqviz.servers.nsqd.message import (
    BrokerMessage,
    IDGenerator,
    decode_record,
    encode_record,
    id_digits,
)
from nsqviz.servers.nsqd.options import Options

ids = st.binary(min_size=16, max_size=16).map(lambda b: b.hex()[:16].encode())


@given(ts=st.integers(-(2**63), 2**63 - 1), attempts=st.integers(0, 65535), mid=ids,
       body=st.binary(max_size=300))
def test_disk_record_is_the_grammar_message_layout(ts, attempts, mid, body):
    msg = BrokerMessage(mid, body, ts, attempts)
    data = encode_record(msg)
    assert data == grammar.Message.build(
        {"timestamp": ts, "attempts": attempts, "id": mid, "body": body})
    parsed = grammar.Message.parse(data)
    back = decode_record(data)
    assert (back.timestamp, back.attempts, back.id, back.body) == (
        parsed.timestamp, parsed.attempts, parsed.id, parsed.body)


def test_short_record_refused():
    with pytest.raises(ValueError, match="shorter than 26"):
        decode_record(b"x" * 25)


def test_ids_unique_and_hex():
    gen = IDGenerator()
    batches = [gen.batch([b"x"]) for _ in range(100)] + [gen.batch([b"y"] * 100), gen.batch([])]
    got = [i for b in batches for i in b.ids(0, len(b))]
    assert len(got) == 200 and len(set(got)) == len(got)
    assert all(len(i) == 16 and int(i, 16) >= 0 for i in got)


@pytest.mark.parametrize("n", [0, 1, 2, 200, 255, 256, 257, 600])
@pytest.mark.parametrize("first", [0, 1, 0x0123456789ABCDEF, 2**64 - 601])
def test_id_digits_are_each_id_in_hex(first, n):
    # every id at once by one multiply per 256 ids: the same digits as one id at a time,
    # across the chunk boundaries and up to the top of the 64-bit range
    assert id_digits(first, n) == b"".join(b"%016x" % (first + k) for k in range(n))


def test_a_batch_unpacks_into_the_messages_and_records_it_holds():
    batch = IDGenerator().batch([b"a", b"bc", b"def"])
    assert (len(batch), batch.size) == (3, 6)
    msgs = batch.messages(1, 3)
    assert [(m.id, m.body, m.timestamp, m.attempts) for m in msgs] == [
        (batch.ids(1, 2)[0], b"bc", batch.timestamp, 0),
        (batch.ids(2, 3)[0], b"def", batch.timestamp, 0)]
    assert batch.records(1, 3) == [encode_record(m) for m in msgs]


def _queue(path, **kw):
    opts = {"max_bytes_per_file": 1000, "min_msg_size": 1, "max_msg_size": 500,
            "sync_every": 10, **kw}
    return DiskQueue("t:c", str(path), **opts)


def test_disk_queue_rolls_files_and_survives_reopen(tmp_path):
    q = _queue(tmp_path)
    records = [b"%03d" % i * 30 for i in range(100)]  # 90-byte records: ~11 per file
    for r in records[:60]:
        q.put_many([r])
    assert q.get_many(20) == records[:20]
    q.close()
    assert "t:c.diskqueue.meta.dat" in os.listdir(tmp_path)
    q = _queue(tmp_path)
    assert q.depth == 40
    for r in records[60:]:
        q.put_many([r])
    assert q.get_many(1000) == records[20:]
    assert q.depth == 0
    # fully read files are removed
    dat = [f for f in os.listdir(tmp_path) if f.endswith(".dat") and "meta" not in f]
    assert len(dat) <= 1


def test_disk_queue_bad_size_sets_the_record_aside_and_reads_on(tmp_path):
    q = _queue(tmp_path)
    q.put_many([b"%02d" % i * 45 for i in range(30)])  # 90 bytes each; files of 11 records
    q.close()
    first = tmp_path / "t:c.diskqueue.000000.dat"
    data = bytearray(first.read_bytes())
    data[0:4] = b"\x7f\xff\xff\xff"  # a size no record can have
    first.write_bytes(bytes(data))
    q = _queue(tmp_path)
    assert q.get_many(100) == [b"%02d" % i * 45 for i in range(1, 30)]
    assert (tmp_path / "t:c.diskqueue.000000.dat.bad").read_bytes() == bytes(data[:94])


def test_disk_queue_refuses_bad_sizes(tmp_path):
    q = _queue(tmp_path)
    with pytest.raises(ValueError, match="invalid record size"):
        q.put_many([b"x" * 501])


def _defaults(opts: Options) -> Negotiated:
    return Negotiated("", "", "", opts.client_timeout / 2, 16384, opts.output_buffer_timeout,
                      0, opts.msg_timeout, False)


def test_negotiation_clamps_deflate_level_and_reports_settings():
    opts = Options(max_deflate_level=4)
    n, resp = negotiate({"feature_negotiation": True, "deflate": True, "deflate_level": 9,
                         "output_buffer_size": -1, "heartbeat_interval": -1},
                        opts, current=_defaults(opts), tls_available=False,
                        auth_required=False)
    assert resp["deflate_level"] == 4 and n.deflate_level == 4
    assert (n.output_buffer_size, n.output_buffer_timeout) == (1, 0.0)
    assert n.heartbeat_interval == 0.0
    assert resp["output_buffer_size"] == 1 and resp["output_buffer_timeout"] == 0


def test_negotiation_off_by_server_options():
    opts = Options(snappy=False, deflate=False)
    _, resp = negotiate({"feature_negotiation": True, "snappy": True, "tls_v1": True},
                        opts, current=_defaults(opts), tls_available=False,
                        auth_required=True)
    assert (resp["snappy"], resp["tls_v1"], resp["auth_required"]) == (False, False, True)


def test_negotiation_wrong_type():
    opts = Options()
    with pytest.raises(IdentifyRefused, match="failed to decode JSON body"):
        negotiate({"snappy": "yes"}, opts, current=_defaults(opts), tls_available=False,
                  auth_required=False)


@pytest.mark.parametrize("text,seconds", [("60s", 60), ("250ms", 0.25), ("15m", 900),
                                          ("1h", 3600), ("1m30s", 90), ("2", 2)])
def test_go_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


def test_bad_duration():
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration("soon")


def test_command_line_flags_like_nsqd():
    import argparse

    from nsqviz.servers.nsqd.options import add_arguments, options_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    o = options_from_args(parser.parse_args([
        "--tls-required", "--snappy=false", "--msg-timeout", "2s", "--max-req-timeout=90m",
        "--auth-http-address", "a:1", "--auth-http-address", "b:2", "--mem-queue-size", "5",
    ]))
    assert (o.tls_required, o.snappy, o.deflate) == (True, False, True)
    assert (o.msg_timeout, o.max_req_timeout, o.mem_queue_size) == (2.0, 5400.0, 5)
    assert o.auth_http_address == ["a:1", "b:2"]
    defaults = options_from_args(parser.parse_args([]))
    assert defaults == Options()
    assert (defaults.max_rdy_count, defaults.max_msg_size, defaults.msg_timeout) == (
        2500, 1048576, 60.0)


def test_broker_dispatch_is_built_from_the_command_table():
    from nsqviz.nsq.commands import COMMANDS
    from nsqviz.nsq.events import Magic, Violation
    from nsqviz.servers.nsqd.connection import BrokerConnection, handler_name

    handlers = BrokerConnection._handlers
    assert set(handlers) == {spec.event for spec in COMMANDS.values()} | {Magic, Violation}
    for spec in COMMANDS.values():
        method = handlers[spec.event]
        assert method.__name__ == handler_name(spec.verb), spec.verb
        assert callable(method) and method is getattr(BrokerConnection, handler_name(spec.verb))


queue_ops = st.lists(st.one_of(
    st.tuples(st.just("batch"), st.integers(0, 7)),
    st.tuples(st.just("single"), st.just(1)),
    st.tuples(st.just("take"), st.integers(0, 9)),
    st.tuples(st.just("popleft"), st.just(1)),
    st.tuples(st.just("move"), st.integers(0, 9)),
), max_size=40)


def _ids(entries):
    from nsqviz.servers.nsqd.memqueue import Run

    return [i for e in entries
            for i in (e.batch.ids(e.start, e.stop) if isinstance(e, Run) else [e.id])]


@given(ops=queue_ops)
def test_memory_queue_keeps_order_across_runs_and_singles(ops):
    """A queue of runs of shared batches and single messages gives them back in the order
    they came, whichever way they are taken; entries taken and copied into a second queue
    leave the batches they share as they were."""
    from nsqviz.servers.nsqd.memqueue import MemoryQueue, size_of

    gen = IDGenerator()
    q, model = MemoryQueue(), []
    for op, n in ops:
        if op == "batch":
            batch = gen.batch([b"%d" % i for i in range(n)])
            q.append_batch(batch, 0, n)
            model += batch.ids(0, n)
        elif op == "single":
            msg = gen.batch([b"s"]).messages(0, 1)[0]
            q.append(msg)
            model.append(msg.id)
        elif op == "take":
            entries = q.take(n)
            assert size_of(entries) == min(n, len(model))
            assert _ids(entries) == model[:size_of(entries)]
            del model[:size_of(entries)]
        elif op == "popleft":
            msg = q.popleft()
            assert (msg.id if msg else None) == (model.pop(0) if model else None)
        else:
            entries = q.take(n)
            taken = size_of(entries)
            other, twin = MemoryQueue(), MemoryQueue()
            other.extend(entries, copy=True)
            twin.extend(entries)
            assert taken == len(other) == min(n, len(model))
            assert _ids(other.take(n)) == _ids(twin.take(n)) == model[:taken]
            del model[:taken]
        assert len(q) == len(model)
    assert [decode_record(r).id for r in q.records()] == model


def test_channel_finish_reports_the_ids_not_in_flight():
    from types import SimpleNamespace

    from nsqviz.servers.nsqd.server import Broker

    channel = Broker(Options()).get_topic("t").get_channel("c")
    client = SimpleNamespace(in_flight={m: BrokerMessage(m, b"", 0) for m in (b"a", b"b", b"c")})
    channel.in_flight_count = 3
    assert channel.finish(client, [b"a", b"x", b"b", b"y", b"a"]) == [b"x", b"y", b"a"]
    assert (list(client.in_flight), channel.in_flight_count) == ([b"c"], 1)
    assert channel.finish(client, [b"c"]) == [] and channel.in_flight_count == 0


def test_a_delivery_gives_each_of_its_messages_back_as_an_object_of_its_own():
    from nsqviz.servers.nsqd.message import Delivery, flying

    batch = IDGenerator().batch([b"m%d" % i for i in range(10)])
    delivery = Delivery(batch, 3, 7, deadline=5.0)
    assert (delivery.ids, delivery.bodies) == (batch.ids(3, 7), batch.bodies[3:7])
    for mid, body in zip(delivery.ids, delivery.bodies, strict=True):
        msg = flying(delivery, mid)
        assert (msg.id, msg.body, msg.timestamp, msg.attempts, msg.deadline) == (
            mid, body, batch.timestamp, 1, 5.0)
    assert batch not in gc.get_referents(delivery)  # only its own bodies are kept


class _Reader:
    """A subscribed client with room for anything (the channel's Consumer)."""

    sample_rate = 0
    msg_timeout = 60.0

    def __init__(self, log: list[str]) -> None:
        self.in_flight: dict = {}
        self.delivered = 0
        self.log = log

    def room(self) -> int:
        return 100_000

    def deliver(self, batch: list) -> None:
        self.delivered += sum(len(getattr(item, "ids", (item,))) for item in batch)
        self.log.append("deliver")

    def timed_out(self, msg_id: bytes) -> None:
        pass

    def abort(self) -> None:
        pass


def test_a_pump_hands_out_smaller_slices_of_a_backlog_while_it_is_published_to():
    import asyncio

    from nsqviz.servers.nsqd.channel import PUBLISHING_SLICE, PUBLISHING_WINDOW, PUMP_SLICE
    from nsqviz.servers.nsqd.server import Broker

    async def run() -> None:
        ids = IDGenerator()
        channel = Broker(Options()).get_topic("t").get_channel("c")
        channel.put_batch(ids.batch([b"x"] * 1000))  # no client yet: all of it waits
        await asyncio.sleep(2 * PUBLISHING_WINDOW)
        reader = _Reader([])
        channel.add_client(reader)
        channel.pump()  # no put for a while: a whole slice of the backlog
        assert reader.delivered == PUMP_SLICE
        channel.put_batch(ids.batch([b"y"] * 10))
        channel.pump()  # what was brought, and a smaller slice of the backlog
        assert reader.delivered == PUMP_SLICE + 10 + PUBLISHING_SLICE
        channel.pump()  # still being published to
        assert reader.delivered == PUMP_SLICE + 10 + 2 * PUBLISHING_SLICE
        channel.remove_client(reader)  # the pumps already scheduled find no one
        await asyncio.sleep(2 * PUBLISHING_WINDOW)
        channel.add_client(reader)
        channel.pump()  # the publisher has stopped: whole slices again
        assert reader.delivered == 2 * PUMP_SLICE + 10 + 2 * PUBLISHING_SLICE

    asyncio.run(run())


def test_a_channel_delivers_after_the_commands_read_in_the_same_turn():
    """A publisher waiting for its OK is read before the deliveries its last publish
    woke: the pump runs behind the next turn's I/O callbacks (here a callback queued
    after the wake, as a socket's read is queued after the callbacks of the turn
    before)."""
    import asyncio

    from nsqviz.servers.nsqd.server import Broker

    async def run() -> list[str]:
        log: list[str] = []
        channel = Broker(Options()).get_topic("t").get_channel("c")
        channel.add_client(_Reader(log))
        channel.put_batch(IDGenerator().batch([b"x"] * 5))  # wakes the channel
        asyncio.get_running_loop().call_soon(log.append, "read")
        for _ in range(3):
            await asyncio.sleep(0)
        return log

    assert asyncio.run(run()) == ["read", "deliver"]
