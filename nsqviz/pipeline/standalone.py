"""A Spark standalone cluster on 127.0.0.1: a master and N workers, for ``spark-submit``.

The pip package of PySpark has no ``sbin/start-*.sh``; the daemons are started with its
``bin/spark-class``, each in its own process group, and stopped with it. Used by the
cluster test and the pipeline benchmark to run the job the way a real cluster runs it
(``spark-submit`` with the package shipped by :mod:`nsqviz.pipeline.ship`)::

    with StandaloneCluster(workdir, workers=2, cores=1) as cluster:
        subprocess.run(cluster.submit(zip_path, main_path, *args), env=cluster.env)
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
from typing import IO, Any, cast

__all__ = ["StandaloneCluster"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


class StandaloneCluster:
    """Start with ``with``; ``url`` is the master, ``env`` the environment to submit in."""

    def __init__(self, workdir: str | os.PathLike[str], *, workers: int = 1, cores: int = 2,
                 memory: str = "2g", timeout: float = 90.0):
        import pyspark

        self.workdir = os.fspath(workdir)
        self.workers, self.cores, self.memory, self.timeout = workers, cores, memory, timeout
        self.home = os.path.dirname(pyspark.__file__)
        self.port, self.ui = _free_port(), _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = dict(os.environ, SPARK_HOME=self.home, SPARK_LOCAL_IP="127.0.0.1",
                        PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                        SPARK_LOG_DIR=os.path.join(self.workdir, "logs"),
                        SPARK_NO_DAEMONIZE="1")
        self.procs: list[tuple[subprocess.Popen[bytes], IO[bytes]]] = []

    @property
    def work_dirs(self) -> list[str]:
        return [os.path.join(self.workdir, f"work{i}") for i in range(self.workers)]

    def _start(self, *args: str, log: str) -> subprocess.Popen[bytes]:
        os.makedirs(self.workdir, exist_ok=True)
        out = open(os.path.join(self.workdir, log), "wb")  # noqa: SIM115 - closed in stop()
        p = subprocess.Popen([os.path.join(self.home, "bin", "spark-class"), *args],
                             env=self.env, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.procs.append((p, out))
        return p

    def _alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=2) as r:
                return int(json.load(r).get("aliveworkers", 0))
        except OSError:
            return 0

    def _wait(self, predicate: Any, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            for p, _ in self.procs:
                if p.poll() is not None:
                    program = cast(list[str], p.args)[1]  # started with a list: the class
                    raise RuntimeError(f"{program} exited with {p.returncode} before {what}"
                                       f" (logs in {self.workdir})")
            time.sleep(0.5)
        raise RuntimeError(f"timed out waiting for {what} (logs in {self.workdir})")

    def __enter__(self) -> StandaloneCluster:
        try:
            self._start("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                        "--port", str(self.port), "--webui-port", str(self.ui),
                        log="master.log")
            self._wait(lambda: _port_open(self.port), "the master")
            for i, work in enumerate(self.work_dirs):
                self._start("org.apache.spark.deploy.worker.Worker", self.url,
                            "--host", "127.0.0.1", "--cores", str(self.cores),
                            "--memory", self.memory, "--webui-port", str(_free_port()),
                            "--work-dir", work, log=f"worker{i}.log")
            self._wait(lambda: self._alive_workers() >= self.workers, "the workers")
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def submit(self, py_files: str, main: str, *args: str,
               executor_memory: str = "1g") -> list[str]:
        """The ``spark-submit`` command line for ``main`` with ``args``."""
        return [os.path.join(self.home, "bin", "spark-submit"), "--master", self.url,
                "--py-files", py_files,
                "--conf", f"spark.executor.memory={executor_memory}",
                "--conf", f"spark.pyspark.python={sys.executable}",
                "--conf", "spark.driver.host=127.0.0.1",
                main, *args]

    def stop(self) -> None:
        """Stop the daemons (their process groups), newest first."""
        for p, out in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            out.close()
        self.procs.clear()
