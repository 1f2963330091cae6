"""The doctor's views, for the engines that run the analyses: each rule's findings, and
the one ``findings`` table they make together.

:func:`views` is called by :mod:`nsqviz.pipeline.definitions` with every rule of the
registry (the capture layer's and each protocol's), after the analyses they read. Each
rule's ``sql`` becomes a step view of its findings (:attr:`~nsqviz.doctor.rule.Rule.
view`); ``rule_findings`` joins them with each rule's id and severity; ``findings`` is
that with the words added by one Python function (:func:`nsqviz.doctor.words.worded`,
through :attr:`nsqviz.sql.View.python`) -- so the same rows, words included, come out
of DuckDB in-process and of the pipeline.
"""

from __future__ import annotations

from collections.abc import Iterable

from nsqviz.doctor.rule import FRAME_FILES, FRAME_FILES_SQL, RULE_COLUMNS, Rule, Severity
from nsqviz.sql import View

__all__ = ["RULE_FINDINGS", "views"]

RULE_FINDINGS = "rule_findings"
"""The step view of every rule's findings, before their words."""


def views(rules: Iterable[Rule], words: str) -> tuple[View, ...]:
    """The views of ``rules`` (in order; ids unique): the files of frames, each rule's
    findings, and ``findings`` -- worded by ``words`` (``module:function`` taking the
    rows of ``rule_findings``). Nothing when there is no rule."""
    rules = list(rules)
    if not rules:
        return ()
    seen: set[str] = set()
    out = [View(FRAME_FILES, FRAME_FILES_SQL, """The file of each packet of a frame, by
connection, the frame's time and the packet number (a doctor's evidence names a packet with
its file).""", step=True)]
    selects = []
    for rule in rules:
        if rule.id in seen:
            raise ValueError(f"two rules are called {rule.id!r}")
        seen.add(rule.id)
        if rule.across_servers and FRAME_FILES in rule.sql:
            raise ValueError(f"{rule.id} combines brokers: it reads views that built their"
                             f" evidence per broker, not {FRAME_FILES} (the frames')")
        out.extend(rule.steps)
        out.append(View(rule.view, rule.sql, f"The findings of {rule.id}: {rule.title}",
                        step=True, across_servers=rule.across_servers))
        severity = rule.severity_sql or f"'{Severity(rule.severity).value}'"
        selects.append(f"SELECT '{rule.id}' AS rule, CAST({severity} AS STRING) AS severity, "
                       f"{', '.join(RULE_COLUMNS)} FROM {rule.view}")
    across = any(r.across_servers for r in rules)
    out.append(View(RULE_FINDINGS, "\nUNION ALL\n".join(selects), """Every rule's
findings: its id and severity, then the columns each rule gives.""", step=True,
                    across_servers=across))
    out.append(View("findings", f"SELECT * FROM {RULE_FINDINGS}", """One row per finding of
the doctor: its rule and severity, the broker and connection, its evidence (time, file,
packet, connection, message id, what it shows), its figures, and its words -- summary,
explanation, what to change, the thresholds that decided it.""",
                    across_servers=across, python=words))
    return tuple(out)
