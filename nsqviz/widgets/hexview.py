"""A hex view that colours each byte by the grammar field it belongs to.

Like Wireshark's bytes pane next to its packet tree: the left side is the classic
offset / hex / ASCII dump, the right side the field tree from
:func:`nsqviz.layout.annotate`, and each leaf field has one colour in both
(and in every other hex view: :func:`nsqviz.palette.field_colour`). Hovering a
byte names its field (``title``). Bytes the grammar could not attribute (after a parse
error) are pink, and the byte where the error was noticed is outlined in red.
"""

from __future__ import annotations

from typing import Any

import construct

from nsqviz import protocols
from nsqviz.layout import Field, Layout, annotate
from nsqviz.palette import SEPARATOR, UNPARSED, field_colour
from nsqviz.widgets.style import CSS, SELECTED, StaticView, esc, short_value

__all__ = ["LINK_CSS", "HexView", "unit_view"]

_PER_ROW = 16

_LINKED = 96
"""Fields linked by :data:`LINK_CSS` (a longer layout keeps its colours, unlinked)."""

LINK_CSS = "<style>" + "".join(
    f".nsqviz-hex:has(.nv-k{k}:hover,.nv-k{k}:focus) .nv-k{k}"
    f"{{outline:2px solid {SELECTED};outline-offset:-1px;filter:saturate(2)}}"
    for k in range(_LINKED)
) + ".nsqviz-hex [tabindex]{cursor:pointer}</style>"
"""Linked selection without a script: hover or click (focus) a byte or a tree row and
every element of the same field lights up -- the bytes in hex and ASCII and the tree
row. CSS ``:has()`` works in the static HTML too (saved outputs, nbconvert, JupyterLab,
Notebook 7, VS Code), where a script would not run."""


class HexView(StaticView):
    """Render one :class:`~nsqviz.layout.Layout` as coloured hex + field tree.

    A plain object: ``html()`` gives the markup, ``text()`` a plain-text version
    (used for ``text/plain`` and in tests), ``widget()`` an ``ipywidgets.HTML``.
    """

    def __init__(self, layout: Layout, title: str = "", *, fold_over: int = 160):
        self.layout = layout
        self.title = title
        self.fold_over = fold_over  # longer inputs start folded (a click opens them)
        self.colours = _assign_colours(layout)
        self._keys = {id(leaf): k for k, leaf in enumerate(layout.leaves()) if k < _LINKED}

    @classmethod
    def of(cls, con: construct.Construct[Any, Any], data: bytes, title: str = "") -> HexView:
        return cls(annotate(con, data), title)

    # -- rendering ------------------------------------------------------------------

    def html(self, *, with_css: bool = True) -> str:
        lay = self.layout
        parts = [CSS if with_css else "", LINK_CSS, '<div class="nsqviz nsqviz-hex">']
        title = esc(self.title) if self.title else "bytes"
        parts.append(
            f'<div class="nv-title">{title} <span class="nv-muted">· {len(lay.data)} bytes'
            f"</span></div>"
        )
        if lay.error is not None:
            parts.append(f'<div class="nv-err">✗ {esc(lay.error)}</div>')
        body = (
            f'{self._legend()}<div class="nv-hexwrap">{self._dump()}'
            f'<div class="nv-tree">{self._tree(lay.root, top=True)}</div></div>'
        )
        if len(lay.data) > self.fold_over and lay.error is None:
            fields = len(lay.leaves())
            body = (
                f'<details><summary class="nv-muted">{len(lay.data)} bytes in {fields} fields '
                f"— click to show</summary>{body}</details>"
            )
        parts.append(body)
        parts.append("</div>")
        return "".join(parts)

    def text(self) -> str:
        """One line per leaf: range, path, hex, value -- the bytes pane as text."""
        lines = [f"{self.title or 'bytes'} ({len(self.layout.data)} bytes)"]
        if self.layout.error is not None:
            lines.append(f"  ERROR {self.layout.error}")
        for leaf in self.layout.leaves():
            raw = leaf.raw.hex(" ")
            if len(raw) > 47:
                raw = raw[:44] + "..."
            lines.append(
                f"  [{leaf.start:>4},{leaf.end:>4}) {_named(leaf):<34} {raw:<47} "
                f"{short_value(leaf.value)}"
            )
        return "\n".join(lines)


    # -- parts --------------------------------------------------------------------

    def _legend(self) -> str:
        chips = []
        for leaf in self.layout.leaves():
            if _is_separator(leaf):
                continue
            chips.append(
                f'<span class="nv-chip" style="background:{self.colours[id(leaf)]}">'
                f"{esc(_named(leaf))}</span>"
            )
        return f'<div class="nv-legend">{"".join(chips)}</div>'

    def _dump(self) -> str:
        data = self.layout.data
        owner: list[Field | None] = [None] * len(data)
        for leaf in self.layout.leaves():
            for i in range(leaf.start, leaf.end):
                owner[i] = leaf
        bad = self.layout.error_offset
        rows = []
        for row in range(0, max(len(data), 1), _PER_ROW):
            hexes, chars = [], []
            for i in range(row, min(row + _PER_ROW, len(data))):
                who = owner[i]
                bg = self.colours[id(who)] if who is not None else UNPARSED
                tip = esc(_named(who)) if who is not None else "(unattributed)"
                cls = " nv-bad" if i == bad else ""
                cls += self._link(who)
                style = f'style="background:{bg}" title="{tip}"'
                if i % 8 == 0 and i % _PER_ROW:
                    hexes.append('<span class="nv-gap"></span>')
                hexes.append(f'<span class="nv-b{cls}" {style}>{data[i]:02x}</span>')
                ch = chr(data[i]) if 32 <= data[i] < 127 else "·"
                chars.append(f'<span class="nv-a{cls}" {style}>{esc(ch)}</span>')
            rows.append(
                f'<tr><td class="nv-off nv-mono">{row:04x}</td>'
                f'<td class="nv-mono">{"".join(hexes)}</td>'
                f'<td class="nv-ascii nv-mono">{"".join(chars)}</td></tr>'
            )
        return f'<table class="nv-hex">{"".join(rows)}</table>'

    def _link(self, leaf: Field | None, *, attr: bool = False) -> str:
        """The class (and focusability) that links a field's bytes and its tree row."""
        k = self._keys.get(id(leaf)) if leaf is not None else None
        if k is None:
            return ""
        return f' class="nv-k{k}" tabindex="-1"' if attr else f' nv-k{k}" tabindex="-1'

    def _tree(self, node: Field, *, top: bool = False) -> str:
        if top and not node.name and node.children:
            return "<ul>" + "".join(self._item(c) for c in node.children) + "</ul>"
        return "<ul>" + self._item(node) + "</ul>"

    def _item(self, node: Field) -> str:
        name = esc(node.name if isinstance(node.name, str) else f"[{node.name}]")
        rng = f'<span class="nv-range">[{node.start}..{node.end})</span>'
        kind = f'<span class="nv-kind">{esc(node.kind)}</span>'
        if node.is_leaf:
            sw = self.colours.get(id(node), UNPARSED)
            flag = ' <span class="nv-err">✗</span>' if node.failed else ""
            value = "" if node.failed else esc(short_value(node.value))
            return (
                f'<li{self._link(node, attr=True)}><span class="nv-sw" style="background:{sw}">'
                f"</span>"
                f'<span class="nv-mono">{name}</span>{kind}{rng}'
                f'<span class="nv-val nv-mono">{value}</span>{flag}</li>'
            )
        kids = "".join(self._item(c) for c in node.children)
        return f'<li><b class="nv-mono">{name}</b>{kind}{rng}<ul>{kids}</ul></li>'


