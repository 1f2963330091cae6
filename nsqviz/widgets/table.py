"""A small table view (the in-flight messages, a transcript summary).

Rows are plain dicts; the caller decides the columns and formats the values. A value
that is a list is shown one item a line; text between backticks is shown as code (the
way the course's markdown writes a name), not with its backticks.
"""

from __future__ import annotations

import re
from typing import Any

from nsqviz.widgets.style import CSS, StaticView, esc

__all__ = ["TableView"]


class TableView(StaticView):
    def __init__(self, columns: list[str], rows: list[dict[str, Any]], title: str = "",
                 empty: str = "(none)"):
        self.columns = list(columns)
        self.rows = list(rows)
        self.title = title
        self.empty = empty

    def html(self, *, with_css: bool = True) -> str:
        title = (
            f'<div class="nv-title">{esc(self.title)} '
            f'<span class="nv-muted">· {len(self.rows)}</span></div>'
            if self.title else ""
        )
        if not self.rows:
            body = f'<div class="nv-muted">{esc(self.empty)}</div>'
        else:
            head = "".join(f"<th>{esc(c)}</th>" for c in self.columns)
            rows = "".join(
                "<tr>" + "".join(f'<td class="nv-mono">{_cell(r.get(c, ""))}</td>'
                                 for c in self.columns) + "</tr>"
                for r in self.rows
            )
            body = f'<table class="nv-table"><tr>{head}</tr>{rows}</table>'
        return f'{CSS if with_css else ""}<div class="nsqviz nsqviz-table">{title}{body}</div>'

    def text(self) -> str:
        lines = [self.title] if self.title else []
        if not self.rows:
            lines.append(self.empty)
        for r in self.rows:
            lines.append("  ".join(f"{c}={_plain(r.get(c, ''))}" for c in self.columns))
        return "\n".join(lines)


_CODE = re.compile(r"`([^`]+)`")


def _cell(value: Any) -> str:
    """A value as HTML: a list one item a line, backticked text as code."""
    items = value if isinstance(value, list) else [value]
    return "<br>".join(_CODE.sub(r"<code>\1</code>", esc(item)) for item in items)


def _plain(value: Any) -> str:
    """A value as text: a list's items joined by " · ", backticks dropped."""
    items = value if isinstance(value, list) else [value]
    return " · ".join(_CODE.sub(r"\1", str(item)) for item in items)

