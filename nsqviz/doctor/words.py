"""How a finding reads: the one function that turns a finding's row into its words.

:func:`word` fills a rule's templates from a finding's figures; :func:`worded` adds the
words, and what the evidence names (its packets and their files, its connections and
message ids), to rows of the ``findings`` table. It is what the ``findings`` view runs
(:attr:`nsqviz.sql.View.python`), so ``nsqviz doctor``, ``cap.diagnose()`` and the
``findings`` table ``nsqviz pipeline`` writes say the same, word for word.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping
from typing import Any, NamedTuple

from nsqviz.doctor.rule import FINDING_COLUMNS, Rule, Severity

__all__ = ["Words", "at_least", "canonical_figures", "connection_of", "ordered", "schema",
           "word", "worded"]


class Words(NamedTuple):
    """A finding's words."""

    summary: str
    explanation: str
    change: str
    thresholds: list[str]


class _Figures(dict[str, Any]):
    """A finding's figures for :meth:`str.format_map`: a figure the finding has no value
    for reads ``?`` (an engine leaves a null out of its JSON)."""

    def __missing__(self, key: str) -> str:
        return "?"


_FORMATTER = string.Formatter()
_WHEN = re.compile(r"\{\?(\w+)\}(.*?)\{/\}", re.S)


def _fill(template: str, values: _Figures) -> str:
    """``template`` filled from ``values``: ``{name}`` or ``{name:spec}`` is a figure (a
    spec meant for a number, ``:.3f``, is dropped for a figure that is not one, so ``?``
    still reads); ``{name:/message/messages}`` is a count with its noun, singular or
    plural; ``{?name}...{/}`` is kept only when figure ``name`` is there and not 0, false
    or empty -- the choices a template makes."""
    template = _WHEN.sub(lambda m: m.group(2) if values.get(m.group(1)) else "", template)
    out = []
    for text, name, spec, conversion in _FORMATTER.parse(template):
        out.append(text)
        if name is None:
            continue
        value, spec = values[name], spec or ""
        if conversion:
            value = _FORMATTER.convert_field(value, conversion)
        if spec.startswith("/"):
            one, _, many = spec[1:].partition("/")
            out.append(f"{value} {one if value == 1 else many}")
            continue
        if spec and not isinstance(value, int | float):
            spec = ""
        out.append(format(value, spec))
    return "".join(out)


def word(rule: Rule, figures: Mapping[str, Any]) -> Words:
    """The words of one finding of ``rule`` with these ``figures`` (its thresholds are
    figures too, by name)."""
    values = _Figures({**rule.by_name, **figures})
    return Words(_fill(rule.summary, values), _fill(rule.explanation, values),
                 _fill(rule.change, values), [str(t) for t in rule.thresholds])


def canonical_figures(text: str | None) -> dict[str, Any]:
    """A finding's figures from their JSON, nulls left out (so the engines, which write
    a null or leave it out, agree)."""
    if not text:
        return {}
    return {k: v for k, v in json.loads(text).items() if v is not None}


def connection_of(conn_id: str | None) -> str | None:
    """A connection id's ``client->server`` (the id is that and its start time)."""
    return None if conn_id is None else conn_id.rsplit("@", 1)[0]


def schema() -> Any:
    """The ``findings`` table's Arrow schema (:data:`nsqviz.doctor.rule.FINDING_COLUMNS`)."""
    import pyarrow as pa

    item = pa.struct([("ts", pa.float64()), ("file", pa.string()), ("packet", pa.int64()),
                      ("conn_id", pa.string()), ("msg_id", pa.string()),
                      ("what", pa.string())])
    types = {"ts": pa.float64(), "end_ts": pa.float64(), "evidence": pa.list_(item),
             "connections": pa.list_(pa.string()), "packets": pa.list_(pa.int64()),
             "packet_files": pa.list_(pa.string()), "msg_ids": pa.list_(pa.string()),
             "thresholds": pa.list_(pa.string())}
    return pa.schema([(name, types.get(name, pa.string())) for name, _ in FINDING_COLUMNS])


def worded(rows: Any, rules: Mapping[str, Rule]) -> Any:
    """Rows of the rules' findings (``rule``, ``severity`` and :data:`~nsqviz.doctor.rule.
    RULE_COLUMNS`, an Arrow table) as rows of the ``findings`` table: their figures in
    one form, their words, and what their evidence names."""
    import pyarrow as pa

    out: dict[str, list[Any]] = {name: [] for name, _ in FINDING_COLUMNS}
    for row in rows.to_pylist():
        rule = rules[row["rule"]]
        items = row["evidence"] or []
        figures = canonical_figures(row["figures"])
        words = word(rule, figures)
        seen: dict[tuple[Any, Any], None] = {}
        for item in items:
            if item["packet"] is not None:
                seen.setdefault((item["file"], item["packet"]), None)
        values = {
            **{k: row[k] for k in ("rule", "severity", "server", "conn_id", "ts",
                                   "evidence")},
            "figures": json.dumps(figures, sort_keys=True, separators=(",", ":")),
            "connection": connection_of(row["conn_id"]),
            "connections": list(dict.fromkeys(
                c for c in (connection_of(i["conn_id"]) for i in items) if c)),
            "end_ts": max((i["ts"] for i in items if i["ts"] is not None),
                          default=row["ts"]),
            "packets": [p for _, p in seen], "packet_files": [f for f, _ in seen],
            "msg_ids": list(dict.fromkeys(i["msg_id"] for i in items if i["msg_id"])),
            "summary": words.summary, "explanation": words.explanation,
            "change": words.change, "thresholds": words.thresholds,
        }
        for name, column in out.items():
            column.append(values[name])
    return pa.Table.from_pydict(out, schema=schema())


def ordered(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings (rows as dicts) most severe first, then in time, rule and connection
    order: how ``nsqviz doctor`` lists them and ``cap.diagnose()`` gives them."""
    return sorted(findings, key=lambda f: (Severity(f["severity"]).rank, f["ts"],
                                           f["rule"], f["connection"] or ""))


def at_least(findings: list[dict[str, Any]], severity: Severity) -> list[dict[str, Any]]:
    """The findings at ``severity`` or more severe (``warning``: warnings and errors)."""
    return [f for f in findings if Severity(f["severity"]).rank <= severity.rank]
