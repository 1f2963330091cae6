"""One colour per command/frame name and per field, for every view and plot.

A learner follows ``FIN`` from the sequence diagram to the replay lanes to a plot, and
``size`` from one hex view to the next, by its colour; so no view picks colours of its
own. Two maps, both fixed by the protocol tables, not by what a view happens to show:

* :func:`name_colour` -- a command, frame or RPC method: the names every registered
  protocol gives its records (:meth:`nsqviz.protocols.protocol.Protocol.names`: NSQ's verbs,
  the magic and frame types, TubeMQ's RPC methods, the lookup protocol's verbs and
  answers), and their other spellings (:meth:`~nsqviz.protocols.protocol.Protocol.aliases`: a
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
import math
import zlib
from functools import cache
from typing import Any

__all__ = ["KINDS", "MIN_DELTA_E", "QUIET", "SEPARATOR", "UNPARSED", "delta_e", "field_colour",
           "ink", "name_colour", "name_of_event", "names", "ordinal_colour", "spread"]

SEPARATOR = "#e5e7eb"
"""Unnamed constants (spaces, newlines): present, but quiet."""
UNPARSED = "#fecaca"
"""Bytes the grammar could not attribute."""
OTHER = "#e5e7eb"
"""A name outside the tables (a gap, a TLS record)."""
KINDS = {"gap": "#7c8594", "error": UNPARSED, "tls": "#aeb5c0"}
"""A record that is no command or frame, by its kind: bytes missing from the capture,
bytes no grammar could parse, a TLS record. Quiet greys and the unparsed pink, each
:data:`MIN_DELTA_E` from :data:`OTHER`, from the others and from every name."""
QUIET = (OTHER, *KINDS.values())

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
    """Every registered protocol's names (:meth:`~nsqviz.protocols.protocol.Protocol.names`), in
    registration order: the first protocol's take the hand-picked fills, every other
    name the next generated one (a name two protocols share keeps the fill it got
    first) -- each moved, where it must be, to the nearest fill at least
    :data:`MIN_DELTA_E` from its protocol's other names and from the quiet fills
    (:data:`QUIET`): any of them can stand side by side in a legend."""
    from nsqviz import protocols

    out: dict[str, str] = {}
    used: set[str] = set()
    for k, proto in enumerate(protocols.registered()):
        own = list(dict.fromkeys(proto.names()))
        fresh = [n for n in own if n not in out]
        wanted = [*_HAND_FILLS] if k == 0 else []
        wanted += _generated(max(len(fresh) - len(wanted), 0), offset=0.05)
        for least in range(int(MIN_DELTA_E), 0, -1):  # as far apart as the pastels allow
            try:
                mine = _spread(fresh, wanted, [out[n] for n in own if n in out], used, least)
            except ValueError:
                continue
            _SPREAD[proto.name] = float(least)
            break
        out.update(mine)
        used.update(mine.values())
    return out


_SPREAD: dict[str, float] = {}
"""Per protocol, the least colour difference between two of its names (:func:`spread`)."""


def spread(protocol: str) -> float:
    """The least CIEDE2000 difference between any two of ``protocol``'s names and the
    quiet fills: :data:`MIN_DELTA_E` for NSQ's 16 and the lookup protocol's; less for a
    protocol with more names than pastels that far apart (TubeMQ's RPCs, nsqd's HTTP
    endpoints)."""
    _names()
    return _SPREAD[protocol]


def _spread(names: list[str], wanted: list[str], mates: list[str], used: set[str],
            least: float) -> dict[str, str]:
    """Each of ``names`` its ``wanted`` fill, or the nearest pastel ``least`` from the
    fills before it, from ``mates`` and from the quiet fills; ValueError if one has none."""
    out: dict[str, str] = {}
    for name, fill in zip(names, wanted, strict=False):
        taken = [*mates, *out.values(), *QUIET]
        out[name] = _apart(fill, taken, used | set(out.values()), least)
    return out


@cache
def _aliases() -> dict[str, str]:
    """Other spellings of a name (TubeMQ's message names, the magic in lower case), as
    each protocol gives them (:meth:`~nsqviz.protocols.protocol.Protocol.aliases`)."""
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


MIN_DELTA_E = 12.0
"""The least CIEDE2000 colour difference between two fills that can stand side by side:
two fields of one unit, two names of one protocol (a legend, a replay's lanes), a name
and the quiet fills, two neighbouring frames of the sticky-packet map. About 2 is just
noticeable; pastels 12 apart read as two colours at a glance (MPUB's ``count`` and
``data``, 4 apart, read as one field)."""


@cache
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


@cache
def delta_e(a: str, b: str) -> float:
    """The CIEDE2000 difference of two fills (Sharma, Wu, Dalal 2005); cached: choosing
    the fills compares the same pastels many times."""
    (l1, a1, b1), (l2, a2, b2) = _lab(a), _lab(b)
    mean_c = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(mean_c ** 7 / (mean_c ** 7 + 25 ** 7)))
    a1, a2 = a1 * (1 + g), a2 * (1 + g)
    c1, c2 = math.hypot(a1, b1), math.hypot(a2, b2)
    h1, h2 = math.degrees(math.atan2(b1, a1)) % 360, math.degrees(math.atan2(b2, a2)) % 360
    dh = 0.0 if c1 * c2 == 0 else (h2 - h1 + 180) % 360 - 180
    d_h = 2 * math.sqrt(c1 * c2) * math.sin(math.radians(dh) / 2)
    mean_l, mean_cp = (l1 + l2) / 2, (c1 + c2) / 2
    if c1 * c2 == 0:
        mean_h = h1 + h2
    elif abs(h1 - h2) <= 180:
        mean_h = (h1 + h2) / 2
    else:
        mean_h = (h1 + h2 + 360) / 2 if h1 + h2 < 360 else (h1 + h2 - 360) / 2
    t = (1 - 0.17 * math.cos(math.radians(mean_h - 30)) + 0.24 * math.cos(math.radians(2 * mean_h))
         + 0.32 * math.cos(math.radians(3 * mean_h + 6))
         - 0.20 * math.cos(math.radians(4 * mean_h - 63)))
    rc = 2 * math.sqrt(mean_cp ** 7 / (mean_cp ** 7 + 25 ** 7))
    rt = -math.sin(math.radians(60 * math.exp(-(((mean_h - 275) / 25) ** 2)))) * rc
    sl = 1 + 0.015 * (mean_l - 50) ** 2 / math.sqrt(20 + (mean_l - 50) ** 2)
    sc, sh = 1 + 0.045 * mean_cp, 1 + 0.015 * mean_cp * t
    dl, dc, dhh = (l2 - l1) / sl, (c2 - c1) / sc, d_h / sh
    return math.sqrt(dl * dl + dc * dc + dhh * dhh + rt * dc * dhh)


@cache
def _pool() -> tuple[str, ...]:
    """Pastels to move a fill to: every 10 degrees of hue, three lightnesses, two
    saturations (black text stays readable on each)."""
    return tuple(_hex(*colorsys.hls_to_rgb(h / 36, light, sat))
                 for h in range(36) for light in (0.66, 0.76, 0.86) for sat in (0.55, 0.8))


def _apart(fill: str, neighbours: list[str], used: set[str] | frozenset[str] = frozenset(),
           least: float = MIN_DELTA_E) -> str:
    """``fill``, or the pastel nearest to it (:func:`_pool`) that is at least ``least``
    from every one of ``neighbours`` and not in ``used``."""
    def fits(c: str) -> bool:
        return c not in used and all(delta_e(c, n) >= least for n in neighbours)

    if fits(fill):
        return fill
    found = next((c for c in sorted(_pool(), key=lambda c: delta_e(c, fill)) if fits(c)), None)
    if found is None:
        raise ValueError(f"no pastel {least} from {len(neighbours)} fills")
    return found


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
    :data:`MIN_DELTA_E` from every other's and from :data:`SEPARATOR` and
    :data:`UNPARSED` (which fields neighbour which depends on the bytes: an MPUB's
    ``count`` is followed by its first message's ``size``, or by ``data`` when the
    message is empty)."""
    from nsqviz import protocols

    found: dict[str, None] = {}
    seen: set[int] = set()
    for con in protocols.registered()[0].grammars():
        _walk_names(con, found, seen)
    out: dict[str, str] = {}
    for name, fill in zip(found, _FIELD_FILLS, strict=False):
        out[name] = _apart(fill, [*out.values(), SEPARATOR, UNPARSED], set(out.values()))
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
    return fill if k % 2 == 0 else _shade(fill)


@cache
def _shade(fill: str) -> str:
    """The same hue as ``fill``, lighter (or, for a fill too light for that, darker)
    until it is :data:`MIN_DELTA_E` from it: two neighbouring frames of one name."""
    hue, light, sat = _hls(fill)
    steps = [light + d / 100 for d in range(2, 40, 2)] + [light - d / 100 for d in range(2, 40, 2)]
    for level in steps:
        if 0.3 <= level <= 0.95:
            shade = _hex(*colorsys.hls_to_rgb(hue, level, sat))
            if delta_e(shade, fill) >= MIN_DELTA_E:
                return shade
    raise AssertionError(f"no shade of {fill} {MIN_DELTA_E} apart")  # pragma: no cover
