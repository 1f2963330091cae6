"""The HTTP APIs' doctor rules: declarative definitions over the analyses' tables
(:class:`nsqviz.doctor.rule.Rule`), kept with the protocol and run by the same engines as
its analyses into the ``findings`` table (:attr:`nsqviz.protocols.protocol.Protocol.rules`;
:mod:`nsqviz.doctor` says how a rule is written).

None yet.
"""

from __future__ import annotations

from nsqviz.doctor.rule import Rule

__all__ = ["RULES"]

RULES: tuple[Rule, ...] = ()
"""Every rule of the protocol, in the order its findings are listed."""
