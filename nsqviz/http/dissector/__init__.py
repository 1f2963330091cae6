"""The HTTP APIs' Wireshark dissector: Wireshark's own ``http``, told the APIs' ports
(:attr:`nsqviz.protocols.protocol.Protocol.dissector`): ``http.lua``
(:mod:`~nsqviz.http.dissector.script`, with ``engine.lua``).
"""

from __future__ import annotations

from nsqviz.protocols.protocol import LuaScript

__all__ = ["DISSECTOR"]

DISSECTOR = LuaScript("nsqviz.http.dissector.script")
"""``http.lua``, as :attr:`nsqviz.http.protocol.HttpProtocol.dissector`."""
