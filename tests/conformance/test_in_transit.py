"""The checker's benefit of the doubt for bytes in transit, on hand-built event sequences.

An observer between client and nsqd (the tap, or tcpdump) sees a message pass before the
client reads it, and reads a client's commands on different connections in its own
order. These sequences are what a loaded machine made of ``nsqviz.clients.nsq``'s traffic in
notebook 08 (a message in transit when the client re-sent RDY; a RDY re-sent on one
connection read after the failure's RDY 0 on another), built here event by event so the
interleaving is the same on every run.
"""

from __future__ import annotations

from itertools import count

from nsqviz.conformance.rules import Connection, Seen, check_backoff, check_connection
from nsqviz.nsq.events import Fin, Message, Rdy, Req, Sub
from nsqviz.stream.direction import Direction

C2S, S2C = Direction.C2S, Direction.S2C


class Wire:
    """Connections filled in the order an observer saw their events (one clock)."""

    def __init__(self, n: int = 1) -> None:
        self.conns = [Connection(f"client{k}->nsqd") for k in range(n)]
        self._t = count()
        for c in self.conns:
            self.cmd(c, Sub("t", "c"))

    def _add(self, conn: Connection, direction: Direction, event) -> None:
        t = next(self._t)
        conn.seen.append(Seen(t * 0.001, direction, event, (t + 1,)))

    def cmd(self, conn: Connection, *events) -> None:
        for e in events:
            self._add(conn, C2S, e)

    def msgs(self, conn: Connection, *numbers: int) -> None:
        for n in numbers:
            self._add(conn, S2C, Message(0, 1, b"%016d" % n, b"x"))

    def fins(self, conn: Connection, *numbers: int) -> None:
        self.cmd(conn, *(Fin(b"%016d" % n) for n in numbers))


def rdy_update(conn: Connection):
    (v,) = [v for v in check_connection(conn) if v.rule == "rdy-update"]
    return v


# ----------------------------------------------------------------------- the 25 % rule


def test_a_message_in_transit_when_the_client_resent_rdy_counts_for_the_next_rdy():
    w = Wire()
    (c,) = w.conns
    w.cmd(c, Rdy(8))
    w.msgs(c, *range(1, 10))  # 9 passed on; the client had read 8 when it re-sent
    w.fins(c, *range(1, 9))
    w.cmd(c, Rdy(8))  # due: 0 left of 8 (message 9 was still in transit)
    w.msgs(c, *range(10, 16))
    w.fins(c, *range(9, 16))
    w.cmd(c, Rdy(8))  # the client counted 9..15: 1 left of 8 (< 25 %)
    # in the observer's order only 10..15 came between the last two RDYs: 2 left of 8,
    # which the checker used to call a breach
    v = rdy_update(c)
    assert v.status == "pass", v
    assert "2 re-sends" in v.detail


def test_the_benefit_of_the_doubt_counts_each_message_once():
    # the same message cannot make two re-sends due: 5 messages for RDY 4, re-sent twice
    w = Wire()
    (c,) = w.conns
    w.cmd(c, Rdy(4))
    w.msgs(c, 1, 2, 3, 4, 5)
    w.cmd(c, Rdy(4))  # due if it had read 4 (or all 5)
    w.cmd(c, Rdy(4))  # at most 1 more could have been read since: 3 of 4 left
    v = rdy_update(c)
    assert v.status == "fail", v
    assert "at least 3 of 4 left" in v.detail and v.packets == c.seen[-1].packets


def test_an_answered_message_was_certainly_read_before_the_next_rdy():
    # FIN 5 before the re-send: message 5 is counted for this RDY, not the next one
    w = Wire()
    (c,) = w.conns
    w.cmd(c, Rdy(4))
    w.msgs(c, 1, 2, 3, 4, 5)
    w.fins(c, 1, 2, 3, 4, 5)
    w.cmd(c, Rdy(4))
    w.msgs(c, 6, 7)
    w.fins(c, 6, 7)
    w.cmd(c, Rdy(4))  # only 6 and 7 can count: 2 of 4 left
    v = rdy_update(c)
    assert v.status == "fail" and "at least 2 of 4 left" in v.detail, v


def test_a_client_that_resends_after_every_message_is_still_caught():
    w = Wire()
    (c,) = w.conns
    w.cmd(c, Rdy(10))
    for n in range(1, 6):
        w.msgs(c, n)
        w.cmd(c, Rdy(10))
    v = rdy_update(c)
    assert v.status == "fail" and "5 such" in v.detail, v


def test_resends_at_zero_left_pass_in_the_observers_order_too():
    w = Wire()
    (c,) = w.conns
    w.cmd(c, Rdy(2))
    for n in (1, 3, 5):
        w.msgs(c, n, n + 1)
        w.fins(c, n, n + 1)
        w.cmd(c, Rdy(2))
    assert rdy_update(c).status == "pass"


# -------------------------------------------------------------------------- backoff


def two_connections(rdy_a: int, rdy_b: int):
    """A consumer on two connections with these RDYs; message 1 is delivered on A."""
    w = Wire(2)
    a, b = w.conns
    w.cmd(a, Rdy(rdy_a))
    w.cmd(b, Rdy(rdy_b))
    w.msgs(a, 1)
    return w, a, b


def fail_on(w: Wire, conn: Connection) -> None:
    """The handler failed message 1: REQ, and RDY 0 on its connection."""
    w.cmd(conn, Req(b"%016d" % 1, 0), Rdy(0))


def test_a_rdy_sent_before_the_backoff_but_read_after_its_rdy_0_is_not_held_to_it():
    # the client: B re-sends RDY 5 (after FIN); then A's handler fails: REQ, RDY 0 on A and
    # B; 0.4 s later RDY 1 on A tests the waters; success: RDY 5 on both.
    # The observer read A's socket first: REQ, RDY 0 on A, then B's "FIN RDY 5 RDY 0".
    w, a, b = two_connections(5, 5)
    w.msgs(b, 2)
    fail_on(w, a)
    w.fins(b, 2)
    w.cmd(b, Rdy(5), Rdy(0))
    w.cmd(a, Rdy(1))
    w.msgs(a, 1)
    w.fins(a, 1)
    w.cmd(a, Rdy(5))
    w.cmd(b, Rdy(5))
    v = check_backoff([a, b])
    assert v.status == "pass", v
    assert v.detail == "REQ, RDY 0, then RDY 1 on one connection"


def test_a_rdy_above_1_after_a_connections_own_rdy_0_is_a_breach():
    # B goes to RDY 0 with A, then gets RDY 5 back before anyone tested the waters
    w, a, b = two_connections(5, 5)
    fail_on(w, a)
    w.cmd(b, Rdy(0))
    w.cmd(b, Rdy(5))
    w.cmd(a, Rdy(1))
    v = check_backoff([a, b])
    assert v.status == "fail" and "first RDY was 5" in v.detail, v


def test_a_connection_at_zero_before_the_failure_may_test_the_waters():
    # C held no RDY when A failed (max_in_flight < num_conns): no RDY 0 is sent to it,
    # and its RDY 1 is the test of the waters
    w, a, c = two_connections(1, 0)
    fail_on(w, a)
    w.cmd(c, Rdy(1))
    v = check_backoff([a, c])
    assert v.status == "pass", v
    assert v.packets[-1] == c.seen[-1].packets[0]
