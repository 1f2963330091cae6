"""A flow's units as records: what the capture layer makes of its protocol's items.

A decoded command or frame is one :class:`~nsqviz.records.DecodedRecord` (the hot path:
its packets counted for the statistics, a heuristic resync said once); every other kind
of item by its handler (:data:`_ON_ITEM`): an annotation adds to the record before it, a
TLS switch, undecodable bytes (a gap's ``Skipped`` while resynchronising), a stream that
ended inside a unit. Bytes the capture lost are a gap's records (:func:`gap_records`:
the unit it cut, the gap, a proven resync); a direction's end gives what its observer
still held (:func:`end_records`). The decoder (:mod:`nsqviz.capture.decode`) calls these
with the flow's state (:mod:`nsqviz.capture.flowstate`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from nsqviz.capture.driver import split_packet_id
from nsqviz.capture.flow import Flow
from nsqviz.capture.flowstate import FlowState, Side
from nsqviz.capture.tcp import FlowEnd, Gap
from nsqviz.protocols.items import ANSWERS, Item, ItemKind
from nsqviz.records import DecodedRecord
from nsqviz.stream.direction import Direction

__all__ = ["answered", "end_records", "gap_records", "packets_of", "record", "unit_records"]

_FILE0 = 1 << 40
"""Packet ids from this up are of a later file (:func:`~nsqviz.capture.driver.split_packet_id`)."""

# A namedtuple's own __new__ is a Python-level function; tuple.__new__ builds the same
# object in C, which counts once per record (the capture readers' hot loop).
_new_tuple = tuple.__new__

_COMMAND, _FRAME = ItemKind.COMMAND, ItemKind.FRAME
"""The kinds of a unit's item, read once (see :data:`nsqviz.stream.direction.C2S`)."""

_ZEROS = tuple((0,) * n for n in range(8))
"""The file numbers of a unit's packets in the first file, by how many packets."""


def record(flow: Flow, direction: Direction | None, kind: str, name: str,
           fields: dict[str, Any], ts: float, ids: tuple[int, ...], event: Any,
           protocol: str | None = None, offset: int | None = None,
           size: int | None = None, answers: int | None = None) -> DecodedRecord:
    """One record, its packet ids split into files and packets (see
    :func:`~nsqviz.capture.driver.split_packet_id`)."""
    if ids and ids[-1] >= _FILE0:
        pairs = [split_packet_id(i) for i in ids]
        files, packets = tuple(f for f, _ in pairs), tuple(n for _, n in pairs)
    else:
        files, packets = (0,) * len(ids), ids
    return _new_tuple(DecodedRecord, (ts, flow.label, direction, kind, name, fields,
                                      packets, flow.id, event, protocol, files, offset,
                                      size, answers))


def unit_records(state: FlowState, side: Side, direction: Direction, items: list[Item],
                 number: int, ts: float) -> list[DecodedRecord]:
    """The records of one direction's items: a command or frame here (the hot path),
    every other kind of item by its handler in :data:`_ON_ITEM`."""
    flow = state.flow
    label, flow_id = flow.label, flow.id
    proto = state.protocol.name if state.protocol is not None else None
    counts = state.stats.records
    fpp = state.stats.frames_per_packet
    ppf = state.stats.packets_per_frame
    out: list[DecodedRecord] = []
    epoch = side.epoch
    for item in items:
        kind, name, fields, event, at, raw = item
        offset = None if at is None else epoch + at
        if epoch:
            _shift_violations(fields, epoch)
        if kind is not _COMMAND and kind is not _FRAME:
            other = _ON_ITEM[kind](flow, side, direction, item, offset, number, ts,
                                   proto, counts, out)
            if other is not None:
                out.append(other)
            continue
        packets: tuple[int, ...]
        if raw is None:
            size, packets = None, (number,)
        else:
            size = len(raw.data)
            sources = raw.sources
            packets = ((sources[0].segment,) if len(sources) == 1
                       else packets_of(raw, number))
        if side.resyncing:
            side.resyncing = False
            counts["gap"] = counts.get("gap", 0) + 1
            out.append(record(
                flow, direction, "gap", "Resync",
                {"method": "heuristic", "offset": epoch if offset is None else offset,
                 "reason": "the first frame the framing rule accepts after the gap"},
                ts, packets[:1], None, proto))
        # Units come out in stream order, so a packet's count is complete once a
        # unit starts in a later packet.
        for p in packets:
            if p == side.packet:
                side.frames += 1
            else:
                if side.frames:
                    fpp[side.frames] += 1
                side.packet, side.frames = p, 1
        ppf[len(packets)] += 1
        counts[kind] = counts.get(kind, 0) + 1
        if packets[-1] < _FILE0:  # packets of the first file: record() without the call
            out.append(_new_tuple(DecodedRecord, (
                ts, label, direction, kind, name, fields, packets, flow_id, event, proto,
                _ZEROS[len(packets)] if len(packets) < len(_ZEROS) else (0,) * len(packets),
                offset, size, None)))
        else:
            out.append(record(flow, direction, kind, name, fields, ts, packets, event, proto,
                              offset, size))
    return out


