"""The capture doctor's definitions: what a rule is, what a finding is, and how a finding
reads -- shared by every protocol and the capture layer.

A **rule** (:class:`~nsqviz.doctor.rule.Rule`) is declarative: a stable id
(``nsq.msg-timeout``), a :class:`~nsqviz.doctor.rule.Severity`, its **definition** -- an
SQL query over the analyses' tables, in the analyses' dialect (:mod:`nsqviz.sql`), whose
rows are its findings -- its **thresholds** (:class:`~nsqviz.doctor.rule.Threshold`:
named constants, each with the reason for its value), and its **words**: templates of a
one-line summary with the figures, what happened and why it matters, and what to
change, filled from each finding's figures (:mod:`nsqviz.doctor.words`).

Rules are kept with what they judge, and found through the same registry as the
analyses:

===================================  ===============================================
``nsqviz/<protocol>/rules.py``       a protocol's rules, its ``RULES``, read through
                                     :attr:`nsqviz.protocols.protocol.Protocol.rules`
``nsqviz/capture/rules.py``          the rules of the TCP layer and of the capture
                                     itself (windows, retransmissions, resets, snaplen)
===================================  ===============================================

:mod:`nsqviz.pipeline.definitions` collects them with the analyses; each becomes a
view, and :func:`~nsqviz.doctor.views.views` joins their rows into the one ``findings``
table (:data:`~nsqviz.doctor.rule.FINDING_COLUMNS`), with each finding's words added by
one function (:func:`~nsqviz.doctor.words.worded`). So the doctor runs wherever the
analyses run -- ``nsqviz doctor`` and ``cap.diagnose()`` in-process on DuckDB, and
``nsqviz pipeline``, whose per-broker Spark tasks run the same SQL and write the same
``findings`` table.

**Adding a rule** (TCP, lookupd, TubeMQ, ...): in the ``rules.py`` of what it judges,
write a :class:`~nsqviz.doctor.rule.Rule` whose ``sql`` gives one row per finding with
the columns :data:`~nsqviz.doctor.rule.RULE_COLUMNS` names -- the evidence built with
:func:`~nsqviz.doctor.rule.evidence` and :data:`~nsqviz.doctor.rule.EVIDENCE`, the
figures with :func:`~nsqviz.doctor.rule.figures` -- and add it to that module's
``RULES``. Its words name its figures and thresholds as ``{name}``. A rule that needs
a table no analysis gives adds that view to its protocol's analyses (``channel_depth``,
``consumer_flow`` for NSQ's RDY rules) -- in Python when SQL says it badly
(:attr:`nsqviz.sql.View.python`: the ``guide`` view runs ``nsqviz conformance``'s checks
for ``nsq.guide``). A rule that reads several brokers' rows (one client's connections to
several nsqds) says ``across_servers``: it then reads views only, never the frames, and
builds each broker's part and evidence in ``steps`` of its own (as ``nsq.rdy-hoarding``).
``tests/doctor/test_rules.py`` holds every registered rule to its captures in
``data/doctor/`` (``expected.json``) and to the healthy captures (no warning or error).
"""

from nsqviz.doctor.rule import (
    EVIDENCE,
    FINDING_COLUMNS,
    RULE_COLUMNS,
    Rule,
    Severity,
    Threshold,
    evidence,
    figures,
)

__all__ = [
    "EVIDENCE",
    "FINDING_COLUMNS",
    "RULE_COLUMNS",
    "Rule",
    "Severity",
    "Threshold",
    "evidence",
    "figures",
]
