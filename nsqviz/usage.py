"""How nsqviz tells a user that what they typed is wrong: the nearest valid choices, and
the one-line error of a sub-command.

Both are defined here once, below every part that reports a bad argument (the display
filters, ``nsqviz decode``'s checks and live capture, the analyses, the pipeline, the
``nsqviz`` entry point), so a flow id, a filter field, an interface and a message id
are matched by one rule and every sub-command's error reads the same way. This module
imports nothing from nsqviz.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from os.path import commonprefix

__all__ = ["CUTOFF", "SHOWN", "damaged_input", "help_text", "nearest", "nearest_hint",
           "usage_error", "warn"]

CUTOFF = 0.6
"""How alike a choice must be to count as near: :class:`difflib.SequenceMatcher`'s ratio
(twice the characters in common over both lengths), case aside. 0.6 keeps one typo in a
short name (``lo0`` -> ``lo``: 0.8, ``comand`` -> ``command``: 0.92) and in a 16-hex
message id (one character wrong or missing: above 0.9), while two unrelated message ids
stay below it (random 16-hex pairs: median 0.25, 0.6 or more in about one pair of
100,000)."""


def nearest(value: str, choices: Iterable[str], n: int = 3, *,
            close_only: bool = False) -> list[str]:
    """The at most ``n`` ``choices`` nearest to ``value``, case aside: those whose ratio
    reaches :data:`CUTOFF`, most alike first; else, when none does, those that begin
    with the longest part of ``value`` any choice begins with
    (``nsq.msg.what_was_it_called`` -> ``nsq.msg.*``, a message id's first characters ->
    the ids starting so); else the
    first ``n`` in sorted order, so that a bad argument always names valid ones --
    unless ``close_only``, for a "did you mean" hint that names only near ones.

    Ties and the fallbacks go in sorted order; a choice given twice, or in two cases, is
    named once. Each choice is compared once (after sorting them), cheap bounds first."""
    pool: dict[str, str] = {}
    for choice in sorted(set(choices)):
        pool.setdefault(choice.casefold(), choice)
    import difflib  # a bad argument's cost alone, not every command's start-up

    wanted = value.casefold()
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(wanted)  # the matcher caches what it learns of its second sequence
    scored: list[tuple[float, str]] = []
    for key, choice in pool.items():
        matcher.set_seq1(key)
        if (matcher.real_quick_ratio() >= CUTOFF and matcher.quick_ratio() >= CUTOFF
                and (ratio := matcher.ratio()) >= CUTOFF):
            scored.append((-ratio, choice))
    if scored:
        return [choice for _, choice in sorted(scored)[:n]]
    shared = max((len(commonprefix([wanted, key])) for key in pool), default=0)
    if shared:
        return [choice for key, choice in pool.items() if key[:shared] == wanted[:shared]][:n]
    return [] if close_only else list(pool.values())[:n]


def nearest_hint(value: str, choices: Iterable[str]) -> str:
    """``" (nearest: a, b, c)"``, the :func:`nearest` choices to name after a value that
    selects nothing ("" when there are no choices at all)."""
    close = nearest(value, choices)
    return f" (nearest: {', '.join(close)})" if close else ""


def warn(command: str, message: str) -> None:
    """One line on standard error, naming the sub-command: ``nsqviz COMMAND: MESSAGE``."""
    print(f"nsqviz {command}: {message}", file=sys.stderr)


def usage_error(command: str, message: str) -> int:
    """A bad argument, or input that cannot be read: one line on standard error (as
    :func:`warn`) and the exit status 2, returned for the sub-command to return."""
    warn(command, message)
    return 2


SHOWN = 5
"""How many of a damaged input's problems :func:`damaged_input` lists (then a count)."""


def damaged_input(command: str, problems: Sequence[str], count: int | None = None) -> int:
    """The one rule for a capture that could not all be read -- a file cut short, a
    record or block whose length cannot be right, a packet whose headers are not what
    its link type says -- in every sub-command that reads captures (``decode`` and the
    analyses): what could be read has been shown; the problems are said on standard
    error, one line each (the first :data:`SHOWN`, then how many more); and the exit
    status is 2, the status :func:`usage_error` gives to input that cannot be read at
    all, and tshark's for a damaged capture. ``count``: how many there were, when only
    some are kept (a live capture keeps none)."""
    count = len(problems) if count is None else count
    for problem in problems[:SHOWN]:
        warn(command, problem)
    if count > min(len(problems), SHOWN):
        warn(command, f"... {count - min(len(problems), SHOWN)} more problems in the capture")
    return 2


_ROLE = re.compile(r":[\w:.]+:`(~?)([^`<]*?)(?: <[^>]*>)?`")


def help_text(doc: str | None) -> str:
    """A sub-command module's docstring as its ``--help`` description: the first
    paragraph, whole (its first line alone can stop mid-sentence), with reST markup as
    plain text (````nsqviz decode````, ``:mod:`~nsqviz.x``` -> ``nsqviz decode``, ``x``)."""
    first = " ".join((doc or "").strip().split("\n\n", 1)[0].split())
    first = _ROLE.sub(lambda m: m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2),
                      first)
    return first.replace("``", "")
