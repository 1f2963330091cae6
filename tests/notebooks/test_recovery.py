"""After a notebook's cleanup cell, one more experiment gets one line naming the cell to run.

Each case runs a notebook's own cells in a real kernel (nbclient, the notebook's
directory as the working directory), in the notebook's order: the cells up to its
cleanup cell (all of them, or for the Spark notebook only the one that starts Spark),
then the cleanup, then one experiment cell of the notebook. The experiment must fail
with :class:`~nsqviz.clients.session.outcomes.SessionClosed` whose one line names the
cell that made the session by the prompt number the kernel gave it and by its first
line -- not the next cell's number (IPython 9 counts the next cell before this one runs),
nor a page of Java, nor a consumer that "does not hold" a partition.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsqviz.clients.session.outcomes import cell_reference, closed_message

pytestmark = pytest.mark.slow  # a kernel per case, and for 10 a JVM

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _code_cells(name: str) -> list[str]:
    cells = json.loads((NOTEBOOKS / name).read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def _find(sources: list[str], begins: str) -> int:
    found = [i for i, s in enumerate(sources) if s.lstrip().startswith(begins)]
    assert len(found) == 1, f"{len(found)} cells begin with {begins!r}"
    return found[0]


def run_in_kernel(name: str, sources: list[str]) -> list[dict]:
    """Run ``sources`` as the cells of one notebook in a fresh kernel, in order, going
    on after an error; the executed cells (``execution_count``, ``outputs``)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return [dict(c) for c in nb.cells]


# notebook, the first line of the cell that makes the session, the cleanup cell, the
# experiment cell (or learner code), what is closed and by what, and whether all the
# cells before the cleanup run (else only the one that makes the session)
CASES = [
    ("04-failure-labs.ipynb", "import socket", "session.close()",
     'slow = consumer("slow", "timeout")', "session", "close", True),
    ("10-spark-pipeline.ipynb", "import glob, os, tempfile", "spark.stop()",
     "captures = sorted(", "Spark session", "stop", False),
    ("11-tubemq.ipynb", "from nsqviz.clients.session.tubemq import TubeSession",
     "for client in (a, b):", "a.fetch('1:demo:0')", "session", "close", True),
    ("11-tubemq.ipynb", "from nsqviz.clients.session.tubemq import TubeSession",
     None, "a.heartbeat()", "session's simulator", "stop", True),
]


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("name", "made", "cleanup", "experiment", "what", "how", "all_"),
                         CASES, ids=[f"{c[0][:2]}-{c[4]}" for c in CASES])
def test_an_experiment_after_the_cleanup_names_the_cell_that_made_the_session(
        name, made, cleanup, experiment, what, how, all_):
    sources = _code_cells(name)
    made_at = _find(sources, made)
    if cleanup is None:  # the learner stops the simulator alone
        stop_at = _find(sources, "for client in (a, b):")
        before, cleanup_code = sources[:stop_at], "sim.stop()"
    else:
        stop_at = _find(sources, cleanup)
        before = sources[:stop_at] if all_ else sources[:made_at + 1]
        cleanup_code = sources[stop_at]
    try:
        tried = sources[_find(sources, experiment)]
    except AssertionError:
        tried = experiment  # learner code, not a cell of the notebook
    ran = run_in_kernel(name, [*before, cleanup_code, tried])
    made_cell = ran[made_at if all_ or cleanup is None else len(before) - 1]
    for cell in ran[:-1]:
        errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
        assert not errors, (cell["source"][:200], errors)
    errors = [o for o in ran[-1]["outputs"] if o["output_type"] == "error"]
    assert len(errors) == 1, ran[-1]["outputs"]
    said = errors[0]
    reference = cell_reference(made_cell["execution_count"], made_cell["source"])
    assert (said["ename"], said["evalue"]) == (
        "SessionClosed", closed_message(what, reference, how=how))
    assert said["traceback"] == [f"SessionClosed: {said['evalue']}"]  # one line
    assert f"cell [{made_cell['execution_count']}] (it begins `{made}" in said["evalue"]


def test_a_cell_is_named_by_its_number_and_first_line():
    assert cell_reference(3, "\n\n  spark = get_session()\nx = 1") == \
        "cell [3] (it begins `spark = get_session()`)"
    long = "x = " + "1 + " * 40 + "1"
    said = cell_reference(12, long)
    assert said.startswith("cell [12] (it begins `x = 1 + ") and said.endswith("…`)")
    assert len(said) < 90
    assert cell_reference(4, "   \n") == "cell [4]"


def test_in_ipython_the_running_cell_is_the_one_named():
    """The prompt number of the cell that runs ``made_where()``, whichever way this
    IPython counts (``execution_count`` already names the next cell in IPython 9)."""
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_cell("x = 1", store_history=True)
        result = shell.run_cell(
            "# the making cell\nfrom nsqviz.clients.session.outcomes import made_where\n"
            "where = made_where()", store_history=True)
        assert shell.user_ns["where"] == \
            f"cell [{result.execution_count}] (it begins `# the making cell`)"
    finally:
        InteractiveShell.clear_instance()
