"""The broker: nsqd's NSQD object -- listeners, topics, the queue scan, persistence.

One asyncio event loop runs everything: the TCP listener (protocol V2 through the
shared sans-IO codec, see :mod:`nsqviz.servers.nsqd.connection`), the HTTP API, and the
periodic scan that requeues timed-out in-flight messages and releases deferred ones
(nsqd's ``queueScanLoop``; like nsqd, a REQ'd or timed-out message comes back at the
next scan after its due time, not exactly at it).

With ``--data-path``, topic/channel names are kept in ``nsqd.dat`` (nsqd's metadata
file) and messages beyond ``--mem-queue-size`` in disk queues; :meth:`Broker.stop`
writes every queued, deferred and in-flight message out, and :meth:`Broker.start`
brings them back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from typing import TYPE_CHECKING

from nsqviz.nsq.wire import is_valid_channel_name, is_valid_topic_name
from nsqviz.servers.goflags import VERSION
from nsqviz.servers.listen import start_serving
from nsqviz.servers.nsqd.channel import Channel
from nsqviz.servers.nsqd.message import IDGenerator
from nsqviz.servers.nsqd.options import Options
from nsqviz.servers.nsqd.topic import Topic

if TYPE_CHECKING:  # both imported when the broker starts
    import ssl

    from nsqviz.servers.nsqd.connection import BrokerConnection
    from nsqviz.servers.nsqd.lookup import LookupPeers

__all__ = ["Broker"]

log = logging.getLogger(__name__)

METADATA_FILE = "nsqd.dat"


class Broker:
    """An nsqd-compatible broker on the running event loop."""

    def __init__(self, opts: Options | None = None):
        self.opts = opts or Options()
        self.topics: dict[str, Topic] = {}
        self.clients: set[BrokerConnection] = set()
        self.ids = IDGenerator()
        self.start_time = int(time.time())
        self.tcp_port = 0
        self.http_port = 0
        self.tls_context: ssl.SSLContext | None = None
        self._tcp_server: asyncio.base_events.Server | None = None
        self._http_server: asyncio.base_events.Server | None = None
        self._scan_task: asyncio.Task[None] | None = None
        self.lookup: LookupPeers | None = None  # LookupPeers with --lookupd-tcp-address
        self.loading = False
        self._meta_dirty = False
        self.health = "OK"
        """nsqd's health: ``NOK - <error>`` after a disk queue write failed, until one
        succeeds (``/ping`` answers 500 meanwhile, ``/stats`` says it)."""
        self.stopped = asyncio.Event()

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        from nsqviz.servers.nsqd.connection import BrokerConnection
        from nsqviz.servers.nsqd.http import serve_http

        opts = self.opts
        if opts.tls_cert or opts.tls_key:
            self.tls_context = _tls_context(opts)
        elif opts.tls_required:
            raise ValueError("--tls-required needs --tls-cert and --tls-key")
        self._load_metadata()
        if opts.data_path:
            # as nsqd: a data path it cannot write its metadata to is refused at start
            # (not found out, with a traceback, when the first topic is made)
            self.persist_metadata()
        loop = asyncio.get_running_loop()
        host, port = opts.tcp_host_port()
        self._tcp_server = await start_serving(lambda: BrokerConnection(self), host, port)
        self.tcp_port = self._tcp_server.sockets[0].getsockname()[1]
        host, port = opts.http_host_port()
        self._http_server = await serve_http(self, host, port)
        self.http_port = self._http_server.sockets[0].getsockname()[1]
        self._scan_task = loop.create_task(self._scan_loop())
        if opts.lookupd_tcp_address:
            from nsqviz.servers.nsqd.lookup import LookupPeers

            self.lookup = lookup = LookupPeers(self, opts.lookupd_tcp_address)
            lookup.start()
        log.info("nsqviz broker %s: TCP %s, HTTP %s", VERSION, self.tcp_address,
                 self.http_address)

    @property
    def tcp_address(self) -> str:
        return f"{self.opts.tcp_host_port()[0]}:{self.tcp_port}"

    @property
    def http_address(self) -> str:
        return f"{self.opts.http_host_port()[0]}:{self.http_port}"

    async def stop(self) -> None:
        """Graceful stop: stop listening, drop clients, write everything to disk."""
        for server in (self._tcp_server, self._http_server):
            if server is not None:
                server.close()
        if self._scan_task is not None:
            self._scan_task.cancel()
        if self.lookup is not None:
            await self.lookup.stop()
        for client in list(self.clients):
            client.abort()
        await asyncio.sleep(0)
        if self.opts.data_path:
            self.persist_metadata()
        for topic in self.topics.values():
            topic.close()
        self.stopped.set()

    # -- topics and channels ------------------------------------------------------

    def get_topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            topic = self.topics[name] = Topic(self, name, self.opts)
            topic.backlog.on_write = self.disk_written
            self.metadata_changed()
            if self.lookup is not None:
                self.lookup.topic_changed(name)
        return topic

    def delete_topic(self, name: str) -> bool:
        topic = self.topics.pop(name, None)
        if topic is None:
            return False
        topic.delete()
        self.metadata_changed()
        if self.lookup is not None:
            self.lookup.topic_changed(name, deleted=True)
        return True

    def channel_created(self, topic: Topic, channel: Channel) -> None:
        channel.backlog.on_write = self.disk_written
        self.metadata_changed()
        if self.lookup is not None:
            self.lookup.channel_changed(topic.name, channel.name)

    def channel_deleted(self, topic: Topic, channel: Channel) -> None:
        self.metadata_changed()
        if self.lookup is not None:
            self.lookup.channel_changed(topic.name, channel.name, deleted=True)

    def disk_written(self, error: OSError | None) -> None:
        """A disk queue write went (or did not go) through: nsqd's ``SetHealth``."""
        self.health = "OK" if error is None else f"NOK - {error}"

    def metadata_changed(self) -> None:
        if self.loading or not self.opts.data_path or self._meta_dirty:
            return
        self._meta_dirty = True
        asyncio.get_running_loop().call_soon(self._persist_later)

    def _persist_later(self) -> None:
        try:
            self.persist_metadata()
        except OSError as exc:  # nsqd logs it and goes on (its queues keep working)
            log.error("failed to persist metadata - %s", exc)

    def persist_metadata(self) -> None:
        """``nsqd.dat``: the durable topics and channels (ephemeral ones are not kept)."""
        self._meta_dirty = False
        topics = []
        for topic in self.topics.values():
            if topic.ephemeral:
                continue
            channels = [{"name": ch.name, "paused": ch.paused}
                        for ch in topic.channels.values() if not ch.ephemeral]
            topics.append({"channels": channels, "name": topic.name, "paused": topic.paused})
        path = os.path.join(self.opts.data_path, METADATA_FILE)
        os.makedirs(self.opts.data_path, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"topics": topics, "version": VERSION}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def _load_metadata(self) -> None:
        if not self.opts.data_path:
            return
        path = os.path.join(self.opts.data_path, METADATA_FILE)
        try:
            with open(path) as f:
                meta = json.load(f)
        except FileNotFoundError:
            return
        except ValueError as exc:
            raise RuntimeError(f"cannot read {path}: {exc}") from None
        self.loading = True
        try:
            for t in meta.get("topics", []):
                name = t.get("name", "")
                if not is_valid_topic_name(name):
                    log.warning("skipping invalid topic name %r in %s", name, path)
                    continue
                topic = self.get_topic(name)
                topic.paused = bool(t.get("paused"))
                for c in t.get("channels", []):
                    cname = c.get("name", "")
                    if not is_valid_channel_name(cname):
                        log.warning("skipping invalid channel name %r in %s", cname, path)
                        continue
                    topic.get_channel(cname).paused = bool(c.get("paused"))
                if topic.channels:
                    # nsqd starts a topic's pump once its channels are loaded: every
                    # channel gets the messages that waited in the topic
                    topic.drain_backlog()
        finally:
            self.loading = False

    # -- the queue scan -----------------------------------------------------------

    async def _scan_loop(self) -> None:
        interval = self.opts.queue_scan_interval
        sync_every = max(1, round(self.opts.sync_timeout / interval))
        n = 0
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for topic in list(self.topics.values()):
                for channel in list(topic.channels.values()):
                    channel.scan(now)
            n += 1
            if n % sync_every == 0:
                self._sync_disk()

    def _sync_disk(self) -> None:
        for topic in self.topics.values():
            for backlog in [topic.backlog, *(c.backlog for c in topic.channels.values())]:
                if backlog.disk is not None and backlog.disk.dirty:
                    backlog.disk.sync()


def _tls_context(opts: Options) -> ssl.SSLContext:
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2  # nsqd's default --tls-min-version
    ctx.load_cert_chain(opts.tls_cert, opts.tls_key)
    if opts.tls_root_ca_file:
        ctx.load_verify_locations(opts.tls_root_ca_file)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx
