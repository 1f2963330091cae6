"""An nsqlookupd-compatible discovery service, on the ``"  V1"`` codec of :mod:`nsqviz.lookupd`.

* :mod:`~nsqviz.servers.nsqlookupd.registry`: the registration database;
* :mod:`~nsqviz.servers.nsqlookupd.server` / :mod:`~nsqviz.servers.nsqlookupd.http`: the asyncio
  service (``nsqviz lookupd`` on the command line, :class:`EmbeddedLookupd` in-process).
"""

from nsqviz.servers.nsqlookupd.server import EmbeddedLookupd, Lookupd, LookupdOptions

__all__ = ["EmbeddedLookupd", "Lookupd", "LookupdOptions"]
