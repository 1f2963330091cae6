"""Captures analysed in-process: the analyses defined once as SQL
(:mod:`nsqviz.pipeline.definitions`, beside the frames table they read), run by DuckDB
here (:mod:`.engine`) and by Spark SQL in :mod:`nsqviz.pipeline.analyses`;
``nsqviz.open`` (:mod:`.capture`) and ``nsqviz messages/connections/stats``
(:mod:`.cli`, :mod:`.stats`), one message's lifecycle picture (:mod:`.lifecycle`)."""
