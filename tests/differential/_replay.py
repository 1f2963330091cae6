"""Replay raw byte probes against an nsqd-compatible server and describe what came back.

A :class:`Probe` is a list of chunks written one after another on a fresh connection.
What comes back is decoded by the codec's passive :class:`~nsqviz.nsq.observer.Observer`
(fed both directions, so it follows a compression switch) and turned into an
:class:`Outcome`: the frames in order, each described without nsqd's own values (a
message's id and timestamp, the version in an IDENTIFY response), and whether and how
the server closed the connection: with a FIN, or with an RST (what the kernel sends when
a server closes with input it has not read). Two servers agree on a probe when their
outcomes are equal.

Before each chunk the replay waits until everything sent that nsqd answers (the
observer's client side knows) has been answered, and runs the TLS handshake when the
server agreed to one; so what is compared does not depend on timing. A chunk may hold
``{ID}``: it is replaced by the id of the last message received (the
replay waits for one), so a probe can FIN, REQ or TOUCH a message it was sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
from dataclasses import dataclass, field

from nsqviz.nsq import events as ev
from nsqviz.nsq.compression import compressor
from nsqviz.nsq.framing import CommandFraming
from nsqviz.nsq.observer import Observer
from nsqviz.stream.reassembly import Garbage, Reassembler

ID = b"{ID}"
WAIT = b"{WAIT}"
"""A chunk that is not sent: the replay waits until one more message has arrived than
the earlier WAITs of the probe waited for (two WAITs: two messages). A probe that
expects a message waits for it so: the quiet period after the last chunk is no bound
on when nsqd's message pump delivers (a loaded machine's came after it)."""

MASKED_IDENTIFY_KEYS = frozenset({"version"})
"""IDENTIFY response keys that are the server's own (nsqd's build), not protocol."""


@dataclass(frozen=True)
class Probe:
    """Chunks sent on one connection, ``gap`` seconds apart (a split command's pieces)."""

    name: str
    chunks: tuple[bytes, ...]
    gap: float = 0.02
    config: str = "plain"  # which server pair: see the test's CONFIGS

    def __post_init__(self) -> None:
        if not self.chunks:
            raise ValueError(f"{self.name}: a probe sends something")


@dataclass
class Outcome:
    """What a server answered to a probe, free of its own values.

    Responses and errors are kept in order, and messages in order, but apart: nsqd
    writes pushed messages from its message pump and answers from its command loop, so
    the order *between* a message and an answer is not part of the protocol (nsqd
    itself varies it from run to run)."""

    frames: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    closed: bool = False
    reset: bool = False  # closed with an RST, not a FIN

    def __str__(self) -> str:
        end = ("reset" if self.reset else "closed") if self.closed else "open"
        return " | ".join([*self.frames, *self.messages, end])


def describe(event) -> str | None:
    """A frame as the comparison sees it; None for what is not a frame."""
    if isinstance(event, ev.Message):
        return f"message attempts={event.attempts} body={event.body!r}"
    if isinstance(event, ev.Error):
        return f"error {event.data.decode(errors='replace')}"
    if isinstance(event, ev.Response):
        try:
            doc = json.loads(event.data)
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            for key in MASKED_IDENTIFY_KEYS & doc.keys():
                doc[key] = "<masked>"
            return "response " + json.dumps(doc, sort_keys=True)
        return f"response {event.data.decode(errors='replace')}"
    return None


async def replay(address: str, probe: Probe, *, quiet: float = 0.3,
                 wait: float = 5.0, close_wait: float = 30.0,
                 limits: dict[str, int] | None = None) -> Outcome:
    """Send ``probe`` to ``address`` and collect the answers until the server closes or
    has been quiet for ``quiet`` seconds after the last chunk. An answer is waited for
    up to ``wait`` seconds; the close after a fatal error up to ``close_wait`` (nsqd
    creates an MPUB's topic, and writes its metadata, before it reads the body size: with
    hundreds of probes at once that takes seconds). ``limits``: the server's
    ``max_body_size``/``max_msg_size``, for telling which chunk it refuses as it frames
    it (the passive observer holds such bytes while it looks for the next frame)."""
    host, _, port = address.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    observer = Observer(provenance=False)
    framing = Reassembler(CommandFraming(**(limits or {})), provenance=False, resync=False)
    outcome = Outcome()
    state = {"compressor": None, "tls": False, "last_id": None, "fatal": False,
             "messages": 0, "waited": 0}
    arrived = asyncio.Condition()
    ids: list[bytes] = []

    def take(events) -> None:
        for event in events:
            if isinstance(event, ev.CompressionStarted):
                state["compressor"] = compressor(event.kind, event.level)
            elif isinstance(event, ev.TLSUpgrade):
                state["tls"] = True
            elif isinstance(event, ev.Error) and event.fatal:
                state["fatal"] = True
            elif isinstance(event, ev.Message):
                state["last_id"] = event.id
                state["messages"] += 1
                if event.id not in ids:
                    ids.append(event.id)
            text = describe(event)
            if text is not None:
                kind = outcome.messages if isinstance(event, ev.Message) else outcome.frames
                kind.append(text)

    async def read() -> None:
        while True:
            try:
                data = await reader.read(65536)
            except ConnectionResetError:
                data, outcome.reset = b"", True
            except (ConnectionError, ssl.SSLError):
                data = b""
            if not data:
                outcome.closed = True
            async with arrived:
                if data:
                    take(observer.s2c(data))
                arrived.notify_all()
            if not data:
                return

    async def until(predicate, timeout: float) -> bool:
        async with arrived:
            try:
                await asyncio.wait_for(arrived.wait_for(predicate), timeout)
            except TimeoutError:
                return False
        return True

    def settled() -> bool:
        """Nothing asked is still unanswered (or the TLS handshake is due, or it closed).
        After a fatal error (or a chunk the codec expects one for) only the close
        settles it: a chunk sent into the server's closing would be input it never read,
        and decide how it closes (FIN or RST)."""
        if state["fatal"]:
            return outcome.closed
        upgrade_due = state["tls"] and writer.get_extra_info("ssl_object") is None
        return outcome.closed or upgrade_due or not observer.client.pending

    async def settle() -> bool:
        """Wait for the answers to what was sent, then run a due TLS handshake; False
        when nothing more is to be sent (closed, or a fatal error whose close did not
        come: a chunk sent now would race it)."""
        await until(settled, close_wait if state["fatal"] else wait)
        if state["fatal"]:
            return False
        if outcome.closed or not state["tls"] or writer.get_extra_info("ssl_object"):
            return not outcome.closed
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            await writer.start_tls(context)
        except (ConnectionError, ssl.SSLError, TimeoutError) as exc:
            outcome.frames.append(f"tls failed {type(exc).__name__}")
            outcome.closed = True
            return False
        outcome.frames.append("tls")
        # the replay decrypts: both sides of the observer decode again
        observer.encrypted = False
        observer.client.tls_established()
        observer.server.tls_started()
        await until(settled, wait)
        return not outcome.closed

    reading = asyncio.create_task(read())
    try:
        for chunk in probe.chunks:
            if not await settle():
                break
            if chunk == WAIT:
                state["waited"] += 1
                await until(lambda: state["messages"] >= state["waited"] or outcome.closed,
                            wait)
                continue
            if ID in chunk:
                await until(lambda: state["last_id"] is not None, wait)
                chunk = chunk.replace(ID, state["last_id"] or b"0" * 16)
            wire = state["compressor"].compress(chunk) if state["compressor"] else chunk
            # the observer reads what goes on the wire (compressed, once negotiated)
            # the grammar's refusals (Violation) and the state's (Refused: RDY before
            # SUB): either way nsqd closes, and a chunk sent now would race that close
            refused = [e for e in observer.c2s(wire)
                       if isinstance(e, ev.Violation | ev.Refused) and e.fatal and e.code]
            refused += [g for g in framing.feed(chunk) if isinstance(g, Garbage) and g.code]
            if refused:
                state["fatal"] = True  # a command nsqd refuses and closes on: no ask pends
            try:
                writer.write(wire)
                await writer.drain()
            except (ConnectionError, ssl.SSLError):
                break
            await asyncio.sleep(probe.gap)
        else:
            await settle()
        # done sending: wait until the server closes or stays quiet
        while not outcome.closed:
            count = len(outcome.frames) + len(outcome.messages)
            if not await until(
                lambda n=count: len(outcome.frames) + len(outcome.messages) > n or outcome.closed,
                quiet,
            ):
                break
    finally:
        reading.cancel()
        with contextlib.suppress(BaseException):
            await reading
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    return _mask_ids(outcome, ids)


def _mask_ids(outcome: Outcome, ids: list[bytes]) -> Outcome:
    """Message ids are the server's own: in error texts they become ``<id N>`` (N: the
    order in which the messages arrived)."""
    for n, mid in enumerate(ids):
        text = mid.decode()
        outcome.frames = [f.replace(text, f"<id {n}>") for f in outcome.frames]
    return outcome


async def replay_all(address: str, probes, *, limit: int = 64,
                     limits: dict[str, int] | None = None) -> dict[str, Outcome]:
    """Every probe against ``address``, ``limit`` connections at a time (``limits``: see
    :func:`replay`)."""
    gate = asyncio.Semaphore(limit)

    async def one(probe: Probe) -> tuple[str, Outcome]:
        async with gate:
            return probe.name, await replay(address, probe, limits=limits)

    return dict(await asyncio.gather(*(one(p) for p in probes)))
