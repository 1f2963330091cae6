"""NSQ's timers, found in a transcript or a capture, as spans over a diagram's rows
(:class:`~nsqviz.protocols.timers.TimerRow`, :class:`~nsqviz.protocols.timers.TimerSpan`): what
:meth:`nsqviz.nsq.protocol.NsqProtocol.timers` gives the replay, and a session's
sequence diagram draws with its server's options.

Where each timer acts, and where its length comes from (never typed in a notebook):

* ``heartbeat_interval`` -- from one ``_heartbeat_`` to the next (the first from the
  connection's first command). Length: the IDENTIFY request's ``heartbeat_interval``
  if the client sent one, else nsqd's ``client_timeout / 2`` (the IDENTIFY field
  table's default); ``-1`` turns heartbeats and these spans off.
* the **read deadline**, two heartbeat intervals: from a client's last command, when
  heartbeats kept coming after it (the client went quiet) -- nsqd closes the
  connection once it passes.
* ``msg_timeout`` -- from each delivery of a message to its FIN, REQ or TOUCH in time
  (a TOUCH starts a new one), or to the first row after it ran out (where nsqd
  redelivers it with ``attempts + 1``). Length: the IDENTIFY response's
  ``msg_timeout`` (feature negotiation), else the IDENTIFY request's, else the broker's
  ``--msg-timeout``.
* ``REQ delay`` and ``DPUB deferral`` -- from the command, its own parameter long.
* ``output_buffer_timeout`` -- up to a connection's first message, from the later of its
  ``RDY`` and the last publish before it (nsqd cannot have buffered the message earlier):
  nsqd may hold a message in its buffer this long before it flushes. Length: the IDENTIFY
  response's, else the request's, else the broker's ``--output-buffer-timeout``.

A span runs from its start row to the row that ended it (the FIN, the TOUCH, the
redelivery) or, for a timer that ran out, to the first row whose time is past its end;
one that is still running when the diagram ends stays open. Rows, not times, fix the
geometry, so a stored picture is the same on every run.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Protocol

from nsqviz.nsq import events as ev
from nsqviz.nsq.grammar_errors import BadJSON
from nsqviz.nsq.json_object import read_object
from nsqviz.protocols.timers import TimerRow, TimerSpan

__all__ = ["ServerTimers", "Settings", "timer_spans"]


class ServerTimers(Protocol):
    """What the timers read of an nsqd's options (seconds): the embedded broker's
    :class:`nsqviz.servers.nsqd.options.Options` is one."""

    @property
    def client_timeout(self) -> float: ...

    @property
    def msg_timeout(self) -> float: ...

    @property
    def output_buffer_timeout(self) -> float: ...


@dataclass
class Settings:
    """A connection's timer lengths in milliseconds, each with where it came from."""

    heartbeat_ms: float
    msg_timeout_ms: float
    output_buffer_timeout_ms: float
    sources: dict[str, str]

    @classmethod
    def of(cls, opts: ServerTimers | None) -> Settings:
        """From the server's options; ``None`` (a capture of an unknown nsqd): only what
        the wire says counts, and a timer it does not give is not drawn."""
        if opts is None:
            return cls(0.0, 0.0, 0.0, {})
        return cls(opts.client_timeout / 2 * 1000, opts.msg_timeout * 1000,
                   opts.output_buffer_timeout * 1000,
                   {"heartbeat_interval": "client_timeout/2", "msg_timeout": "--msg-timeout",
                    "output_buffer_timeout": "--output-buffer-timeout"})

    def identify(self, data: dict[str, Any], source: str) -> None:
        """Take what an IDENTIFY request or its negotiated response says."""
        for key, attr in (("heartbeat_interval", "heartbeat_ms"), ("msg_timeout", "msg_timeout_ms"),
                          ("output_buffer_timeout", "output_buffer_timeout_ms")):
            value = data.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value != 0:
                setattr(self, attr, float(value))
                self.sources[key] = source


def _ms(value: float) -> str:
    return f"{value:g} ms" if value < 10_000 else f"{value / 1000:g} s"


