"""The HTTP APIs' doctor rules: declarative definitions over the analyses' tables, each
a view (:class:`nsqviz.sql.View`) whose rows are findings, kept with the protocol and run
by the same engines as its analyses (:attr:`nsqviz.protocols.Protocol.rules`).

None yet: ``nsqviz doctor`` fills this catalogue.
"""

from __future__ import annotations

from nsqviz.sql import View

__all__ = ["RULES"]

RULES: tuple[View, ...] = ()
"""Every rule of the protocol, in the order its findings are listed."""
