"""From an expression tree to a predicate over one packet's field values.

:func:`build` checks the tree against the field registry once -- every word is a field,
a protocol or a literal of the right type, relations apply to the field's type -- and
returns a closure; evaluating it is a walk over closures and the packet's values, with
no parsing or lookup by name left. Unknown names are errors naming the nearest known
ones (:func:`nsqviz.usage.nearest`, near ones only), at their position.

Values are lists: a field a packet holds several times (``nsq.command`` in a packet
with three commands) matches as Wireshark 4.0 does: ``==``, ``>``, ``contains``,
``matches``, ``in`` and ``!==`` (``~=``) when **any** value does; ``!=`` and ``===``
when **all** do; a test on a field the packet lacks is false (so ``!=`` too).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nsqviz.fields import Field, FieldType
from nsqviz.filters.literals import literal, pattern
from nsqviz.filters.syntax import (
    And,
    Exists,
    FilterSyntaxError,
    Func,
    Member,
    Node,
    Not,
    Operand,
    Or,
    Quoted,
    Relation,
    Word,
)
from nsqviz.usage import nearest

__all__ = ["Predicate", "Values", "build"]

Values = Mapping[str, Sequence[Any]]
"""One packet's fields: name -> values (protocol names -> ``[True]`` when present)."""
Predicate = Callable[[Values], bool]
Getter = Callable[[Values], Sequence[Any]]

_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq, "gt": operator.gt, "lt": operator.lt, "ge": operator.ge,
    "le": operator.le,
}
_MIRROR = {"eq": "eq", "all_eq": "all_eq", "all_ne": "all_ne", "any_ne": "any_ne",
           "gt": "lt", "lt": "gt", "ge": "le", "le": "ge"}
_COUNT = Field("count()", FieldType.UINT32, "count")


class _Builder:
    def __init__(self, fields: Mapping[str, Field], protocols: Sequence[str]) -> None:
        self.fields = fields
        self.protocols = frozenset(protocols)
        self.names = sorted([*fields, *protocols])
        self.used: set[str] = set()

    def unknown(self, word: Word) -> FilterSyntaxError:
        close = nearest(word.text, self.names, close_only=True)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        return FilterSyntaxError(f"{word.text} is neither a field nor a protocol name{hint}",
                                 word.pos, len(word.text))

    def is_field(self, op: Operand) -> bool:
        if isinstance(op, Func):
            return True
        return isinstance(op, Word) and (op.text in self.fields or op.text in self.protocols)

    def field(self, op: Operand) -> tuple[Field, Getter]:
        """The field an operand names and how to read its values from a packet."""
        if isinstance(op, Func):
            field, get = self.field(op.arg)
            if op.name == "count":
                return _COUNT, lambda v: [len(get(v))]
            if not field.type.textual:
                raise FilterSyntaxError(f"len() needs a string or byte field;"
                                        f" {field.abbrev} is {field.type.value}", op.arg.pos,
                                        len(op.arg.text))
            return Field(f"len({field.abbrev})", FieldType.UINT32, "len"), \
                lambda v: [len(x) for x in get(v)]
        assert isinstance(op, Word)
        if op.text in self.protocols and op.text not in self.fields:
            raise FilterSyntaxError(f"{op.text} is a protocol: only its presence can be"
                                    " tested", op.pos, len(op.text))
        if op.text not in self.fields:
            raise self.unknown(op)
        name = op.text
        self.used.add(name)
        return self.fields[name], lambda v: v.get(name, ())

    def node(self, node: Node) -> Predicate:
        if isinstance(node, Or):
            parts = [self.node(n) for n in node.nodes]
            return lambda v: any(p(v) for p in parts)
        if isinstance(node, And):
            parts = [self.node(n) for n in node.nodes]
            return lambda v: all(p(v) for p in parts)
        if isinstance(node, Not):
            inner = self.node(node.node)
            return lambda v: not inner(v)
        if isinstance(node, Exists):
            return self.exists(node.operand)
        if isinstance(node, Member):
            return self.member(node)
        return self.relation(node)

    def exists(self, op: Operand) -> Predicate:
        if isinstance(op, Quoted):
            raise FilterSyntaxError("a value alone is not a test (compare it with a field)",
                                    op.pos)
        if isinstance(op, Func):
            _, get = self.field(op)
            return lambda v: bool(get(v)) and bool(get(v)[0])
        if not self.is_field(op):
            raise self.unknown(op)
        name = op.text
        self.used.add(name)
        return lambda v: bool(v.get(name))

    def member(self, node: Member) -> Predicate:
        if not self.is_field(node.operand):
            raise self.unknown(node.operand) if isinstance(node.operand, Word) else \
                FilterSyntaxError("'in' needs a field on its left", node.pos)
        field, get = self.field(node.operand)
        singles: list[Any] = []
        ranges: list[tuple[Any, Any]] = []
        for item in node.items:
            if isinstance(item, tuple):
                ranges.append((literal(field, item[0]), literal(field, item[1])))
            else:
                singles.append(literal(field, item))
        if field.type in (FieldType.IPV4, FieldType.IPV6):
            nets = singles
            return lambda v: any(x in n for x in get(v) for n in nets)
        wanted = frozenset(singles)
        return lambda v: any(x in wanted or any(lo <= x <= hi for lo, hi in ranges)
                             for x in get(v))

    def relation(self, node: Relation) -> Predicate:
        op, left, right = node.op, node.left, node.right
        if not self.is_field(left):
            if not self.is_field(right):
                if isinstance(left, Word):
                    raise self.unknown(left)
                raise FilterSyntaxError("neither side of the comparison is a field",
                                        node.pos)
            if op in ("contains", "matches"):
                raise FilterSyntaxError(f"{op} needs a field on its left", left.pos)
            left, right, op = right, left, _MIRROR[op]
        field, get = self.field(left)
        if self.is_field(right) and not (isinstance(right, Word) and op == "matches"):
            return self.fields_relation(op, field, get, *self.field(right), node)
        if op == "matches":
            if not field.type.textual:
                raise FilterSyntaxError(f"matches needs a string or byte field;"
                                        f" {field.abbrev} is {field.type.value}", node.pos)
            found = pattern(field, right)
            return lambda v: any(found(x) for x in get(v))
        if op == "contains":
            if not field.type.textual:
                raise FilterSyntaxError(f"contains needs a string or byte field;"
                                        f" {field.abbrev} is {field.type.value}", node.pos)
            part = literal(field, right)
            return lambda v: any(part in x for x in get(v))
        value = literal(field, right)
        if field.type in (FieldType.IPV4, FieldType.IPV6):
            return _address_test(op, get, value, node)
        return _test(op, get, lambda _x: value)

    def fields_relation(self, op: str, field: Field, get: Getter, other: Field,
                        get_other: Getter, node: Relation) -> Predicate:
        if op in ("contains", "matches"):
            raise FilterSyntaxError(f"{op} compares a field with a value", node.pos)
        if FieldType.NONE in (field.type, other.type):
            raise FilterSyntaxError("a flag can only be tested for presence", node.pos)
        if field.type.integer != other.type.integer or \
                (not field.type.integer and field.type is not other.type):
            raise FilterSyntaxError(f"{field.abbrev} ({field.type.value}) and {other.abbrev}"
                                    f" ({other.type.value}) cannot be compared", node.pos)
        return lambda v: _pairs(op, get(v), get_other(v))


