"""What ``cap.diagnose()`` returns: the doctor's findings as a DataFrame that a notebook
shows as the doctor's report.

:class:`Findings` is a :class:`pandas.DataFrame` of the ``findings`` table's rows
(:data:`nsqviz.doctor.rule.FINDING_COLUMNS`) -- filter it, count it, read its columns as
any DataFrame -- whose HTML is the report of
:class:`~nsqviz.widgets.findings.FindingsReport` (cards most severe first, a timeline,
packet numbers that open the replay) instead of a table; its text is what ``nsqviz
doctor`` prints, which names no file by its full path (a notebook's stored text reads
the same wherever the capture lies). A DataFrame derived from it (a filter, a column
selection) is a plain DataFrame: it may lack the columns the report reads.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from nsqviz.doctor.rule import FINDING_COLUMNS, Severity
from nsqviz.doctor.text import finding_text, tally
from nsqviz.widgets.findings import FindingsReport
from nsqviz.widgets.style import once

__all__ = ["Findings"]


class Findings(pd.DataFrame):  # type: ignore[misc]  # pandas is read untyped (Any)
    """The doctor's findings of a capture of ``files`` spanning ``span`` (its first and
    last record's times), one row per finding."""

    _metadata = ["files", "span"]

    @property
    def _constructor(self) -> Any:
        """What pandas builds a derived DataFrame with: a plain one."""
        return pd.DataFrame

    @classmethod
    def of(cls, rows: list[dict[str, Any]], files: list[str],
           span: tuple[float, float]) -> Findings:
        """The findings ``rows`` (in the order given) of a capture of ``files``."""
        out = cls(rows, columns=[name for name, _ in FINDING_COLUMNS])
        out.files, out.span = list(files), span
        return out

    def report(self) -> FindingsReport:
        """The report these findings render as."""
        return FindingsReport(self.to_dict("records"), self.files, self.span)

    def __repr__(self) -> str:
        rows = self.to_dict("records")
        several = len({f for r in rows for f in r["packet_files"]}) > 1
        return "\n".join(finding_text(r, self.span[0], several, 100) for r in rows) \
            + tally(rows, rows, Severity.INFO)

    def _repr_html_(self) -> str:
        return once(self.report().html())
