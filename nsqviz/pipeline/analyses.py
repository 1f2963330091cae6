"""The analyses, each a DataFrame computed from the frames table alone.

They are plain Spark SQL over :data:`~nsqviz.pipeline.decode.FRAME_SCHEMA` -- no Python
UDFs -- because by the time frames exist every protocol question has been answered by
the codec; what is left is joining and ordering events in time, which the JVM does
best. Each function documents the rules it applies, since those rules are what an
operator must trust:

* a message is known by its broker (the server end of its connections), topic, channel
  and id: nsqd copies a message to every channel of its topic under the same id, and
  ids are only unique per nsqd and topic (two nsqds, or two deployments in one capture,
  may use the same ids);
* a delivery (``FrameTypeMessage``) ends with the first ``FIN``/``REQ`` for its id *on
  the same connection* before the id is delivered again on the same channel; without
  one it ``timeout``-ed if a later delivery exists (at delivery time + the connection's
  negotiated ``msg_timeout``), else it is still ``open`` when the capture ends;
* a publish is linked to a message by broker, topic and body (sha1): the latest
  PUB/MPUB/DPUB of that body at or before the first delivery -- nsqd assigns ids after
  the publish, so nothing else on the wire links them; a message with no such publish
  in the capture keeps its row, with no publish;
* events at the same instant are ordered by connection and frame number, so every table
  is the same however Spark partitions the frames;
* in-flight counts deliveries minus ends of deliveries (FIN, REQ, timeout) -- not FIN
  commands, since a FIN for an id not in flight (``E_FIN_FAILED``) frees nothing; the
  starvation test is the client-library guide's ``in_flight > 0 and in_flight >= 0.85 *
  last_rdy``;
* an RPC answer (TubeMQ) is paired with the request of the same ``rpc_serial`` on the
  same connection that it follows most closely -- the codec pairs them the same way;
  a request with no answer before the capture ends is counted ``unanswered``;
* a heartbeat is answered by the first command the client sends after it and before the
  next one (nsqd resets its read deadline on any command); a connection is *closed for
  missed heartbeats* when its last two heartbeats went unanswered and it then ended
  with FIN or RST.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from nsqviz.stream.direction import Direction
from nsqviz.tubemq.protos import RpcStatus
from nsqviz.tubemq.tables import ErrorCode

__all__ = [
    "connections",
    "deliveries",
    "flow_control",
    "heartbeats",
    "messages",
    "rpc_latency",
    "rpc_pairs",
    "sticky_packets",
]

C2S, S2C = Direction.C2S.value, Direction.S2C.value  # plain strings for Spark literals

DEFAULT_MSG_TIMEOUT_MS = 60000  # nsqd's --msg-timeout default
STARVATION_RATIO = 0.85

_FRAMES = ("command", "frame")
MESSAGE_KEY = ("server", "topic", "channel", "msg_id")
"""What identifies a message in the deliveries and messages tables."""


def _server():
    """The broker's end of a connection: the right side of its ``client->server`` label."""
    return F.substring_index("flow", "->", -1).alias("server")


def _first_where(cond, value, alias: str):
    """Per group, ``value`` of the first row (by frame number) where ``cond`` holds."""
    return F.min_by(F.when(cond, value), F.when(cond, F.col("seq"))).alias(alias)


def _per_connection(frames: DataFrame) -> DataFrame:
    """Per connection, in one pass: its subscription (the first SUB's topic and channel),
    what IDENTIFY asked for and the JSON answer negotiated, and the message timeout in
    force (negotiated, else requested, else nsqd's default; null when the connection
    neither identified nor negotiated)."""
    sub = F.col("name") == "SUB"
    ident = F.col("name") == "IDENTIFY"
    answer = (F.col("name") == "FrameTypeResponse") & F.col("data").startswith("{")
    timeout = F.get_json_object("data", "$.msg_timeout")
    per = frames.where(sub | ident | answer).groupBy("conn_id").agg(
        _first_where(sub, F.col("topic"), "topic"),
        _first_where(sub, F.col("channel"), "channel"),
        _first_where(ident, F.col("data"), "identify"),
        _first_where(answer, F.col("data"), "negotiated"),
        F.max(ident | answer).alias("_timed"),
        _first_where(ident, timeout, "_asked"),
        _first_where(answer, timeout, "_granted"),
    )
    return per.withColumn("msg_timeout_ms", F.when(F.col("_timed"), F.coalesce(
        F.col("_granted").cast("long"), F.col("_asked").cast("long"),
        F.lit(DEFAULT_MSG_TIMEOUT_MS)))).drop("_timed", "_asked", "_granted")


