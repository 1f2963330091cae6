"""Packaging the pipeline for ``spark-submit`` on a cluster, the standard way.

Executors import nsqviz from a zip shipped with ``--py-files``; the application file is
:mod:`nsqviz.pipeline.job`'s own source, copied next to it. Third-party dependencies
(construct, python-snappy, pyarrow, pandas) must be importable by the executors' Python
-- install them there, or ship a packed virtualenv with ``--archives`` (venv-pack /
conda-pack) and point ``spark.pyspark.python`` at it::

    python -m nsqviz.pipeline.ship dist/
    spark-submit --master spark://HOST:7077 --py-files dist/nsqviz.zip \\
        dist/nsqviz_pipeline_main.py /data/captures/ --out /data/out

Capture paths must be readable by every executor under the same name (a shared file
system): the pcap source opens them by path.
"""

from __future__ import annotations

import os
import shutil
import sys
import zipfile

__all__ = ["build"]

MAIN_NAME = "nsqviz_pipeline_main.py"


def build(dest: str | os.PathLike[str]) -> tuple[str, str]:
    """Write ``dest/nsqviz.zip`` (the package with its data files) and
    ``dest/nsqviz_pipeline_main.py``; return their paths."""
    dest = os.fspath(dest)
    os.makedirs(dest, exist_ok=True)
    # this module's own package's package: the nsqviz these files are part of
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    root = os.path.dirname(package)
    zpath = os.path.join(dest, "nsqviz.zip")
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
        for folder, dirs, files in os.walk(package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):  # modules and their data (TubeMQ's .proto sources)
                if not name.endswith((".pyc", ".pyo")):
                    full = os.path.join(folder, name)
                    z.write(full, os.path.relpath(full, root))
    from nsqviz.pipeline import job

    main = os.path.join(dest, MAIN_NAME)
    shutil.copyfile(job.__file__, main)
    return zpath, main


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "dist"
    z, m = build(out)
    print(f"spark-submit --master MASTER --py-files {z} {m} CAPTURES... --out DIR")
