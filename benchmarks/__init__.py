"""Benchmarks: each module's ``main()`` prints its own figures, with ratios against a
baseline measured in the same run. Run one with ``python -m benchmarks.NAME``, all with
``python -m benchmarks`` (``make bench``). Not part of the test suite's pass/fail."""
