"""The pipeline through ``spark-submit`` on a real standalone cluster on 127.0.0.1.

A master and a worker are started from the installed PySpark
(:class:`~nsqviz.pipeline.standalone.StandaloneCluster`), the package is shipped the
standard way (``--py-files`` zip built by :mod:`nsqviz.pipeline.ship`), and the result
must equal the local run on the same captures.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import table

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def cluster(spark, tmp_path):
    """A standalone master + one 2-core worker."""
    from nsqviz.pipeline.standalone import StandaloneCluster

    with StandaloneCluster(tmp_path / "cluster", workers=1, cores=2) as c:
        yield c


@pytest.mark.timeout(900)  # two JVMs start, then a third submits; slow on a busy CI box
def test_spark_submit_on_standalone_cluster(cluster, captures, run_rotated, tmp_path):
    from nsqviz.pipeline.ship import build

    zpath, main = build(tmp_path / "dist")
    out = tmp_path / "out"
    cmd = cluster.submit(zpath, main, *captures["rotated"], "--out", str(out))
    proc = subprocess.run(cmd, env=cluster.env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "frames" in proc.stdout and str(out) in proc.stdout

    # The work ran in executors the worker launched, not in a local driver.
    apps = list(Path(cluster.work_dirs[0]).glob("app-*/*/stderr"))
    assert apps, "the worker launched no executor"

    class Result:
        def table(self, name):
            return str(out / name)

    for name in ("frames", "messages", "connections", "sticky_packets"):
        a, b = table(run_rotated, name), table(Result(), name)
        key = [c for c in a.columns if a[c].map(lambda v: isinstance(v, str | int | float)).all()]
        assert len(a) == len(b) > 0, name
        assert (a.sort_values(key).reset_index(drop=True)[key]
                .equals(b.sort_values(key).reset_index(drop=True)[key])), name
