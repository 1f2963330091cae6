"""One colour per command/frame name and per field, for every view and plot.

A learner follows ``FIN`` from the sequence diagram to the replay lanes to a plot, and
``size`` from one hex view to the next, by its colour; so no view picks colours of its
own. Two maps, both fixed by the protocol tables, not by what a view happens to show:

* :func:`name_colour` -- a command, frame or RPC method: the names every registered
  protocol gives its records (:meth:`nsqviz.protocols.Protocol.names`: NSQ's verbs,
  the magic and frame types, TubeMQ's RPC methods, the lookup protocol's verbs and
  answers), and their other spellings (:meth:`~nsqviz.protocols.Protocol.aliases`: a
  request message such as ``RegisterRequestC2M`` takes its method's colour). Every
  name has its own colour (:func:`names` is total and injective, a test checks it);
  a protocol registered later gets colours for its names without an edit here.
* :func:`field_colour` -- a field of a hex view or field tree, by the field's name (the
  last name of its path: ``command.body.size`` and ``size`` of a frame are one ``size``
  colour). The names the first registered protocol's grammar (NSQ's) gives its fields
  each have their own colour; any other name (TubeMQ's protobuf fields) takes a stable
  one from the same set.

Fills are pastel, so black text on them stays readable; :func:`ink` is the darker shade
of the same hue for lines and text on white (the sequence diagram's arrows).
"""

from __future__ import annotations

import colorsys
import zlib
from functools import cache
from typing import Any

__all__ = ["MIN_DELTA_E", "SEPARATOR", "UNPARSED", "delta_e", "field_colour", "field_groups",
           "ink", "name_colour", "name_of_event", "names", "ordinal_colour"]

SEPARATOR = "#e5e7eb"
"""Unnamed constants (spaces, newlines): present, but quiet."""
UNPARSED = "#fecaca"
"""Bytes the grammar could not attribute."""
OTHER = "#e5e7eb"
"""A name outside the tables (a gap, a TLS record)."""

_HAND_FILLS = (
    "#8ecae6", "#ffb703", "#90be6d", "#f4a6c1", "#b8a1e3", "#f9c74f", "#7fd1b9",
    "#f8961e", "#a3c4f3", "#e9c46a", "#c1d37f", "#9bf6ff", "#d4a373",
    "#b5e48c", "#ffadad", "#cdb4db", "#ff99c8", "#a0c4ff",
)
"""Hand-picked pastels, far apart, for the first registered protocol's names (NSQ's: the
magic and the 12 commands, then the frame types -- response green, error red, message
lilac); names beyond them take generated fills."""


def _hex(r: float, g: float, b: float) -> str:
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def _hls(fill: str) -> tuple[float, float, float]:
    return colorsys.rgb_to_hls(*(int(fill[i:i + 2], 16) / 255 for i in (1, 3, 5)))


def _generated(n: int, *, offset: float) -> list[str]:
    """``n`` pastels spread over the hue circle (golden-angle steps), two lightnesses."""
    out = []
    for i in range(n):
        hue = (offset + i * 0.381966) % 1.0
        light = 0.78 if i % 2 else 0.70
        out.append(_hex(*colorsys.hls_to_rgb(hue, light, 0.62)))
    return out


@cache
def _names() -> dict[str, str]:
    """Every registered protocol's names (:meth:`~nsqviz.protocols.Protocol.names`), in
    registration order: the first protocol's take the hand-picked fills while they last,
    every other name the next generated one (a name two protocols share keeps the fill
    it got first)."""
    from nsqviz import protocols

    out: dict[str, str] = {}
    fresh = [n for proto in protocols.registered() for n in proto.names()]
    first = protocols.registered()[0].names()
    for name, fill in zip(first, _HAND_FILLS, strict=False):
        out.setdefault(name, fill)
    rest = [n for n in dict.fromkeys(fresh) if n not in out]
    out.update(zip(rest, _generated(len(rest), offset=0.05), strict=True))
    return out


@cache
def _aliases() -> dict[str, str]:
    """Other spellings of a name (TubeMQ's message names, the magic in lower case), as
    each protocol gives them (:meth:`~nsqviz.protocols.Protocol.aliases`)."""
    from nsqviz import protocols

    out: dict[str, str] = {}
    for proto in protocols.registered():
        for alias, name in proto.aliases().items():
            out.setdefault(alias, name)
    return out


def names() -> dict[str, str]:
    """Every command, frame type and RPC method name with its fill (a copy)."""
    return dict(_names())


def name_colour(name: Any) -> str:
    """The fill of a command, frame type or RPC method name (:data:`OTHER` if none)."""
    key = getattr(name, "value", name)  # an enum member (ErrorCode) by its value
    key = str(key)
    table = _names()
    if key in table:
        return table[key]
    alias = _aliases().get(key)
    return table[alias] if alias is not None else OTHER


def name_of_event(event: Any) -> str | None:
    """The table name of a protocol's event (``SUB``, ``FrameTypeMessage``, an RPC
    message), as its protocol names its records, else ``None``."""
    from nsqviz import protocols

    proto = protocols.of_event(event)
    return None if proto is None else proto.record_name(event)


