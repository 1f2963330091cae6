"""The pipeline through ``spark-submit`` on a real standalone cluster on 127.0.0.1.

A master and a worker are started from the installed PySpark (``bin/spark-class``; the
pip package has no ``sbin/start-*.sh``), the package is shipped the standard way
(``--py-files`` zip built by :mod:`nsqviz.pipeline.ship`), and the result must equal the
local run on the same captures.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from .conftest import table

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str, procs) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"{p.args[2]} exited with {p.returncode} before {what}")
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


@pytest.fixture
def cluster(spark, tmp_path):
    """A standalone master + one 2-core worker; yields the master URL."""
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(home, "bin", "spark-class")
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOG_DIR=str(tmp_path / "logs"), SPARK_NO_DAEMONIZE="1")
    procs = []

    def start(*args, log):
        out = open(tmp_path / log, "wb")  # noqa: SIM115 - closed with the process
        p = subprocess.Popen([spark_class, *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
        procs.append((p, out))
        return p

    master = start("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                   "--port", str(port), "--webui-port", str(ui), log="master.log")
    try:
        _wait(lambda: _alive_workers(ui) >= 0 and _port_open(port), 90, "the master", [master])
        worker = start("org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                       "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
                       "--webui-port", str(worker_ui), "--work-dir", str(tmp_path / "work"),
                       log="worker.log")
        _wait(lambda: _alive_workers(ui) >= 1, 90, "the worker to register", [master, worker])
        yield {"url": f"spark://127.0.0.1:{port}", "env": env, "work": tmp_path / "work",
               "home": home}
    finally:
        for p, out in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            out.close()


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.timeout(900)  # two JVMs start, then a third submits; slow on a busy CI box
def test_spark_submit_on_standalone_cluster(cluster, captures, run_rotated, tmp_path):
    from nsqviz.pipeline.ship import build

    zpath, main = build(tmp_path / "dist")
    out = tmp_path / "out"
    cmd = [
        os.path.join(cluster["home"], "bin", "spark-submit"),
        "--master", cluster["url"],
        "--py-files", zpath,
        "--conf", "spark.executor.memory=1g",
        "--conf", f"spark.pyspark.python={sys.executable}",
        "--conf", "spark.driver.host=127.0.0.1",
        main, *captures["rotated"], "--out", str(out),
    ]
    proc = subprocess.run(cmd, env=cluster["env"], capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "frames" in proc.stdout and str(out) in proc.stdout

    # The work ran in executors the worker launched, not in a local driver.
    apps = list(cluster["work"].glob("app-*/*/stderr"))
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
