"""nsqd's and nsqlookupd's HTTP APIs: the endpoints, the codec on h11, and the protocol
as captures, views, the analyses and Wireshark see it.

* :mod:`~nsqviz.http.api`: the endpoints on one screen, what a publish carries, what a
  lookup answers;
* :mod:`~nsqviz.http.grammar`: a message's bytes laid out (start line, header lines,
  body);
* :mod:`~nsqviz.http.events`: what happens on a connection;
* :mod:`~nsqviz.http.framing`: where messages end (h11 says), where one may start again;
* :mod:`~nsqviz.http.reader`: one direction read through h11 on :mod:`nsqviz.sansio`
  (what both roles share: violations, resynchronising, long bodies);
* :mod:`~nsqviz.http.codec`: sans-IO connections for both roles
  (:class:`~nsqviz.http.codec.ServerConnection`, :class:`~nsqviz.http.codec.
  ClientConnection`), kept in step;
* :mod:`~nsqviz.http.observer`, :mod:`~nsqviz.http.protocol`, :mod:`~nsqviz.http.fields`,
  :mod:`~nsqviz.http.analyses`, :mod:`~nsqviz.http.report`,
  :mod:`~nsqviz.http.dissector`: the registered
  :class:`nsqviz.protocols.protocol.Protocol`.

The servers that speak these APIs are :mod:`nsqviz.servers.nsqd.http` and
:mod:`nsqviz.servers.nsqlookupd.http`, on :mod:`nsqviz.servers.httpd`.
"""
