"""One colour per command/frame name and per field, the same in every view."""

import re

import pytest

from nsqviz import palette, protocols
from nsqviz.capture.replay import Replay
from nsqviz.clients.session.sticky import message_frames, reassemble
from nsqviz.nsq import events as ev
from nsqviz.nsq.commands import COMMAND_NAMES, FRAME_NAMES
from nsqviz.protocols.detection import Detection
from nsqviz.protocols.protocol import Protocol
from nsqviz.tubemq.tables import METHODS
from nsqviz.widgets.hexview import HexView
from nsqviz.widgets.replay import ReplayView
from nsqviz.widgets.sequence import Arrow, SequenceDiagram
from nsqviz.widgets.steps import command_hex, frame_hex
from nsqviz.widgets.sticky import StickyView


def test_names_total_and_injective_over_the_tables():
    names = palette.names()
    expected = {*COMMAND_NAMES.values(), *FRAME_NAMES.values(), *(m.name for m in METHODS.values())}
    assert expected <= set(names)
    assert set(names) == {n for p in protocols.registered() for n in p.names()}
    assert len(set(names.values())) == len(names), "two names share a colour"
    assert palette.OTHER not in names.values()
    assert palette.name_colour("DPUB") != palette.name_colour("TOUCH")


def test_aliases_take_their_tables_colour():
    assert palette.name_colour("magic") == palette.name_colour("MAGIC")
    register = next(m for m in METHODS.values() if m.request == "RegisterRequestC2M")
    assert palette.name_colour("RegisterRequestC2M") == palette.name_colour(register.name)
    assert palette.name_colour("nonsense") == palette.OTHER


def test_a_new_protocol_gets_colours_without_an_edit(monkeypatch):
    """A protocol registered beside the built-in ones: its new names each get a colour
    of their own, a name it shares keeps the one it had."""
    class Extra(Protocol):
        name, title, package, server_ports = "extra", "Extra", "extra", frozenset()
        client_hello = detect = observer = fields = summary = label = None

        def names(self):
            return ("SUB", *(f"VERB{i}" for i in range(40)))

    before = palette.names()
    monkeypatch.setitem(protocols._EXTRA, "extra", Extra())
    palette._names.cache_clear()
    try:
        after = palette.names()
        assert {k: after[k] for k in before} == before
        assert len(set(after.values())) == len(after) == len(before) + 40
    finally:
        monkeypatch.undo()
        palette._names.cache_clear()


def test_grammar_fields_each_have_their_own_colour():
    fields = palette._fields()
    assert {"verb", "topic", "channel", "size", "frame_type", "id", "attempts"} <= set(fields)
    assert len(set(fields.values())) == len(fields)
    assert palette.field_colour(("command", "body", "data", "messages", 3, "size")) == \
        palette.field_colour(("size",))


def _fills_of(markup: str, label: str) -> set[str]:
    """Backgrounds of the chips/boxes whose text is ``label``."""
    return set(re.findall(r'background:(#[0-9a-f]{6})[^>]*>' + re.escape(label) + "<", markup))


def test_a_name_has_one_colour_in_the_replay_and_the_sequence_diagram():
    view = ReplayView(Replay.load("data/guide-pynsq.pcap")).html()
    diagram = SequenceDiagram(["c", "nsqd"], [
        Arrow("c", "nsqd", "FIN 0a", name="FIN"),
        Arrow("nsqd", "c", "MSG", "message", name=palette.name_of_event(
            ev.Message(b"0" * 16, 1, 0, b"x"))),
    ]).html()
    for name in ("FIN", "FrameTypeMessage"):
        fill = palette.name_colour(name)
        assert _fills_of(view, name) == {fill}
        assert _fills_of(diagram, name) == {fill}
        assert f'fill="{fill}"' in diagram  # the label's background
        assert f'stroke="{palette.ink(fill)}"' in diagram


def test_the_sticky_map_draws_frames_in_their_names_colour():
    frames = message_frames([5, 5])
    run = reassemble("two", frames, [b"".join(frames)])
    html = StickyView(run).html()
    assert palette.name_colour("FrameTypeMessage") in html
    assert palette.ordinal_colour(1, "FrameTypeMessage") in html


