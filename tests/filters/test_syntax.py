"""The display-filter syntax: precedence, every spelling, and errors that say where."""

from __future__ import annotations

import pytest

from nsqviz.filters.syntax import (
    And,
    Exists,
    FilterSyntaxError,
    Func,
    Member,
    Not,
    Or,
    Quoted,
    Relation,
    Word,
    parse,
)


def test_and_binds_tighter_than_or_and_not_tighter_than_and():
    tree = parse("a or b and not c")
    assert isinstance(tree, Or)
    assert isinstance(tree.nodes[1], And)
    assert isinstance(tree.nodes[1].nodes[1], Not)
    tree = parse("not a and b")
    assert isinstance(tree, And) and isinstance(tree.nodes[0], Not)
    tree = parse("(a || b) && !c")
    assert isinstance(tree, And) and isinstance(tree.nodes[0], Or)


def test_chains_are_flat():
    assert len(parse("a and b and c").nodes) == 3  # type: ignore[union-attr]


@pytest.mark.parametrize("spelling,op", [
    ("==", "eq"), ("eq", "eq"), ("any_eq", "eq"), ("!=", "all_ne"), ("ne", "all_ne"),
    ("all_ne", "all_ne"), ("===", "all_eq"), ("all_eq", "all_eq"), ("!==", "any_ne"),
    ("~=", "any_ne"), ("any_ne", "any_ne"), (">", "gt"), ("gt", "gt"), ("<", "lt"),
    ("lt", "lt"), (">=", "ge"), ("ge", "ge"), ("<=", "le"), ("le", "le"),
    ("contains", "contains"), ("matches", "matches"), ("~", "matches"),
])
def test_every_relation_spelling(spelling, op):
    tree = parse(f'nsq.command {spelling} "x"')
    assert isinstance(tree, Relation) and tree.op == op
    assert tree.left == Word("nsq.command", 0)


def test_literals_sets_ranges_and_functions():
    tree = parse('frame.number in {1..5, 9, "x"}')
    assert isinstance(tree, Member)
    assert tree.items == ((Word("1", 17), Word("5", 20)), Word("9", 23), Quoted(b"x", 26))
    tree = parse(r'nsq.body == "a\x00\"b\\"')
    assert isinstance(tree, Relation) and tree.right == Quoted(b'a\x00"b\\', 12)
    tree = parse("ip.addr == 10.0.0.0/8 or eth == aa:bb:cc or x == ::1")
    assert [n.right.text for n in tree.nodes] == ["10.0.0.0/8", "aa:bb:cc", "::1"]  # type: ignore[union-attr]
    tree = parse("count(nsq.command) > 2")
    assert isinstance(tree, Relation) and tree.left == Func("count", Word("nsq.command", 6), 0)
    assert isinstance(parse("nsq"), Exists)


@pytest.mark.parametrize("expr,position,words", [
    ("", 0, "empty"),
    ("nsq.command ==", 14, "ends where a field or a value"),
    ("nsq.command == == 1", 15, "'==' was unexpected"),
    ('nsq.command == "PUB', 15, "not closed"),
    ("(nsq.command", 12, "')'"),
    ("nsq.command in {1 2}", 18, "',' or '}'"),
    ("a b", 2, "'b' was unexpected"),
    ("nsq.command == $", 15, "unexpected character '$'"),
    (r'nsq.body == "\q"', 13, "unknown escape"),
    ("and a", 0, "'and' was unexpected"),
    ('nsq.command[0:2] == "PU"', 11, "slices (field[i:j]) are not supported"),
    ('upper(nsq.command) == "PUB"', 0, "unknown function upper() (known: len(), count())"),
])
def test_errors_name_the_position(expr, position, words):
    with pytest.raises(FilterSyntaxError) as info:
        parse(expr)
    assert info.value.position == position
    assert words in str(info.value)


def test_a_long_expression_is_read_in_linear_time():
    expr = " or ".join(f"frame.number == {i}" for i in range(20000))
    assert len(parse(expr).nodes) == 20000  # type: ignore[union-attr]
    deep = "(" * 90 + "a" + ")" * 90
    assert parse(deep) == Exists(Word("a", 90), 90)
    with pytest.raises(FilterSyntaxError, match="nested deeper"):
        parse("(" * 5000 + "a" + ")" * 5000)
    with pytest.raises(FilterSyntaxError, match="nested deeper"):
        parse("!" * 5000 + "a")
