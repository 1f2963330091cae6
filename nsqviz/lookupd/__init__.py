"""The ``"  V1"`` protocol nsqd speaks to nsqlookupd: wire format, tables and codec.

* :mod:`~nsqviz.lookupd.grammar`: the protocol's bytes (construct) and its error table
  (:class:`~nsqviz.lookupd.grammar.Refusal`);
* :mod:`~nsqviz.lookupd.events`: what happens on a connection;
* :mod:`~nsqviz.lookupd.states`: the state table;
* :mod:`~nsqviz.lookupd.framing`: where units end;
* :mod:`~nsqviz.lookupd.codec`: sans-IO connections for both roles
  (:class:`~nsqviz.lookupd.codec.ServerConnection`,
  :class:`~nsqviz.lookupd.codec.ClientConnection`) on :mod:`nsqviz.sansio`;
* :mod:`~nsqviz.lookupd.observer`, :mod:`~nsqviz.lookupd.protocol`,
  :mod:`~nsqviz.lookupd.fields`: the protocol as captures, views, Spark and Wireshark
  see it (a registered :class:`nsqviz.protocols.protocol.Protocol`).

The nsqlookupd-compatible service that speaks it is :mod:`nsqviz.servers.nsqlookupd`.
"""