def _test(op: str, get: Getter, value: Callable[[Any], Any]) -> Predicate:
    if op == "all_ne":
        return lambda v: bool(get(v)) and all(x != value(v) for x in get(v))
    if op == "all_eq":
        return lambda v: bool(get(v)) and all(x == value(v) for x in get(v))
    if op == "any_ne":
        return lambda v: any(x != value(v) for x in get(v))
    cmp = _ORDER[op]
    return lambda v: any(cmp(x, value(v)) for x in get(v))


def _pairs(op: str, xs: Sequence[Any], ys: Sequence[Any]) -> bool:
    if not xs or not ys:
        return False
    if op == "all_ne":
        return all(x != y for x in xs for y in ys)
    if op == "all_eq":
        return all(x == y for x in xs for y in ys)
    if op == "any_ne":
        return any(x != y for x in xs for y in ys)
    cmp = _ORDER[op]
    return any(cmp(x, y) for x in xs for y in ys)


def _address_test(op: str, get: Getter, net: Any, node: Relation) -> Predicate:
    if op == "eq":
        return lambda v: any(x in net for x in get(v))
    if op == "all_ne":
        return lambda v: bool(get(v)) and all(x not in net for x in get(v))
    if op == "all_eq":
        return lambda v: bool(get(v)) and all(x in net for x in get(v))
    if op == "any_ne":
        return lambda v: any(x not in net for x in get(v))
    return _test(op, get, lambda _x: net.network_address)


def build(tree: Node, fields: Mapping[str, Field],
          protocols: Sequence[str]) -> tuple[Predicate, frozenset[str]]:
    """The predicate of ``tree`` over packets' values (``protocols``: names whose
    presence can be tested, ``nsq``, ``tcp`` ...), and the names it reads."""
    builder = _Builder(fields, protocols)
    predicate = builder.node(tree)
    return predicate, frozenset(builder.used)
