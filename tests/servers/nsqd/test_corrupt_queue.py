"""One damaged record in a channel's disk queue (issue 33 item 1): the broker sets it
aside and delivers every intact record -- at least as many as the real nsqd delivers
from the same file -- and no consumer's connection ever pays for it.

The queue is written by a broker and damaged in the middle (:mod:`._corrupt`): three
bytes of an id that are no hex digits (before: a BadMessageID in the consumer's encoder,
its connection cut, the channel stuck), a size 5 bytes too long or 0x7fffffff (nsqd, as
the broker before, gives up on the rest of the file), attempts at 65535 (the next
delivery wraps to 0 in nsqd; before, the encoder failed), or bytes in a body (no check
can see those: both deliver it).
"""

from __future__ import annotations

import pytest

from tests.servers.nsqd import _corrupt
from tests.servers.nsqd._processes import NSQD_MISSING, find_nsqd

pytestmark = pytest.mark.slow

N = 1000
DAMAGED = N // 2
SET_ASIDE = {"id", "size", "huge size"}  # the damage the checks on reading see


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The queue as each broker writes it (nsqd's only where nsqd is found)."""
    root = tmp_path_factory.mktemp("written")
    kinds = ["ours", "nsqd"] if find_nsqd() is not None else ["ours"]
    return {kind: _corrupt.write_queue(kind, root, N) for kind in kinds}


@pytest.mark.parametrize("case", list(_corrupt.DAMAGE))
def test_every_intact_record_is_delivered_and_the_bad_one_set_aside(written, tmp_path, case):
    damaged = _corrupt.damage(written["ours"], tmp_path / "data", case, DAMAGED)
    log = tmp_path / "ours.log"
    got = _corrupt.run("ours", damaged, log, expect=len(damaged.messages))
    assert not got.closed and not got.errors
    assert got.intact(damaged.messages) == len(damaged.messages)
    assert len(got.messages) == len(damaged.messages) + (case == "body")  # nothing twice
    bad = damaged.data / (_corrupt.QUEUE_FILE + ".bad")
    if case in SET_ASIDE:
        assert bad.read_bytes() == damaged.after
        assert f"{len(damaged.after)} bytes at offset {damaged.offset} of " in log.read_text()
    else:
        assert not bad.exists()
    if case == "attempts":  # 65535 + 1 wraps, as nsqd's uint16 does
        assert {a for _, _, a in got.messages} == {0, 1}


@pytest.mark.skipif(find_nsqd() is None, reason=NSQD_MISSING)
@pytest.mark.parametrize("case", list(_corrupt.DAMAGE))
def test_at_least_what_nsqd_delivers_from_the_same_file(written, tmp_path, case, capsys):
    """The file nsqd wrote, damaged the same way in two copies, one for each broker."""
    counts = {}
    for kind in ("nsqd", "ours"):
        damaged = _corrupt.damage(written["nsqd"], tmp_path / kind, case, DAMAGED)
        got = _corrupt.run(kind, damaged, tmp_path / f"{kind}.log")
        assert not got.closed
        counts[kind] = got.intact(damaged.messages)
    with capsys.disabled():
        print(f"\n  {case}: intact records delivered of {len(damaged.messages)}: "
              f"nsqd {counts['nsqd']}, ours {counts['ours']}")
    assert counts["ours"] == len(damaged.messages) >= counts["nsqd"]
