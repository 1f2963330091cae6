"""An nsqlookupd-compatible discovery service, on the ``"  V1"`` codec of :mod:`nsqviz.lookupd`.

* :mod:`~nsqviz.discovery.registry`: the registration database;
* :mod:`~nsqviz.discovery.server` / :mod:`~nsqviz.discovery.http`: the asyncio service
  (``nsqviz lookupd`` on the command line, :class:`EmbeddedLookupd` in-process).
"""

from nsqviz.discovery.server import EmbeddedLookupd, Lookupd, LookupdOptions

__all__ = ["EmbeddedLookupd", "Lookupd", "LookupdOptions"]
