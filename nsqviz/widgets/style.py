"""Colours, CSS and small HTML helpers shared by every view.

Every view renders to a self-contained HTML string (its CSS inline in a ``<style>``
block scoped under ``.nsqviz``), because the same string is used three ways: as the
value of an ``ipywidgets.HTML`` in a live kernel, as the ``text/html`` a notebook saved
with outputs shows on GitHub, and as what the tests and nbval compare. So nothing in
it may be random: no generated ids, no timestamps the caller did not pass in. Colours
come from :mod:`nsqviz.palette`, the one map every view and plot reads.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from typing import Any

from nsqviz.compactjson import SEPARATORS

__all__ = ["CSS", "SELECTED", "Live", "Static", "StaticView", "esc", "once", "short_value",
           "stable_digest", "unique_ids"]

SELECTED = "#2563eb"  # the outline of a selected byte, row or box: seen on fills and on
# a dark theme's background alike


def _var(jp: str, vscode: str, light: str) -> str:
    """A theme colour: JupyterLab's variable, else VS Code's, else the light value (stored
    HTML read without a theme: nbconvert, nbviewer, GitHub)."""
    return f"var(--jp-{jp},var(--vscode-{vscode},{light}))"


INK = _var("content-font-color1", "editor-foreground", "#1f2937")
MUTED = _var("content-font-color2", "descriptionForeground", "#6b7280")
FAINT = _var("content-font-color3", "disabledForeground", "#9ca3af")
PAPER = _var("layout-color1", "editor-background", "#fff")
RULE = _var("border-color2", "editorWidget-border", "#e5e7eb")
ON_FILL = "#111827"
"""Text drawn on a pastel fill (a byte, a chip, a frame span) stays dark in every theme:
the fill is the same in light and dark, so its text must be too."""

# Every rule is scoped ".nsqviz <class> <element>" (two classes): more specific than a
# host's own (JupyterLab's ".jp-RenderedHTMLCommon td{text-align:right}"), so a table's
# cells say their alignment themselves and line up with their headers.
CSS = f"""
<style>
.nsqviz{{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,sans-serif;font-size:13px;
 color:{INK};line-height:1.35;margin:4px 0}}
