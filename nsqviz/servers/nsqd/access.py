"""The steps of a broker connection that wait on something outside its command loop:
the TLS handshake after IDENTIFY, and AUTH -- asking the auth service, and asking again
before SUB or a publish once its answer has expired. While one runs, reading pauses and
the commands already read wait. A part of
:class:`nsqviz.servers.nsqd.connection.BrokerConnection`, whose state it uses."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from nsqviz import compactjson
from nsqviz.nsq.errors import ErrorCode, go_quote
from nsqviz.nsq.events import Response
from nsqviz.servers.nsqd.auth import AuthError, AuthState, query_auth
from nsqviz.servers.nsqd.identify import Negotiated
from nsqviz.servers.nsqd.options import Options
from nsqviz.servers.nsqd.output import OK, FatalClientError, Output

__all__ = ["AccessSteps"]

log = logging.getLogger("nsqviz.servers.nsqd.connection")


class AccessSteps(Output):
    """TLS and AUTH for a :class:`BrokerConnection`."""

    broker: Any
    opts: Options
    auth_state: AuthState | None
    tls_version: str
    tls_cipher_suite: str
    tls_common_name: str
    _secret: str
    _write_paused: bool

    # the connection's own methods, used here
    _run: Callable[[], None]
    _start_compression: Callable[[Negotiated], None]

    async def _upgrade_tls(self, settings: Negotiated) -> None:
        try:
            transport = await self.loop.start_tls(
                self._live, self, self.broker.tls_context, server_side=True,
                ssl_handshake_timeout=5.0,
            )
        except (TimeoutError, OSError, ConnectionError) as exc:
            log.info("TLS handshake with %s failed: %s", self.remote_address, exc)
            self._fatal(ErrorCode.IDENTIFY_FAILED, f"IDENTIFY failed {exc}")
            return
        if transport is None:
            self._teardown()
            return
        self.transport = transport
        ssl_obj = transport.get_extra_info("ssl_object")
        if ssl_obj is not None:
            self.tls_version = (ssl_obj.version() or "").replace("TLSv", "TLS")
            cipher = ssl_obj.cipher()
            self.tls_cipher_suite = cipher[0] if cipher else ""
            peer = ssl_obj.getpeercert()
            if peer:
                for rdn in peer.get("subject", ()):
                    for key, value in rdn:
                        if key == "commonName":
                            self.tls_common_name = value
        self.codec.tls_started()
        self._send_now(OK)
        self._start_compression(settings)
        self._busy = False
        if not self._write_paused:
            transport.resume_reading()
        self._run()

    async def _authenticate(self, secret: str) -> None:
        try:
            state = await self._query_auth(secret)
        except AuthError as exc:
            log.warning("AUTH for %s failed: %s", self.remote_address, exc)
            self._fatal(ErrorCode.AUTH_FAILED, "AUTH failed")
            return
        self.auth_state = state
        self._secret = secret
        if not state.authorizations:
            self._fatal(ErrorCode.UNAUTHORIZED, "AUTH no authorizations found")
            return
        self.codec.authorized()
        self._send_now(Response(compactjson.encode({
            "identity": state.identity,
            "identity_url": state.identity_url,
            "permission_count": len(state.authorizations),
        })))
        self._resume()

    async def _query_auth(self, secret: str) -> AuthState:
        host = self.remote_address.rsplit(":", 1)[0]
        o = self.opts
        return await asyncio.to_thread(
            query_auth, o.auth_http_address, remote_ip=host, tls=bool(self.tls_version),
            common_name=self.tls_common_name, secret=secret,
            connect_timeout=o.http_client_connect_timeout,
            request_timeout=o.http_client_request_timeout,
        )

    def _resume(self) -> None:
        if self.closed:
            return
        self._busy = False
        if not self._write_paused:
            self._live.resume_reading()
        self._run()

    def _when_authorized(self, cmd: str, topic: str, channel: str,
                         action: Callable[[], None]) -> None:
        """nsqd's CheckAuth, then ``action`` -- at once, or after asking the auth service
        again when its last answer has expired."""
        if not self._check_auth(cmd, topic, channel, action):
            action()

    def _check_auth(self, cmd: str, topic: str, channel: str,
                    then: Callable[[], None]) -> bool:
        """Returns True when ``then`` must wait for a re-query (it is then run later)."""
        if not self.opts.auth_http_address:
            return False
        state = self.auth_state
        assert state is not None  # the codec refused SUB and publishing before AUTH
        if state.is_expired():
            self._busy = True
            self._live.pause_reading()
            self.loop.create_task(self._recheck_auth(cmd, topic, channel, then))
            return True
        if not state.is_allowed(topic, channel):
            raise FatalClientError(ErrorCode.UNAUTHORIZED,
                         f"AUTH failed for {cmd} on {go_quote(topic)} {go_quote(channel)}")
        return False

    async def _recheck_auth(self, cmd: str, topic: str, channel: str,
                            then: Callable[[], None]) -> None:
        try:
            self.auth_state = state = await self._query_auth(self._secret)
        except AuthError as exc:
            log.warning("AUTH re-check for %s failed: %s", self.remote_address, exc)
            self._fatal(ErrorCode.AUTH_FAILED, "AUTH failed")
            return
        if self.closed:
            return
        try:
            if not state.is_allowed(topic, channel):
                raise FatalClientError(ErrorCode.UNAUTHORIZED,
                             f"AUTH failed for {cmd} on {go_quote(topic)} {go_quote(channel)}")
            then()
        except FatalClientError as exc:
            self._fatal(exc.code, exc.text)
            return
        self._resume()
