"""The doctor's report, as ``cap.diagnose()`` shows it in a notebook, on real captures of
data/doctor/: still a DataFrame; its cards most severe first, each with its rule,
summary, what to change and every packet of its evidence as an opener of the replay of
that packet's connection at that packet; a timeline lane per connection the findings
name, each finding a bar on its lanes."""

from __future__ import annotations

import re
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd

from nsqviz.analysis.capture import Capture
from nsqviz.analysis.findings import Findings
from nsqviz.doctor.rule import Severity
from nsqviz.widgets.findings import FindingsReport

DATA = Path(__file__).resolve().parents[2] / "data"


@cache
def diagnosed(name: str) -> Findings:
    return Capture(str(DATA / "doctor" / name), fields=False).diagnose()


class _Cards(HTMLParser):
    """The report's cards, in page order: each card's rule and severity, its opener
    labels (pick number, text) and its panes (number, caption text)."""

    def __init__(self) -> None:
        super().__init__()
        self.cards: list[dict[str, Any]] = []
        self.lanes: list[str] = []
        self.marks: list[str] = []
        self._in: str | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "div" and "nv-card" in classes:
            self.cards.append({"rule": a["data-rule"], "severity": next(
                c[3:] for c in classes if c[3:] in {s.value for s in Severity}),
                "links": [], "panes": []})
        elif tag == "label" and "nv-pktlink" in classes:
            k = next(int(c[7:]) for c in classes if re.fullmatch(r"nv-box-\d+", c))
            self.cards[-1]["links"].append([k, ""])
            self._in = "link"
        elif tag == "div" and self._in == "pane":
            self._depth += 1
        elif tag == "div" and "nv-pane" in classes:
            k = next(int(c[8:]) for c in classes if re.fullmatch(r"nv-pane-\d+", c))
            self.cards[-1]["panes"].append([k, ""])
            self._in, self._depth = "pane", 1
        elif tag == "text" and "nv-lane" in classes:
            self._in = "lane"
        elif tag == "g" and "nv-mark" in classes:
            self.marks.append(a["data-rule"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._in == "pane":
            self._depth -= 1
            if not self._depth:  # the pane's own end: it holds the replay's divs
                self._in = None
        elif tag in ("label", "text") and self._in != "pane":
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "link":
            self.cards[-1]["links"][-1][1] += data
        elif self._in == "pane":
            self.cards[-1]["panes"][-1][1] += data
        elif self._in == "lane":
            self.lanes.append(data)


def _parse(markup: str) -> _Cards:
    parser = _Cards()
    parser.feed(markup)
    return parser


def test_diagnose_is_still_a_dataframe() -> None:
    found = diagnosed("tcp-reset.pcap")
    assert isinstance(found, pd.DataFrame) and len(found) >= 3
    assert list(found.columns[:3]) == ["rule", "severity", "server"]
    errors = found[found.severity == "error"]
    assert type(errors) is pd.DataFrame and len(errors) < len(found)  # derived: plain
    assert "<table" in errors._repr_html_()  # and shown as a table again
    assert "nsqviz-doctor" in found._repr_html_()


def test_cards_most_severe_first_with_every_packet_an_opener_of_its_replay() -> None:
    found = diagnosed("tcp-reset.pcap")
    page = _parse(found.report().html())
    ranks = [Severity(c["severity"]).rank for c in page.cards]
    assert ranks == sorted(ranks) and len(set(ranks)) == 3, page.cards
    assert [c["rule"] for c in page.cards] == list(found.rule)
    for card, (_, f) in zip(page.cards, found.iterrows(), strict=True):
        packets = sorted({i["packet"] for i in f.evidence})
        # every packet of the evidence is a link, and each link's pane is the replay of
        # that packet's connection at that packet
        assert sorted({int(text) for _, text in card["links"]}) == packets, card
        panes = dict(card["panes"])
        for k, text in card["links"]:
            caption = panes[k]
            assert caption.startswith(f"packet {text} of tcp-reset.pcap: the replay of "), \
                caption
            assert f"· packet {text} of " in caption  # the replay's own title: at it
    first = found.iloc[0]
    markup = found.report().html()
    # the replays in the panes open nothing of their own (their radio group would answer
    # the card's): the only openers are the packet links
    assert markup.count('class="nv-pick nv-pick-') == sum(len(c["links"]) for c in page.cards)
    for words in (first.summary, first.change):
        assert words.replace("'", "&#x27;").replace('"', "&quot;") in markup


def test_timeline_has_a_lane_per_connection_and_each_finding_on_its_lanes() -> None:
    found = diagnosed("nsq-backlog.pcap")
    page = _parse(found.report().html())
    named = {c for _, f in found.iterrows() for c in [f.connection, *f.connections] if c}
    assert sorted(page.lanes) == sorted(named)
    expected = [f.rule for _, f in found.iterrows()
                for _ in dict.fromkeys([f.connection, *f.connections]) if _]
    assert page.marks == expected


def test_a_capture_with_nothing_wrong_says_so() -> None:
    found = diagnosed("healthy-nsqviz-client.pcap")
    report = FindingsReport(found.to_dict("records"), found.files, found.span)
    markup = report.html()
    assert found.empty and "no rule found anything wrong" in markup
    assert "class=\"nv-card" not in markup


def test_the_report_links_at_most_its_budget_of_replays(monkeypatch) -> None:
    from nsqviz.widgets import findings as view

    monkeypatch.setattr(view, "REPLAYS_LINKED", 2)
    found = diagnosed("tcp-reset.pcap")
    markup = found.report().html()
    page = _parse(markup)
    assert sum(len({k for k, _ in c["links"]}) for c in page.cards) == 2
    assert "the report links 2 packets at most: cap.replay(upto=N) shows the others" in markup


def test_its_text_is_what_nsqviz_doctor_prints_and_names_no_full_path() -> None:
    """A notebook stores a DataFrame's text beside its HTML: the doctor's terminal text,
    which reads the same wherever the capture lies (nbval compares it on any clone)."""
    import contextlib
    import io

    from nsqviz.cli import main

    path = str(DATA / "doctor" / "tcp-reset.pcap")
    text = repr(diagnosed("tcp-reset.pcap"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["doctor", path])
    assert str(DATA) not in text and "tcp.reset" in text
    assert [line.split()[:2] for line in text.splitlines() if line[:1].isupper()] == \
        [line.split()[:2] for line in out.getvalue().splitlines() if line[:1].isupper()]
