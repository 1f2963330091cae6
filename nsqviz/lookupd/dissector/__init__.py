"""The lookup protocol's Wireshark dissector, generated from its grammar and tables
(``nsqviz wireshark`` writes it; :attr:`nsqviz.protocols.Protocol.dissector`):
``lookupd.lua`` (:mod:`~nsqviz.lookupd.dissector.script`, with ``engine.lua``).

The generator is imported when a dissector is written, not with the protocol.
"""

from __future__ import annotations

from nsqviz.protocols import Dissector, Protocol

__all__ = ["DISSECTOR", "LookupdDissector"]


class LookupdDissector(Dissector):
    """``lookupd.lua``, nothing beside it."""

    def files(self, protocol: Protocol) -> dict[str, str]:
        from nsqviz.lookupd.dissector.script import render

        return {f"{protocol.name}.lua": render(protocol)}


DISSECTOR = LookupdDissector()
"""The lookup protocol's dissector, as :attr:`nsqviz.lookupd.protocol.LookupdProtocol.
dissector`."""
