"""How a capture's flow finds its protocol: every registered protocol scores the flow
alike (:class:`Detector`, the detection part of :class:`~nsqviz.protocols.protocol.
Protocol`) and :func:`detect` takes the one most sure it is its own.

A protocol is sure, most to least, when its server's first answer is framed as its server
frames (:meth:`Detector.server_hello`), when its client's hello was seen
(:meth:`Detector.client_hello`, :meth:`Detector.starts_hello`), when the server's port is
one of its ports (:attr:`Detector.server_ports`), when the bytes look like it
(:meth:`Detector.looks_like`); :attr:`Detector.detection_words` say each verdict in its
own words.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import NamedTuple, TypeVar

__all__ = ["Detection", "DetectionWords", "Detector", "answer_undecided", "detect"]


class Detection(NamedTuple):
    """How sure a protocol is that a flow is its own: ``score`` 4 the server's first
    answer is framed as its server frames, 3 the client's hello was seen, 2 the server
    port is one of its ports, 1 the bytes look like it, 0 not it (``why`` says which).

    The server's answer outranks the client's hello because a server refuses a hello it
    does not speak in its *own* protocol: a client that sends nsqlookupd's magic to nsqd
    gets nsqd's ``E_BAD_PROTOCOL`` as an NSQ error frame, and the connection is nsqd's
    (what its client sent is shown as the magic nsqd refused)."""

    score: int
    why: str


class DetectionWords(NamedTuple):
    """What :meth:`Detector.detect` says of a flow, in a protocol's own words: its hello
    ``seen``; on its port from the start but without it, what its server does
    (``refused``); ``missing`` the hello elsewhere; the bytes ``look`` like it; ``none``."""

    seen: str
    refused: str
    missing: str
    look: str
    none: str


class Detector(ABC):
    """The detection hooks of a protocol (:class:`~nsqviz.protocols.protocol.Protocol` is
    one), and the one way every protocol scores a flow with them (:meth:`detect`)."""

    name: str
    """The protocol's short name (:func:`detect`'s ``ports`` are keyed by it)."""
    title: str
    """How people write it (a verdict names it so)."""
    server_ports: frozenset[int]
    """Ports its servers listen on by default."""

    @abstractmethod
    def client_hello(self, data: bytes) -> bool:
        """Do these first bytes of a stream prove their sender is this protocol's client?
        (The capture layer uses it to orient a flow whose SYN was not captured.)"""

    detection_words: DetectionWords
    """The words of :meth:`detect`'s verdicts."""

    def starts_hello(self, data: bytes) -> bool:
        """Could a client's first bytes ``data`` (perhaps fewer than the whole hello) be
        this protocol's hello? By default: they are all of it."""
        return self.client_hello(data)

    def server_hello(self, data: bytes) -> bool | None:
        """Are a server's first bytes on a connection (``data``: what arrived of them,
        perhaps one segment of a few bytes) framed as this protocol's server frames its
        first answer -- to its own client's hello, or its refusal of another's? ``None``:
        too few bytes yet to tell. By default ``False``: the answer names no protocol."""
        return False

    def looks_like(self, direction: str, data: bytes) -> bool:
        """Do bytes seen in the middle of a flow look like this protocol's?"""
        return False

    def detect(self, direction: str, data: bytes, *, from_start: bool,
               server_port: bool, answer: bytes = b"") -> Detection:
        """Is a flow this protocol's? ``data`` is the first payload seen, in
        ``direction``; ``from_start``: it is the client's first bytes after a captured
        handshake; ``server_port``: the server's port is one of this protocol's;
        ``answer``: the server's first bytes, when a flow seen from its start has them.
        Every protocol scores alike (:class:`Detection`): its server's answer
        (:meth:`server_hello`), its hello (:meth:`starts_hello`), then its port, then the
        look of the bytes (:meth:`looks_like`)."""
        words = self.detection_words
        if from_start:
            hello = self.starts_hello(data)
            if answer and self.server_hello(answer):  # said only where it decides
                return Detection(4, words.seen if hello else
                                 f"the server answers in {self.title}'s framing "
                                 f"({words.missing})")
            if hello:
                return Detection(3, words.seen)
            if server_port:
                return Detection(2, f"server port ({words.refused})")
            return Detection(0, words.missing)
        if server_port:
            return Detection(2, "server port")
        if self.looks_like(direction, data):
            return Detection(1, words.look)
        return Detection(0, words.none)


D = TypeVar("D", bound=Detector)


def detect(protocols: Iterable[D], direction: str, data: bytes, *, from_start: bool,
           ports: Mapping[str, frozenset[int]], server_port: int,
           answer: bytes = b"") -> tuple[D | None, str]:
    """The protocol most sure a flow is its own, and why; ``None`` and the reasons when
    none claims it. ``ports`` are each protocol's server ports; ``answer`` the server's
    first bytes (:meth:`Detector.detect`). A tie (two protocols given one port, say)
    goes to the one whose bytes alone still look like it, else to the first."""
    verdicts = []
    reasons = []
    for proto in protocols:
        verdict = proto.detect(direction, data, from_start=from_start,
                               server_port=server_port in ports.get(proto.name, ()),
                               answer=answer)
        if verdict.score:
            verdicts.append((verdict, proto))
        else:
            reasons.append(f"{proto.title}: {verdict.why}")
    if not verdicts:
        return None, "; ".join(reasons)
    top = max(v.score for v, _ in verdicts)
    tied = [(v, p) for v, p in verdicts if v.score == top]
    if len(tied) > 1:
        for verdict, proto in tied:
            if proto.detect(direction, data, from_start=from_start, server_port=False).score:
                return proto, f"{verdict.why}, and the bytes look like it"
    return tied[0][1], tied[0][0].why


def answer_undecided(protocols: Iterable[Detector], answer: bytes) -> bool:
    """Does some protocol need more of the server's first bytes than ``answer`` to say
    whether they are framed as its server's (:meth:`Detector.server_hello`)?"""
    return any(proto.server_hello(answer) is None for proto in protocols)
