"""``nsqviz decode``'s checks of its narrowing options: ``-Y``, ``--flow``, ``--filter``.

A value that can select nothing is a mistake to report, not an empty output: a display
filter that does not compile, a ``--flow`` no flow of the capture answers to, a
``--filter`` name that is no record kind, no name a protocol uses and no name seen in
the capture. Each is one line naming the nearest valid choices
(:func:`nsqviz.usage.nearest_hint`); the command exits with status 2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from nsqviz import protocols
from nsqviz.capture.flowstate import FlowStats
from nsqviz.records import DecodedRecord
from nsqviz.usage import nearest_hint

if TYPE_CHECKING:
    from nsqviz import filters

__all__ = ["KINDS", "Seen", "UsageError", "display_filter"]

KINDS = ("command", "frame", "error", "gap", "tls", "flow", "tcp")
"""The kinds of records (:class:`~nsqviz.records.DecodedRecord`; ``tcp``: a connection's
FIN or RST) that ``--filter`` accepts as well as names."""


class UsageError(ValueError):
    """An option value that cannot select anything (the message is one line)."""


def display_filter(expression: str | None) -> filters.Filter | None:
    """The compiled ``-Y`` expression, or :class:`UsageError` saying where it is wrong.
    The filter engine (and RE2) is imported only here: a run without ``-Y`` does not
    pay for it at start-up."""
    if expression is None:
        return None
    from nsqviz import filters

    try:
        return filters.compile(expression)
    except filters.FilterError as exc:
        raise UsageError(f"-Y: {exc}") from None


def _record_names() -> set[str]:
    return {n for p in protocols.registered() for n in p.record_names()}


class Seen:
    """What the records of a run were called, for :meth:`unmatched` after the run."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def watch(self, records: Iterable[DecodedRecord]) -> Iterator[DecodedRecord]:
        """The records, unchanged, noting their names and error codes."""
        names = self.names
        for rec in records:
            names.add(rec.name)
            names.add(rec.kind)
            code = rec.fields.get("code")
            if isinstance(code, str):
                names.add(code)
            yield rec

    def unmatched(self, flows: Sequence[str], names: Iterable[str], stats: Sequence[FlowStats],
                  matcher: Callable[[list[str]], Callable[[DecodedRecord], bool] | None]
                  ) -> str:
        """The first ``--flow`` or ``--filter`` value that matches nothing known, as a
        one-line message with the nearest choices; ``""`` when every one is known."""
        for spec in flows:
            match = matcher([spec])
            if match is not None and not any(
                    match(DecodedRecord(0, s.flow.label, None, "", "", {}, (), s.flow.id))
                    for s in stats):
                choices = [str(s.flow.id) for s in stats] + [
                    end for s in stats for end in (s.flow.label, *s.flow.label.split("->"))]
                return f"--flow {spec}: no such flow in the capture{nearest_hint(spec, choices)}"
        known = {n.lower(): n for n in [*KINDS, *_record_names(), *self.names]}
        for name in names:
            if name.lower() not in known:
                return (f"--filter {name}: no record kind or name is called that"
                        f"{nearest_hint(name, known.values())}")
        return ""
