"""Where a pipeline run gets its SparkSession, and the one check that saves an hour: Java.

Defaults: ``local[*]``; a driver heap sized to the input (:func:`driver_memory_for`: in
local mode the executors live inside the driver JVM, and the real work -- TCP reassembly
and protocol decoding -- happens in Python workers, outside the JVM heap, so the heap
only holds Spark's own bookkeeping and the analyses' shuffles and Parquet buffers: 512
MB for the sample captures, 1 GB from 64 MB of input, 4 GB only when asked); few
shuffle partitions (the default 200 would mean 200 tiny Python tasks per stage); for
small inputs a JVM tuned to start fast and stay small (serial GC, a heap that grows only
as needed, a small code cache, no C2 compiler); and Arrow for every pandas hand-over. Under
``spark-submit`` the session already exists and its master/memory come from the command
line: :func:`get_session` then only adds the SQL settings that do not need a JVM restart.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import weakref
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pyspark is imported when a session is made
    from pyspark.sql import SparkSession


__all__ = ["DEFAULT_MASTER", "JavaMissing", "check_java", "check_running", "driver_memory_for",
           "get_session", "input_bytes"]

DEFAULT_MASTER = "local[*]"
MIN_JAVA = 17
_SMALL_JVM_OPTIONS = ("-XX:+UseSerialGC -Xms64m -Xmn32m -XX:MinHeapFreeRatio=10"
                      " -XX:MaxHeapFreeRatio=30 -XX:ReservedCodeCacheSize=64m"
                      " -XX:TieredStopAtLevel=1")
"""For small inputs: startup and footprint over peak JIT speed (the JVM schedules tasks
and runs the analyses; decoding and its Parquet are Python's). The heap starts at 64 MB
and grows only as far as a collection leaves it less than 10 % free, with a 32 MB young
generation: by default the serial collector starts with 1/64 of the machine's memory
and touches all of it before its first full collection (notebook 10, measured from
/proc: the JVM's peak RSS 691 MB -> 539 MB). Large inputs keep the JVM's defaults."""


def input_bytes(files: Iterable[str]) -> int:
    """Bytes of the capture ``files`` (as :func:`~nsqviz.capture.paths.expand_paths`
    names them)."""
    return sum(os.path.getsize(f) for f in files)


def driver_memory_for(n_bytes: int | None) -> str:
    """The driver heap for ``n_bytes`` of captures (``None``: unknown, taken as large)."""
    if n_bytes is not None and n_bytes < 64 * 2**20:
        return "512m"
    return "1g"

# Settings that can be changed on a running session (so also under spark-submit).
_SQL_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
    # Bounds the Arrow batch sent to one grouped-map call *chunk*; a connection is
    # still one group (a group cannot be split), so this caps the pandas copies only.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "20000",
    "spark.sql.session.timeZone": "UTC",
}


class JavaMissing(RuntimeError):
    """No usable Java runtime: Spark cannot start. The message says how to get one."""


def check_java() -> str:
    """Return the ``java -version`` banner, or raise :class:`JavaMissing` with the fix."""
    java = shutil.which("java", path=_java_path())
    if java is None:
        raise JavaMissing(
            f"Spark needs a Java {MIN_JAVA}+ runtime and none was found (no `java` on PATH "
            "and no JAVA_HOME). Install one, e.g. `sudo apt-get install "
            f"openjdk-{MIN_JAVA}-jre-headless` (Debian/Ubuntu), `brew install openjdk@{MIN_JAVA}` "
            "(macOS), or run `make sysdeps` as root."
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    banner = (out.stderr or out.stdout).strip()
    major = _java_major(banner)
    if major is not None and major < MIN_JAVA:
        raise JavaMissing(
            f"Spark 4 needs Java {MIN_JAVA}+, but {java} is Java {major}. Install "
            f"openjdk-{MIN_JAVA}-jre-headless (or newer) and put it first on PATH or in JAVA_HOME."
        )
    return banner


def _java_path() -> str | None:
    home = os.environ.get("JAVA_HOME")
    path = os.environ.get("PATH", "")
    return f"{home}/bin{os.pathsep}{path}" if home else path


def _java_major(banner: str) -> int | None:
    import re

    m = re.search(r'version "(\d+)(?:\.(\d+))?', banner)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 and m.group(2) else major


def get_session(
    master: str | None = None,
    *,
    app_name: str = "nsqviz-pipeline",
    driver_memory: str | None = None,
    input_bytes: int | None = None,
    shuffle_partitions: int | None = None,
    conf: dict[str, str] | None = None,
    jvm_log: str | os.PathLike[str] | None = None,
) -> SparkSession:
    """A SparkSession with the pcap source registered.

    ``driver_memory`` defaults to :func:`driver_memory_for` ``input_bytes`` (the size of
    what will be read, when known). ``master=None`` reuses an active session
    (spark-submit, a notebook's existing one) and otherwise starts ``local[*]``. Raises
    :class:`JavaMissing` before Spark would fail with a long JVM stack trace.
    ``jvm_log`` sends the JVM's own stdout/stderr (log4j warnings with timestamps, Python
    worker tracebacks) to a file instead of the terminal -- in a notebook they would
    otherwise land in whatever cell is running.
    """
    from pyspark.sql import SparkSession

    from nsqviz.clients.session.outcomes import made_where
    from nsqviz.pipeline.source import PcapDataSource

    spark = SparkSession.getActiveSession()
    if spark is None or master is not None:
        if spark is None:
            check_java()
        # Python workers must run the interpreter that has nsqviz and its dependencies,
        # not whatever `python3` is first on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # Under spark-submit the JVM is already running with --master and the driver
        # memory it was given (PYSPARK_GATEWAY_PORT says so): leave both alone.
        submitted = "PYSPARK_GATEWAY_PORT" in os.environ
        if not submitted and (master or DEFAULT_MASTER).startswith("local"):
            # A local run talks to itself only: bind to loopback, not the host's address.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = SparkSession.builder.appName(app_name)
        if master is not None or not submitted:
            builder = builder.master(master or DEFAULT_MASTER)
        if not submitted:
            memory = driver_memory or driver_memory_for(input_bytes)
            builder = builder.config("spark.driver.memory", memory)
            if memory == "512m":
                builder = builder.config("spark.driver.extraJavaOptions", _SMALL_JVM_OPTIONS)
        cores = _cores(master or DEFAULT_MASTER)
        parts = shuffle_partitions or max(4, 2 * cores)
        builder = (
            builder.config("spark.sql.shuffle.partitions", str(parts))
            .config("spark.default.parallelism", str(parts))
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.python.worker.reuse", "true")
        )
        for key, value in (conf or {}).items():
            builder = builder.config(key, value)
        if jvm_log is None:
            spark = builder.getOrCreate()
        else:
            with _redirected_fds(jvm_log):
                spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(os.environ.get("NSQVIZ_SPARK_LOG_LEVEL", "ERROR"))
    for key, value in _SQL_CONF.items():
        spark.conf.set(key, value)
    spark.dataSource.register(PcapDataSource)
    _MADE.setdefault(spark, made_where())
    return spark


_MADE: weakref.WeakKeyDictionary[SparkSession, str] = weakref.WeakKeyDictionary()
"""Where each session :func:`get_session` gave out was made, for :func:`check_running`."""


def check_running(spark: SparkSession) -> None:
    """Raise :class:`~nsqviz.clients.session.outcomes.SessionClosed` -- one line, naming
    the cell that made ``spark`` -- once ``spark.stop()`` ran: Spark itself would go on
    and fail inside the JVM with a hundred lines of Java ending in an unrelated
    ``DATA_SOURCE_NOT_FOUND`` (the stopped session forgot the registered pcap source)."""
    from nsqviz.clients.session.outcomes import SessionClosed, closed_message

    if spark.sparkContext._jsc is None:  # what SparkContext.stop() leaves
        raise SessionClosed(closed_message(
            "Spark session", _MADE.get(spark, "the code that made it"), how="stop"))


def _cores(master: str) -> int:
    """Cores a ``local[N]``/``local[*]`` master uses; 2 for anything else."""
    import re

    m = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master)
    if not m:
        return 2
    return (os.cpu_count() or 2) if m.group(1) == "*" else int(m.group(1))


@contextlib.contextmanager
def _redirected_fds(path: str | os.PathLike[str]) -> Iterator[None]:
    """Point file descriptors 1 and 2 at ``path`` while a child process is started.

    The JVM inherits the descriptors it is started with; this process gets its own back.
    """
    saved = [os.dup(1), os.dup(2)]
    with open(path, "ab") as log:
        try:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