# The other kinds of item, one handler each (:data:`_ON_ITEM`): each returns the record
# to add, or ``None``.


def _annotation(flow: Flow, side: Side, direction: Direction, item: Item,
                offset: int | None, number: int, ts: float, proto: str | None,
                counts: dict[str, int], out: list[DecodedRecord]) -> DecodedRecord | None:
    """Not a unit of its own: it says something about the one just before it (the
    command an answer answers: by its number, kept apart from the fields)."""
    if out and out[-1].dir == direction:
        fields = answered(item.fields)
        answers = fields.pop(ANSWERS, None)
        out[-1].fields.update(fields)
        if answers is not None:
            out[-1] = out[-1]._replace(answers=answers)
    return None


def _tls(flow: Flow, side: Side, direction: Direction, item: Item,
         offset: int | None, number: int, ts: float, proto: str | None,
         counts: dict[str, int], out: list[DecodedRecord]) -> DecodedRecord | None:
    counts["tls"] = counts.get("tls", 0) + 1
    return record(flow, direction, "tls", item.name, item.fields, ts, (number,),
                  item.event, proto)


def _error(flow: Flow, side: Side, direction: Direction, item: Item,
           offset: int | None, number: int, ts: float, proto: str | None,
           counts: dict[str, int], out: list[DecodedRecord]) -> DecodedRecord | None:
    """Bytes the observer could not decode: an error record, or -- while resynchronising
    after a gap -- bytes skipped, a gap record."""
    raw = item.raw
    size = None if raw is None else len(raw.data)
    packets = packets_of(raw, number)
    fields = item.fields
    if "offset" in fields:
        fields["offset"] = offset
    if side.resyncing:
        fields["note"] = "undecodable bytes after a gap, skipped while resynchronising"
        counts["gap"] = counts.get("gap", 0) + 1
        return record(flow, direction, "gap", "Skipped", fields, ts, packets,
                      item.event, proto, offset, size)
    counts["error"] = counts.get("error", 0) + 1
    return record(flow, direction, "error", item.name, fields, ts, packets,
                  item.event, proto, offset, size)


def _skipped(flow: Flow, side: Side, direction: Direction, item: Item,
             offset: int | None, number: int, ts: float, proto: str | None,
             counts: dict[str, int], out: list[DecodedRecord]) -> DecodedRecord | None:
    """The rest of bytes an error record already reported."""
    raw = item.raw
    size = None if raw is None else len(raw.data)
    counts["gap"] = counts.get("gap", 0) + 1
    fields = {**item.fields, "offset": offset, "size": size, "continued": True}
    return record(flow, direction, "gap", item.name, fields, ts,
                  packets_of(raw, number), item.event, proto, offset, size)


def _truncated(flow: Flow, side: Side, direction: Direction, item: Item,
               offset: int | None, number: int, ts: float, proto: str | None,
               counts: dict[str, int], out: list[DecodedRecord]) -> DecodedRecord | None:
    """The stream ended inside a unit."""
    counts["error"] = counts.get("error", 0) + 1
    fields = item.fields
    fields["offset"] = offset
    return record(flow, direction, "error", item.name, fields, ts, (number,),
                  item.event, proto, offset)


