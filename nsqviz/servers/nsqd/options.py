"""The broker's options: nsqd v1.3.0's flag names, meanings and defaults.

A learner who reads ``nsqd --help`` should find the same knobs here, with the same
defaults, so what they tune in a notebook transfers to production. Durations are kept
in seconds (floats) internally; on the command line they take Go-style values
(``60s``, ``250ms``, ``15m``, ``1h``) as nsqd's do.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from nsqviz.nsq.framing import DEFAULT_MAX_BODY_SIZE, DEFAULT_MAX_MSG_SIZE
from nsqviz.servers.goflags import parse_duration
from nsqviz.servers.listen import LOOPBACK, split_address

__all__ = ["DURATION_FLAGS", "Options", "add_arguments", "options_from_args"]

def _flag_bool(text: str) -> bool:
    if text.lower() in ("1", "t", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "f", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r}")


@dataclass
class Options:
    """nsqd's options that the embedded broker implements (names as ``--flag-name``)."""

    tcp_address: str = f"{LOOPBACK}:4150"  # nsqd: 0.0.0.0 (see nsqviz.servers.listen)
    http_address: str = f"{LOOPBACK}:4151"
    broadcast_address: str = ""
    data_path: str = ""
    mem_queue_size: int = 10000
    max_bytes_per_file: int = 100 * 1024 * 1024
    sync_every: int = 2500
    sync_timeout: float = 2.0
    queue_scan_interval: float = 0.1
    msg_timeout: float = 60.0
    max_msg_timeout: float = 15 * 60.0
    max_msg_size: int = DEFAULT_MAX_MSG_SIZE
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    max_req_timeout: float = 3600.0
    client_timeout: float = 60.0
    max_heartbeat_interval: float = 60.0
    max_rdy_count: int = 2500
    max_output_buffer_size: int = 64 * 1024
    max_output_buffer_timeout: float = 30.0
    min_output_buffer_timeout: float = 0.025
    output_buffer_timeout: float = 0.25
    max_channel_consumers: int = 0
    snappy: bool = True
    deflate: bool = True
    max_deflate_level: int = 6
    tls_cert: str = ""
    tls_key: str = ""
    tls_root_ca_file: str = ""
    tls_required: bool = False
    auth_http_address: list[str] = field(default_factory=list)
    lookupd_tcp_address: list[str] = field(default_factory=list)
    http_client_connect_timeout: float = 2.0
    http_client_request_timeout: float = 5.0

    def tcp_host_port(self) -> tuple[str, int]:
        return split_address(self.tcp_address)

    def http_host_port(self) -> tuple[str, int]:
        return split_address(self.http_address)


# flag -> (type, help). The help texts say what the option does in our words.
_FLAGS: dict[str, tuple[Callable[[str], Any], str]] = {
    "tcp_address": (str, "<addr>:<port> to listen on for TCP clients (port 0: a free one)"),
    "http_address": (str, "<addr>:<port> to listen on for HTTP clients (port 0: a free one)"),
    "broadcast_address": (str, "address reported in /info (empty: the hostname)"),
    "data_path": (str, "directory for disk queues and metadata (empty: memory only)"),
    "mem_queue_size": (int, "messages kept in memory per topic/channel before going to disk "
                            "(lost if the process is killed, as with nsqd)"),
    "max_bytes_per_file": (int, "bytes per disk queue file before rolling over"),
    "sync_every": (int, "messages written or read between fsyncs of a disk queue (a "
                        "power cut loses what was not fsynced; a killed process does not)"),
    "sync_timeout": (parse_duration, "time between fsyncs of a disk queue"),
    "queue_scan_interval": (parse_duration, "how often in-flight/deferred queues are scanned"),
    "msg_timeout": (parse_duration, "default time a message may be in flight before requeue"),
    "max_msg_timeout": (parse_duration, "maximum msg_timeout a client may ask for in IDENTIFY"),
    "max_msg_size": (int, "maximum size of one message body in bytes"),
    "max_body_size": (int, "maximum size of a command body (MPUB, IDENTIFY, AUTH) in bytes"),
    "max_req_timeout": (parse_duration, "maximum requeue/defer delay (REQ clamps, DPUB refuses)"),
    "client_timeout": (parse_duration, "time after which a silent client is disconnected"),
    "max_heartbeat_interval": (parse_duration, "maximum heartbeat_interval a client may ask for"),
    "max_rdy_count": (int, "maximum RDY count a client may set"),
    "max_output_buffer_size": (int, "maximum output_buffer_size a client may ask for"),
    "max_output_buffer_timeout": (parse_duration, "maximum output_buffer_timeout"),
    "min_output_buffer_timeout": (parse_duration, "minimum output_buffer_timeout"),
    "output_buffer_timeout": (parse_duration, "default output_buffer_timeout"),
    "max_channel_consumers": (int, "maximum consumers per channel (0: unlimited)"),
    "snappy": (_flag_bool, "allow snappy compression (true/false)"),
    "deflate": (_flag_bool, "allow deflate compression (true/false)"),
    "max_deflate_level": (int, "maximum deflate_level a client may ask for"),
    "tls_cert": (str, "path to a certificate file (enables tls_v1)"),
    "tls_key": (str, "path to the certificate's private key"),
    "tls_root_ca_file": (str, "CA file to verify client certificates with"),
    "tls_required": (_flag_bool, "require TLS for every command but IDENTIFY (true/false)"),
    "auth_http_address": (str, "<addr>:<port> of an auth service (may be given several times)"),
    "lookupd_tcp_address": (str, "<addr>:<port> of an nsqlookupd to register with (repeatable)"),
    "http_client_connect_timeout": (parse_duration, "connect timeout for the auth service"),
    "http_client_request_timeout": (parse_duration, "request timeout for the auth service"),
}


DURATION_FLAGS = frozenset(k for k, (kind, _) in _FLAGS.items() if kind is parse_duration)
"""The options nsqd takes as Go durations (``1s``, ``250ms``); :class:`Options` holds seconds."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every option as ``--flag-name`` with nsqd's default."""
    defaults = Options()
    for f in fields(Options):
        type_, help_ = _FLAGS[f.name]
        flag = "--" + f.name.replace("_", "-")
        default = getattr(defaults, f.name)
        if f.name in ("auth_http_address", "lookupd_tcp_address"):
            parser.add_argument(flag, action="append", default=[], help=help_)
        elif type_ is _flag_bool:
            # Go's bool flags: bare --flag means true, --flag=false turns it off
            parser.add_argument(flag, type=type_, nargs="?", const=True, default=default,
                                metavar="BOOL", help=f"{help_} (default {default!r})")
        else:
            parser.add_argument(flag, type=type_, default=default,
                                help=f"{help_} (default {default!r})")


def options_from_args(args: argparse.Namespace) -> Options:
    return Options(**{f.name: getattr(args, f.name) for f in fields(Options)})
