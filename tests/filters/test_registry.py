"""The field registry: one declaration per field name, read by the Lua generators."""

from __future__ import annotations

import re

import pytest

from nsqviz import protocols
from nsqviz.fields import CAPTURE_FIELDS, Field, FieldType, by_abbrev
from nsqviz.protocols.protocol import Protocol

_DECL = re.compile(r'^F\["([\w.]+)"\] = ProtoField\.(\w+)\("([\w.]+)"', re.M)


@pytest.mark.parametrize("proto", [p.name for p in protocols.registered()
                                   if p.dissector is not None])
def test_each_dissector_declares_exactly_the_registry_fields_with_their_types(proto):
    protocol = protocols.by_name(proto)
    assert protocol.dissector is not None
    lua = protocol.dissector.files(protocol)[f"{proto}.lua"]
    declared = {abbrev: (key, typ) for key, typ, abbrev in _DECL.findall(lua)}
    fields = protocols.by_name(proto).filter_fields
    if not declared:
        # a protocol Wireshark dissects itself (HTTP) declares none: its fields are
        # Wireshark's own, which test_tshark_shows_each_fields_type_and_description
        # holds to Wireshark's registration (name, type, title, description)
        assert "ProtoField" not in lua
        return
    assert list(declared) == [f.abbrev for f in fields]
    for f in fields:
        key, typ = declared[f.abbrev]
        assert typ == f.type.value
        assert f"{proto}.{key}" == f.abbrev  # the engine's key is the name, once


def test_every_protocol_field_is_under_its_protocol_name_and_capture_fields_under_layers():
    for proto in protocols.registered():
        assert all(f.protocol == proto.name for f in proto.filter_fields), proto.name
    assert {f.protocol for f in CAPTURE_FIELDS} <= {"frame", "tcp", "ip", "ipv6"}
    names = protocols.filter_fields()
    for wanted in ("frame.number", "tcp.stream", "ip.addr", "nsq.msg.id", "nsq.error.code",
                   "nsq.cut", "nsq.response_to", "tubemq.method", "tubemq.serial"):
        assert wanted in names


def test_one_name_with_two_types_is_refused():
    a = Field("x.y", FieldType.STRING, "Y")
    assert by_abbrev([a, a]) == {"x.y": a}
    with pytest.raises(TypeError, match="x.y"):
        by_abbrev([a, Field("x.y", FieldType.UINT32, "Y")])


def test_nsqviz_fields_lists_the_registry(capsys):
    from nsqviz.cli import main

    assert main(["fields"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(protocols.filter_fields())
    assert main(["fields", "FRAME_TYPE"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("nsq.frame_type") and "2=FrameTypeMessage" in line


def test_tshark_shows_each_fields_type_and_description(tmp_path):
    """What Wireshark registers from the generated Lua (``tshark -G fields``): the
    registry's type, title and description for every field."""
    import shutil
    import subprocess

    from nsqviz.wireshark.generate import write_dissectors

    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed (scripts/sysdeps.sh installs it)")
    write_dissectors(tmp_path)
    cmd = ["tshark", "-G", "fields", *(f"-Xlua_script:{p}" for p in sorted(tmp_path.glob("*.lua")))]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    shown = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if parts[0] == "F":
            shown[parts[2]] = (parts[1], parts[3], parts[7] if len(parts) > 7 else "")
    kinds = {"string": "FT_STRING", "bytes": "FT_BYTES", "bool": "FT_BOOLEAN",
             "uint16": "FT_UINT16", "uint32": "FT_UINT32", "uint64": "FT_UINT64",
             "int32": "FT_INT32", "int64": "FT_INT64", "framenum": "FT_FRAMENUM",
             "absolute_time": "FT_ABSOLUTE_TIME", "relative_time": "FT_RELATIVE_TIME"}
    for proto in protocols.registered():
        if proto.dissector is None:
            continue
        for f in proto.filter_fields:
            assert shown[f.abbrev] == (f.title, kinds[f.type.value], f.description), f.abbrev


def test_a_registered_protocol_only_declares_its_fields(monkeypatch):
    """A protocol from outside nsqviz: its fields are in the registry, filters compile
    over them and select its records by the values it gives -- nothing else edited."""
    from nsqviz import filters
    from nsqviz.records import DecodedRecord

    class Toy(Protocol):
        name, title, package, server_ports = "toy", "Toy", "toy_pkg", frozenset({9})
        filter_fields = (Field("toy.op", FieldType.STRING, "Operation"),
                         Field("toy.n", FieldType.UINT32, "Number"))

        def filter_values(self, record):
            return {"toy.op": [record.name], "toy.n": [record.fields["n"]]}

        def client_hello(self, data): return False
        def detect(self, direction, data, *, from_start, server_port): return None
        def observer(self, *, midstream, fields=True): return None
        def fields(self, event): return {}
        def summary(self, kind, name, fields): return ""
        def label(self, event): return ("", "")

    monkeypatch.setattr(protocols, "_EXTRA", {})
    protocols.register(Toy())
    assert protocols.filter_fields()["toy.n"].type is FieldType.UINT32

    def rec(packet, name, n):
        return DecodedRecord(1.0, "10.0.0.1:1->10.0.0.2:9", "c2s", "command", name, {"n": n},
                             (packet,), 0, None, "toy")

    records = [rec(1, "GET", 1), rec(2, "PUT", 5), rec(2, "GET", 7), rec(3, "GET", 9)]
    flt = filters.compile('toy.op == "GET" and toy.n > 4 and tcp.dstport == 9')
    assert [(r.packets[0], r.name) for r in flt.select(records)] == \
        [(2, "PUT"), (2, "GET"), (3, "GET")]
    with pytest.raises(filters.FilterError, match="did you mean toy.op"):
        filters.compile("toy.opp")
