"""The probe corpus against the real nsqd and ``nsqviz broker``: answer for answer.

Every probe (see :mod:`tests.differential._probes`) is replayed on a fresh connection to
both servers (all probes concurrently); the outcomes -- responses and errors in order,
messages in order, and whether the server closed -- must be equal once nsqd's own
values are masked (message ids and timestamps, its version).

:data:`KNOWN` lists where the broker still answers differently, each with what nsqd does
and why we do not (yet). A listed probe that starts to agree passes (XPASS), so fixing
one never breaks the suite; remove it from the list then.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from tests.differential._probes import LIMITS, corpus
from tests.differential._replay import replay_all

PROBES = corpus()
FRAMING_LIMITS = {k: LIMITS[k] for k in ("max_body_size", "max_msg_size")}

_DOUBLE_SPACE = ("the command line: nsqd v1.3.0 splits on every single space, so in `RDY  5` the "
                 "count it reads is the empty word between the two spaces (an empty number, "
                 "see the next entry); the codec refuses the empty count")
_NUMBER = ("numbers: nsqd's ByteToBase10 reads an empty number as 0 and wraps past int64 "
           "without an error; the codec refuses both")
_MPUB = ("MPUB: nsqd checks the body size against --max-body-size and then reads the "
         "messages straight from the stream, ignoring that size; a lying size desynchronises "
         "nsqd's stream. The codec frames MPUB by its declared size (as the spec and every "
         "client do), so it refuses the command instead; and nsqd checks a message's declared "
         "size against --max-msg-size ('message too big') before reading it, where the codec "
         "first finds that the size overruns the body ('cut short')")
_NO_NEWLINE = ("a line without its \\n: nsqd validates the topic of the whole line (up to the "
               "next \\n, across the body) before it reads a body size; the codec reads the "
               "size first")

KNOWN: dict[str, str] = {
    r"double-space/RDY": _DOUBLE_SPACE,
    r"number/.*/empty|number/(RDY|DPUB)/huge": _NUMBER,
    r"size/MPUB/one-short|mpub/(count-too-.*|message-size-(over|huge)"
    r"|message-\d+/size-over-max-msg)": _MPUB,
    r"no-newline/(PUB|MPUB|DPUB)": _NO_NEWLINE,
}


def known(name: str) -> str | None:
    for pattern, reason in KNOWN.items():
        if re.fullmatch(pattern, name):
            return reason
    return None


@pytest.fixture(scope="module")
def outcomes(server_pairs):
    """``{probe name: (nsqd's outcome, ours)}`` for the whole corpus."""

    async def run():
        results = {}
        for config, (real, ours) in server_pairs.items():
            probes = [p for p in PROBES if p.config == config]
            theirs, mine = await asyncio.gather(
                replay_all(real.tcp_address, probes, limits=FRAMING_LIMITS),
                replay_all(ours.tcp_address, probes, limits=FRAMING_LIMITS))
            results.update({p.name: (theirs[p.name], mine[p.name]) for p in probes})
        return results

    return asyncio.run(run())


def test_the_corpus_covers_every_command_in_every_state():
    assert len(PROBES) >= 300
    names = {p.name for p in PROBES}
    for state in ("init", "identified", "subscribed", "in_flight", "closing"):
        for verb in ("NOP", "IDENTIFY", "AUTH", "SUB", "PUB", "MPUB", "DPUB", "RDY", "CLS",
                     "FIN-unknown", "REQ-unknown", "TOUCH-unknown"):
            assert f"state/{state}/{verb}" in names
    for verb in ("FIN", "REQ", "TOUCH"):
        assert f"state/in_flight/{verb}" in names
    assert {p.config for p in PROBES} == {"plain", "auth", "tls", "tls-required", "nocompress"}


@pytest.mark.parametrize(
    "name",
    [pytest.param(p.name, marks=pytest.mark.xfail(reason=known(p.name), strict=False))
     if known(p.name) else p.name for p in PROBES],
)
def test_probe_answers_like_nsqd(outcomes, name):
    theirs, ours = outcomes[name]
    assert str(ours) == str(theirs), f"nsqd: {theirs}\nours: {ours}"