def ink(fill: str) -> str:
    """The same hue as ``fill``, dark enough for a line or text on white."""
    hue, _light, sat = _hls(fill)
    return _hex(*colorsys.hls_to_rgb(hue, 0.34, min(1.0, max(sat, 0.55))))


# ---------------------------------------------------------------------------- fields

_FIELD_FILLS = (*_HAND_FILLS, *_generated(18, offset=0.6))


MIN_DELTA_E = 20.0
"""The least CIE76 colour difference between two fields that can share a hex view (two
pastel greens 12 apart read as one field): a field whose fill in order would come nearer
than this to one already coloured takes the first spare fill that does not."""


def _lab(fill: str) -> tuple[float, float, float]:
    """``fill`` (``#rrggbb``, sRGB) in CIE L*a*b* (D65), where distance is perceptual."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(fill[i:i + 2], 16) / 255) for i in (1, 3, 5))
    xyz = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047,
           0.2126 * r + 0.7152 * g + 0.0722 * b,
           (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)
    fx, fy, fz = (t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def delta_e(a: str, b: str) -> float:
    """The CIE76 difference of two fills: about 2 is just noticeable, 20 clearly apart."""
    return float(sum((p - q) ** 2 for p, q in zip(_lab(a), _lab(b), strict=True)) ** 0.5)


def field_groups(con: Any, seen: frozenset[int] = frozenset()) -> list[frozenset[str]]:
    """The sets of field names that can appear in one unit ``con`` parses: one set per
    way through its switches (a command's verb, a frame's type), names in order."""
    from construct import Construct, Renamed, Switch

    if id(con) in seen:
        return [frozenset()]
    seen = seen | {id(con)}
    own = frozenset([con.name]) if isinstance(con, Renamed) and con.name else frozenset()
    if isinstance(con, Switch):
        cases = [c for c in (*con.cases.values(), con.default) if isinstance(c, Construct)]
        return [own | g for c in cases for g in field_groups(c, seen)] or [own]
    out = [own]
    for attr in ("subcon", "subcons", "thensubcon", "elsesubcon"):
        value = getattr(con, attr, None)
        for child in value if isinstance(value, list | tuple) else [value]:
            if isinstance(child, Construct):
                out = list({a | b for a in out for b in field_groups(child, seen)})
    return out


def _walk_names(con: Any, out: dict[str, None], seen: set[int]) -> None:
    from construct import Construct, Renamed

    if id(con) in seen:
        return
    seen.add(id(con))
    if isinstance(con, Renamed) and con.name:
        out.setdefault(con.name, None)
    for attr in ("subcon", "subcons", "cases", "thensubcon", "elsesubcon", "default"):
        value = getattr(con, attr, None)
        children = value.values() if isinstance(value, dict) else (
            value if isinstance(value, list | tuple) else [value])
        for child in children:
            if isinstance(child, Construct):
                _walk_names(child, out, seen)


@cache
def _fields() -> dict[str, str]:
    """The first registered protocol's field names (its :meth:`~nsqviz.protocols.
    Protocol.grammars`: NSQ's), in the grammar's order, each with its own fill, at least
    :data:`MIN_DELTA_E` from the fills of the fields it can share a unit with."""
    from nsqviz import protocols

    found: dict[str, None] = {}
    seen: set[int] = set()
    groups: list[frozenset[str]] = []
    for con in protocols.registered()[0].grammars():
        _walk_names(con, found, seen)
        groups += field_groups(con)
    spare = list(_FIELD_FILLS[len(found):])
    out: dict[str, str] = {}
    for name, fill in zip(found, _FIELD_FILLS, strict=False):
        mates = [out[m] for g in groups if name in g for m in g if m in out]
        fits = [c for c in (fill, *spare) if all(delta_e(c, m) >= MIN_DELTA_E for m in mates)]
        if not fits:
            raise AssertionError("no fill far enough from a field's neighbours")  # pragma: no cover
        out[name] = fits[0]
        if fits[0] != fill:
            spare.remove(fits[0])
    return out


def field_colour(path: tuple[Any, ...] | str) -> str:
    """The fill of a field, by the last name of its path (array indices skipped)."""
    parts = [path] if isinstance(path, str) else [p for p in path if isinstance(p, str)]
    name = parts[-1] if parts else ""
    table = _fields()
    if name in table:
        return table[name]
    return _FIELD_FILLS[zlib.crc32(name.encode()) % len(_FIELD_FILLS)]


def ordinal_colour(k: int, name: Any = None) -> str:
    """Instance ``k`` of a run of same-named units (the sticky map's frames F0, F1 …):
    the name's fill, every other one lighter, so neighbours stay apart and the name
    keeps its colour. Without a name, the field fills in turn."""
    if name is None:
        return _FIELD_FILLS[k % len(_FIELD_FILLS)]
    fill = name_colour(name)
    if k % 2 == 0:
        return fill
    hue, light, sat = _hls(fill)
    return _hex(*colorsys.hls_to_rgb(hue, min(0.9, light + 0.1), sat))