def timer_spans(rows: list[TimerRow], opts: ServerTimers | None) -> list[TimerSpan]:
    """Every timer the rows show, as spans (see the module docstring); ``opts`` ``None``:
    the server's options are unknown, only lengths the wire gives are used."""
    spans: list[TimerSpan] = []
    settings: dict[str, Settings] = {}
    last_beat: dict[str, int] = {}  # connection -> row of its last heartbeat (or first row)
    last_command: dict[str, TimerRow] = {}
    beats_since: dict[str, int] = {}
    flushed: set[str] = set()
    last_rdy: dict[str, int] = {}  # connection -> row of its last RDY above 0
    last_publish: int | None = None  # row of the last PUB/MPUB/DPUB on any connection
    open_msgs: dict[bytes, tuple[TimerRow, float, str]] = {}  # id -> (start row, length, why)

    position = {r.index: k for k, r in enumerate(rows)}

    def first_row_after(t: float, start: int) -> int | None:
        """The first row after row ``start`` (an index) whose time is ``t`` or later."""
        for r in rows[position[start] + 1:]:
            if r.t >= t:
                return r.index
        return None

    def close_msg(mid: bytes, end: int | None, how: str) -> None:
        start, length, why = open_msgs.pop(mid)
        spans.append(TimerSpan(start.index, end, f"msg_timeout {_ms(length)}{why} · {how}",
                          "FrameTypeMessage"))

    for row in rows:
        conn = settings.setdefault(row.connection, Settings.of(opts))
        last_beat.setdefault(row.connection, row.index)
        item = row.item
        # a message whose msg_timeout ran out before this row is over (its redelivery,
        # whenever the client saw it, closes it as "redelivered" below)
        redelivery = item.id if isinstance(item, ev.Message) else None
        for mid, (start, length, _why) in list(open_msgs.items()):
            if mid != redelivery and row.t >= start.t + length / 1000:
                close_msg(mid, row.index, "ran out")
        if row.from_client:
            last_command[row.connection] = row
            beats_since[row.connection] = 0
            if isinstance(item, ev.Identify):
                conn.identify(item.data, "IDENTIFY request")
                if "heartbeat_interval" in item.data:  # nsqd's ticker restarts with it
                    last_beat[row.connection] = row.index
            elif isinstance(item, ev.Fin | ev.Req | ev.Touch) and item.id in open_msgs:
                verb = type(item).__name__.upper()
                close_msg(item.id, row.index, f"{verb} in time")
                if isinstance(item, ev.Touch):  # msg_timeout_ms > 0: the message had one
                    open_msgs[item.id] = (row, conn.msg_timeout_ms, " (restarted by TOUCH)")
            if isinstance(item, ev.Rdy) and item.count > 0:
                last_rdy[row.connection] = row.index
            if isinstance(item, ev.Pub | ev.Mpub | ev.Dpub):
                last_publish = row.index
            if isinstance(item, ev.Req):
                spans.append(TimerSpan(row.index, first_row_after(row.t + item.timeout / 1000,
                                                             row.index),
                                  f"REQ delay {_ms(item.timeout)}", "REQ"))
            elif isinstance(item, ev.Dpub):
                spans.append(TimerSpan(row.index, first_row_after(row.t + item.defer_time / 1000,
                                                             row.index),
                                  f"DPUB deferral {_ms(item.defer_time)}", "DPUB"))
            continue
        if isinstance(item, ev.Response) and item.data.startswith(b"{"):
            with contextlib.suppress(BadJSON):
                conn.identify(read_object(item.data), "IDENTIFY response")
        elif isinstance(item, ev.Response) and item.is_heartbeat and conn.heartbeat_ms > 0:
            spans.append(TimerSpan(last_beat[row.connection], row.index,
                              f"heartbeat_interval {_ms(conn.heartbeat_ms)} "
                              f"({conn.sources['heartbeat_interval']})", "FrameTypeResponse"))
            last_beat[row.connection] = row.index
            beats_since[row.connection] = beats_since.get(row.connection, 0) + 1
        elif isinstance(item, ev.Message):
            if (row.connection not in flushed and row.connection in last_rdy
                    and conn.output_buffer_timeout_ms > 0):
                flushed.add(row.connection)
                obt = conn.output_buffer_timeout_ms
                # buffered no earlier than both the RDY and the publish before it
                causes = [last_rdy[row.connection]]
                causes += [last_publish] if last_publish is not None else []
                buffered_from = max(causes, key=position.__getitem__)
                spans.append(TimerSpan(buffered_from, row.index,
                                  f"output_buffer_timeout {_ms(obt)} "
                                  f"({conn.sources['output_buffer_timeout']}): nsqd may hold a "
                                  "message this long before it flushes", "RDY"))
            if item.id in open_msgs:
                close_msg(item.id, row.index, "redelivered")
            if conn.msg_timeout_ms > 0:
                open_msgs[item.id] = (row, conn.msg_timeout_ms, "")
    for mid in list(open_msgs):
        close_msg(mid, None, "running")
    for name, cmd in last_command.items():
        hb = settings[name].heartbeat_ms
        if beats_since.get(name) and hb > 0:
            spans.append(TimerSpan(cmd.index, first_row_after(cmd.t + 2 * hb / 1000, cmd.index),
                              f"read deadline 2 × heartbeat_interval = {_ms(2 * hb)}: "
                              "nsqd closes a client silent this long", "FrameTypeError"))
    return sorted(spans, key=lambda s: (s.first, s.label))
