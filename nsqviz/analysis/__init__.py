"""Captures analysed in-process: the analyses defined once as SQL by each protocol and
the capture layer (collected by :mod:`nsqviz.pipeline.definitions`), run by DuckDB
(:mod:`nsqviz.pipeline.on_duckdb`) here and in :mod:`nsqviz.pipeline.analyses`' tasks;
``nsqviz.open`` (:mod:`.capture`) and ``nsqviz messages/connections/stats``
(:mod:`.cli`, :mod:`.stats`), one message's lifecycle picture (:mod:`.lifecycle`)."""
