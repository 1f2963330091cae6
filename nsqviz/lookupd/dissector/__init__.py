"""The lookup protocol's Wireshark dissector, generated from its grammar and tables
(``nsqviz wireshark`` writes it; :attr:`nsqviz.protocols.protocol.Protocol.dissector`):
``lookupd.lua`` (:mod:`~nsqviz.lookupd.dissector.script`, with ``engine.lua``).
"""

from __future__ import annotations

from nsqviz.protocols.protocol import LuaScript

__all__ = ["DISSECTOR"]

DISSECTOR = LuaScript("nsqviz.lookupd.dissector.script")
"""The lookup protocol's dissector, ``lookupd.lua``, as
:attr:`nsqviz.lookupd.protocol.LookupdProtocol.dissector`."""
