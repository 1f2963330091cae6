"""``make fuzz``: every fuzz target for a while under atheris, with counts.

``python -m tests.fuzz [--seconds S] [TARGET ...]`` runs each target for ``S`` seconds
(default 120) in its own process, seeded with valid and sample inputs; prints how many
inputs each ran and whether it failed. A failing input is written to
``tests/fuzz/regressions/<target>/`` -- from then on every test run replays it
(``test_fuzz.py::test_regressions_stay_fixed``) until the bug is fixed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.fuzz.targets import REGRESSIONS, ROOT, TARGETS, capture_seeds, filter_seeds

_DONE = re.compile(rb"Done (\d+) runs")
_STATS = re.compile(rb"#(\d+)\s")
_CRASH = re.compile(rb"Test unit written to (\S+)")


def _seed_corpus(name: str, folder: Path) -> None:
    from tests.fuzz.test_fuzz import (
        _http_seeds,
        _json_seeds,
        _lookupd_seeds,
        _nsq_seeds,
        _tubemq_seeds,
    )

    seeds = {"capture": capture_seeds(), "nsq_grammar": _nsq_seeds(),
             "tubemq_grammar": _tubemq_seeds(),
             "nsq_codec": [bytes([r, 1]) + b"".join(_nsq_seeds()) for r in range(5)],
             "tubemq_codec": [bytes([r, 0]) + b"".join(_tubemq_seeds()) for r in range(3)],
             "json_object": _json_seeds(), "lookupd_grammar": _lookupd_seeds(),
             "lookupd_codec": [bytes([r, 1]) + b"".join(_lookupd_seeds()) for r in range(3)],
             "http": [b"\0" + s for s in _http_seeds()], "display_filter": filter_seeds()}
    for i, data in enumerate(seeds[name]):
        (folder / f"seed-{i}").write_bytes(data)


def run(name: str, seconds: int) -> tuple[int, str | None]:
    """(inputs run, the failing input's file or None)."""
    out_dir = REGRESSIONS / name
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{name}-") as corpus:
        _seed_corpus(name, Path(corpus))
        max_len = 65536 if name == "capture" else 4096
        proc = subprocess.run(
            [sys.executable, "-m", "tests.fuzz._atheris_one", name,
             f"-max_total_time={seconds}", f"-max_len={max_len}", "-rss_limit_mb=4096",
             f"-artifact_prefix={out_dir}/", "-print_final_stats=1", corpus],
            cwd=ROOT, capture_output=True)
    log = proc.stdout + proc.stderr
    done = _DONE.findall(log) or _STATS.findall(log) or [b"0"]
    crash = _CRASH.search(log)
    if crash is None and proc.returncode != 0:
        sys.stderr.write(log.decode(errors="replace")[-3000:])
    return int(done[-1]), crash.group(1).decode() if crash else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=120, help="per target")
    parser.add_argument("targets", nargs="*", help=f"any of {', '.join(sorted(TARGETS))}")
    args = parser.parse_args(argv)
    names = args.targets or sorted(TARGETS)
    unknown = set(names) - set(TARGETS)
    if unknown:
        parser.error(f"no target named {', '.join(sorted(unknown))}")
    failed = 0
    total = 0
    for name in names:
        count, crash = run(name, args.seconds)
        total += count
        failed += crash is not None
        verdict = f"FAILED, input kept in {crash}" if crash else "no failure"
        print(f"{name:16} {count:>10,} inputs in {args.seconds} s: {verdict}", flush=True)
    print(f"{'all':16} {total:>10,} inputs, {failed} target(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
