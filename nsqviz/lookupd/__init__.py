"""An nsqlookupd-compatible discovery service and the ``"  V1"`` protocol nsqd speaks to it.

* :mod:`~nsqviz.lookupd.grammar`: the protocol's bytes (construct) and error table;
* :mod:`~nsqviz.lookupd.codec`: sans-IO connections for both roles, the state table;
* :mod:`~nsqviz.lookupd.registry`: the registration database;
* :mod:`~nsqviz.lookupd.server` / :mod:`~nsqviz.lookupd.http`: the asyncio service
  (``nsqviz lookupd`` on the command line, :class:`EmbeddedLookupd` in-process).
"""

from nsqviz.lookupd.server import EmbeddedLookupd, Lookupd, LookupdOptions

__all__ = ["EmbeddedLookupd", "Lookupd", "LookupdOptions"]