def _named(leaf: Field) -> str:
    """A field's name in the legend and tooltips: its path, or for a unit that is one field
    (the magic) the grammar's name for it -- never an empty chip."""
    return leaf.dotted or (leaf.name if isinstance(leaf.name, str) else "")


def _is_separator(leaf: Field) -> bool:
    """A space or line end between fields (or an unnamed constant): grey, no legend chip."""
    if leaf.kind != "const":
        return False
    unnamed = isinstance(leaf.name, str) and leaf.name.startswith("_")
    return unnamed or leaf.raw in (b" ", b"\n", b"\r\n")


def _assign_colours(layout: Layout) -> dict[int, str]:
    """Each leaf's fill: its field's colour (:func:`nsqviz.palette.field_colour`), the
    same in every hex view and tree; separators grey, unparsed bytes pink."""
    out: dict[int, str] = {}
    for leaf in layout.root.leaves():
        if leaf.kind == "unparsed":
            out[id(leaf)] = UNPARSED
        elif not leaf.width:
            out[id(leaf)] = "transparent"  # owns no bytes (a peek): no colour of its own
        elif _is_separator(leaf):
            out[id(leaf)] = SEPARATOR
        else:
            out[id(leaf)] = field_colour(leaf.path)
    return out


def unit_view(protocol: str, kind: str, name: str, data: bytes, title: str = "") -> HexView | None:
    """The hex view of one command or frame of ``protocol``, laid out by the grammar the
    protocol names for it (:meth:`nsqviz.protocols.protocol.Protocol.layout`), or ``None`` when it
    names none."""
    con = protocols.by_name(protocol).layout(kind, name)
    if con is None:
        return None
    if not isinstance(con, construct.Construct):  # a function of the bytes (see Protocol.layout)
        return HexView(con(data), title)
    return HexView.of(con, data, title)
