"""notebooks/00-reference.ipynb is the card nsqviz.teaching.reference renders from the code's tables."""

from __future__ import annotations

from pathlib import Path

from nsqviz.nsq import identify_fields
from nsqviz.teaching import reference
from nsqviz.servers.nsqd.options import Options
from nsqviz.nsq import framing, grammar
from nsqviz.nsq import wire as nsq_wire
from nsqviz.nsq.commands import COMMANDS, FRAMES
from nsqviz.nsq.errors import ErrorCode

CARD = Path(__file__).parents[2] / "notebooks" / "00-reference.ipynb"


def test_stored_card_is_what_the_code_renders():
    assert CARD.read_text() == reference.render(), (
        "notebooks/00-reference.ipynb is stale: run "
        "`python -m nsqviz.teaching.reference notebooks/00-reference.ipynb`")


def test_card_states_every_fact_the_tables_hold():
    text = "".join(c for _, c in reference.cells())
    for verb in COMMANDS:
        assert f"`{verb}" in text
    for name, value in FRAMES.values():
        assert f"| {name} | {value} |" in text
    for code in ErrorCode:
        assert f"`{code.value}` | {'fatal' if code.fatal else '**non-fatal**'}" in text
    assert {c.value for c in ErrorCode if not c.fatal} == {
        "E_FIN_FAILED", "E_REQ_FAILED", "E_TOUCH_FAILED"}
    for key in identify_fields.IDENTIFY_FIELDS:
        assert f"| {key} |" in text
    opts = Options()
    for n in (opts.max_msg_size, opts.max_body_size, framing.DEFAULT_MAX_FRAME_SIZE,
              opts.max_rdy_count, (opts.max_body_size - 4) // 5):
        assert f"| {n} |" in text
    assert reference.name_limit() == 64 and "1 to **64**" in text and "#ephemeral" in text
    assert "snappy and deflate cannot be combined" in text
    assert "0 requeues the message at once" in text
    assert "| id | 10..25 | 16 ASCII hex digits |" in text


def test_name_limit_is_found_by_asking_the_grammar(monkeypatch):
    monkeypatch.setattr(nsq_wire, "is_valid_topic_name", lambda n: 1 <= len(n) <= 10)
    assert reference.name_limit() == 10
