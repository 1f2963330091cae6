"""Shared fixtures. Keep additive: each part of the project adds its own."""

# `make test` runs the tests on several pytest-xdist workers at once (scripts/test.sh
# passes -n; tests/_xdist.py deals them), while other people run tests on the same
# machine. So a test:
# 1. takes its ports from the OS: binds 127.0.0.1:0 (or uses tests._jupyter.free_port) and
#    reads the port back -- never a fixed port, not even nsqd's 4150;
# 2. writes only under tmp_path / tmp_path_factory (or to a file name of its own in
#    test-artifacts/) -- never to a fixed path in /tmp, $HOME or the checkout; a cache it
#    fills in the checkout (.venv-pynsq/) is filled under a file lock;
# 3. shares its file's worker: a file's tests run on one worker, in order, so a
#    module-scoped fixture is built once; other files run meanwhile on other workers;
# 4. gets a session-scoped fixture once per worker that uses it -- unless its folder is
#    listed TOGETHER in tests._xdist.UNITS (tests/pipeline: Spark; tests/docs: the site;
#    tests/differential: the nsqd pairs), whose tests all run on one worker. Put a costly
#    session fixture in such a folder's conftest, or list its folder there
#    (tests/test_xdist.py checks); a file whose tests each deserve a worker is listed EACH;
# 5. is marked `slow` (or `browser`, `spark`) when it takes more than a few seconds: the
#    units holding those start early (after tests._xdist.LONGEST, where a unit of minutes
#    belongs), so none is left running alone at the end;
# 6. waits for what it is about, not for the clock: it polls for a condition with a
#    deadline rather than sleeping a fixed time, and keeps a timer as short as what it
#    proves allows; the machine is busy, so a deadline is generous and a bound on
#    elapsed time has room;
# 7. needs nothing from another file's tests: no order between files, nothing left behind.
# `pytest -n0` (or no -n) runs everything in this one process, in file order.

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests import _xdist

# The real NSQ and TubeMQ programs the differential and interop tests run: where this
# project's machines keep them (beside the checkout), unless the environment says.
_MACHINE_PEERS = Path(__file__).resolve().parent.parent.parent / "shared" / "peers"
if _MACHINE_PEERS.is_dir():
    os.environ.setdefault("NSQVIZ_PEERS", str(_MACHINE_PEERS))

# Tests that signal a program they start (Ctrl-C to `nsqviz decode -i`, a closed
# terminal's SIGHUP) expect a terminal's dispositions; a run started in the background
# (`cmd &`, nohup) ignores SIGINT and SIGHUP, and its children would inherit that (a
# program started with SIGINT ignored keeps it ignored, as POSIX asks of background
# jobs). Python handlers are reset to the default in a child at exec, ignoring is not.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``-n N`` deals the tests as tests/_xdist.py says, unless ``--dist`` says otherwise."""
    if getattr(config.option, "numprocesses", None) and config.option.dist == "no":
        config.option.dist = "loadfile"


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") == "loadfile":
        return _xdist.make_scheduler(config, log)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _xdist.allow_for_shared_fixtures(items)
    if hasattr(config, "workerinput"):  # an xdist worker: the long units first
        _xdist.longest_first(items)


@pytest.fixture
def broker_options() -> dict:
    """Options for the ``broker`` fixture (nsqd's names, underscores); override per module."""
    return {}


@pytest.fixture
def broker(tmp_path, broker_options):
    """An in-process nsqd-compatible broker on free loopback ports, stopped afterwards.

    ``broker.tcp_address`` / ``broker.http_address`` are ``"127.0.0.1:PORT"``.
    """
    from nsqviz.servers.nsqd import EmbeddedBroker

    options = {"data_path": str(tmp_path / "nsqd"), **broker_options}
    with EmbeddedBroker(**options) as running:
        yield running


def peer(name: str):
    """The real program ``name`` (nsqd, to_nsq, ...), or skip the test saying how to provide it.

    Found by :func:`nsqviz.servers.peers.find`: ``$NSQD``-style variable, PATH, ``$NSQVIZ_PEERS``.
    """
    from nsqviz.servers.peers import PeerNotFound, require

    try:
        return require(name)
    except PeerNotFound as exc:
        pytest.skip(str(exc))


@pytest.fixture
def real_nsqd_options() -> dict:
    """Flags for the ``real_nsqd`` fixture (nsqd's names, underscores); override per module."""
    return {}


@pytest.fixture
def real_nsqd(tmp_path, real_nsqd_options):
    """The real nsqd on free loopback ports (skips when none is found), stopped afterwards.

    ``real_nsqd.tcp_address`` / ``real_nsqd.http_address`` are ``"127.0.0.1:PORT"``.
    """
    from nsqviz.servers.peers import RealNsqd

    binary = peer("nsqd")
    with RealNsqd(binary, data_path=str(tmp_path / "real-nsqd"), **real_nsqd_options) as running:
        yield running
