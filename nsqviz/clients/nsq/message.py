"""The message a consumer's handler gets: its data and the three answers (FIN, REQ, TOUCH).

A message is answered once: :meth:`finish` (FIN) or :meth:`requeue` (REQ). :meth:`touch`
asks nsqd for more time and may be repeated; the client never touches on its own (the
guide forbids it). :meth:`time_until_timeout` says how long nsqd will still wait, from
the negotiated ``msg_timeout`` and the monotonic clock at arrival. If nsqd refuses an
answer (``E_FIN_FAILED``: the message had already timed out), :attr:`refused` holds that
error -- the failure stays with its message.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from nsqviz.clients.nsq.config import Config
from nsqviz.clients.nsq.conn import NSQConnection
from nsqviz.nsq.events import Error, Fin, Req, Touch
from nsqviz.nsq.events import Message as MessageFrame

Answered = Callable[["Message", Fin | Req, bool], None]
"""Where a message's FIN or REQ goes (the consumer's bookkeeping: RDY, backoff); passed
in so that a message does not know the consumer that made it."""

__all__ = ["Message"]


class Message:
    """A message delivered to this consumer (``id``, ``body``, ``attempts``, ``timestamp``)."""

    __slots__ = ("id", "body", "attempts", "timestamp", "conn", "received_at", "deadline",
                 "responded", "async_", "refused", "_config", "_answered", "__weakref__")

    def __init__(self, event: MessageFrame, conn: NSQConnection, config: Config,
                 answered: Answered, now: float):
        self.id: bytes = event.id
        self.body: bytes = event.body
        self.attempts: int = event.attempts
        self.timestamp: int = event.timestamp
        self.conn = conn
        self._config = config
        self._answered = answered
        self.received_at = now
        self.deadline = now + conn.msg_timeout
        self.responded = False
        self.async_ = False
        self.refused: Error | None = None

    def __repr__(self) -> str:
        return f"<Message {self.id.decode()} attempts={self.attempts} {len(self.body)} bytes>"

    def enable_async(self) -> None:
        """The handler returns before answering; it will call finish/requeue later."""
        self.async_ = True

    def time_until_timeout(self) -> float:
        """Seconds before nsqd times this message out (negative: it already has)."""
        return self.deadline - time.monotonic()

    def finish(self) -> None:
        """FIN: done. The consumer counts it as a success (backoff)."""
        self._answer(Fin(self.id), True)

    def requeue(self, delay: float | None = None, *, backoff: bool = True) -> None:
        """REQ after ``delay`` seconds (default: ``requeue_delay * attempts``, capped);
        ``backoff`` counts it as a failure for the consumer's backoff."""
        if delay is None:
            cfg = self._config
            delay = min(cfg.requeue_delay * self.attempts, cfg.max_requeue_delay)
        self._answer(Req(self.id, int(delay * 1000)), not backoff)

    def touch(self) -> None:
        """TOUCH: reset nsqd's timeout for this message (up to ``max_msg_timeout``)."""
        if self.responded:
            raise RuntimeError(f"message {self.id.decode()} was already answered")
        self.conn.send(Touch(self.id))
        self.deadline = time.monotonic() + self.conn.msg_timeout

    def _answer(self, cmd: Fin | Req, success: bool) -> None:
        if self.responded:
            raise RuntimeError(f"message {self.id.decode()} was already answered")
        self.responded = True
        self._answered(self, cmd, success)
