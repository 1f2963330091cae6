"""Click a box, open its bytes: how the replay, sequence diagram and sticky map open a
frame's hex view and field tree, with no script.

A view that has clickable boxes wraps itself in ``<div class="nv-open">``. Each box is a
``<label>`` around a hidden radio button (class ``nv-pick-k``), and the view carries one
hidden pane per box (class ``nv-pane-k``) holding that frame's
:class:`~nsqviz.widgets.hexview.HexView`. Clicking the box checks its radio button, and
one shared rule, ``.nv-open:has(.nv-pick-k:checked) .nv-pane-k{display:block}``, shows
the pane. Each pane has a "close" label (a radio button of the same group that no pane
answers to).

Why this and not the alternatives:

- **a script or a kernel round-trip** (an ipywidgets button per box, anywidget): works
  only while a kernel runs; a saved notebook, nbconvert, nbviewer and a notebook opened
  before it is run would show boxes that do nothing. A label and a radio button are
  plain HTML, so the same markup works in the live widget (an ``ipywidgets.HTML`` value)
  and in every stored output.
- **anchors and** ``:target``: JupyterLab handles in-page links itself (it scrolls, and
  the address is the notebook's, not the fragment), so ``:target`` never matches there;
  it also needs ids, which are global to the page.
- ``<details>``: opens in place, so a box drawn at an absolute position (a slot of a
  packet lane, a row of an SVG diagram) would push or overlap its neighbours, and any
  number would stay open at once.
- **a radio group**: one frame open per view, state kept while the reader clicks bytes
  inside the opened hex view (focus-based tricks lose it), no ids (the radio button is
  inside its label; the group's ``name`` is a hash of the view's content, stable across
  runs for nbval). ``:has()`` is in Chromium (JupyterLab, Notebook 7, VS Code's
  Electron), Firefox and Safari.
"""

from __future__ import annotations

import re

from nsqviz.widgets.style import SELECTED, esc, stable_digest

__all__ = ["MAX_OPEN_BYTES", "MAX_OPENERS", "OPEN_CSS", "Openers", "too_long"]

MAX_OPENERS = 96
"""Boxes per view that open a pane (the shared CSS has a rule for each)."""

MAX_OPEN_BYTES = 4096
"""A longer frame opens a note instead of its hex view (~200 bytes of HTML per byte:
every pane is in the page, opened or not)."""

OPEN_CSS = "<style>" + (
    ".nv-open .nv-pane{margin-top:6px}"
    ".nv-open label.nv-box{cursor:pointer}"
    f".nv-open label.nv-box:hover{{outline:2px dashed {SELECTED};z-index:3}}"
    ".nv-open .nv-close{cursor:pointer;margin-left:8px;text-decoration:underline}"
    + "".join(
        f".nv-open:has(.nv-pick-{k}:checked) .nv-pane-{k}{{display:block!important}}"
        f".nv-open:has(.nv-pick-{k}:checked) .nv-box-{k}{{outline:2px solid {SELECTED};z-index:2}}"
        for k in range(MAX_OPENERS)
    )
) + "</style>"

_STYLE = re.compile(r"<style>.*?</style>", re.S)

_HIDDEN_INPUT = "position:absolute;opacity:0;width:0;height:0;margin:0;pointer-events:none"
"""Inline, like each pane's ``display:none`` (which :data:`OPEN_CSS` overrides with
``!important``): where a page drops ``<style>`` blocks (JupyterLab sanitizes an untrusted
notebook's stored HTML) the boxes open nothing, but no radio button shows and no closed
pane spills open."""


class Openers:
    """The boxes and panes of one view; ``seed`` (its content) names its radio group."""

    def __init__(self, seed: str):
        self.group = "nv-" + stable_digest(seed, 12)
        self.panes: list[str] = []

    def box(self, k: int, content: str, *, style: str = "", title: str = "",
            cls: str = "") -> str:
        """A ``<label>`` that opens pane ``k`` (the caller adds pane ``k`` with :meth:`pane`)."""
        return (
            f'<label class="nv-box nv-box-{k} {cls}" style="{style}" title="{esc(title)}">'
            f'<input type="radio" name="{self.group}" class="nv-pick nv-pick-{k}" '
            f'style="{_HIDDEN_INPUT}">'
            f"{content}</label>"
        )

    def pane(self, k: int, markup: str, caption: str = "") -> None:
        """Pane ``k``: ``markup`` (a hex view; its ``<style>`` blocks are dropped, the
        view carries them once) under a caption with a close label."""
        close = (f'<label class="nv-close nv-muted"><input type="radio" name="{self.group}" '
                 f'class="nv-pick" style="{_HIDDEN_INPUT}">✕ close</label>')
        self.panes.append(
            f'<div class="nv-pane nv-pane-{k}" style="display:none"><div class="nv-muted">'
            f"{esc(caption)}{close}</div>{_STYLE.sub('', markup)}</div>"
        )

    def html(self) -> str:
        return "".join(self.panes)


def too_long(title: str, size: int, where: str) -> str:
    """What a pane holds instead of a hex view over :data:`MAX_OPEN_BYTES` bytes."""
    return (f'<div class="nv-muted">{esc(title)} · {size} bytes: too many to draw here; '
            f"{esc(where)}</div>")
