"""The ``"  V1"`` protocol's wire constants, without construct: the magic, the verbs, how
nsqlookupd's answers begin.

The grammar (:mod:`nsqviz.lookupd.grammar`), the framing and the protocol's detection
(:mod:`nsqviz.lookupd.protocol`) read these, so that offering a capture's flows to this
protocol builds no grammar.
"""

from __future__ import annotations

__all__ = ["ANSWER_STARTS", "ERROR_PREFIX", "MAGIC_V1", "VERBS"]

MAGIC_V1 = b"  V1"
"""The magic nsqd sends first; anything else is answered ``E_BAD_PROTOCOL`` and closed."""

VERBS = ("IDENTIFY", "REGISTER", "UNREGISTER", "PING")
"""Every command of the lookup protocol, by verb (the grammar's ``COMMANDS``, in order)."""

ERROR_PREFIX = b"E_"
"""How every error answer starts (each error code does)."""

ANSWER_STARTS = (b"OK", b"{", ERROR_PREFIX)
"""How every answer nsqlookupd sends begins: ``OK``, IDENTIFY's JSON object, an error --
what detection and a resynchronisation look for."""
