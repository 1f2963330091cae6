"""A written capture that holds every finding of the TCP analysis, for the tests that
hold it to tshark (:mod:`nsqviz.capture.tcp_analysis`)."""

from __future__ import annotations

from pathlib import Path

from nsqviz.capture.layers import ACK, FIN, PSH, RST, SYN
from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.stream.direction import Direction

__all__ = ["write_every_case"]

C, S = ("10.3.0.1", 40300), ("10.3.0.2", 4150)


def write_every_case(path: Path) -> None:
    """One connection with each kind of finding, made packet by packet, its handshake
    1 ms long (what tells out-of-order from retransmitted); a second one mid-stream
    (3 ms tell them apart there), whose last segment is out of order just after one that
    came in sequence."""
    c2s, s2c = Direction.C2S, Direction.S2C
    with PcapWriter(path) as w:
        conv = TcpConversation(w, C, S, isn=(1000, 9000))
        c, s = 1001, 9001  # the first sequence numbers after each SYN

        def data(ts, rel, size, flags=ACK | PSH):
            conv.packet(c2s, ts, c + rel, s, flags, b"x" * size)

        def ack(ts, rel, window=65535, flags=ACK):
            conv.packet(s2c, ts, s, c + rel, flags, window=window)

        conv.packet(c2s, 1.0, 1000, 0, SYN)
        conv.packet(s2c, 1.0005, 9000, c, SYN | ACK)
        conv.packet(c2s, 1.001, c, s, ACK)
        data(2.0, 0, 100)
        data(2.001, 100, 100)
        data(2.5, 0, 100)  # retransmission: not acknowledged yet
        ack(2.6, 200)
        data(2.7, 100, 100)  # spurious: acknowledged already
        data(3.0, 300, 100)  # leaves a hole at 200 ...
        data(3.0002, 200, 100)  # ... filled within the round trip: out-of-order
        ack(3.1, 400)
        data(4.0, 400, 100)
        data(4.0001, 500, 100)
        for i in range(3):  # the receiver asks for 400 again and again
            ack(4.001 + i * 0.0001, 400)
        data(4.005, 400, 100)  # fast retransmission
        ack(4.01, 600)
        conv.packet(c2s, 5.0, c + 599, s, ACK)  # keep-alive: none of them
        conv.packet(c2s, 5.1, c + 599, s, ACK, b"k")
        ack(6.0, 600, window=0)  # the receiver stops reading
        data(6.2, 600, 1)  # a zero-window probe
        ack(6.2001, 600, window=0)
        conv.packet(c2s, 6.5, c + 599, s, ACK)  # a probe as Linux sends it
        ack(6.5001, 600, window=0)
        ack(7.0, 600, window=4096)  # it reads again
        data(7.001, 600, 100)
        conv.packet(c2s, 8.0, c + 700, s, FIN | ACK)
        conv.packet(c2s, 8.5, c + 700, s, FIN | ACK)  # the FIN again
        ack(9.0, 701, window=4096, flags=RST | ACK)

        mid = TcpConversation(w, ("10.3.0.3", 40301), S, isn=(5000, 7000))
        for ts, rel in ((10.0, 0), (10.001, 100), (10.002, 300), (10.0025, 200),
                        (10.5, 100), (10.51, 400), (10.5105, 300)):
            mid.packet(c2s, ts, 5001 + rel, 7001, ACK | PSH, b"y" * 100)
        mid.packet(s2c, 10.6, 7001, 5401, ACK, window=0)
        mid.packet(s2c, 11.6, 7001, 5401, ACK | FIN, window=0)
