"""Seed 002's client-guide rules, checked on observed traffic (a capture or a live tap).

The checker reads what the codec's :class:`~nsqviz.nsq.observer.Observer` decoded of each
client connection -- commands, frames, times and packet numbers -- and gives every rule
of :data:`RULES` a :class:`Verdict`: ``pass``, ``fail`` or ``not exercised`` (the traffic
never put the rule to the test), with the packets that show it. Nothing here knows which
library made the traffic.

Rules across connections (the RDY sum and the backoff of one consumer, lookupd polling)
are checked by :func:`check_consumer`, :func:`check_backoff` and :func:`check_polls`.
``max_in_flight`` is not on the wire: the sum rule is judged only when it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from nsqviz.nsq import events as ev
from nsqviz.nsq.commands import BY_EVENT, name_of
from nsqviz.nsq.errors import not_in_flight
from nsqviz.stream.direction import Direction

__all__ = ["MESSAGE_RULES", "RULES", "Connection", "Seen", "Verdict", "check_backoff",
           "check_connection", "check_consumer", "check_polls"]

PASS, FAIL, NOT_EXERCISED = "pass", "fail", "not exercised"

RULES: dict[str, str] = {
    "handshake": "magic, then IDENTIFY, then SUB (AUTH between them when required)",
    "feature-negotiation": "IDENTIFY asks for feature_negotiation",
    "initial-rdy": "the first RDY after SUB is 1",
    "max-rdy-count": "no RDY above nsqd's max_rdy_count (2500 without negotiation)",
    "rdy-update": "a RDY is re-sent only when the count left is 0 or < 25 % of the last sent",
    "heartbeat": "every _heartbeat_ is answered before the next one",
    "in-flight": "FIN, REQ and TOUCH only for messages in flight on that connection",
    "state": "every command in a state nsqd's transition table allows it in",
    "backoff": "after a failure (REQ): RDY 0, then RDY 1 to test the waters, then more",
    "cls-before-close": "a subscribed connection the client ends sends CLS first and "
                        "waits for CLOSE_WAIT",
    "rdy-sum": "the RDY counts of one consumer's connections never add up to more than "
               "max_in_flight",
    "lookupd-polling": "every lookupd is polled, periodically, with jitter",
}
"""Rule id -> what the guide asks, in one line."""


@dataclass(frozen=True, slots=True)
class Seen:
    """One decoded event of a connection: when, which way, what, from which packets;
    ``violation``: what nsqd answers to it, where the codec judged the command (as sent,
    in ``event``) out of bounds; ``refused``: nsqd's answer to a well-formed command it
    refuses where it was sent (its state, its flight), as the observer judged it."""

    t: float
    direction: Direction
    event: ev.Event
    packets: tuple[int, ...]
    violation: ev.Violation | None = None
    refused: str = ""

    @classmethod
    def of(cls, t: float, direction: Direction, event: ev.Event,
           packets: tuple[int, ...]) -> Seen:
        """``event`` as the observer decoded it: a refused command is seen as sent."""
        if type(event) is ev.Violation and event.command is not None:
            return cls(t, direction, event.command, packets, event)
        return cls(t, direction, event, packets)


@dataclass
class Connection:
    """The events of one client connection, in order; ``ended_by`` is ``"client"``,
    ``"server"`` or ``None`` (still open when the traffic ends); ``lost``: where the
    capture lost bytes of a direction (a gap, the snaplen, a start after the handshake),
    as the direction and the number of events seen before -- what was lost is judged by
    no rule, and what it may explain fails none; ``cut``: the commands the capture cut
    short (the number of events seen before, the verb), of which only the head is known."""

    label: str
    seen: list[Seen] = field(default_factory=list)
    ended_by: str | None = None
    lost: list[tuple[Direction, int]] = field(default_factory=list)
    cut: list[tuple[int, str]] = field(default_factory=list)

    def lost_before(self, direction: Direction, index: int) -> bool:
        """Did the capture lose bytes ``direction`` sent before event ``index``?"""
        return any(d == direction and at <= index for d, at in self.lost)

    @property
    def subscribed(self) -> ev.Sub | None:
        return next((s.event for s in self.seen
                     if type(s.event) is ev.Sub and s.violation is None), None)


@dataclass(frozen=True, slots=True)
class Verdict:
    rule: str
    status: str
    detail: str
    packets: tuple[int, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "status": self.status, "detail": self.detail,
                "packets": list(self.packets)}


def _v(rule: str, status: str, detail: str, *seen: Seen | None) -> Verdict:
    packets = tuple(sorted({p for s in seen if s is not None for p in s.packets}))
    return Verdict(rule, status, detail, packets[:12])


# ------------------------------------------------------------------- one connection


def check_connection(conn: Connection,
                     rules: Collection[str] | None = None) -> list[Verdict]:
    """Every per-connection rule for ``conn`` (or those of ``rules``, in this order)."""
    return [check(conn) for rule, check in _CHECKS.items()
            if rules is None or rule in rules]


MESSAGE_RULES = frozenset({"rdy-update", "heartbeat", "in-flight"})
"""The per-connection rules that read a connection's messages and their answers one by
one. The others read its control commands and frames (the magic, IDENTIFY, SUB, RDY,
CLS, nsqd's responses), the commands nsqd refused and its first and last events: they
fail on those alone as on the whole connection -- what lets the doctor ask them of a
connection without its messages (:func:`nsqviz.conformance.frames.failures`)."""


def _commands(conn: Connection) -> list[Seen]:
    c2s = Direction.C2S
    return [s for s in conn.seen if s.direction == c2s]


def _count(s: Seen) -> int:
    """The count of a RDY; 0 for any other command (a CLS ends a connection's share)."""
    return s.event.count if isinstance(s.event, ev.Rdy) else 0


_WITH_ID = (ev.Message, ev.Fin, ev.Req, ev.Touch)


def _mid(s: Seen) -> bytes:
    """The message id a message, FIN, REQ or TOUCH carries (``b""`` for other events)."""
    e = s.event
    return e.id if isinstance(e, _WITH_ID) else b""


_IDENTIFY = BY_EVENT[ev.Identify].verb


def _handshake(conn: Connection) -> Verdict:
    order = [s for s in _commands(conn) if type(s.event) in (ev.Magic, ev.Identify, ev.Sub)]
    kinds = [type(s.event) for s in order]
    if ev.Sub not in kinds:
        if ev.Identify in kinds or any(verb == _IDENTIFY for _, verb in conn.cut):
            return _v("handshake", PASS, "IDENTIFY sent (a producer: no SUB)", *order)
        return _v("handshake", NOT_EXERCISED, "no IDENTIFY or SUB seen", *order)
    if ev.Identify not in kinds:
        sub = order[kinds.index(ev.Sub)]
        at = conn.seen.index(sub)
        if any(i <= at and verb == _IDENTIFY for i, verb in conn.cut):
            return _v("handshake", PASS, "IDENTIFY (cut short by the capture) before SUB",
                      *order)
        if conn.lost_before(Direction.C2S, at):
            return _v("handshake", NOT_EXERCISED, "SUB, but the capture lost what the "
                      "client sent before it", sub)
        return _v("handshake", FAIL, "SUB without IDENTIFY first", *order)
    if kinds.index(ev.Identify) > kinds.index(ev.Sub):
        return _v("handshake", FAIL, "IDENTIFY after SUB", *order)
    return _v("handshake", PASS, "IDENTIFY before SUB", *order)


def _feature_negotiation(conn: Connection) -> Verdict:
    ident = next((s for s in _commands(conn) if type(s.event) is ev.Identify), None)
    if ident is None:
        return _v("feature-negotiation", NOT_EXERCISED, "no IDENTIFY seen")
    if isinstance(ident.event, ev.Identify) and ident.event.data.get("feature_negotiation"):
        return _v("feature-negotiation", PASS, "feature_negotiation: true", ident)
    return _v("feature-negotiation", FAIL, "IDENTIFY without feature_negotiation", ident)


def _rdys(conn: Connection) -> list[Seen]:
    return [s for s in _commands(conn) if type(s.event) is ev.Rdy]


def _initial_rdy(conn: Connection) -> Verdict:
    rdys = _rdys(conn)
    if conn.subscribed is None or not rdys:
        return _v("initial-rdy", NOT_EXERCISED, "no SUB followed by RDY")
    first = rdys[0]
    if _count(first) == 1:
        return _v("initial-rdy", PASS, "first RDY 1", first)
    return _v("initial-rdy", FAIL, f"first RDY {_count(first)}, the guide says 1", first)


def _max_rdy_count(conn: Connection) -> Verdict:
    """Judged by the codec's observer, which knows nsqd's limit: 2500, or the
    ``max_rdy_count`` nsqd announced in its IDENTIFY response. A RDY nsqd refuses as sent
    is one whose count is out of that range (the codec's one check of a RDY)."""
    rdys = _rdys(conn)
    if not rdys:
        return _v("max-rdy-count", NOT_EXERCISED, "no RDY sent")
    over = [(s, s.violation) for s in rdys if s.violation is not None]
    if over:
        return _v("max-rdy-count", FAIL, f"{over[0][1].text} (nsqd's max_rdy_count)",
                  *(s for s, _ in over))
    top = max(rdys, key=_count)
    return _v("max-rdy-count", PASS, f"highest RDY {_count(top)}, within nsqd's "
              "max_rdy_count", top)


def _rdy_update(conn: Connection) -> Verdict:
    """The 25 % rule, judged on what the client could have counted when it sent each RDY.

    The observer sits between client and nsqd: a message it passed on before it saw the
    client's RDY may still have been in transit to the client when the client sent that
    RDY -- the client then counts it against the *next* RDY. So the messages a client
    counted for one RDY are only known within bounds: at most every message passed on
    since the fewest it may have read at its previous RDY; at least up to the last one it
    answered (FIN, REQ, TOUCH: it has read that one and, TCP keeping order, every one
    before). A re-send is judged a breach only if no reading within these bounds, shared
    by every RDY of the connection, makes it due -- the benefit of the doubt goes to the
    client, and what the observer saw in order stays certain.
    """
    passed = 0  # messages passed on to the client so far
    answered = 0  # the client has certainly read this many (its last answer's number)
    number: dict[bytes, int] = {}  # message id -> its number among the messages passed
    last: int | None = None
    fewest = 0  # the fewest messages the client may have read when it sent the last RDY
    resends, bad = [], []
    message, c2s, answer_kinds = ev.Message, Direction.C2S, (ev.Fin, ev.Req, ev.Touch)
    for s in conn.seen:
        e = s.event
        kind = type(e)
        if isinstance(e, message):
            passed += 1
            number[e.id] = passed
        elif s.direction != c2s:
            continue
        elif isinstance(e, answer_kinds):
            answered = max(answered, number.get(e.id, 0))
        elif kind is ev.Rdy:
            count, read = _count(s), max(answered, fewest)
            if last is not None and count == last and count > 0:
                due = _due_after(count)  # messages since the last RDY that make it due
                if passed - fewest >= due:
                    resends.append(s)
                    read = max(answered, fewest + due)
                else:
                    bad.append((s, count - (passed - fewest)))
            last, fewest = count, read
    if bad:
        s, left = bad[0]
        return _v("rdy-update", FAIL, f"RDY {_count(s)} re-sent with at least {left} of "
                  f"{_count(s)} left (>= 25 %), counting every message that may have "
                  f"reached the client before it; {len(bad)} such", *(b[0] for b in bad))
    if resends:
        return _v("rdy-update", PASS, f"{len(resends)} re-sends, each at 0 or < 25 % left",
                  *resends)
    return _v("rdy-update", NOT_EXERCISED, "RDY never re-sent with the same count")


def _due_after(count: int) -> int:
    """The fewest messages after RDY ``count`` that leave 0 or less than 25 % of it."""
    return 3 * count // 4 + 1


def _heartbeat(conn: Connection) -> Verdict:
    beats = [i for i, s in enumerate(conn.seen) if s.direction == Direction.S2C
             and type(s.event) is ev.Response and s.event.is_heartbeat]
    if not beats:
        return _v("heartbeat", NOT_EXERCISED, "no heartbeat in the traffic")
    missed = []
    for k, i in enumerate(beats):
        end = beats[k + 1] if k + 1 < len(beats) else len(conn.seen)
        if not any(s.direction == Direction.C2S for s in conn.seen[i + 1:end]):
            if end == len(conn.seen) and conn.ended_by is None:
                continue  # the traffic ends before an answer could be seen
            missed.append(conn.seen[i])
    if missed:
        return _v("heartbeat", FAIL, f"{len(missed)} of {len(beats)} heartbeats unanswered",
                  *missed)
    return _v("heartbeat", PASS, f"{len(beats)} heartbeats answered",
              *(conn.seen[i] for i in beats[:6]))


def _in_flight(conn: Connection) -> Verdict:
    """An id is in flight from its delivery until its FIN or REQ -- and no longer when
    nsqd refused the answer (``E_FIN_FAILED`` ...: it timed out meanwhile). An answer
    for an id never seen delivered fails only when the capture lost nothing the server
    sent before it (the delivery may be in what it lost)."""
    flying: set[bytes] = set()
    answers, bad, unjudged = [], [], []
    # a loop over every message and answer of the connection: names bound once
    message, touch, c2s = ev.Message, ev.Touch, Direction.C2S
    answer_kinds = (ev.Fin, ev.Req, touch)
    for i, s in enumerate(conn.seen):
        e = s.event
        if isinstance(e, message):
            flying.add(e.id)
        elif isinstance(e, answer_kinds) and s.direction == c2s:
            mid = e.id
            if s.refused and _not_in_flight(s):  # nsqd's own verdict
                bad.append(s)
            elif mid not in flying:
                if conn.lost_before(Direction.S2C, i):
                    unjudged.append(s)
                    continue
                bad.append(s)
            answers.append(s)
            if type(e) is not touch:
                flying.discard(mid)
    lost = (f"; {len(unjudged)} not judged: the capture lost server bytes before them"
            if unjudged else "")
    if not answers:
        if unjudged:
            return _v("in-flight", NOT_EXERCISED, lost.removeprefix("; "), *unjudged)
        return _v("in-flight", NOT_EXERCISED, "no FIN, REQ or TOUCH")
    if bad:
        refused = sum(1 for s in bad if _not_in_flight(s))
        said = f", {refused} of them refused by nsqd" if refused else ""
        return _v("in-flight", FAIL, f"{len(bad)} answers for ids not in flight "
                  f"(first {_mid(bad[0]).decode()}){said}{lost}", *bad)
    return _v("in-flight", PASS, f"{len(answers)} answers, each for a message in flight"
              f"{lost}", *answers[:3])


def _state(conn: Connection) -> Verdict:
    commands = [s for s in _commands(conn) if type(s.event) is not ev.Magic]
    if not commands:
        return _v("state", NOT_EXERCISED, "no command after the magic")
    bad = [s for s in commands if s.refused and not _not_in_flight(s)]
    if bad:
        return _v("state", FAIL, f"{len(bad)} command(s) sent in a state that forbids them "
                  f"(first: {name_of(type(bad[0].event))}, nsqd answers {bad[0].refused})",
                  *bad)
    return _v("state", PASS, f"{len(commands)} commands, each in a state that allows it",
              *commands[:3])


def _not_in_flight(s: Seen) -> bool:
    """Is ``s`` refused for its id (the in-flight rule's matter), not for its state?"""
    cmd = s.event
    if not s.refused or not isinstance(cmd, ev.Fin | ev.Req | ev.Touch):
        return False
    return s.refused == " ".join(not_in_flight(name_of(type(cmd)), cmd.id))


def _cls_before_close(conn: Connection) -> Verdict:
    if conn.subscribed is None:
        return _v("cls-before-close", NOT_EXERCISED, "never subscribed")
    cls = next((s for s in _commands(conn) if type(s.event) is ev.Cls), None)
    wait = next((s for s in conn.seen if type(s.event) is ev.Response
                 and s.event.data == b"CLOSE_WAIT"), None)
    if cls is not None:
        if wait is None:
            return _v("cls-before-close", FAIL, "CLS sent, CLOSE_WAIT never seen", cls)
        return _v("cls-before-close", PASS, "CLS, then CLOSE_WAIT", cls, wait)
    if conn.ended_by == "client":
        last = conn.seen[-1] if conn.seen else None
        return _v("cls-before-close", FAIL, "the client closed a subscribed connection "
                  "without CLS", last)
    return _v("cls-before-close", NOT_EXERCISED,
              "the connection did not end by the client within the traffic")


_CHECKS: dict[str, Callable[[Connection], Verdict]] = {
    "handshake": _handshake, "feature-negotiation": _feature_negotiation,
    "initial-rdy": _initial_rdy, "max-rdy-count": _max_rdy_count,
    "rdy-update": _rdy_update, "heartbeat": _heartbeat, "in-flight": _in_flight,
    "state": _state, "cls-before-close": _cls_before_close,
}
"""Each per-connection rule's check, in the order verdicts are given."""


# ------------------------------------------------------------------- across connections


def check_consumer(conns: Iterable[Connection], max_in_flight: int | None,
                   window: float = 0.02) -> Verdict:
    """The RDY sum over the subscribed connections (RDYs closer than ``window`` seconds
    count as one burst: a client lowers one and raises another in one go; a CLS ends
    its connection's share)."""
    # CLS ends a connection's share (nsqd sends no more messages on it)
    timeline = sorted(((s.t, k, s) for k, c in enumerate(conns) for s in _commands(c)
                       if type(s.event) in (ev.Rdy, ev.Cls)), key=lambda x: x[0])
    if not timeline:
        return _v("rdy-sum", NOT_EXERCISED, "no RDY sent")
    if max_in_flight is None:
        return _v("rdy-sum", NOT_EXERCISED, "max_in_flight is not on the wire: give it")
    current: dict[int, int] = {}
    start: float | None = None
    burst: list[Seen] = []
    worst: tuple[int, list[Seen]] = (0, [])
    for t, k, s in timeline + [(float("inf"), -1, None)]:
        if start is not None and t - start >= window:
            total = sum(current.values())
            if total > worst[0]:
                worst = (total, burst)
            start, burst = None, []
        if s is None:
            break
        start = t if start is None else start
        current[k] = _count(s)
        burst.append(s)
    total, burst = worst
    status = PASS if total <= max_in_flight else FAIL
    return _v("rdy-sum", status, f"highest sum {total} (max_in_flight {max_in_flight}) over "
              f"{len({k for _, k, _ in timeline})} connection(s)", *burst)


def check_backoff(conns: Iterable[Connection]) -> Verdict:
    """Backoff is one state for the whole consumer: after a failure (REQ) every
    connection goes to RDY 0, and the first RDY above 0 afterwards, on any connection,
    is 1 -- the test of the waters -- before the others get their share back.

    Commands on different connections are seen in the order the observer read them,
    which is not always the order the client sent them: a RDY another connection had on
    its way when the failure's RDY 0 was read may have been sent before the client went
    into backoff. Only each connection's own order is certain, so a RDY above 0 is held
    to the rule only once its connection is at 0 since the failure -- it sent RDY 0
    after the REQ, or its last RDY before the REQ was 0 (or it had none).
    """
    conns = list(conns)
    cmds = sorted(((s.t, k, s) for k, c in enumerate(conns) for s in _commands(c)
                   if type(s.event) in (ev.Req, ev.Rdy)), key=lambda x: x[0])
    reqs = [s for _, _, s in cmds if type(s.event) is ev.Req]
    if not reqs:
        return _v("backoff", NOT_EXERCISED, "no failure (REQ) in the traffic")
    first_req = next(i for i, (_, _, s) in enumerate(cmds) if type(s.event) is ev.Req)
    rdy_before: dict[int, int] = {}
    for _, k, s in cmds[:first_req]:
        if type(s.event) is ev.Rdy:
            rdy_before[k] = _count(s)
    at_zero = {k for k in range(len(conns)) if rdy_before.get(k, 0) == 0}
    zero = up = None
    for _, k, s in cmds[first_req:]:
        if type(s.event) is not ev.Rdy:
            continue
        if _count(s) == 0:
            at_zero.add(k)
            zero = zero or s
        elif zero is not None and k in at_zero:
            up = s
            break
    if zero is None:
        return _v("backoff", NOT_EXERCISED, "REQ never followed by RDY 0: no backoff, or "
                  "requeues without backoff (the wire cannot tell them apart)", reqs[0])
    if up is None:
        return _v("backoff", NOT_EXERCISED, "RDY 0 after REQ; the traffic ends in backoff",
                  reqs[0], zero)
    if _count(up) != 1:
        return _v("backoff", FAIL, f"after RDY 0 the first RDY was {_count(up)}, not 1 "
                  "(test the waters)", reqs[0], zero, up)
    return _v("backoff", PASS, "REQ, RDY 0, then RDY 1 on one connection", reqs[0], zero, up)


def check_polls(polls: dict[str, list[tuple[float, int]]]) -> Verdict:
    """``polls``: lookupd address -> [(time, packet)] of its ``GET /lookup`` requests."""
    if not polls or not any(polls.values()):
        return Verdict("lookupd-polling", NOT_EXERCISED, "no GET /lookup in the traffic")
    # a poll round asks the lookupds at about the same time
    asks = sorted((t, a, p) for a, ps in polls.items() for t, p in ps)
    rounds: list[list[tuple[float, str, int]]] = []
    for ask in asks:
        if rounds and ask[0] - rounds[-1][0][0] < 0.25:
            rounds[-1].append(ask)
        else:
            rounds.append([ask])
    packets = tuple(p for r in rounds[:4] for _, _, p in r)
    partial = [r for r in rounds if {a for _, a, _ in r} != set(polls)]
    if len(polls) > 1 and partial:
        return Verdict("lookupd-polling", FAIL, f"{len(partial)} of {len(rounds)} poll rounds "
                       f"asked only some of the {len(polls)} lookupds (the guide: all, and "
                       "take the union)", tuple(p for r in partial[:4] for _, _, p in r))
    gaps = [b[0][0] - a[0][0] for a, b in zip(rounds, rounds[1:], strict=False)]
    if len(gaps) < 2:
        return Verdict("lookupd-polling", NOT_EXERCISED,
                       f"{len(rounds)} poll rounds: too few to see the period", packets)
    spread = max(gaps) - min(gaps)
    detail = (f"{len(polls)} lookupd(s), {len(rounds)} rounds, intervals "
              f"{min(gaps):.2f}-{max(gaps):.2f} s")
    if spread < 0.005 * max(gaps):
        return Verdict("lookupd-polling", FAIL, detail + ": no jitter", packets)
    return Verdict("lookupd-polling", PASS, detail, packets)
