"""construct's compiler turns the frame grammar into Python code; what it generates must
parse and build exactly as the interpreted grammar does (the benchmark reports both)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.nsq import grammar as g
from nsqviz.nsq import grammar_errors

COMPILED = g.Frame.compile()

frames = st.one_of(
    st.builds(
        lambda data: {"frame_type": "FrameTypeResponse", "data": data}, st.binary(max_size=64)
    ),
    st.builds(lambda data: {"frame_type": "FrameTypeError", "data": data}, st.binary(max_size=64)),
    st.builds(
        lambda ts, attempts, mid, body: {
            "frame_type": "FrameTypeMessage",
            "data": {"timestamp": ts, "attempts": attempts, "id": mid, "body": body},
        },
        st.integers(-(2**63), 2**63 - 1),
        st.integers(0, 2**16 - 1),
        st.text("0123456789abcdef", min_size=16, max_size=16).map(str.encode),
        st.binary(max_size=64),
    ),
)


@settings(max_examples=200, deadline=None)
@given(frames)
def test_compiled_frame_agrees_with_the_interpreter(fields):
    wire = g.Frame.build(fields)
    assert COMPILED.build(fields) == wire
    assert COMPILED.parse(wire) == g.Frame.parse(wire)
    assert COMPILED.build(COMPILED.parse(wire)) == wire


def test_compiled_frame_keeps_the_named_errors():
    for wire, error in [
        (b"\x00\x00\x00\x05\x00\x00\x00\x07x", grammar_errors.UnknownFrameType),
        (b"\x00\x00\x00\x01\x00\x00\x00\x00", grammar_errors.BadSize),
    ]:
        for parser in (g.Frame, COMPILED):
            try:
                parser.parse(wire)
            except error:
                continue
            raise AssertionError(f"{parser} accepted {wire!r}")