def test_a_field_has_one_colour_in_every_hex_view():
    sub = command_hex(b"SUB orders audit\n")
    pub = command_hex(b"PUB orders\n\x00\x00\x00\x02hi")
    frame = frame_hex(b"\x00\x00\x00\x06\x00\x00\x00\x00OK")

    def colours(view: HexView) -> dict[str, str]:
        return {leaf.path[-1]: view.colours[id(leaf)] for leaf in view.layout.leaves()}

    assert colours(sub)["topic"] == colours(pub)["topic"] == palette.field_colour("topic")
    assert colours(pub)["size"] == colours(frame)["size"]
    assert colours(sub)["verb"] != colours(sub)["topic"]


def test_a_tubemq_method_has_one_colour_in_the_replay_and_the_sequence_diagram():
    view = ReplayView(Replay.load("data/tubemq/tubemq-producer-go.pcap")).html()
    fill = palette.name_colour("RegisterRequestP2M")
    assert fill == palette.name_colour("producerRegisterP2M") != palette.OTHER
    assert _fills_of(view, "RegisterRequestP2M") == {fill}
    diagram = SequenceDiagram(["producer", "Master"], [
        Arrow("producer", "Master", "RegisterRequestP2M #1", name="RegisterRequestP2M"),
        Arrow("Master", "producer", "RegisterResponseM2P", "response", name="RegisterResponseM2P"),
    ]).html()
    assert _fills_of(diagram, "RegisterRequestP2M") == {fill}
    assert f'fill="{fill}"' in diagram


def test_a_new_protocols_names_are_coloured_without_an_edit(monkeypatch):
    """A third protocol (one registered from outside) brings names the palette has never
    seen: each gets its own colour, a shared name keeps the first protocol's, and the
    names already coloured keep theirs."""
    from nsqviz import protocols

    class Third(Protocol):
        name, title, package = "third", "Third", "tests.third"

        def names(self):
            return ("IDENTIFY", *(f"VERB{i}" for i in range(40)))

        def client_hello(self, data):
            return False

        def detect(self, direction, data, *, from_start, server_port):
            return Detection(0, "never")

        def observer(self, *, midstream, fields=True):
            raise NotImplementedError

        def fields(self, event):
            return {}

        def summary(self, kind, name, fields):
            return ""

        def label(self, event):
            return "", ""

    before = palette.names()
    monkeypatch.setattr(protocols, "_EXTRA", {"third": Third()})
    monkeypatch.setattr(palette, "_names", palette._names.__wrapped__)
    after = palette.names()
    assert {k: after[k] for k in before} == before
    assert after["IDENTIFY"] == before["IDENTIFY"]
    assert len(set(after.values())) == len(after)
    assert {f"VERB{i}" for i in range(40)} <= set(after)


def test_the_replay_picker_names_each_records_flow():
    # two connections' magics must not read as the same record
    pytest.importorskip("ipywidgets", reason="pip install ipywidgets (the notebook extra)")
    replay = Replay.load("data/guide-pynsq.pcap")
    markup = ReplayView(replay, upto=replay.packets[-1].number).live().markup
    options = re.findall(r"<option>([^<]*)</option>", markup)
    magics = [o for o in options if "MAGIC" in o.upper()]
    assert len(magics) >= 2 and len(set(magics)) == len(magics)
    assert all(o.startswith("flow ") for o in options)


def test_fields_that_share_a_unit_are_perceptually_apart():
    # frame_type and data.id were two greens 12 apart (CIE76): one field to the eye; now
    # every NSQ field is MIN_DELTA_E (CIEDE2000) from every other
    from itertools import combinations

    fields = palette._fields()
    for a, b in combinations(sorted(fields), 2):
        d = palette.delta_e(fields[a], fields[b])
        assert d >= palette.MIN_DELTA_E, (a, b, d)
    # and in a real hex view: each neighbouring pair of fields of a message frame
    frame = (b"\x00\x00\x00\x20\x00\x00\x00\x02" + bytes(8) + b"\x00\x01"
             + b"0123456789abcdef" + b"hi")
    view = frame_hex(frame)
    fills = [view.colours[id(leaf)] for leaf in view.layout.leaves() if leaf.width]
    assert len(fills) >= 6
    for a, b in zip(fills, fills[1:], strict=False):
        assert palette.delta_e(a, b) >= palette.MIN_DELTA_E


