"""The clients, side by side, all on their protocol's sans-IO client role.

* :mod:`nsqviz.clients.nsq` -- the asyncio NSQ client library (Consumer, Producer),
  following the client guide;
* :mod:`nsqviz.clients.tubemq` -- TubeMQ from Python: RPC channels keeping every byte,
  an asyncio Producer and Consumer;
* :mod:`nsqviz.clients.session` -- the notebooks' stepping sessions, NSQ's
  (:mod:`~nsqviz.clients.session.nsq`) and TubeMQ's (:mod:`~nsqviz.clients.session.tubemq`):
  one command or request at a time, every byte recorded.
"""
