"""An nsqlookupd-compatible discovery service and the ``"  V1"`` protocol nsqd speaks to it.

* :mod:`~nsqviz.lookupd.grammar`: the protocol's bytes (construct) and error table;
* :mod:`~nsqviz.lookupd.codec`: sans-IO connections for both roles, the state table;
* :mod:`~nsqviz.lookupd.registry`: the registration database;
* :mod:`~nsqviz.lookupd.server` / :mod:`~nsqviz.lookupd.http`: the asyncio service
  (``nsqviz lookupd`` on the command line, :class:`EmbeddedLookupd` in-process);
* :mod:`~nsqviz.lookupd.observer`, :mod:`~nsqviz.lookupd.protocol`,
  :mod:`~nsqviz.lookupd.fields`: the protocol as captures, views, Spark and Wireshark
  see it (a registered :class:`nsqviz.protocols.Protocol`).

The service's names are imported on first use, so that decoding a capture (which
imports the protocol) does not load the service and the broker options it reads.
"""

from typing import Any

__all__ = ["EmbeddedLookupd", "Lookupd", "LookupdOptions"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from nsqviz.lookupd import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
