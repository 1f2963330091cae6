"""A small table view (the in-flight messages, a transcript summary).

Rows are plain dicts; the caller decides the columns and formats the values.
"""

from __future__ import annotations

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
                "<tr>" + "".join(f'<td class="nv-mono">{esc(r.get(c, ""))}</td>'
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
            lines.append("  ".join(f"{c}={r.get(c, '')}" for c in self.columns))
        return "\n".join(lines)

