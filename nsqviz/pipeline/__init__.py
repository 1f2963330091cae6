"""Captures on Spark: pcap files -> TCP packets -> connections -> frames -> analyses.

``nsqviz pipeline CAPTURES... --out DIR`` or :func:`nsqviz.pipeline.job.run`; the pieces
are :mod:`.source` (``spark.read.format("pcap")``), :mod:`.frames` (each file
decoded in its own task, then the connections that cross file boundaries finished from
the state :mod:`.handoff` carries, with the capture package and the codec),
:mod:`.definitions` (the analyses as SQL, defined once: messages, connections, flow
control, heartbeats, sticky packets, RPC request/answer pairs and per-method latency --
Spark SQL runs them in :mod:`.analyses`, DuckDB in-process in :mod:`nsqviz.analysis`) and
:mod:`.spark` (the SparkSession and the Java check). PySpark is imported lazily: the
rest of nsqviz works without the ``spark`` extra.
"""
