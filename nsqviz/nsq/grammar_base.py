"""What the NSQ grammar modules are built on: typed bases for ``construct``'s classes,
the locator that gives a failure its field, and the exact parse that gives it its offset.

``construct`` is typed by the stubs of ``construct-typing``, whose generic classes exist
for the type checker only (``Adapter[int, int, str, str]`` is not valid at run time):
the grammar's own constructs derive from the bases here, which are those generics to
the checker and construct's plain classes at run time. The values they pass (ints,
bytes, names) are typed by each method's own annotations; ``Grammar`` is the type of a
definition as a whole, whose parsed and built values are construct's dicts and
``Container`` objects.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any, TypeAlias

from construct import Adapter, Const, Construct, ConstructError, StreamError, Subconstruct
from construct.core import stream_tell

from nsqviz.nsq.grammar_errors import GrammarError

if TYPE_CHECKING:
    from construct.core import Context, PathType, StreamType

    ConstructBase: TypeAlias = Construct[Any, Any]
    SubconstructBase: TypeAlias = Subconstruct[Any, Any, Any, Any]
    AdapterBase: TypeAlias = Adapter[Any, Any, Any, Any]
    ConstBase: TypeAlias = Const[Any, Any]
else:
    ConstructBase, SubconstructBase, AdapterBase, ConstBase = (
        Construct, Subconstruct, Adapter, Const)

Grammar: TypeAlias = "Construct[Any, Any]"
"""A grammar definition: what it parses to and builds from is construct's containers."""

__all__ = [
    "AdapterBase",
    "ConstBase",
    "ConstructBase",
    "Grammar",
    "SubconstructBase",
    "parse_exactly",
]

# ---------------------------------------------------------------------------- locating


class _Located(SubconstructBase):
    """Stamps a GrammarError raised inside with the offset where the field *starts* and
    the field's name."""

    def __init__(self, subcon: Grammar, field: str):
        super().__init__(subcon)
        self.field = field

    def _parse(self, stream: StreamType, context: Context, path: PathType) -> Any:
        start = stream_tell(stream, path)
        try:
            return self.subcon._parsereport(stream, context, path)
        except GrammarError as exc:
            if exc.offset is None:
                exc.offset = start
            if exc.field is None:
                exc.field = self.field
            raise

    def _build(self, obj: Any, stream: StreamType, context: Context, path: PathType) -> Any:
        try:
            return self.subcon._build(obj, stream, context, path)
        except GrammarError as exc:
            if exc.field is None:
                exc.field = self.field
            raise


def parse_exactly(con: Grammar, data: bytes) -> Any:
    """Parse ``data`` whole, turning any construct failure into a GrammarError with offset."""
    stream = io.BytesIO(data)
    try:
        value = con.parse_stream(stream)
    except GrammarError as exc:
        if exc.offset is None:
            exc.offset = stream_tell(stream, None)
        raise
    except ConstructError as exc:
        # construct's own text ("Error in path (parsing) -> ...") is not for a reader:
        # say which field ran short or did not fit, in the grammar's names
        field = _field_of(exc.path)
        what = field or "the input"
        reason = (f"{what} is cut short" if isinstance(exc, StreamError)
                  else f"{what} does not fit the grammar")
        raise GrammarError(reason, offset=stream_tell(stream, None), field=field) from None
    rest = len(data) - stream_tell(stream, None)
    if rest:
        raise GrammarError(f"{rest} bytes left over", offset=len(data) - rest)
    return value


def _field_of(path: str | None) -> str | None:
    """The innermost named field of a construct error path (``(parsing) -> data -> id``)."""
    names = [p.strip() for p in (path or "").split("->")]
    names = [n for n in names if n and not n.startswith("(") and not n.isdigit()]
    if "messages" in names[:-1]:  # inside MPUB's PrefixedArray: its count or a message
        return {"count": "num messages", "items": "message size"}.get(names[-1], names[-1])
    return names[-1] if names else None