.nsqviz .nv-title{{font-weight:600;margin:2px 0 6px}}
.nsqviz .nv-muted{{color:{MUTED};font-weight:400}}
.nsqviz .nv-err{{color:#dc2626;font-weight:600}}
.nsqviz code,.nsqviz pre,.nsqviz .nv-mono{{font-family:"JetBrains Mono","DejaVu Sans Mono",Menlo,
 Consolas,monospace;font-size:12px}}
.nsqviz .nv-hexwrap{{display:flex;gap:18px;align-items:flex-start;flex-wrap:wrap}}
.nsqviz .nv-hex{{border-collapse:collapse}}
.nsqviz .nv-hex td{{padding:0;vertical-align:top;text-align:left}}
.nsqviz .nv-off{{color:{FAINT};padding-right:10px!important;user-select:none}}
.nsqviz .nv-b{{display:inline-block;width:2.2ch;text-align:center;margin:1px 0;padding:1px 1px;
 color:{ON_FILL}}}
.nsqviz .nv-a{{display:inline-block;width:1.1ch;text-align:center;margin:1px 0;padding:1px 0;
 color:{ON_FILL}}}
.nsqviz .nv-gap{{display:inline-block;width:1ch}}
.nsqviz .nv-bad{{outline:2px solid #dc2626;outline-offset:-2px}}
.nsqviz .nv-ascii{{padding-left:14px!important}}
.nsqviz .nv-legend{{display:flex;flex-wrap:wrap;gap:4px 6px;margin:0 0 6px}}
.nsqviz .nv-chip{{border-radius:3px;padding:0 5px;font-size:11px;border:1px solid rgba(0,0,0,.08);
 color:{ON_FILL}}}
.nsqviz .nv-tree{{font-size:12px;min-width:280px}}
.nsqviz .nv-tree ul{{list-style:none;margin:0;padding-left:14px}}
.nsqviz .nv-tree>ul{{padding-left:0}}
.nsqviz .nv-tree li{{margin:1px 0;white-space:nowrap}}
.nsqviz .nv-sw{{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;
 vertical-align:-1px;border:1px solid rgba(0,0,0,.15)}}
.nsqviz .nv-kind{{color:{MUTED};font-size:11px;margin-left:4px}}
.nsqviz .nv-range{{color:{FAINT};font-size:11px;margin-left:4px}}
.nsqviz .nv-val{{margin-left:6px;color:{INK}}}
.nsqviz table.nv-table{{border-collapse:collapse;font-size:12px}}
.nsqviz table.nv-table th{{text-align:left;border-bottom:1px solid {RULE};padding:2px 10px 2px 0;
 color:{INK}}}
.nsqviz table.nv-table td{{padding:2px 10px 2px 0;border-bottom:1px solid {RULE}}}
.nsqviz table.nv-table td,.nsqviz table.nv-sticky td{{text-align:left}}
.nsqviz .nv-card{{border:1px solid {RULE};border-radius:6px;padding:8px 10px;margin:4px 0;
 background:{PAPER};max-width:100%;box-sizing:border-box;overflow-x:auto}}
.nsqviz svg.nv-seq,.nsqviz svg.nv-fsm{{max-width:100%;height:auto;background:#fff;
 border-radius:4px}}
.nsqviz .nv-grid{{display:flex;gap:14px;flex-wrap:wrap;align-items:flex-start}}
</style>
"""


_STYLE = re.compile(r"<style>.*?</style>", re.S)
_shown: set[str] = set()


def once(markup: str) -> str:
    """``markup`` without the ``<style>`` blocks this process has already displayed.

    A notebook's outputs share one page, so each view's CSS is needed once: the first
    output that uses it carries it and later outputs do not (a saved notebook holds each
    block once instead of in every output). Every display path (``_repr_html_``,
    :class:`Static`, :class:`Live`) goes through here; ``html()`` itself stays
    self-contained for widgets and files."""

    def keep_first(match: re.Match[str]) -> str:
        block = match.group(0)
        if block in _shown:
            return ""
        _shown.add(block)
        return block

    return _STYLE.sub(keep_first, markup)


class Static:
    """An HTML picture with a text form, displayed with :func:`once`'s shared CSS."""

    def __init__(self, markup: str, text: str = ""):
        self.markup, self.text = markup, text or _STYLE.sub("", markup)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/html": once(self.markup), "text/plain": self.text}


class Live:
    """A live ipywidget that also stores a complete static picture and a text form.

    Where widgets run (JupyterLab, Notebook 7, VS Code) the front end shows the widget;
    a saved notebook read without a kernel (GitHub, nbviewer, nbconvert, a text export)
    shows ``markup`` and ``text`` instead of ipywidgets' bare ``VBox(children=...)``."""

    def __init__(self, widget: Any, markup: str, text: str):
        self.widget, self.markup, self.text = widget, markup, text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(self.widget._repr_mimebundle_() or {})
        bundle["text/html"] = once(self.markup)
        bundle["text/plain"] = self.text
        return bundle

    def __repr__(self) -> str:
        return self.text


_VARYING = re.compile(r"\b[0-9a-f]{16}\b|\d")


def unique_ids(svg: str) -> str:
    """``svg`` with its ``@ID@`` placeholders replaced by a hash of its content.

    SVG ids are global in an HTML page: two diagrams in one notebook (or two notebooks
    open in one JupyterLab) sharing ``marker`` ids take each other's arrowheads, and a
    hidden one makes them vanish. A content hash is unique per picture and the same on
    every run (nbval compares it; nothing random). Numbers and message ids, which vary
    from run to run, are left out of the hash; the labels and their order make it."""
    return svg.replace("@ID@", stable_digest(svg, 10))


def stable_digest(text: str, length: int) -> str:
    """A hash of ``text`` without its numbers and message ids (which vary from run to
    run): a name unique to a picture and the same on every run."""
    return hashlib.sha1(_VARYING.sub("", text).encode()).hexdigest()[:length]


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def short_value(value: Any, limit: int = 40) -> str:
    """A one-line rendering of a parsed value for labels and tree rows."""
    if isinstance(value, bytes | bytearray):
        value = bytes(value)
        text = repr(value)
    elif isinstance(value, dict):
        clean = {k: v for k, v in value.items() if not str(k).startswith("_")}
        try:
            text = json.dumps(clean, separators=SEPARATORS, default=repr)
        except (TypeError, ValueError):
            text = repr(clean)
    elif isinstance(value, str):
        text = repr(value)
    else:
        text = str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


class StaticView:
    """What every view shares: it *is* its HTML (``html()``) and its text (``text()``).

    A notebook shows the HTML (live, saved, or on GitHub), ``repr`` and the tests read
    the text, and ``widget()`` wraps the same HTML for an ipywidgets layout."""

    def html(self) -> str:  # pragma: no cover - each view defines it
        raise NotImplementedError

    def text(self) -> str:  # pragma: no cover - each view defines it
        raise NotImplementedError

    def _repr_html_(self) -> str:
        return once(self.html())

    def __repr__(self) -> str:
        return self.text()

    def widget(self) -> Any:
        import ipywidgets

        return ipywidgets.HTML(self.html())
