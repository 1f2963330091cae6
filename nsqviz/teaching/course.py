"""The course: the notebooks in one reading order, with one time estimate each.

The files are numbered in this order, so JupyterLab's file browser, the site and every
**Next** link agree; the order itself lives here, once: notebook 01's path table and every
notebook's **Next** link are written from it (``python -m nsqviz.teaching.course
notebooks/``), and a test checks that the file names and what the notebooks say follow
this table.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["COURSE", "Lesson", "next_cell", "path_cell", "path_table", "write"]


@dataclass(frozen=True)
class Lesson:
    """One notebook of the course: its file, title, what it teaches, how long it takes
    a newcomer to read and run once (``None``: a card to keep open, not to read through)."""

    file: str
    title: str
    line: str
    minutes: int | None

    @property
    def number(self) -> str:
        return self.file[:2]


COURSE: tuple[Lesson, ...] = (
    Lesson("00-reference.ipynb", "reference card", "every command, frame, error, IDENTIFY key, "
           "name rule and size limit, generated from the code — keep it open", None),
    Lesson("01-wire-format.ipynb", "wire format",
           "build and parse every command and frame, byte by byte", 20),
    Lesson("02-live-session.ipynb", "live session",
           "step a consumer and a publisher through a whole session against the embedded "
           "broker", 30),
    Lesson("03-sticky-packets.ipynb", "sticky packets",
           "how a byte stream becomes frames again (粘包), the playground", 20),
    Lesson("04-failure-labs.ipynb", "failure labs", "break it on purpose: the errors nsqd "
           "sends, fatal or not, and the timers behind them", 10),
    Lesson("05-feature-negotiation.ipynb", "feature negotiation",
           "snappy, deflate, TLS, AUTH", 20),
    Lesson("06-pcap-replay.ipynb", "pcap replay", "real captures replayed packet by packet", 15),
    Lesson("07-debugging-a-capture.ipynb", "debugging a capture",
           "an operator's questions about a real nsqd's capture, one command each", 10),
    Lesson("08-client-library.ipynb", "client library",
           "the client guide's rules on the wire: RDY shares, backoff, discovery", 30),
    Lesson("09-wireshark.ipynb", "Wireshark", "the generated dissectors in tshark", 15),
    Lesson("10-spark-pipeline.ipynb", "Spark pipeline",
           "captures at scale: lifecycles and protocol health", 15),
    Lesson("11-tubemq.ipynb", "TubeMQ", "a second binary protocol beside NSQ", 30),
)
"""The reading order."""

NEXT_ID = "next"
"""The id of the Next cell in each notebook (before its exercises)."""

PATH_ID = "reading-order"
"""The id of notebook 01's cell with the path table."""


def path_table(here: str = "01") -> str:
    """The markdown table of the course, ``here`` marked "(this one)"."""
    rows = ["| # | notebook | one line | time |", "|---|---|---|---|"]
    for lesson in COURSE:
        title = f"{lesson.title} (this one)" if lesson.number == here else \
            f"[{lesson.title}]({lesson.file})"
        time = "—" if lesson.minutes is None else f"{lesson.minutes} min"
        rows.append(f"| {lesson.number} | {title} | {lesson.line} | {time} |")
    return "\n".join(rows)


def path_cell() -> str:
    """Notebook 01's path cell: the table and how to read it."""
    return ("### Your path through the notebooks\n\n" + path_table("01") + "\n\n"
            "Times are estimates for reading and running once. Each notebook ends with a "
            "**Next** link that follows this order, then exercises; the answers open with a "
            "click.\nTo start JupyterLab: `make lab`, then open the "
            "`http://127.0.0.1:8888/lab?token=…` URL it prints (it runs as root\nwith "
            "`--allow-root` on this project's machines).")


def next_cell(file: str) -> str:
    """The Next cell's text for ``file``: the following lesson, or the course's end."""
    at = [lesson.file for lesson in COURSE].index(file)
    if at + 1 == len(COURSE):
        return ("**This is the last notebook of the course.** The path through all of them is "
                "the table at the top of [01 · wire format](01-wire-format.ipynb).")
    nxt = COURSE[at + 1]
    time = f" (about {nxt.minutes} min)" if nxt.minutes else ""
    return f"**Next:** [{nxt.number} · {nxt.title}]({nxt.file}){time}: {nxt.line}."


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def write(notebooks: Path) -> None:
    """Put each lesson's Next cell before its exercises (replacing an older one), and the
    path table into notebook 01."""
    for lesson in COURSE[1:]:
        path = notebooks / lesson.file
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell.get("id") == PATH_ID:
                cell["source"] = _lines(path_cell())
        cells = [c for c in nb["cells"] if c.get("id") != NEXT_ID]
        at = next((i for i, c in enumerate(cells)
                   if str(c.get("id", "")).startswith("exercises-")), len(cells))
        cells.insert(at, {"cell_type": "markdown", "id": NEXT_ID, "metadata": {},
                          "source": _lines(next_cell(lesson.file))})
        nb["cells"] = cells
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    write(Path(sys.argv[1] if len(sys.argv) > 1 else "notebooks"))
