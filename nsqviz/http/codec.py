"""Sans-IO connections of nsqd's and nsqlookupd's HTTP APIs, one object per role, each
a :class:`~nsqviz.http.reader.MessageReader` (h11 reading one direction, on
:mod:`nsqviz.sansio`).

:class:`ServerConnection` is the server's side: the client's bytes go into ``receive``
and come out as :class:`~nsqviz.http.events.Request` s (and, as soon as it is read, the
head of each, :class:`~nsqviz.http.events.RequestHead`). :class:`ClientConnection` is
the client's side: the server's bytes come out as :class:`~nsqviz.http.events.Response`
s, each with the request it answers.

Both roles are passive -- a capture's :class:`~nsqviz.http.observer.Observer` drives
them, and each keeps its h11 in step with what the other saw: the client role "sends"
each request whose head the server role read (:meth:`ClientConnection.sent`), so that
its h11 knows what an answer answers (a HEAD's has no body); the server role "answers"
each request at once (its h11 would not read a pipelined request before), but a request
to switch protocols waits for the real answer (:meth:`ServerConnection.answered`).
Neither role owns a socket or a clock.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import h11

from nsqviz.http import api
from nsqviz.http.events import Event, Message, Request, RequestHead, Response, Violation
from nsqviz.http.framing import REQUEST_LINE, STATUS_LINE
from nsqviz.http.reader import MessageReader, chunked, headers, latin1

__all__ = ["ClientConnection", "ServerConnection"]


# ------------------------------------------------------------------------------ server


class ServerConnection(MessageReader):
    """The server's side of a connection: reads the client's requests."""

    role = h11.SERVER
    starts = REQUEST_LINE

    def __init__(self, *, provenance: bool = False, passive: bool = False,
                 midstream: bool = False) -> None:
        self.requests = 0
        """The requests whose heads were read so far."""
        self._waiting = 0  # the number of a request to switch, waiting for its answer
        self._proposed = False  # the request in progress asks to switch protocols
        super().__init__(provenance=provenance, passive=passive, midstream=midstream)

    def _head_event(self, ev: Any, head_size: int) -> Request:
        self.requests += 1
        self._proposed = ev.method == b"CONNECT" or any(
            n.lower() == b"upgrade" for n, _ in ev.headers.raw_items())
        request = Request(latin1(ev.http_version), headers(ev), b"", 0, chunked(ev),
                          head_size, method=latin1(ev.method), target=latin1(ev.target),
                          number=self.requests)
        self._early.append((self._cuts, RequestHead(request)))
        return request

    def _body_hint(self, head: Message) -> int | None:
        return None if isinstance(head, Request) and head.method == "CONNECT" else \
            super()._body_hint(head)

    def _judge(self, message: Message) -> Event:
        """A publish whose body nsqd refuses (a binary MPUB body its grammar does not
        read) is that request with the refusal (nsqd answers 413)."""
        assert isinstance(message, Request)
        refused = api.publish(message)
        if not isinstance(refused, api.Refused):
            return message
        at = None
        if refused.offset is not None and not message.chunked:
            at = self._start + message.head_size + refused.offset
        return Violation(refused.code, refused.reason, self._start, message=message,
                         field=refused.field, reason=refused.reason, field_offset=at,
                         fatal=False)

    def _code(self, status: int) -> str:
        return str(status)  # Go's server answers a request it cannot read with this status

    def _on_refusal(self, start: int, head: Message | None) -> None:
        if head is None:  # no request's head: these bytes take a request's place
            self._early.append((self._cuts, RequestHead(None, self._packet_at(start))))

    def _next_cycle(self) -> None:
        """The request ended: h11 is told it was answered (a request to switch
        protocols waits for the real answer), so that it reads the next."""
        if self._proposed:
            self._waiting = self.requests
            return  # h11 waits to be told whether it switched: answered() says
        self._answer(h11.Response(status_code=200, headers=[("Content-Length", "0")]))

    def _answer(self, response: Any) -> None:
        conn = self._h11
        try:
            conn.send(response)
            if type(response) is h11.Response:
                conn.send(h11.EndOfMessage())
        except h11.LocalProtocolError:
            self._restart(self._consumed(), self._held())  # h11 cannot follow: start over
            return
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        elif conn.their_state is not h11.SWITCHED_PROTOCOL:
            # the client asked to close (Connection: close, HTTP/1.0): whatever it sends
            # still is read as requests by a fresh h11
            held, at = self._held(), self._consumed()
            self._restart(at, held)

    def answered(self, response: Response) -> None:
        """The server's final answer to a request to switch protocols (``Upgrade``, or
        CONNECT), seen by the client role: switched, or not (then the requests after it
        are read)."""
        request = response.request
        if not self._waiting or request is None or request.number != self._waiting:
            return
        self._waiting = 0
        if response.status == 101:
            self._switch_to = request.header("upgrade") or "?"
            self._answer(h11.InformationalResponse(
                status_code=101, headers=[("Upgrade", self._switch_to),
                                          ("Connection", "upgrade")]))
        elif request.method == "CONNECT" and 200 <= response.status < 300:
            self._switch_to = f"a tunnel to {request.target}"
            self._answer(h11.Response(status_code=response.status, headers=[]))
        else:
            self._answer(h11.Response(status_code=response.status,
                                      headers=[("Content-Length", "0")]))


# ------------------------------------------------------------------------------ client


class ClientConnection(MessageReader):
    """The client's side of a connection: reads the server's responses, each paired with
    the request it answers (HTTP/1.1 answers in order)."""

    role = h11.CLIENT
    starts = STATUS_LINE

    def __init__(self, *, provenance: bool = False, passive: bool = False,
                 midstream: bool = False) -> None:
        self.pending: deque[Request | None] = deque()
        """The requests sent and not yet answered, oldest first (``None``: bytes the
        server refuses as a request, which it answers all the same)."""
        self.answering: Request | None = None
        """The request the response in progress answers (``None``: none was seen)."""
        self.answers = 0
        """The final answers whose heads were read so far."""
        super().__init__(provenance=provenance, passive=passive, midstream=midstream)

    def _reason(self, reason: str) -> str:
        # h11 judges the first line of either side by one rule, and names it so
        return reason.replace("request line", "status line")

    def sent(self, request: Request | None) -> None:
        """The client sent ``request`` (its head, seen by the server role), or (``None``)
        bytes the server answers as a request it cannot read."""
        self.pending.append(request)

    def forget_pending(self) -> None:
        """A capture lost requests: the answers can no longer be paired with them."""
        self.pending.clear()

    def _head_event(self, ev: Any, head_size: int) -> Response:
        final = type(ev) is h11.Response
        self.answers += final
        return Response(latin1(ev.http_version), headers(ev), b"", 0, chunked(ev),
                        head_size, status=ev.status_code, reason=latin1(ev.reason),
                        request=self.answering, number=self.answers if final else 0)

    def _body_hint(self, head: Message) -> int | None:
        assert isinstance(head, Response)
        request = head.request
        if head.interim or head.status in (204, 304) or (
                request is not None and request.method == "HEAD"):
            return 0
        if request is not None and request.method == "CONNECT" and 200 <= head.status < 300:
            return 0
        if head.header("transfer-encoding") is None and head.content_length is None:
            return None  # up to the close
        return super()._body_hint(head)

    def _before_piece(self) -> None:
        if self._h11.our_state is h11.IDLE:
            self._ask()

    def _ask(self) -> None:
        """Tell h11 the request the next response answers: the oldest pending one, or a
        stand-in when none was seen (the response then answers nothing known)."""
        request = self.pending.popleft() if self.pending else None
        self.answering = request
        if request is None:
            self._h11.send(h11.Request(method="GET", target="/",
                                       headers=[("Host", "-"), ("Content-Length", "0")]))
        else:
            headers = [("Host", request.header("host") or "-"), ("Content-Length", "0")]
            for name in ("upgrade", "connection"):
                value = request.header(name)
                if value is not None:
                    headers.append((name, value))
            if request.version == "1.0" and request.header("connection") is None:
                headers.append(("Connection", "close"))  # h11 speaks 1.1 only
            self._h11.send(h11.Request(method=request.method, target=request.target,
                                       headers=headers))
        self._h11.send(h11.EndOfMessage())

    def _next_cycle(self) -> None:
        """The response ended: the next one answers the next request."""
        conn = self._h11
        self.answering = None
        if conn.their_state is h11.SWITCHED_PROTOCOL:
            return
        held = self._held()
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        else:
            # the server closes after this answer: a fresh h11 reads what still comes
            self._restart(self._consumed(), held)
        if held:
            self._ask()

    def _on_head(self, ev: Any) -> None:
        super()._on_head(ev)
        if type(ev) is h11.InformationalResponse and ev.status_code == 101:
            request = self.answering
            self._switch_to = (request.header("upgrade") if request is not None else None) \
                or "?"

    def _switch(self) -> None:
        request = self.answering
        if request is not None and request.method == "CONNECT":
            self._switch_to = f"a tunnel to {request.target}"
        super()._switch()
