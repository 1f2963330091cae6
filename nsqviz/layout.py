"""Byte attribution for any ``construct`` grammar: which field owns which bytes.

Wireshark's bytes pane and Kaitai's Web IDE answer one question for every byte of a
packet: *which field is this?* :func:`annotate` answers it for any construct -- it
parses ``data`` with the grammar and returns a tree of :class:`Field` nodes, each with
its path (``command.body.size``), its byte range ``[start, end)``, its raw bytes and
its parsed value. The leaves tile the parsed bytes: every byte belongs to exactly one
leaf. Bytes a grammar reads but does not name (a separator ``Const`` in a ``Struct``)
take the protocol word the grammar gives that construct as ``layout_name``
(``separator``, ``newline``; numbered when one struct holds several), or failing that a
positional name (``_1``), rather than vanishing; a zero-width leaf that is not a byte
field (a peek at the verb, a check) owns no bytes and is left out of the tree; bytes
that were not read at all
(after an error, or trailing) get an explicit ``(unparsed)`` / ``(trailing)`` leaf.

Why trace instead of re-implementing the parsers: the annotator must agree with the
grammar byte for byte, including context-dependent sizes (``this.size - 4``), switches
and adapters that validate. So it runs construct's *own* parse once and records, for
every ``_parsereport`` call, the stream offsets before and after. Construct keeps
absolute offsets in the substreams of ``Prefixed``/``FixedSized``
(``BytesIOWithOffsets``), so the recorded ranges are ranges of the input. The trace is
then folded into fields: ``Renamed`` gives names, ``Struct``/``Sequence`` children are
named after their subcons, ``Array`` children after their index, ``Prefixed`` splits
into ``size`` and ``data``, and single-child wrappers (``Adapter``, ``Const``,
``Switch``, ``RawCopy``, ``Rebuild``...) collapse into the field they wrap, keeping
the outermost (most decoded) value.

The tracing hook is installed only for the duration of one :func:`annotate` call and
is active only on the calling thread; other threads parsing at the same time go
through construct untouched.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from construct import (
    Array,
    Bytes,
    BytesInteger,
    Const,
    Construct,
    Container,
    FocusedSeq,
    FormatField,
    GreedyBytes,
    GreedyRange,
    Prefixed,
    RawCopy,
    Renamed,
    Sequence,
    Struct,
)

__all__ = ["Field", "Layout", "annotate"]

PathPart = str | int


@dataclass
class Field:
    """One node of the field tree: bytes ``[start, end)`` of the annotated input."""

    name: PathPart
    path: tuple[PathPart, ...]
    start: int
    end: int
    value: Any
    raw: bytes
    kind: str  # what the bytes are: "int32", "const", "bytes[16]", "token", "struct"...
    children: list[Field] = field(default_factory=list)
    failed: bool = False  # the grammar gave up inside this field

    @property
    def width(self) -> int:
        return self.end - self.start

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def dotted(self) -> str:
        """The path as text: ``body.messages[0].size``."""
        return format_path(self.path)

    def walk(self) -> Iterator[Field]:
        """This node and every descendant, depth first, in byte order."""
        yield self
        for child in self.children:
            yield from child.walk()

    def leaves(self) -> list[Field]:
        return [f for f in self.walk() if f.is_leaf]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.dotted,
            "start": self.start,
            "end": self.end,
            "raw": self.raw.hex(),
            "kind": self.kind,
        }
        if self.is_leaf:
            out["value"] = _jsonable(self.value)
        else:
            out["children"] = [c.to_dict() for c in self.children]
        return out


@dataclass
class Layout:
    """The result of :func:`annotate`: the field tree, and the error if parsing failed.

    On error the tree holds every field parsed before the failure and one
    ``(unparsed)`` leaf for the rest, so a hex view can still attribute every byte and
    point at the offset where the grammar gave up.
    """

    data: bytes
    root: Field
    error: Exception | None = None
    error_offset: int | None = None

    @property
    def value(self) -> Any:
        return self.root.value

    def leaves(self) -> list[Field]:
        """Leaves that own bytes, in byte order (zero-width leaves, e.g. a peek, left out)."""
        return [f for f in self.root.leaves() if f.width]

    def field_at(self, offset: int) -> Field | None:
        """The leaf that owns byte ``offset``."""
        for leaf in self.leaves():
            if leaf.start <= offset < leaf.end:
                return leaf
        return None

    def find(self, dotted: str) -> Field:
        for f in self.root.walk():
            if f.dotted == dotted:
                return f
        raise KeyError(dotted)

    def to_dict(self) -> dict[str, Any]:
        return {
            "data": self.data.hex(),
            "root": self.root.to_dict(),
            "error": None if self.error is None else str(self.error),
            "error_offset": self.error_offset,
        }


def format_path(path: tuple[PathPart, ...]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


# ------------------------------------------------------------------------- tracing


@dataclass
class _Trace:
    """One ``_parsereport`` call: which construct read which bytes and what it returned."""

    con: Construct[Any, Any]
    start: int
    end: int = -1
    value: Any = None
    failed: bool = False
    children: list[_Trace] = field(default_factory=list)


_original_parsereport = Construct._parsereport
_hook_lock = threading.Lock()
_local = threading.local()


def _tracing_parsereport(self: Construct[Any, Any], stream: IO[bytes], context: Any,
                         path: Any) -> Any:
    stack: list[_Trace] | None = getattr(_local, "stack", None)
    if stack is None:
        return _original_parsereport(self, stream, context, path)
    node = _Trace(self, stream.tell())
    stack[-1].children.append(node)
    stack.append(node)
    try:
        node.value = _original_parsereport(self, stream, context, path)
    except BaseException:
        node.failed = True
        node.end = _tell(stream, node.start)
        raise
    else:
        node.end = stream.tell()
    finally:
        stack.pop()
    return node.value


def _tell(stream: IO[bytes], default: int) -> int:
    try:
        return stream.tell()
    except (OSError, ValueError):
        return default


def annotate(con: Construct[Any, Any], data: bytes, **contextkw: Any) -> Layout:
    """Parse ``data`` with ``con`` and attribute every byte to a named field.

    Never raises for bad input: a parse error is returned in ``Layout.error`` with the
    offset where it happened (the error's own ``offset`` attribute if it has one, as the
    NSQ grammar's errors do, else the stream position at the failure).
    """
    data = bytes(data)
    top = _Trace(con, 0)
    stream = io.BytesIO(data)
    error: Exception | None = None
    error_offset: int | None = None
    with _hook_lock:
        setattr(Construct, "_parsereport", _tracing_parsereport)  # noqa: B010 - a hook
        _local.stack = [top]
        try:
            con.parse_stream(stream, **contextkw)
        except Exception as exc:  # noqa: BLE001 - any grammar's failure is data here
            error = exc
            error_offset = getattr(exc, "offset", None)
            if error_offset is None:
                error_offset = _deepest_end(top)
        finally:
            _local.stack = None
            setattr(Construct, "_parsereport", _original_parsereport)  # noqa: B010
    if not top.children:  # parse_stream always reports the root; be defensive anyway
        raise RuntimeError("construct did not report its root parse")
    trace = top.children[0]
    root = _fold(trace, (), con.name or "", data)
    _fill_gaps(root, data)
    if root.end < len(data):
        tail_name = "(unparsed)" if error is not None else "(trailing)"
        root = _with_tail(root, root.end, data, tail_name)
    return Layout(data, root, error, error_offset)


def _deepest_end(trace: _Trace) -> int:
    end = trace.end if trace.end >= 0 else trace.start
    for child in trace.children:
        end = max(end, _deepest_end(child))
    return end


# ------------------------------------------------------------------------- folding


def _unwrap(value: Any) -> Any:
    if isinstance(value, Container) and "_io" in value:
        return Container({k: v for k, v in value.items() if k != "_io"})
    return value


def _fold(trace: _Trace, path: tuple[PathPart, ...], name: PathPart, data: bytes) -> Field:
    """Turn one trace node into a field, collapsing transparent single-child wrappers."""
    value = trace.value
    if isinstance(trace.con, RawCopy) and isinstance(value, Container) and "value" in value:
        value = value.value
    node = trace
    chain = [trace.con]
    # Walk down through wrappers that read exactly the same bytes as their one child.
    while True:
        con = node.con
        chain.append(con)
        if isinstance(con, Renamed) and node.children:
            node = node.children[0]
            continue
        if (
            len(node.children) == 1
            and not isinstance(con, Prefixed | Struct | Sequence | FocusedSeq | Array | GreedyRange)
            and _same_span(node, node.children[0])
        ):
            node = node.children[0]
            continue
        break
    start = trace.start
    end = trace.end if trace.end >= 0 else _deepest_end(trace)
    end = max(end, start)
    out = Field(
        name, path, start, end, _unwrap(value), data[start:end], _kind(chain, end - start),
        failed=trace.failed,
    )
    kids = _named_children(node)
    if kids and _children_fit(kids, start, end):
        for kid_name, kid in kids:
            if _is_positional(kid_name) and kid.end == kid.start and not kid.failed:
                continue  # an unnamed zero-width check (e.g. "nothing left") owns no bytes
            child = _fold(kid, (*path, kid_name), kid_name, data)
            if _reads_nothing(child):
                continue  # a peek or a check: no bytes of its own, nothing to show
            out.children.append(child)
    return out


def _reads_nothing(node: Field) -> bool:
    """A zero-width leaf that is not a (possibly empty) byte field, struct or array."""
    return (
        node.is_leaf and node.width == 0 and not node.failed
        and not node.kind.startswith("bytes")
        and node.kind not in ("struct", "array", "prefixed")
    )


def _is_positional(name: PathPart) -> bool:
    return isinstance(name, str) and name.startswith("_")


def _same_span(a: _Trace, b: _Trace) -> bool:
    return a.start == b.start and (a.end == b.end or a.failed or b.failed)


def _children_fit(kids: list[tuple[PathPart, _Trace]], start: int, end: int) -> bool:
    """Children attribute bytes only if they lie inside the parent, in order, apart."""
    pos = start
    for _, kid in kids:
        k_end = kid.end if kid.end >= 0 else kid.start
        if kid.start < pos or k_end > end:
            return False
        pos = max(k_end, kid.start)
    return True


def _named_children(node: _Trace) -> list[tuple[PathPart, _Trace]]:
    con = node.con
    kids = node.children
    if isinstance(con, Struct | Sequence | FocusedSeq):
        out: list[tuple[PathPart, _Trace]] = []
        focus = getattr(con, "parsebuildfrom", None)
        seen: dict[str, int] = {}
        for i, (sc, kid) in enumerate(zip(con.subcons, kids, strict=False)):
            inner = kid.children[0] if isinstance(kid.con, Renamed) and kid.children else kid
            if sc.name is not None and sc.name == focus and isinstance(inner.con, Array):
                # PrefixedArray is FocusedSeq(count, items=Array): list the items directly,
                # so paths read ``messages[0]`` rather than ``messages.items[0]``.
                out.extend(enumerate(inner.children))
            else:
                out.append((sc.name if sc.name else _unnamed(sc, i, seen), kid))
        return out
    if isinstance(con, Array):
        return list(enumerate(kids))
    if isinstance(con, GreedyRange):
        # the attempt that ended the range failed and was rewound: it owns no bytes
        return list(enumerate(k for k in kids if not k.failed))
    if isinstance(con, Prefixed) and kids:
        names = ["size", "data"]
        return [(names[i] if i < 2 else f"_{i}", kid) for i, kid in enumerate(kids)]
    return [(f"_{i}", kid) for i, kid in enumerate(kids)]


def _unnamed(sc: Construct[Any, Any], i: int, seen: dict[str, int]) -> str:
    """The name of an unnamed subcon: its grammar's ``layout_name`` (``separator``;
    ``separator2`` for the second in one struct), else its position (``_1``)."""
    word = getattr(sc, "layout_name", None)
    if not isinstance(word, str):
        return f"_{i}"
    seen[word] = seen.get(word, 0) + 1
    return word if seen[word] == 1 else f"{word}{seen[word]}"


_FORMATS = {"b": "int8", "B": "uint8", "h": "int16", "H": "uint16", "i": "int32",
            "I": "uint32", "l": "int32", "L": "uint32", "q": "int64", "Q": "uint64",
            "f": "float32", "d": "float64"}


def _kind(chain: list[Construct[Any, Any]], width: int) -> str:
    """A short type label for a field, from the wrappers it was folded through."""
    if any(isinstance(c, Const) for c in chain):
        return "const"
    inner = chain[-1]
    if isinstance(inner, FormatField):
        order = {">": " BE", "<": " LE"}.get(inner.fmtstr[:1], "") if inner.length > 1 else ""
        return _FORMATS.get(inner.fmtstr[-1], inner.fmtstr) + order
    if isinstance(inner, BytesInteger) and isinstance(inner.length, int) \
            and isinstance(inner.swapped, bool):
        order = " LE" if inner.swapped else " BE"
        return f"{'' if inner.signed else 'u'}int{inner.length * 8}{order}"
    if isinstance(inner, Bytes):
        return f"bytes[{width}]"
    if isinstance(inner, GreedyBytes.__class__):
        return "bytes"
    if isinstance(inner, Struct | Sequence | FocusedSeq):
        return "struct"
    if isinstance(inner, Array | GreedyRange):
        return "array"
    if isinstance(inner, Prefixed):
        return "prefixed"
    return type(inner).__name__.lstrip("_").lower()


def _fill_gaps(node: Field, data: bytes) -> None:
    """Add ``(padding)`` leaves for bytes a composite read but no child claimed."""
    if node.is_leaf:
        return
    filled: list[Field] = []
    pos = node.start
    for child in node.children:
        if child.start > pos:
            filled.append(_filler(node.path, "(padding)", pos, child.start, data))
        _fill_gaps(child, data)
        filled.append(child)
        pos = max(pos, child.end)
    if pos < node.end:
        filled.append(_filler(node.path, "(padding)", pos, node.end, data))
    node.children = filled


def _filler(path: tuple[PathPart, ...], name: str, start: int, end: int, data: bytes) -> Field:
    return Field(name, (*path, name), start, end, data[start:end], data[start:end], "unparsed")


def _with_tail(root: Field, covered: int, data: bytes, name: str) -> Field:
    """Give bytes the grammar never reached a leaf of their own under the root."""
    tail = _filler((), name, covered, len(data), data)
    if root.is_leaf:
        root = Field(root.name, root.path, root.start, root.end, root.value, root.raw,
                     root.kind, [], root.failed)
        if root.width:
            root.children.append(_filler((), "(root)", root.start, root.end, data))
    root.children.append(tail)
    root.end = len(data)
    root.raw = data[root.start :]
    return root


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("ascii") if bytes(value).isascii() else bytes(value).hex()
        except UnicodeDecodeError:
            return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return repr(value)
