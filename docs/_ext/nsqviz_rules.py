"""The site's page of the capture doctor's rules: ``.. nsqviz-rules::`` documents every
registered rule (:func:`nsqviz.pipeline.definitions.rules`: the capture layer's, then
each protocol's) from its definition -- id, severity, what it detects, its words (what
happened and why it matters, what to change: its templates, each figure shown by name),
its thresholds with their reasons, its SQL -- and an example finding the doctor computes
at build time from the rule's real capture in ``data/doctor/`` (``expected.json`` names
which captures show which rule).

Nothing on the page is typed about a rule: a rule added to the registry gets its section,
and its example is what the doctor says about its capture in this build.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
EVIDENCE_SHOWN = 8
"""Evidence items the example shows (the summary counts them all)."""

_FIGURE = re.compile(r"\{\??(\w+)")


def example_captures(rule_id: str) -> list[str]:
    """The captures ``data/doctor/expected.json`` says show rule ``rule_id``, the one
    named after the rule first, then the rest of ``data/doctor/``, then older samples."""
    expected = json.loads((DATA / "doctor" / "expected.json").read_text())
    named = [name for name, what in expected.items()
             if any(f["rule"] == rule_id for f in what.get("findings", ()))]
    own = f"doctor/{rule_id.replace('.', '-')}.pcap"
    return sorted(named, key=lambda n: (n != own, not n.startswith("doctor/"), n))


@cache
def diagnosed(name: str) -> tuple[dict[str, Any], ...]:
    """The doctor's findings on capture ``data/<name>`` (each capture read once a build)."""
    from nsqviz.analysis.capture import Capture

    return tuple(Capture(str(DATA / name), fields=False).diagnose().to_dict("records"))


def example(rule_id: str) -> tuple[str, dict[str, Any]] | None:
    """(capture, finding): the first finding of rule ``rule_id`` in its captures (the
    first two tried), or ``None`` when they show none."""
    for name in example_captures(rule_id)[:2]:
        found = [f for f in diagnosed(name) if f["rule"] == rule_id]
        if found:
            return name, found[0]
    return None


def templates(rule: Any) -> tuple[str, str, str]:
    """A rule's summary, explanation and change with each figure shown by name (``‹n›``)
    and each threshold by its value -- the rule's words, as every finding fills them."""
    from nsqviz.doctor.words import word

    text = " ".join((rule.summary, rule.explanation, rule.change))
    names = {n: f"‹{n}›" for n in _FIGURE.findall(text) if n not in rule.by_name}
    words = word(rule, names)
    return words.summary, words.explanation, words.change


def _para(label: str, text: str) -> nodes.paragraph:
    para = nodes.paragraph()
    para += nodes.strong(text=label)
    para += nodes.Text(" " + text)
    return para


def _bullets(items: list[str]) -> nodes.bullet_list:
    out = nodes.bullet_list()
    for item in items:
        out += nodes.list_item("", nodes.paragraph(text=item))
    return out


def _table(head: list[str], rows: list[list[str]]) -> nodes.table:
    table = nodes.table(classes=["nsqviz-evidence"])
    group = nodes.tgroup(cols=len(head))
    table += group
    for _ in head:
        group += nodes.colspec(colwidth=1)
    thead, tbody = nodes.thead(), nodes.tbody()
    for cells, part in ((head, thead), *((r, tbody) for r in rows)):
        row = nodes.row()
        for cell in cells:
            row += nodes.entry("", nodes.paragraph(text=cell))
        part += row
    group += thead
    group += tbody
    return table


class RulesDirective(SphinxDirective):
    """``.. nsqviz-rules::``: a section per registered rule (see the module doc)."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from nsqviz.doctor.rule import Severity
        from nsqviz.pipeline.definitions import rules

        everything = list(rules().values())
        out: list[nodes.Node] = [_bullets([f"{r.id} ({r.severity}): {r.title}"
                                           for r in everything])]
        for rule in everything:
            # the words as written, no smart quotes: --max-msg-timeout is a flag, not a dash
            section = nodes.section(ids=[nodes.make_id("rule-" + rule.id)],
                                    classes=["nsqviz-rule"], support_smartquotes=False)
            section += nodes.title(text=rule.id)
            severity = (f"{Severity(rule.severity).value}, or as each finding decides"
                        if rule.severity_sql else Severity(rule.severity).value)
            section += _para("What it finds:", rule.title + ".")
            section += _para("Severity:", severity + ".")
            summary, explanation, change = templates(rule)
            section += _para("Why it matters:", explanation)
            section += _para("What to change:", change)
            section += _para("Its summary line:", summary)
            if rule.thresholds:
                section += nodes.paragraph("", "", nodes.strong(text="Thresholds:"))
                section += _bullets([str(t) for t in rule.thresholds])
            section += self._example(rule)
            section += nodes.paragraph("", "", nodes.strong(text="Its definition"),
                                       nodes.Text(" (SQL over the analyses' tables):"))
            sql = nodes.literal_block(rule.sql.strip(), rule.sql.strip(), language="sql")
            section += sql
            out.append(section)
        return out

    def _example(self, rule: Any) -> list[nodes.Node]:
        found = example(rule.id)
        if found is None:
            tried = ", ".join(example_captures(rule.id)[:2]) or "none"
            return [_para("Example:", f"none yet: the doctor finds no {rule.id} in the "
                                      f"captures that should show it ({tried}).")]
        name, finding = found
        para = nodes.paragraph()
        para += nodes.strong(text="Example")
        para += nodes.Text(" from the real capture ")
        para += nodes.literal(text=f"data/{name}")
        para += nodes.Text(", as ")
        para += nodes.literal(text=f"nsqviz doctor data/{name}")
        para += nodes.Text(" words it:")
        items = list(finding["evidence"] or ())
        t0 = items[0]["ts"] if items else 0.0
        rows = [[f"{i['ts'] - t0:+.3f} s", str(i["packet"] or ""),
                 (i["conn_id"] or "").rsplit("@", 1)[0], i["msg_id"] or "", i["what"] or ""]
                for i in items[:EVIDENCE_SHOWN]]
        quote = nodes.block_quote()
        quote += nodes.paragraph("", "", nodes.strong(
            text=f"{finding['severity']} {finding['rule']}: {finding['summary']}"))
        quote += nodes.paragraph(text=finding["explanation"])
        quote += _para("What to change:", finding["change"])
        if rows:
            more = len(items) - len(rows)
            quote += nodes.paragraph(text="Evidence (packets are Wireshark's frame numbers)"
                                          + (f", the first {len(rows)} of {len(items)} items"
                                             if more > 0 else "") + ":")
            quote += _table(["time", "packet", "connection", "message id", "what it shows"],
                            rows)
        return [para, quote]


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("nsqviz-rules", RulesDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
