"""The doctor's rules about the TCP layer and the capture itself -- a peer that stopped
reading (zero windows), retransmissions, resets, what the snaplen cut, connections whose
start was not captured, bytes never captured -- whatever the protocol
(:mod:`nsqviz.doctor` says what a rule is and how to add one).

None yet: each is a :class:`~nsqviz.doctor.rule.Rule` added to :data:`RULES`, over the
capture layer's analyses (:mod:`nsqviz.capture.analyses`) and the TCP tables, which
name no protocol.
"""

from __future__ import annotations

from nsqviz.doctor.rule import Rule

__all__ = ["RULES"]

RULES: tuple[Rule, ...] = ()
"""The capture layer's rules, in the order their findings are listed."""
