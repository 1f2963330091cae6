"""Captures on Spark: pcap files -> TCP packets -> connections -> frames -> analyses.

``nsqviz pipeline CAPTURES... --out DIR`` or :func:`nsqviz.pipeline.job.run`; the pieces
are :mod:`.source` (``spark.read.format("pcap")``), :mod:`.frames` (each file
decoded in its own task, then the connections that cross file boundaries finished from
the state :mod:`.handoff` carries, with the capture package and the codec),
:mod:`.definitions` (the analyses collected: each protocol's SQL, defined once in its
own package -- messages, flow control, heartbeats, RPC request/answer pairs and
per-method latency -- and the capture layer's -- connections, errors, sticky packets;
DuckDB runs them in :mod:`.on_duckdb`, in-process for :mod:`nsqviz.analysis` and inside
the Spark tasks of :mod:`.analyses`, Spark SQL the views that combine brokers) and
:mod:`.spark` (the SparkSession and the Java check). PySpark is imported lazily: the
rest of nsqviz works without the ``spark`` extra.
"""
