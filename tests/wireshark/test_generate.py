"""The generator: what it reads from the grammar, what ``nsqviz wireshark`` writes."""

from __future__ import annotations

import re
import shlex
import shutil
from io import StringIO
from types import SimpleNamespace

import pytest
from construct import Const, Int8ub, Struct

from nsqviz.nsq import commands as nsq_commands
from nsqviz.nsq import grammar, grammar_frames
from nsqviz.nsq.commands import COMMANDS
from nsqviz.nsq.dissector import script as nsq_lua
from nsqviz.nsq.dissector.spec import SpecError, _command, nsq_spec
from nsqviz.nsq.protocol import NSQ
from nsqviz.wireshark import cli as ws_cli
from nsqviz.wireshark.lua import literal


def test_spec_has_every_command_and_parameter_of_the_grammar():
    spec = nsq_spec()
    assert [c.verb for c in spec.commands] == list(grammar.COMMANDS)
    for cmd in spec.commands:
        named = [s.name for s in grammar.COMMANDS[cmd.verb].subcons
                 if s.name not in (None, "verb", "body", "secret")]
        assert [p.name for p in cmd.params] == named
        assert (cmd.body is not None) == (cmd.verb.encode() in nsq_commands.BODY_VERBS)
    assert [f.name for f in spec.message] == [s.name for s in grammar.Message.subcons]
    assert spec.frame_types == grammar_frames.FRAME_TYPES


def test_generated_lua_declares_a_filter_field_for_every_parameter_and_layout_field():
    lua = nsq_lua.render(NSQ)
    abbrevs = set(re.findall(r'ProtoField\.\w+\("([\w.]+)"', lua))
    for cmd in nsq_spec().commands:
        assert f"{cmd.verb} = " in lua
        for p in cmd.params:
            assert p.abbrev in abbrevs
    for name in ("nsq.command", "nsq.topic", "nsq.frame_type", "nsq.msg.id",
                 "nsq.msg.attempts", "nsq.error.code", "nsq.violation"):
        assert name in abbrevs
    assert "do not edit" in lua.splitlines()[1]


def test_a_grammar_that_disagrees_with_the_command_table_is_refused(monkeypatch):
    odd = Struct("verb" / Const(b"RDY"), grammar.SP, "flags" / Int8ub, grammar.LF)
    monkeypatch.setitem(grammar.COMMANDS, "RDY", odd)
    with pytest.raises(SpecError, match="RDY: the grammar and the command table disagree"):
        _command(COMMANDS["RDY"])


def test_lua_literals():
    assert literal({"a": [1, "x\n"], 2: None, "b-c": True}) == \
        '{a = {1, "x\\n"}, [2] = nil, ["b-c"] = true}'
    assert literal(b"  V2\x00\xff") == '"  V2\\0\\255"'


def test_cli_writes_the_dissector_and_says_how_to_load_it(tmp_path):
    out = StringIO()
    args = SimpleNamespace(out=str(tmp_path / "ws"), install=False, protocol=[])
    assert ws_cli.run(args, out) == 0
    lua = tmp_path / "ws" / "nsq.lua"
    assert lua.read_text() == nsq_lua.render(NSQ)
    line = next(x for x in out.getvalue().splitlines() if x.startswith("try: tshark"))
    args = shlex.split(line.removeprefix("try: "))
    assert f"-Xlua_script:{lua}" in args and "tcp.desegment_tcp_streams:TRUE" in args
    protos = (tmp_path / "ws" / "tubemq-proto").resolve()
    assert f'uat:protobuf_search_paths:"{protos}","TRUE"' in args  # survives the shell


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
def test_cli_install_puts_it_where_tshark_loads_personal_lua_plugins(tmp_path, monkeypatch):
    import subprocess

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    out = StringIO()
    assert ws_cli.run(SimpleNamespace(out="unused", install=True, protocol=[]), out) == 0
    assert str(tmp_path) in out.getvalue()
    plugins = subprocess.run(["tshark", "-G", "plugins"], capture_output=True, text=True,
                             timeout=60, check=True).stdout
    assert "nsq.lua" in plugins and "tubemq.lua" in plugins
    assert "tubemq-proto" in (tmp_path / ".config" / "wireshark" / "protobuf_search_paths"
                              ).read_text()


def test_tubemq_dissector_names_every_method_and_carries_the_proto_sources(tmp_path):
    from nsqviz.tubemq.dissector import script as tubemq_lua
    from nsqviz.tubemq.protocol import TUBEMQ
    from nsqviz.tubemq.tables import METHODS

    lua = tubemq_lua.render(TUBEMQ)
    for m in METHODS.values():
        assert f'name = "{m.name}"' in lua
    written = ws_cli.write_dissectors(tmp_path, ["tubemq"])
    assert {p.name for p in written} == {"tubemq.lua", *tubemq_lua.proto_sources()}
    for name, text in tubemq_lua.proto_sources().items():
        assert (tmp_path / tubemq_lua.PROTO_DIR / name).read_text() == text
