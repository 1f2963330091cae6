"""notebooks/00-reference.ipynb is the card nsqviz.teaching.reference renders from the
code's tables."""

from __future__ import annotations

from pathlib import Path

from nsqviz.nsq import framing, identify_fields
from nsqviz.nsq import wire as nsq_wire
from nsqviz.nsq.commands import COMMANDS, FRAMES
from nsqviz.nsq.errors import ErrorCode
from nsqviz.servers.nsqd.options import Options
from nsqviz.teaching import reference

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


def test_the_cards_identify_ranges_are_what_the_broker_enforces():
    """Each number the IDENTIFY table gives a range is accepted at both ends by the
    embedded broker's negotiation, and one past either end is refused (E_BAD_BODY) or,
    for deflate_level, capped -- the same answers the real nsqd gives (notebook 05's
    limits, compared step by step in tests/differential/test_notebook_sessions.py)."""
    from nsqviz.servers.nsqd.identify import IdentifyRefused, Negotiated, negotiate

    opts = Options()
    current = Negotiated("", "", "", 30.0, 16384, 0.25, 0, 60.0, False)

    def ask(key: str, value: int) -> tuple[Negotiated, dict] | None:
        body = {"feature_negotiation": True, key: value, "deflate": key == "deflate_level"}
        try:
            return negotiate(body, opts, current=current, tls_available=False,
                             auth_required=False)
        except IdentifyRefused as exc:
            assert exc.code == ErrorCode.BAD_BODY
            return None

    for f in identify_fields.IDENTIFY_FIELDS.values():
        if f.type is not int or f.high is None:
            continue
        low = _end(f, f.nsqd_low, opts)
        high = _end(f, f.high, opts)
        for value in {low, high} - {0}:
            assert ask(f.name, value) is not None, (f.name, value)
        if low > 1:
            assert ask(f.name, low - 1) is None, (f.name, low - 1)
        past = ask(f.name, high + 1)
        if f.clamps:
            assert past is not None and past[1][f.name] == high
        else:
            assert past is None, (f.name, high + 1)
    text = reference.identify()
    assert "min_output_buffer_timeout (25 ms) .. max_output_buffer_timeout" in text
    assert "capped at max_deflate_level" in text


def _end(f: identify_fields.IdentifyField, bound: int | str | None, opts: Options) -> int:
    if isinstance(bound, str):
        value = getattr(opts, bound)
        return round(value * 1000) if f.unit == "ms" else int(value)
    return int(bound or 0)
