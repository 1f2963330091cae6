"""NSQ's Wireshark dissector, generated from its grammar and tables (``nsqviz wireshark``
writes it; :attr:`nsqviz.protocols.protocol.Protocol.dissector`).

* :mod:`~nsqviz.nsq.dissector.spec` -- what the dissector needs to know, read off the
  grammar, the command table and the framing rule;
* :mod:`~nsqviz.nsq.dissector.probes` -- nsqd's answers to malformed input, probed from
  the codec rather than re-typed;
* :mod:`~nsqviz.nsq.dissector.script` -- ``nsq.lua``: those tables in Lua, the fields of
  the field registry, and ``engine.lua`` (framing, reassembly, pairing) that reads them;
* :mod:`~nsqviz.nsq.dissector.tshark_records` -- what tshark shows, read back as
  ``nsqviz decode`` rows, for the parity tests.
"""

from __future__ import annotations

from nsqviz.protocols.protocol import LuaScript

__all__ = ["DISSECTOR"]

DISSECTOR = LuaScript("nsqviz.nsq.dissector.script")
"""NSQ's dissector, ``nsq.lua``, as :attr:`nsqviz.nsq.protocol.NsqProtocol.dissector`."""
