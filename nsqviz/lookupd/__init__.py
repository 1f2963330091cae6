"""The ``"  V1"`` protocol nsqd speaks to nsqlookupd: wire format, tables and codec.

* :mod:`~nsqviz.lookupd.grammar`: the protocol's bytes (construct) and error table;
* :mod:`~nsqviz.lookupd.codec`: sans-IO connections for both roles, the state table;
* :mod:`~nsqviz.lookupd.observer`, :mod:`~nsqviz.lookupd.protocol`,
  :mod:`~nsqviz.lookupd.fields`: the protocol as captures, views, Spark and Wireshark
  see it (a registered :class:`nsqviz.protocols.Protocol`).

The nsqlookupd-compatible service that speaks it is :mod:`nsqviz.servers.nsqlookupd`.
"""
