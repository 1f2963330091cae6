"""``nsqviz decode`` of a short capture loads only what decoding needs.

A run's start-up is most of a short capture's time (``benchmarks.wireshark_decode``
prints it beside ``tshark -r``): the analyses' engines (pandas, pyarrow, DuckDB), the
notebook widgets and the display-filter engine (RE2) are imported where they are used,
never by the decode command itself; and a protocol's codec, events and grammar are
imported when a connection is first found to speak it -- every registered protocol is
offered every flow, through detection that reads its wire constants alone. Each check is
a fresh interpreter, whose ``sys.modules`` is what the run imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data"

NOT_FOR_DECODE = ("pandas", "pyarrow", "duckdb", "ipywidgets", "re2", "nsqviz.filters",
                  "nsqviz.analysis", "nsqviz.pipeline", "asyncio",
                  "socket", "subprocess", "hashlib", "difflib")
"""Top-level modules a plain ``nsqviz decode`` (no ``-Y``) has no use for: the analyses'
engines and the filters', and standard modules that cost a short capture's run more to
import than decoding it (a live capture's tool, the frames table's digests, a bad
argument's nearest choices; IPv4 addresses are written without ``socket``)."""


def _loaded_after(code: str) -> set[str]:
    """The top-level and nsqviz modules in ``sys.modules`` after running ``code``."""
    probe = (f"import sys, json\n{code}\n"
             "print(json.dumps(sorted(sys.modules)), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=120)
    names = json.loads(done.stderr.strip().splitlines()[-1])
    return set(names) | {n.split(".")[0] for n in names}


NOT_FOR_NSQ = ("construct", "google.protobuf", "h11", "nsqviz.tubemq.codec",
               "nsqviz.tubemq.events", "nsqviz.tubemq.grammar", "nsqviz.tubemq.protos",
               "nsqviz.tubemq.items", "nsqviz.lookupd.grammar", "nsqviz.lookupd.events",
               "nsqviz.lookupd.observer", "nsqviz.lookupd.items", "nsqviz.http.events",
               "nsqviz.http.observer", "nsqviz.http.items", "nsqviz.nsq.grammar",
               "nsqviz.nsq.fields", "nsqviz.doctor", "nsqviz.sql", "nsqviz.report")
"""What ``nsqviz decode`` of an NSQ-only capture has no use for: the other protocols'
codecs, events and grammars (protobuf and h11 with them), NSQ's construct grammar and
filter fields (its struct-based codec decodes), the analyses' and the doctor's parts."""


def _unwanted(loaded: set[str], unwanted: tuple[str, ...] = NOT_FOR_DECODE) -> list[str]:
    return sorted(n for n in unwanted if n in loaded)


def _decoded(capture: Path, *options: str) -> set[str]:
    """What a fresh interpreter imported to run ``nsqviz decode --json [options] capture``
    (which must print records)."""
    return _loaded_after(
        "import contextlib, io\nfrom nsqviz.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    assert main(['decode', '--json', *{list(options)!r}, {str(capture)!r}]) == 0\n"
        "assert out.getvalue().count('\\n') > 5")


def test_importing_the_decode_command_loads_no_analysis_engine():
    loaded = _loaded_after("import nsqviz.capture.cli")
    assert "nsqviz.capture.cli" in loaded
    assert _unwanted(loaded) == []


def test_a_decode_run_loads_no_analysis_engine():
    capture = DATA / "pubsub-nsqjs.pcapng"
    loaded = _loaded_after(
        "import contextlib, io\nfrom nsqviz.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    assert main(['decode', '--json', {str(capture)!r}]) == 0\n"
        "assert out.getvalue().count('\\n') > 10")
    assert "nsqviz.records" in loaded
    assert _unwanted(loaded) == []


def test_a_display_filter_loads_the_filter_engine_when_asked():
    """The check above can fail: ``-Y`` does import what it lists."""
    capture = DATA / "pubsub-nsqjs.pcapng"
    loaded = _loaded_after(
        "import contextlib, io\nfrom nsqviz.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['decode', '-Y', 'nsq', {str(capture)!r}])")
    assert {"re2", "nsqviz.filters"} <= loaded


def test_an_nsq_capture_loads_no_other_protocols_codec_nor_any_grammar():
    loaded = _decoded(DATA / "pubsub-nsqjs.pcapng")
    assert {"nsqviz.nsq.observer", "nsqviz.tubemq.protocol", "nsqviz.lookupd.protocol",
            "nsqviz.http.protocol"} <= loaded  # every protocol was offered the flows
    assert _unwanted(loaded, NOT_FOR_NSQ) == []


def test_a_protocols_codec_loads_when_a_connection_speaks_it():
    """The check above can fail: a TubeMQ capture loads TubeMQ's codec (protobuf with
    it), an HTTP one h11, a lookup one its grammar -- and none of them the others'."""
    tubemq = _decoded(DATA / "tubemq" / "tubemq-errors.pcap")
    assert {"nsqviz.tubemq.codec", "nsqviz.tubemq.items", "google.protobuf"} <= tubemq
    assert not {"h11", "nsqviz.lookupd.events"} & tubemq
    http = _decoded(DATA / "http" / "curl-pub-real.pcap")
    assert {"nsqviz.http.observer", "h11"} <= http
    assert not {"google.protobuf", "nsqviz.tubemq.codec"} & http
    lookupd = _decoded(DATA / "lookupd" / "nsqd-register-real.pcap")
    assert {"nsqviz.lookupd.observer", "nsqviz.lookupd.grammar"} <= lookupd
    assert not {"google.protobuf", "h11"} & lookupd