def deliveries(frames: DataFrame) -> DataFrame:
    """One row per delivery: message id, channel, connection, attempt, and how it ended."""
    info = _per_connection(frames).select("conn_id", "topic", "channel", "msg_timeout_ms")
    # a message frame the capture cut short of its id (snaplen) cannot be followed
    ev = frames.where(F.col("name").isin("FrameTypeMessage", "FIN", "REQ", "TOUCH")
                      & F.col("msg_id").isNotNull()).drop(
        "topic", "channel").join(info, "conn_id", "left")
    msg = (
        ev.where(F.col("name") == "FrameTypeMessage")
        .select(
            _server(), "msg_id", "topic", "channel", "conn_id", "ts", "seq", "attempts", "msg_ts",
            F.col("bodies")[0].alias("body_sha1"), F.lit("D").alias("t"),
            F.lit(None).cast("string").alias("verb"), F.lit(None).cast("long").alias("delay_ms"),
            "msg_timeout_ms",
        )
    )
    resp = (
        ev.where(F.col("name") != "FrameTypeMessage")
        .select(
            _server(), "msg_id", "topic", "channel", "conn_id", "ts", "seq",
            F.lit(None).cast("int").alias("attempts"), F.lit(None).cast("double").alias("msg_ts"),
            F.lit(None).cast("string").alias("body_sha1"), F.lit("R").alias("t"),
            F.col("name").alias("verb"), "delay_ms",
            F.lit(None).cast("long").alias("msg_timeout_ms"),
        )
    )
    w = Window.partitionBy(*MESSAGE_KEY).orderBy("ts", "t", "conn_id", "seq")
    both = resp.unionByName(msg).withColumn(
        "n", F.sum(F.when(F.col("t") == "D", 1).otherwise(0)).over(
            w.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    ).withColumn(
        "d_conn", F.last(F.when(F.col("t") == "D", F.col("conn_id")), ignorenulls=True).over(
            w.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    ).where(F.col("n") > 0)
    own = (F.col("t") == "R") & (F.col("conn_id") == F.col("d_conn"))
    ends = own & F.col("verb").isin("FIN", "REQ")
    end_order = F.when(ends, F.struct("ts", "seq"))
    per = both.groupBy(*MESSAGE_KEY, "n").agg(
        F.max(F.when(F.col("t") == "D", F.col("conn_id"))).alias("conn_id"),
        F.max(F.when(F.col("t") == "D", F.col("ts"))).alias("ts"),
        F.max(F.when(F.col("t") == "D", F.col("attempts"))).alias("attempts"),
        F.max(F.when(F.col("t") == "D", F.col("msg_ts"))).alias("msg_ts"),
        F.max(F.when(F.col("t") == "D", F.col("body_sha1"))).alias("body_sha1"),
        F.max(F.when(F.col("t") == "D", F.col("msg_timeout_ms"))).alias("msg_timeout_ms"),
        F.min_by(F.when(ends, F.col("verb")), end_order).alias("end_verb"),
        F.min(F.when(ends, F.col("ts"))).alias("end_ts"),
        F.min_by(F.when(ends, F.col("delay_ms")), end_order).alias("end_delay"),
        F.sum(F.when(own & (F.col("verb") == "TOUCH"), 1).otherwise(0)).alias("touches"),
    )
    last_n = Window.partitionBy(*MESSAGE_KEY)
    return (
        per.withColumn("last_n", F.max("n").over(last_n))
        .select(
            *MESSAGE_KEY, F.col("n").alias("delivery"), "conn_id", "ts",
            "attempts", "msg_ts", "body_sha1", "touches",
            F.when(F.col("end_verb").isNotNull(), F.col("end_verb"))
            .when(F.col("n") < F.col("last_n"), "timeout")
            .otherwise("open").alias("outcome"),
            F.when(F.col("end_verb").isNotNull(), F.col("end_ts"))
            .when(F.col("n") < F.col("last_n"),
                  F.col("ts") + F.coalesce(F.col("msg_timeout_ms"),
                                           F.lit(DEFAULT_MSG_TIMEOUT_MS)) / 1000)
            .alias("outcome_ts"),
            F.when(F.col("end_verb") == "REQ", F.col("end_delay")).alias("req_delay_ms"),
        )
    )


def messages(frames: DataFrame, delivered: DataFrame | None = None) -> DataFrame:
    """One row per message (:data:`MESSAGE_KEY`: broker, topic, channel, id): publish,
    deliveries, outcome and latencies.

    nsqd copies a message to every channel of its topic under the same id, so the id
    alone is not a key; ``channel`` completes it (and the broker and topic, since ids
    are only unique per nsqd and topic).
    """
    d = delivered if delivered is not None else deliveries(frames)
    pubs = (
        frames.where(F.col("name").isin("PUB", "MPUB", "DPUB"))
        .select(_server(), "topic", F.col("ts").alias("pub_ts"),
                F.col("name").alias("publish_cmd"), F.col("conn_id").alias("publisher"),
                F.explode("bodies").alias("body_sha1"))
    )
    per = d.groupBy(*MESSAGE_KEY).agg(
        F.min("msg_ts").alias("created_ts"),
        F.min("ts").alias("first_delivery_ts"),
        F.max("ts").alias("last_delivery_ts"),
        F.count("*").alias("deliveries_count"),
        F.max_by("outcome", "delivery").alias("outcome"),
        F.max_by("outcome_ts", "delivery").alias("outcome_ts"),
        F.sum("touches").alias("touches"),
        F.sum(F.when(F.col("outcome") == "REQ", 1).otherwise(0)).alias("requeues"),
        F.sum(F.when(F.col("outcome") == "timeout", 1).otherwise(0)).alias("timeouts"),
        F.min("body_sha1").alias("body_sha1"),
        F.sort_array(F.collect_list(F.struct(
            "delivery", "ts", "conn_id", "attempts", "outcome", "outcome_ts", "req_delay_ms",
            "touches"))).alias("deliveries"),
    )
    m, p = per.alias("m"), pubs.alias("p")
    on = [F.col(f"m.{k}") == F.col(f"p.{k}") for k in ("server", "topic", "body_sha1")]
    linked = m.join(p, [*on, F.col("p.pub_ts") <= F.col("m.first_delivery_ts")], "left") \
        .select("m.*", "p.pub_ts", "p.publish_cmd", "p.publisher")
    best = Window.partitionBy(*MESSAGE_KEY).orderBy(
        F.col("pub_ts").desc_nulls_last(), "publisher", "publish_cmd")
    one = linked.withColumn("_r", F.row_number().over(best)).where("_r = 1").drop("_r")
    start = F.coalesce(F.col("pub_ts"), F.col("created_ts"))
    done = F.when(F.col("outcome") == "FIN", F.col("outcome_ts"))
    return one.select(
        *MESSAGE_KEY,
        F.col("pub_ts").alias("publish_ts"), "publish_cmd", "publisher", "created_ts",
        "first_delivery_ts", "deliveries_count", "deliveries", "outcome",
        F.col("outcome_ts").alias("final_ts"), "touches", "requeues", "timeouts",
        (F.col("first_delivery_ts") - start).alias("queue_latency_s"),
        (done - start).alias("end_to_end_latency_s"),
        (done - F.col("last_delivery_ts")).alias("processing_latency_s"),
    )


def connections(frames: DataFrame, beats: DataFrame | None = None) -> DataFrame:
    """One row per connection: who (IDENTIFY), what (SUB/PUB), how long, how much, errors."""
    is_frame = F.col("kind").isin(*_FRAMES)
    base = frames.where(F.col("conn_id").isNotNull()).groupBy("conn_id").agg(
        F.first("flow").alias("flow"),
        F.min("ts").alias("start_ts"),
        F.max("ts").alias("end_ts"),
        F.sum(F.when(is_frame & (F.col("dir") == C2S), 1).otherwise(0)).alias("frames_c2s"),
        F.sum(F.when(is_frame & (F.col("dir") == S2C), 1).otherwise(0)).alias("frames_s2c"),
        F.max(F.when((F.col("name") == "FlowEnd") & (F.col("dir") == C2S), F.col("size")))
        .alias("bytes_c2s"),
        F.max(F.when((F.col("name") == "FlowEnd") & (F.col("dir") == S2C), F.col("size")))
        .alias("bytes_s2c"),
        F.min_by(F.when(F.col("name") == "FlowEnd", F.col("reason")),
                 F.when(F.col("name") == "FlowEnd", F.struct("ts", "seq"))).alias("ended_by"),
        F.sum(F.when(F.col("name") == "FrameTypeMessage", 1).otherwise(0)).alias("messages_in"),
        F.sum(F.when(F.col("name") == "PUB", 1)
              .when(F.col("name").isin("MPUB", "DPUB"), F.size("bodies"))
              .otherwise(0)).alias("messages_published"),
        F.sum(F.when(F.col("kind").isin("error", "gap") | (F.col("name") == "FrameTypeError"), 1)
              .otherwise(0)).alias("errors"),
        F.array_sort(F.collect_set(
            F.when(F.col("name") == "FrameTypeError", F.split("data", " ")[0])
            .when(F.col("kind").isin("error", "gap"), F.col("reason"))
        )).alias("error_codes"),
        F.max(F.col("kind") == "tls").alias("tls"),
        F.max_by(F.when(F.col("name") == "RDY", F.col("count")),
                 F.when(F.col("name") == "RDY", F.col("seq"))).alias("last_rdy"),
        F.max(F.when(F.col("name") == "RDY", F.col("count"))).alias("max_rdy"),
    )
    info = _per_connection(frames)
    out = (
        base.join(info, "conn_id", "left")
        .select(
            *[c for c in base.columns if c not in ("last_rdy", "max_rdy")],
            *[F.get_json_object("identify", f"$.{k}").alias(k)
              for k in ("client_id", "hostname", "user_agent", "feature_negotiation",
                        "heartbeat_interval")],
            "negotiated", "msg_timeout_ms", "topic", "channel", "last_rdy", "max_rdy",
        )
        .withColumn("duration_s", F.col("end_ts") - F.col("start_ts"))
        .withColumn("compression", F.when(F.get_json_object("negotiated", "$.snappy") == "true",
                                          "snappy")
                    .when(F.get_json_object("negotiated", "$.deflate") == "true", "deflate"))
        .withColumn("role", F.when(F.col("channel").isNotNull(), "consumer")
                    .when(F.col("messages_published") > 0, "producer").otherwise("other"))
    )
    hb = beats if beats is not None else heartbeats(frames)
    summary = hb.groupBy("conn_id").agg(
        F.count("*").alias("heartbeats"),
        F.sum(F.when(~F.col("answered"), 1).otherwise(0)).alias("missed_heartbeats"),
        F.avg("nop_response_s").alias("mean_nop_response_s"),
        F.max("closed_after").alias("closed_for_missed_heartbeats"),
    )
    return out.join(summary, "conn_id", "left").fillna(
        {"heartbeats": 0, "missed_heartbeats": 0, "closed_for_missed_heartbeats": False}
    )


def heartbeats(frames: DataFrame) -> DataFrame:
    """One row per ``_heartbeat_``: interval, the client's answer, missed streaks."""
    hb = frames.where(
        (F.col("name") == "FrameTypeResponse") & (F.col("data") == "_heartbeat_")
    ).select("conn_id", "ts", "seq", F.lit("H").alias("t"), F.lit(None).cast("string")
             .alias("cmd"))
    cmds = frames.where((F.col("kind") == "command") & (F.col("dir") == C2S)).select(
        "conn_id", "ts", "seq", F.lit("C").alias("t"), F.col("name").alias("cmd")
    )
    w = Window.partitionBy("conn_id").orderBy("ts", "seq")
    both = cmds.unionByName(hb).withColumn(
        "k", F.sum(F.when(F.col("t") == "H", 1).otherwise(0)).over(
            w.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    ).where(F.col("k") > 0)
    per = both.groupBy("conn_id", "k").agg(
        F.max(F.when(F.col("t") == "H", F.col("ts"))).alias("ts"),
        F.min_by(F.when(F.col("t") == "C", F.col("cmd")),
                 F.when(F.col("t") == "C", F.struct("ts", "seq"))).alias("response"),
        F.min(F.when(F.col("t") == "C", F.col("ts"))).alias("response_ts"),
    )
    ends = frames.where(F.col("name") == "FlowEnd").groupBy("conn_id").agg(
        F.max(F.col("reason").isin("fin", "rst")).alias("closed")
    )
    wk = Window.partitionBy("conn_id").orderBy("k")
    answered = F.col("response").isNotNull()
    out = (
        per.withColumn("interval_s", F.col("ts") - F.lag("ts").over(wk))
        .withColumn("answered", answered)
        .withColumn("response_s", F.col("response_ts") - F.col("ts"))
        .withColumn("nop_response_s", F.when(F.col("response") == "NOP", F.col("response_s")))
        .withColumn("_grp", F.sum(F.when(answered, 1).otherwise(0)).over(wk))
        .withColumn("missed_in_row", F.sum(F.when(answered, 0).otherwise(1)).over(
            Window.partitionBy("conn_id", "_grp").orderBy("k")))
        .withColumn("_last", F.max("k").over(Window.partitionBy("conn_id")))
        .join(ends, "conn_id", "left")
    )
    return out.select(
        "conn_id", F.col("k").alias("heartbeat"), "ts", "interval_s", "answered", "response",
        "response_s", "nop_response_s", "missed_in_row",
        ((F.col("k") == F.col("_last")) & (F.col("missed_in_row") >= 2)
         & F.coalesce(F.col("closed"), F.lit(False))).alias("closed_after"),
    )


def flow_control(frames: DataFrame, delivered: DataFrame | None = None) -> DataFrame:
    """RDY and in-flight per connection over time, with the starvation test at each step."""
    d = delivered if delivered is not None else deliveries(frames)
    rdy = frames.where(F.col("name") == "RDY").select(
        "conn_id", "ts", F.lit(1).alias("prio"), "seq", F.lit("RDY").alias("event"),
        F.col("count").alias("rdy"), F.lit(0).alias("delta"), F.lit(None).cast("string")
        .alias("msg_id"),
    )
    start = d.select(
        "conn_id", "ts", F.lit(1).alias("prio"), F.lit(None).cast("long").alias("seq"),
        F.lit("MSG").alias("event"), F.lit(None).cast("long").alias("rdy"),
        F.lit(1).alias("delta"), "msg_id",
    )
    end = d.where(F.col("outcome_ts").isNotNull()).select(
        "conn_id", F.col("outcome_ts").alias("ts"),
        F.when(F.col("outcome") == "timeout", 0).otherwise(1).alias("prio"),
        F.lit(None).cast("long").alias("seq"), F.col("outcome").alias("event"),
        F.lit(None).cast("long").alias("rdy"), F.lit(-1).alias("delta"), "msg_id",
    )
    w = Window.partitionBy("conn_id").orderBy("ts", "prio", "event", "seq", "msg_id").rowsBetween(
        Window.unboundedPreceding, Window.currentRow)
    ev = rdy.unionByName(start).unionByName(end)
    return ev.select(
        "conn_id", "ts", "event", "msg_id",
        F.last("rdy", ignorenulls=True).over(w).alias("rdy"),
        F.sum("delta").over(w).alias("in_flight"),
    ).withColumn(
        "starved",
        (F.col("in_flight") > 0)
        & (F.col("in_flight") >= F.coalesce(F.col("rdy"), F.lit(0)) * STARVATION_RATIO),
    )


def sticky_packets(frames: DataFrame) -> DataFrame:
    """Distributions, per direction, of frames per packet and packets per frame (粘包)."""
    fr = frames.where(F.col("kind").isin(*_FRAMES))
    per_frame = fr.groupBy("dir", F.size("packets").alias("n")).count().withColumn(
        "measure", F.lit("packets_per_frame"))
    per_packet = (
        fr.select("dir", F.explode(F.arrays_zip("packet_files", "packets")).alias("p"))
        .groupBy("dir", "p").count()
        .groupBy("dir", F.col("count").cast("int").alias("n")).count()
        .withColumn("measure", F.lit("frames_per_packet"))
    )
    return per_frame.unionByName(per_packet).select("dir", "measure", "n", "count")


def rpc_pairs(frames: DataFrame) -> DataFrame:
    """One row per RPC request (protocols with ``rpc_serial``: TubeMQ): its method, the
    answer's status and errCode, and the latency in milliseconds (null: unanswered)."""
    rpc = frames.where(F.col("rpc_serial").isNotNull() & F.col("kind").isin(*_FRAMES))
    req = rpc.where(F.col("kind") == "command").select(
        "protocol", "conn_id", "rpc_serial", F.col("rpc_method").alias("method"),
        F.col("rpc_service").alias("service"), F.col("ts").alias("request_ts"),
        F.col("seq").alias("request_seq"),
    )
    ans = rpc.where(F.col("kind") == "frame").select(
        "conn_id", "rpc_serial", F.col("ts").alias("answer_ts"),
        F.col("seq").alias("answer_seq"), F.col("rpc_status").alias("status"), "err_code",
    )
    joined = req.join(ans, ["conn_id", "rpc_serial"], "left").where(
        F.col("answer_seq").isNull() | (F.col("answer_seq") > F.col("request_seq"))
    )
    first = Window.partitionBy("conn_id", "rpc_serial", "request_seq").orderBy(
        F.col("answer_seq").asc_nulls_last())
    return joined.withColumn("_n", F.row_number().over(first)).where(F.col("_n") == 1).select(
        "protocol", "conn_id", "rpc_serial", "method", "service", "request_ts", "answer_ts",
        "status", "err_code",
        ((F.col("answer_ts") - F.col("request_ts")) * 1000).alias("latency_ms"),
    )


def rpc_latency(frames: DataFrame, pairs: DataFrame | None = None) -> DataFrame:
    """Per protocol and method: requests, answers, unanswered, errors (an answer that is
    not SUCCESS or whose errCode is not 200), and latency in ms (min, median, p95, max,
    mean) over the answered requests."""
    pairs = rpc_pairs(frames) if pairs is None else pairs
    lat = F.col("latency_ms")
    ok = int(ErrorCode.SUCCESS)
    failed = ((F.col("status") != RpcStatus.SUCCESS.name)
              | (F.coalesce(F.col("err_code"), F.lit(ok)) != ok))
    return pairs.groupBy("protocol", "method").agg(
        F.count("*").alias("requests"),
        F.count("answer_ts").alias("answers"),
        F.sum(F.col("answer_ts").isNull().cast("int")).alias("unanswered"),
        F.sum(failed.cast("int")).alias("errors"),
        F.min(lat).alias("min_ms"),
        F.percentile_approx(lat, 0.5).alias("p50_ms"),
        F.percentile_approx(lat, 0.95).alias("p95_ms"),
        F.max(lat).alias("max_ms"),
        F.avg(lat).alias("mean_ms"),
    ).orderBy("protocol", "method")
