"""Wireshark display filters over decoded records: ``nsqviz decode -Y`` and its Python API.

::

    from nsqviz import filters
    from nsqviz.capture.decode import CaptureDecoder

    only = filters.compile('nsq.msg.attempts > 1 or nsq.error.code == "E_INVALID"')
    decoder = CaptureDecoder()
    records = list(decoder.decode(["capture.pcap"]))
    [r for r in records if only(r)]                          # record by record
    list(only.select(records, lambda: decoder.first_ts))     # packet by packet, as tshark

The expression is Wireshark's syntax (:mod:`nsqviz.filters.syntax`) over the field
registry (:func:`nsqviz.protocols.filter_fields`: the names the generated dissectors
register), compiled once into a predicate (:mod:`nsqviz.filters.evaluate`). A bad
expression raises :class:`FilterError` naming the position and, for an unknown name,
the nearest known ones.

:meth:`Filter.select` selects packets as tshark does -- the fields of every unit
completed in a packet are tested together, and a selected packet gives all its
records -- so ``nsqviz decode -Y F`` and ``tshark -Y F`` with the generated dissectors
select the same packets (tests/filters/test_tshark_parity.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from nsqviz import protocols
from nsqviz.filters.evaluate import Predicate, Values, build
from nsqviz.filters.syntax import FilterSyntaxError, parse
from nsqviz.filters.values import ALL, LAYERS, Needs, packet_values, packets
from nsqviz.records import DecodedRecord

__all__ = ["Filter", "FilterError", "compile"]


class FilterError(ValueError):
    """A display filter that cannot be used: ``position`` (0-based) and ``length`` say
    which characters of ``expression`` are wrong, ``reason`` why."""

    def __init__(self, expression: str, reason: str, position: int, length: int = 1) -> None:
        self.expression = expression
        self.reason = reason
        self.position = position
        self.length = length
        where = _excerpt(expression, position)
        super().__init__(f"{reason} (at character {position + 1} of {where})")

    def caret(self) -> str:
        """The expression with the wrong part underlined, as tshark shows it."""
        return f"{self.expression}\n{' ' * self.position}^{'~' * (self.length - 1)}"


_EXCERPT = 60
"""Characters on each side of an error's position that its message quotes."""


def _excerpt(expression: str, position: int) -> str:
    """The expression as an error's one line quotes it: whole when short, else the part
    around ``position`` (a 5,000-digit number is not printed twice)."""
    if len(expression) <= 2 * _EXCERPT:
        return repr(expression)
    start = max(0, position - _EXCERPT)
    end = min(len(expression), position + _EXCERPT)
    return (("..." if start else "") + repr(expression[start:end])
            + ("..." if end < len(expression) else "")
            + f", {len(expression)} characters")


@dataclass(slots=True)
class Filter:
    """A compiled display filter. Calling it on a record tests that record alone;
    :meth:`select` tests packets."""

    expression: str
    predicate: Predicate = field(repr=False)
    needs: Needs = field(default=ALL, repr=False)
    """The values the predicate reads (others are not computed)."""
    first_ts: float | None = field(default=None, repr=False)
    """Time zero of ``frame.time_relative`` (default: the first record's time)."""

    def matches(self, values: Values) -> bool:
        """Do these field values (one packet's) pass?"""
        return self.predicate(values)

    def _t0(self, rec: DecodedRecord) -> float | None:
        if self.first_ts is None:
            self.first_ts = rec.ts
        return self.first_ts

    def __call__(self, record: DecodedRecord) -> bool:
        return self.predicate(packet_values([record], self._t0(record), self.needs))

    def select(self, records: Iterable[DecodedRecord],
               first_ts: Callable[[], float | None] | None = None) -> Iterator[DecodedRecord]:
        """The records of the packets that pass, in their order. ``first_ts`` gives the
        capture's first packet time once known (``CaptureDecoder.first_ts``)."""
        needs, predicate = self.needs, self.predicate
        for group in packets(records):
            t0 = first_ts() if first_ts is not None else None
            t0 = self._t0(group[0]) if t0 is None else t0
            if predicate(packet_values(group, t0, needs)):
                yield from group


def compile(expression: str) -> Filter:  # noqa: A001 - the API's word, as re.compile
    """The filter ``expression`` stands for; :class:`FilterError` if it has none."""
    names = [p.name for p in protocols.registered()]
    try:
        tree = parse(expression)
        predicate, used = build(tree, protocols.filter_fields(), [*LAYERS, *names])
    except FilterSyntaxError as exc:
        raise FilterError(expression, exc.message, exc.position, exc.length) from None
    return Filter(expression, predicate, Needs.of(used))
