"""The client's options, named as in go-nsq's ``Config`` and pynsq's ``Reader``/``Writer``.

Durations are seconds (floats). Every option has the default the NSQ client guide or
go-nsq uses, unless the guide asks for something else (``max_in_flight`` 1).
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass, field, fields
from typing import Any

from nsqviz.clients.nsq.backoff import BackoffStrategy, ExponentialBackoff

__all__ = ["Config"]


@dataclass
class Config:
    """Options shared by :class:`~nsqviz.clients.nsq.Consumer` and
    :class:`~nsqviz.clients.nsq.Producer`.

    Connection and IDENTIFY:

    * ``client_id``, ``hostname``, ``user_agent`` -- who we are (IDENTIFY metadata);
    * ``heartbeat_interval`` -- seconds between nsqd's heartbeats (IDENTIFY, ``-1``:
      off -- a consumer cannot SUB then); ``None`` keeps nsqd's default (30 s);
    * ``output_buffer_size``, ``output_buffer_timeout`` -- nsqd's buffering for us;
    * ``msg_timeout`` -- nsqd's in-flight timeout for our messages (IDENTIFY);
    * ``sample_rate`` -- 1-99: nsqd delivers that percentage of the channel's messages;
    * ``tls_v1`` / ``tls_context`` -- TLS after IDENTIFY (an unverified context if none);
    * ``snappy`` / ``deflate`` / ``deflate_level`` -- compression (one of the two);
    * ``auth_secret`` -- sent with AUTH when nsqd answers ``auth_required``;
    * ``dial_timeout``, ``read_timeout`` -- connect timeout; a connection silent for
      ``read_timeout`` (default: two heartbeat intervals) is declared dead (liveness).

    Consuming:

    * ``max_in_flight`` -- messages in flight over all connections (the RDY budget);
    * ``max_attempts`` -- a message delivered more often is given up (0: never);
    * ``requeue_delay`` / ``max_requeue_delay`` -- REQ delay after a failure:
      ``requeue_delay * attempts``, at most ``max_requeue_delay``;
    * ``backoff_strategy`` -- failures -> seconds of RDY 0; by default exponential with
      full jitter: a uniform draw up to ``backoff_multiplier * 2**(n-1)`` capped at
      ``max_backoff_duration`` (go-nsq's and pynsq's names); ``backoff_disabled`` turns
      backoff off;
    * ``lookupd_poll_interval`` / ``lookupd_poll_jitter`` -- discovery period and the
      random fraction of it added to every poll;
    * ``low_rdy_idle_timeout`` / ``rdy_redistribute_interval`` -- with fewer RDY than
      connections, a connection idle this long gives its RDY 1 to another, checked at
      this interval;
    * ``reconnect_interval`` / ``max_reconnect_interval`` -- delays between reconnects to
      an nsqd given directly (doubling); connections found by discovery are only
      re-opened by discovery.
    """

    client_id: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    hostname: str = field(default_factory=socket.gethostname)
    user_agent: str = "nsqviz.client/0.1"
    heartbeat_interval: float | None = 30.0
    output_buffer_size: int | None = None
    output_buffer_timeout: float | None = None
    msg_timeout: float | None = None
    sample_rate: int = 0
    tls_v1: bool = False
    tls_context: ssl.SSLContext | None = None
    snappy: bool = False
    deflate: bool = False
    deflate_level: int = 6
    auth_secret: bytes | str | None = None
    dial_timeout: float = 1.0
    read_timeout: float | None = None

    max_in_flight: int = 1
    max_attempts: int = 5
    requeue_delay: float = 90.0
    max_requeue_delay: float = 15 * 60.0
    backoff_multiplier: float = 1.0
    max_backoff_duration: float = 120.0
    backoff_strategy: BackoffStrategy | None = None
    backoff_disabled: bool = False
    lookupd_poll_interval: float = 60.0
    lookupd_poll_jitter: float = 0.3
    low_rdy_idle_timeout: float = 10.0
    rdy_redistribute_interval: float = 5.0
    reconnect_interval: float = 8.0
    max_reconnect_interval: float = 5 * 60.0

    def __post_init__(self) -> None:
        if self.snappy and self.deflate:
            raise ValueError("snappy and deflate cannot both be on")
        if self.max_in_flight < 0:
            raise ValueError("max_in_flight must be >= 0")
        if not 0 <= self.sample_rate <= 99:
            raise ValueError("sample_rate must be 0-99")
        if not 0 <= self.lookupd_poll_jitter <= 1:
            raise ValueError("lookupd_poll_jitter must be between 0 and 1")
        if self.backoff_strategy is None:
            self.backoff_strategy = ExponentialBackoff(self.backoff_multiplier,
                                                       self.max_backoff_duration)

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> Config:
        """A config from keyword options; unknown names are an error that lists them."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(f"unknown option(s) {', '.join(unknown)}")
        return cls(**kwargs)

    def identify(self) -> dict[str, Any]:
        """The IDENTIFY body (durations in milliseconds, as nsqd reads them)."""
        body: dict[str, Any] = {
            "client_id": self.client_id,
            "hostname": self.hostname,
            "user_agent": self.user_agent,
            "feature_negotiation": True,
            "tls_v1": self.tls_v1,
            "snappy": self.snappy,
            "deflate": self.deflate,
        }
        if self.deflate:
            body["deflate_level"] = self.deflate_level
        if self.heartbeat_interval is not None:
            hb = self.heartbeat_interval
            body["heartbeat_interval"] = -1 if hb < 0 else int(hb * 1000)
        if self.output_buffer_size is not None:
            body["output_buffer_size"] = self.output_buffer_size
        if self.output_buffer_timeout is not None:
            body["output_buffer_timeout"] = int(self.output_buffer_timeout * 1000)
        if self.msg_timeout is not None:
            body["msg_timeout"] = int(self.msg_timeout * 1000)
        if self.sample_rate:
            body["sample_rate"] = self.sample_rate
        return body