def gap_records(state: FlowState, gap: Gap) -> Iterator[DecodedRecord]:
    """The records of bytes the capture lost in one direction: the unit the gap cut
    (decoded as far as it was captured), the gap, and how decoding resumes."""
    stats = state.stats
    stats.gap_bytes += gap.size
    counts = stats.records
    counts["gap"] = counts.get("gap", 0) + 1
    flow, direction = state.flow, gap.direction
    fields: dict[str, Any] = {"offset": gap.offset, "size": gap.size, "reason": gap.reason}
    observer = state.observer
    side = state.sides[direction]
    resync = None
    proto = state.protocol.name if state.protocol is not None else None
    if observer is not None and not side.dead and not observer.encrypted:
        lost = observer.gap(direction)
        if lost.dead:
            side.dead = lost.dead
            fields["consequence"] = side.dead
        else:
            partial = lost.partial
            unit = lost.unit
            if unit is not None:  # decoded as far as it was captured: a unit, not a gap
                counts[unit.kind] = counts.get(unit.kind, 0) + 1
                fields_of = answered(unit.fields)
                yield record(flow, direction, unit.kind, unit.name, fields_of,
                             gap.ts, packets_of(unit.raw, gap.number), None, proto,
                             gap.offset - len(partial), lost.length,
                             fields_of.pop(ANSWERS, None))
            elif partial:
                fields["lost_partial_frame"] = partial.hex()
            side.epoch = gap.offset + gap.size
            length = lost.length
            remainder = None if length is None else length - len(partial)
            if remainder is not None and remainder >= gap.size:
                side.skip = remainder - gap.size
                side.epoch += side.skip
                side.resyncing = False
                resync = {
                    "method": "proven", "offset": side.epoch, "skipped": side.skip,
                    "reason": f"the lost frame's size prefix says it is {length} bytes long",
                }
            else:
                side.resyncing = True
                side.skip = 0
                if unit is not None:
                    observer.gap(direction)  # more than that unit is missing
    # the packet after the hole (where Wireshark sees the previous segment missing),
    # then the one that made it certain
    packets = ((gap.after, gap.number) if gap.after is not None and gap.after != gap.number
               else (gap.number,))
    yield record(flow, direction, "gap", "Gap", fields, gap.ts, packets, gap,
                 proto, gap.offset, gap.size)
    if resync is not None:
        yield record(flow, direction, "gap", "Resync", resync, gap.ts,
                           (gap.number,), gap, proto)


def end_records(state: FlowState, end: FlowEnd) -> Iterator[DecodedRecord]:
    """What is left in a direction that ended: its observer's last items, or the count
    of the encrypted bytes of a TLS flow."""
    observer = state.observer
    direction = end.direction
    side = state.sides[direction]
    if observer is None or side.dead:
        return
    if observer.encrypted:
        if state.stats.encrypted_bytes and direction == Direction.S2C:
            state.stats.records["tls"] = state.stats.records.get("tls", 0) + 1
            proto = state.protocol.name if state.protocol is not None else None
            yield record(
                state.flow, None, "tls", "Encrypted",
                {"bytes": state.stats.encrypted_bytes,
                 "note": "TLS records are not decoded"},
                end.ts, (end.number,), None, proto)
        return
    items = observer.end(direction, end.number)
    yield from unit_records(state, side, direction, items, end.number, end.ts)


_OnItem = Callable[[Flow, Side, Direction, Item, "int | None", int, float,
                    "str | None", dict[str, int], list[DecodedRecord]], "DecodedRecord | None"]

_ON_ITEM: dict[ItemKind, _OnItem] = {
    ItemKind.ANNOTATION: _annotation,
    ItemKind.TLS: _tls,
    ItemKind.ERROR: _error,
    ItemKind.SKIPPED: _skipped,
    ItemKind.TRUNCATED: _truncated,
}
"""How each kind of item other than a command or frame becomes a record."""


def answered(fields: dict[str, Any]) -> dict[str, Any]:
    """An answer's fields with the packet it answers (``response_to``) numbered in its
    own file, as Wireshark numbers it."""
    asked = fields.get("response_to")
    if asked is not None and asked >= _FILE0:  # a packet of a later file
        return {**fields, "response_to": split_packet_id(asked)[1]}
    return fields


def _shift_violations(fields: dict[str, Any], epoch: int) -> None:
    """An observer's offsets count from where its current stream starts; after a gap the
    capture layer adds what came before (``epoch``) to the offsets a violation carries,
    as it does to the record's own."""
    for problem in (fields, fields.get("violation"), *fields.get("violations", ())):
        if isinstance(problem, dict):
            at = problem.get("field_offset")
            if at is not None:
                problem["field_offset"] = at + epoch
            if problem is not fields and problem.get("offset") is not None:
                problem["offset"] += epoch


def packets_of(raw: Any, current: int) -> tuple[int, ...]:
    """The packets a unit's bytes came from (its provenance), in order."""
    if raw is None or not raw.sources:
        return (current,)
    sources = raw.sources
    if len(sources) == 1:
        return (sources[0].segment,)
    return tuple(sorted({s.segment for s in sources}))
