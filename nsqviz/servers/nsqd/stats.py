"""``/stats``: the same JSON shape as nsqd v1.3.0's ``/stats?format=json``.

A notebook that draws topics, channels, depth, in-flight, deferred, requeue and timeout
counts, and each client's RDY and in-flight, works unchanged against a real nsqd.
"""

from __future__ import annotations

import gc
import resource
from typing import TYPE_CHECKING, Any

from nsqviz.servers.goflags import VERSION

if TYPE_CHECKING:
    from nsqviz.servers.nsqd.connection import BrokerConnection

__all__ = ["stats", "stats_text"]

_NO_LATENCY = {"count": 0, "percentiles": None}


def stats(broker: Any, *, topic: str | None = None, channel: str | None = None,
          include_clients: bool = True) -> dict[str, Any]:
    topics = []
    producers = []
    if topic is not None and topic not in broker.topics:
        # nsqd returns its empty Stats: Go's nil slices are JSON nulls
        return _document(broker, None, None)
    for t in sorted(broker.topics.values(), key=lambda t: t.name):
        if topic is not None and t.name != topic:
            continue
        if channel is not None and channel not in t.channels:
            continue  # nsqd leaves out a topic without the asked-for channel
        channels = []
        for c in sorted(t.channels.values(), key=lambda c: c.name):
            if channel is not None and c.name != channel:
                continue
            clients = [client_stats(cl) for cl in c.clients] if include_clients else []
            channels.append({
                "channel_name": c.name,
                "depth": c.depth,
                "backend_depth": c.backlog.backend_depth,
                "in_flight_count": c.in_flight_count,
                "deferred_count": c.deferred_count,
                "message_count": c.message_count,
                "requeue_count": c.requeue_count,
                "timeout_count": c.timeout_count,
                "client_count": len(c.clients),
                "clients": clients,
                "paused": c.paused,
                "e2e_processing_latency": dict(_NO_LATENCY),
            })
        topics.append({
            "topic_name": t.name,
            "channels": channels,
            "depth": t.depth,
            "backend_depth": t.backlog.backend_depth,
            "message_count": t.message_count,
            "message_bytes": t.message_bytes,
            "paused": t.paused,
            "e2e_processing_latency": dict(_NO_LATENCY),
        })
    if include_clients:
        producers = [client_stats(cl) for cl in broker.clients if cl.channel is None]
    return _document(broker, topics, producers or None)


def _document(broker: Any, topics: list[dict[str, Any]] | None,
              producers: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {
        "version": VERSION,
        "health": broker.health,
        "start_time": broker.start_time,
        "topics": topics,
        "memory": _memory(),
        "producers": producers,
    }


def client_stats(cl: BrokerConnection) -> dict[str, Any]:
    out = {
        "client_id": cl.client_id,
        "hostname": cl.hostname,
        "version": "V2",
        "remote_address": cl.remote_address,
        "state": cl.stats_state,
        "ready_count": cl.rdy,
        "in_flight_count": len(cl.in_flight),
        "message_count": cl.message_count,
        "finish_count": cl.finish_count,
        "requeue_count": cl.requeue_count,
        "connect_ts": cl.connect_ts,
        "sample_rate": cl.sample_rate,
        "deflate": cl.compression == "deflate",
        "snappy": cl.compression == "snappy",
        "user_agent": cl.user_agent,
    }
    if cl.auth_state is not None:
        out["authed"] = True
        if cl.auth_state.identity:
            out["auth_identity"] = cl.auth_state.identity
        if cl.auth_state.identity_url:
            out["auth_identity_url"] = cl.auth_state.identity_url
    if cl.pub_counts:
        out["pub_counts"] = [{"topic": t, "count": n} for t, n in sorted(cl.pub_counts.items())]
    out.update({
        "tls": cl.tls_version != "",
        "tls_cipher_suite": cl.tls_cipher_suite,
        "tls_version": cl.tls_version,
        "tls_negotiated_protocol": "",
        "tls_negotiated_protocol_is_mutual": False,
    })
    return out


def _memory() -> dict[str, int]:
    """Go runtime figures have no Python twin; we report what Python has, same keys."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    counts = gc.get_stats()
    return {
        "heap_objects": len(gc.get_objects()),
        "heap_idle_bytes": 0,
        "heap_in_use_bytes": rss,
        "heap_released_bytes": 0,
        "gc_pause_usec_100": 0,
        "gc_pause_usec_99": 0,
        "gc_pause_usec_95": 0,
        "next_gc_bytes": 0,
        "gc_total_runs": sum(g["collections"] for g in counts),
    }


def stats_text(data: dict[str, Any]) -> str:
    """The plain-text /stats: one line per topic, channel and client."""
    lines = [f"nsqd v{data['version']} (nsqviz broker)", f"Health: {data['health']}", ""]
    if not data["topics"]:
        lines.append("NO_TOPICS")
    for t in data["topics"] or ():
        lines.append(f"[{t['topic_name']:<25}] depth: {t['depth']:<5} be-depth: "
                     f"{t['backend_depth']:<5} msgs: {t['message_count']:<8}")
        for c in t["channels"]:
            lines.append(
                f"    [{c['channel_name']:<25}] depth: {c['depth']:<5} be-depth: "
                f"{c['backend_depth']:<5} inflt: {c['in_flight_count']:<4} def: "
                f"{c['deferred_count']:<4} re-q: {c['requeue_count']:<5} timeout: "
                f"{c['timeout_count']:<5} msgs: {c['message_count']:<8}"
            )
            for cl in c["clients"]:
                lines.append(
                    f"        [V2 {cl['hostname']:<18}] state: {cl['state']} inflt: "
                    f"{cl['in_flight_count']:<4} rdy: {cl['ready_count']:<4} fin: "
                    f"{cl['finish_count']:<8} re-q: {cl['requeue_count']:<8} msgs: "
                    f"{cl['message_count']:<8}"
                )
    return "\n".join(lines) + "\n"
