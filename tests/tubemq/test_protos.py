"""The .proto sources: every message and field of FACTS.md section 11, compiled by the
protobuf package, and protobuf's encoding byte-identical to the grammar's view."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.tubemq import MESSAGES, METHODS
from nsqviz.tubemq.grammar import parse_content, parse_frame
from nsqviz.tubemq.messages import encode, make_request, make_response
from nsqviz.tubemq.protos import ProtoSyntaxError, parse_proto

FACTS = Path(__file__).resolve().parents[3] / "shared" / "tubemq" / "FACTS.md"


def _label(field: FieldDescriptor) -> str:
    return "required" if field.is_required else "repeated" if field.is_repeated else "optional"


def _facts_tables() -> dict[str, list[tuple[int, str, str, str]]]:
    text = FACTS.read_text()
    section = text[text.index("## 11. Protobuf message tables") : text.index("## 12.")]
    tables = {}
    for block in re.split(r"^#### ", section, flags=re.M)[1:]:
        name = block.split("\n", 1)[0].strip()
        rows = re.findall(r"^\| (\d+) \| (\w+) \| ([\w ]+?) \| (\w+) \|", block, flags=re.M)
        tables[name] = [(int(n), label, typ.replace("enum ", ""), fname)
                        for n, label, typ, fname in rows]
    return tables


def _type_name(field: FieldDescriptor) -> str:
    if field.message_type is not None:
        return field.message_type.name
    if field.enum_type is not None:
        return field.enum_type.name
    return {FieldDescriptor.TYPE_INT32: "int32", FieldDescriptor.TYPE_INT64: "int64",
            FieldDescriptor.TYPE_BOOL: "bool", FieldDescriptor.TYPE_STRING: "string",
            FieldDescriptor.TYPE_BYTES: "bytes"}[field.type]


@pytest.mark.skipif(not FACTS.exists(), reason=f"{FACTS} not found (../shared is not here)")
def test_every_message_table_of_the_facts_is_compiled_exactly():
    tables = _facts_tables()
    assert len(tables) == 66
    assert set(tables) == set(MESSAGES)
    for name, rows in tables.items():
        desc = MESSAGES[name].DESCRIPTOR
        got = [(f.number, _label(f), _type_name(f), f.name) for f in desc.fields]
        assert got == rows, name


def test_status_enum():
    status = MESSAGES["ResponseHeader"].DESCRIPTOR.enum_types_by_name["Status"]
    assert {v.name: v.number for v in status.values} == {"SUCCESS": 0, "ERROR": 1, "FATAL": 2}


def test_every_method_names_compiled_messages():
    for m in METHODS.values():
        for name in (m.request, m.response):
            assert name is None or name in MESSAGES


def test_the_reader_refuses_what_it_does_not_know():
    with pytest.raises(ProtoSyntaxError, match="line 2"):
        parse_proto("x.proto", 'syntax = "proto2";\nservice S {}\n')
    with pytest.raises(ProtoSyntaxError, match="unknown type"):
        parse_proto("x.proto", "message A { optional B b = 1; }")
    with pytest.raises(ProtoSyntaxError, match="not closed"):
        parse_proto("x.proto", "message A { optional int32 b = 1;")


# ---------------------------------------- protobuf bytes == the grammar's view

_INT32 = st.integers(-(2**31), 2**31 - 1)
_INT64 = st.integers(-(2**63), 2**63 - 1)


def _value(field: FieldDescriptor, depth: int):
    if field.message_type is not None:
        return _message(field.message_type.name, depth + 1)
    if field.enum_type is not None:
        return st.sampled_from([v.number for v in field.enum_type.values])
    return {FieldDescriptor.TYPE_INT32: _INT32, FieldDescriptor.TYPE_INT64: _INT64,
            FieldDescriptor.TYPE_BOOL: st.booleans(),
            FieldDescriptor.TYPE_STRING: st.text(max_size=20),
            FieldDescriptor.TYPE_BYTES: st.binary(max_size=40)}[field.type]


@st.composite
def _message(draw, name: str, depth: int = 0):
    cls = MESSAGES[name]
    msg = cls()
    for field in cls.DESCRIPTOR.fields:
        if depth > 2 and not field.is_required:
            continue
        if field.is_repeated:
            values = draw(st.lists(_value(field, depth), max_size=3))
            target = getattr(msg, field.name)
            for v in values:
                target.add().CopyFrom(v) if field.message_type else target.append(v)
        elif field.is_required or draw(st.booleans()):
            v = draw(_value(field, depth))
            if field.message_type:
                getattr(msg, field.name).CopyFrom(v)
            else:
                setattr(msg, field.name, v)
    return msg


_PAIRS = [(m.id, m.request, m.response) for m in METHODS.values() if m.request]


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(_PAIRS), st.data())
def test_protobuf_encoding_is_the_grammars_view(pair, data):
    method, req_name, rsp_name = pair
    inner = data.draw(_message(req_name))
    request = make_request(data.draw(st.integers(0, 2**32 - 1)), method, inner)
    content = parse_content(parse_frame(encode(request)).content)
    assert content.connHeader == request.connHeader.SerializeToString()
    assert content.header == request.header.SerializeToString()
    assert content.body == request.body.SerializeToString()
    assert MESSAGES["RequestBody"].FromString(content.body).request == inner.SerializeToString()
    answer = make_response(request, data.draw(_message(rsp_name)))
    content = parse_content(parse_frame(encode(answer)).content)
    assert content.body == answer.body.SerializeToString()
    assert MESSAGES["RspResponseBody"].FromString(content.body).data == (
        answer.message.SerializeToString())