def _chips(markup: str) -> list[str]:
    """The fills of a view's legend chips, in order."""
    return re.findall(r'class="nv-chip[^"]*" style="background:(#[0-9a-f]{6})', markup)


def _apart(fills: list[str], least: float = palette.MIN_DELTA_E) -> list[tuple[str, str, float]]:
    """The pairs of ``fills`` nearer than ``least`` (CIEDE2000)."""
    from itertools import combinations

    return [(a, b, round(palette.delta_e(a, b), 1)) for a, b in combinations(set(fills), 2)
            if palette.delta_e(a, b) < least]


def test_delta_e_is_ciede2000():
    # Sharma, Wu and Dalal's test data: pairs 1, 7 and 17
    cases = [((50, 2.6772, -79.7751), (50, 0, -82.7485), 2.0425),
             ((50, 0, 0), (50, -1, 2), 2.3669), ((50, 2.5, 0), (73, 25, -18), 27.1492)]
    for lab1, lab2, want in cases:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(palette, "_lab", {"#a": lab1, "#b": lab2}.get)
            assert palette.delta_e.__wrapped__("#a", "#b") == pytest.approx(want, abs=1e-4)


def test_every_legend_keeps_its_colours_apart():
    """The rule: fills that can stand side by side are MIN_DELTA_E apart (CIEDE2000) --
    the quiet fills, each protocol's names (its spread where it has more names than
    pastels allow), NSQ's fields, neighbouring frames of a name, neighbouring ordinals;
    and the legends of real views built from the course's captures."""
    assert not _apart(list(palette.QUIET))
    names = palette.names()
    for proto in protocols.registered():
        own = [names[n] for n in proto.names()]
        assert not _apart(own + list(palette.QUIET), palette.spread(proto.name)), proto.name
    assert palette.spread("nsq") == palette.spread("lookupd") == palette.MIN_DELTA_E
    assert min(palette.spread(p.name) for p in protocols.registered()) >= 8
    fields = palette._fields()
    assert not _apart([*fields.values(), palette.SEPARATOR, palette.UNPARSED])
    for name in protocols.registered()[0].names():
        for k in range(3):
            a, b = palette.ordinal_colour(k, name), palette.ordinal_colour(k + 1, name)
            assert palette.delta_e(a, b) >= palette.MIN_DELTA_E, (name, k)
    for k in range(12):
        assert palette.delta_e(palette.ordinal_colour(k), palette.ordinal_colour(k + 1)) \
            >= palette.MIN_DELTA_E, k
    # the views: replay legends (names and kinds), a sequence legend, 01's MPUB hex view
    for capture in ("data/pubsub-pynsq.pcap", "data/small-messages-pynsq.pcap",
                    "data/tubemq/tubemq-producer-go.pcap"):
        markup = ReplayView(Replay.load(capture)).html()
        chips = _chips(re.search(r'<div class="nv-legend">(.*?)</div>', markup)[1])
        least = palette.spread("tubemq" if "tubemq" in capture else "nsq")
        assert len(chips) >= 5 and not _apart(chips, least), capture
    diagram = SequenceDiagram(["c", "nsqd"], [Arrow("c", "nsqd", n, name=n) for n in
                                              ("SUB", "RDY", "FIN", "REQ", "MPUB", "TOUCH")])
    assert not _apart(_chips(diagram.html()))
    mpub = command_hex(b"MPUB orders\n\x00\x00\x00\x0e\x00\x00\x00\x02"
                       b"\x00\x00\x00\x02hi\x00\x00\x00\x00")
    fills = [mpub.colours[id(leaf)] for leaf in mpub.layout.leaves() if leaf.width]
    for a, b in zip(fills, fills[1:], strict=False):
        assert a == b or palette.delta_e(a, b) >= palette.MIN_DELTA_E, (a, b)
