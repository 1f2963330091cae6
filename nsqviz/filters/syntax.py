"""Wireshark's display-filter syntax: tokens and the expression tree, with positions.

The grammar read here is the part of Wireshark 4.0's (``epan/dfilter``) that nsqviz's
fields need, with its precedence -- ``not`` binds tighter than ``and``, ``and`` tighter
than ``or``::

    expr     := and ( ("or" | "||") and )*
    and      := unary ( ("and" | "&&") unary )*
    unary    := ("not" | "!") unary | "(" expr ")" | test
    test     := operand [ relation operand | "contains" operand | ("matches" | "~") operand
                        | "in" "{" item ("," item)* "}" ]
    item     := operand [ ".." operand ]
    operand  := WORD | STRING | ("len" | "count") "(" WORD ")"
    relation := "==" | "eq" | "any_eq" | "!=" | "ne" | "all_ne" | "===" | "all_eq"
              | "!==" | "~=" | "any_ne" | ">" | "gt" | "<" | "lt" | ">=" | "ge" | "<=" | "le"

A ``WORD`` is a field name, a protocol name or an unquoted literal (``PUB``, ``4150``,
``0x1f``, ``aa:bb:cc``, ``127.0.0.0/8``); which one is decided against the field
registry when the tree is checked (:mod:`nsqviz.filters.check`), as Wireshark does.
Every node keeps the offset of its first character, so an error can point at it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "And",
    "Exists",
    "FilterSyntaxError",
    "Func",
    "Member",
    "Node",
    "Not",
    "Operand",
    "Or",
    "Quoted",
    "Relation",
    "Word",
    "parse",
]


class FilterSyntaxError(ValueError):
    """An expression that cannot be read: ``position`` is the 0-based offset of the
    offending character in the expression, ``length`` how many characters it spans."""

    def __init__(self, message: str, position: int, length: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.position = position
        self.length = max(length, 1)


# ------------------------------------------------------------------------ the tree


@dataclass(frozen=True, slots=True)
class Word:
    """An unquoted word: a field or protocol name, or a literal."""

    text: str
    pos: int


@dataclass(frozen=True, slots=True)
class Quoted:
    """A double-quoted string, escapes resolved (``\\xhh`` gives that byte)."""

    value: bytes
    pos: int


@dataclass(frozen=True, slots=True)
class Func:
    """``len(field)`` (each value's length) or ``count(field)`` (how many values)."""

    name: str
    arg: Word
    pos: int


Operand = Word | Quoted | Func


@dataclass(frozen=True, slots=True)
class Exists:
    """A field or protocol alone: true when the packet has it."""

    operand: Operand
    pos: int


@dataclass(frozen=True, slots=True)
class Relation:
    """``left OP right``; ``op`` is the canonical name: ``eq``, ``all_eq`` (``===``),
    ``all_ne`` (what ``!=`` means since Wireshark 3.6), ``any_ne`` (``!==``, ``~=``),
    ``gt``, ``lt``, ``ge``, ``le``, ``contains``, ``matches``."""

    op: str
    left: Operand
    right: Operand
    pos: int


@dataclass(frozen=True, slots=True)
class Member:
    """``operand in {items}``; an item is a value or an inclusive range ``(low, high)``."""

    operand: Operand
    items: tuple[Operand | tuple[Operand, Operand], ...]
    pos: int


@dataclass(frozen=True, slots=True)
class Not:
    node: Node
    pos: int


@dataclass(frozen=True, slots=True)
class And:
    nodes: tuple[Node, ...]
    pos: int


@dataclass(frozen=True, slots=True)
class Or:
    nodes: tuple[Node, ...]
    pos: int


Node = Exists | Relation | Member | Not | And | Or

# ------------------------------------------------------------------------ tokens

RELATIONS = {
    "==": "eq", "eq": "eq", "any_eq": "eq",
    "!=": "all_ne", "ne": "all_ne", "all_ne": "all_ne",
    "===": "all_eq", "all_eq": "all_eq",
    "!==": "any_ne", "~=": "any_ne", "any_ne": "any_ne",
    ">": "gt", "gt": "gt", "<": "lt", "lt": "lt",
    ">=": "ge", "ge": "ge", "<=": "le", "le": "le",
    "contains": "contains", "matches": "matches", "~": "matches",
}
"""Every spelling of a relation and its canonical name."""

_KEYWORDS = {"and": "and", "&&": "and", "or": "or", "||": "or", "not": "not", "!": "not",
             "in": "in"}
FUNCTIONS = ("len", "count")
MAX_DEPTH = 100
"""Parentheses and ``not`` nest at most this deep (the parser recurses on them)."""

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>")
  | (?P<range>\.\.)
  | (?P<symbol>===|!==|==|!=|~=|>=|<=|&&|\|\||[!<>~(){},])
  | (?P<word>(?:[A-Za-z0-9_:/\-]|\.(?!\.))+)
""", re.X)

_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "0": b"\0", "\\": b"\\", '"': b'"',
            "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v"}


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # word, string, symbol, range, end
    text: str
    pos: int
    value: bytes = b""


def _string(expr: str, start: int) -> tuple[bytes, int]:
    """The string opening at ``start`` (its quote) and the offset after its end."""
    out = bytearray()
    i = start + 1
    n = len(expr)
    while i < n:
        c = expr[i]
        if c == '"':
            return bytes(out), i + 1
        if c == "\\":
            if i + 1 >= n:
                break
            e = expr[i + 1]
            if e == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", expr[i + 2:i + 4]):
                out.append(int(expr[i + 2:i + 4], 16))
                i += 4
                continue
            if e in _ESCAPES:
                out += _ESCAPES[e]
                i += 2
                continue
            raise FilterSyntaxError(f"unknown escape \\{e} in a string", i, 2)
        out += _utf8(c)
        i += 1
    raise FilterSyntaxError("the string is not closed (a \" is missing)", start)


def _utf8(c: str) -> bytes:
    """A character of a quoted string as bytes: UTF-8; a byte that was not UTF-8 where
    the expression came from (the command line gives it as a lone surrogate, Python's
    ``surrogateescape``) as that byte, as tshark takes it."""
    try:
        return c.encode("utf-8")
    except UnicodeEncodeError:
        return c.encode("utf-8", "surrogateescape" if "\udc80" <= c <= "\udcff"
                        else "surrogatepass")


def _unexpected(c: str) -> str:
    if "\udc80" <= c <= "\udcff":  # a byte that was not UTF-8 (see _utf8)
        return (f"byte 0x{ord(c) - 0xDC00:02x} (not UTF-8) outside a quoted string: other "
                "than ASCII may only appear inside double quotes")
    if not c.isascii() or not c.isprintable():
        return (f"character {c!r} outside a quoted string: other than printable ASCII may"
                " only appear inside double quotes")
    return f"unexpected character {c!r}"


def tokens(expr: str) -> list[_Tok]:
    """The expression's tokens, in one pass (linear in its length)."""
    out: list[_Tok] = []
    i, n = 0, len(expr)
    while i < n:
        m = _TOKEN.match(expr, i)
        if m is None:
            if expr[i] == "[":
                raise FilterSyntaxError("slices (field[i:j]) are not supported", i)
            raise FilterSyntaxError(_unexpected(expr[i]), i)
        kind = m.lastgroup or ""
        if kind == "space":
            i = m.end()
            continue
        if kind == "string":
            value, end = _string(expr, i)
            out.append(_Tok("string", expr[i:end], i, value))
            i = end
            continue
        out.append(_Tok(kind, m.group(), i))
        i = m.end()
    out.append(_Tok("end", "", n))
    return out


# ------------------------------------------------------------------------ parser


class _Parser:
    def __init__(self, expr: str) -> None:
        self.toks = tokens(expr)
        self.i = 0
        self.depth = 0

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def keyword(self, tok: _Tok) -> str | None:
        if tok.kind in ("word", "symbol"):
            return _KEYWORDS.get(tok.text.lower() if tok.kind == "word" else tok.text)
        return None

    def fail(self, tok: _Tok, what: str) -> FilterSyntaxError:
        if tok.kind == "end":
            return FilterSyntaxError(f"the expression ends where {what} was expected", tok.pos)
        return FilterSyntaxError(f"{tok.text!r} was unexpected here ({what} expected)",
                                 tok.pos, len(tok.text))

    def expect(self, text: str, what: str) -> _Tok:
        tok = self.take()
        if tok.text != text or tok.kind == "string":
            raise self.fail(tok, what)
        return tok

    def expr(self) -> Node:
        first = self.conjunction()
        nodes = [first]
        while self.keyword(self.peek()) == "or":
            self.take()
            nodes.append(self.conjunction())
        return nodes[0] if len(nodes) == 1 else Or(tuple(nodes), _pos(first))

    def conjunction(self) -> Node:
        first = self.unary()
        nodes = [first]
        while self.keyword(self.peek()) == "and":
            self.take()
            nodes.append(self.unary())
        return nodes[0] if len(nodes) == 1 else And(tuple(nodes), _pos(first))

    def unary(self) -> Node:
        tok = self.peek()
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise FilterSyntaxError(f"nested deeper than {MAX_DEPTH} levels", tok.pos)
        try:
            if self.keyword(tok) == "not":
                self.take()
                return Not(self.unary(), tok.pos)
            if tok.kind == "symbol" and tok.text == "(":
                self.take()
                node = self.expr()
                self.expect(")", "')'")
                return node
            return self.test()
        finally:
            self.depth -= 1

    def operand(self) -> Operand:
        tok = self.take()
        if tok.kind == "string":
            return Quoted(tok.value, tok.pos)
        if tok.kind != "word" or self.keyword(tok) is not None or tok.text in RELATIONS:
            raise self.fail(tok, "a field or a value")
        nxt = self.peek()
        if nxt.kind == "symbol" and nxt.text == "(" and tok.text not in FUNCTIONS:
            raise FilterSyntaxError(f"unknown function {tok.text}() (known: "
                                    f"{', '.join(f + '()' for f in FUNCTIONS)})", tok.pos,
                                    len(tok.text))
        if tok.text in FUNCTIONS and nxt.kind == "symbol" and nxt.text == "(":
            self.take()
            arg = self.take()
            if arg.kind != "word":
                raise self.fail(arg, f"a field name inside {tok.text}()")
            self.expect(")", "')'")
            return Func(tok.text, Word(arg.text, arg.pos), tok.pos)
        return Word(tok.text, tok.pos)

    def test(self) -> Node:
        left = self.operand()
        tok = self.peek()
        rel = RELATIONS.get(tok.text if tok.kind == "symbol" else tok.text.lower()) \
            if tok.kind in ("word", "symbol") else None
        if rel is not None:
            self.take()
            return Relation(rel, left, self.operand(), tok.pos)
        if self.keyword(tok) == "in":
            self.take()
            self.expect("{", "'{'")
            items: list[Operand | tuple[Operand, Operand]] = []
            while True:
                low = self.operand()
                if self.peek().kind == "range":
                    self.take()
                    items.append((low, self.operand()))
                else:
                    items.append(low)
                sep = self.take()
                if sep.text == "}" and sep.kind == "symbol":
                    break
                if sep.text != "," or sep.kind != "symbol":
                    raise self.fail(sep, "',' or '}' in the set")
            return Member(left, tuple(items), tok.pos)
        return Exists(left, left.pos)


def _pos(node: Node) -> int:
    return node.pos


def parse(expr: str) -> Node:
    """The tree of ``expr``; :class:`FilterSyntaxError` says where it cannot be read."""
    p = _Parser(expr)
    if p.peek().kind == "end":
        raise FilterSyntaxError("the expression is empty", 0)
    node = p.expr()
    tok = p.peek()
    if tok.kind != "end":
        raise p.fail(tok, "'and', 'or' or the end")
    return node
