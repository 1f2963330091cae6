"""Arrow arrays from Python lists and numpy arrays, built from their buffers.

``pyarrow.array`` asks, on its first call, whether its input is a pandas object -- by
importing pandas (0.25-0.45 s of CPU on a quiet machine: as long as the columnar path
takes for a 30 MB capture). Every array the frames table is made of has one of a few
types -- string, binary, bool, int32, int64, float64 and lists of these -- so the tables
are built here from the buffers Arrow's columnar format lays down for them (a validity
bitmap, offsets, values) with ``pyarrow.Array.from_buffers``, which imports nothing.
A test holds :func:`from_list` equal to ``pyarrow.array`` on every type, nulls included
(``tests/test_arrays.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["from_list", "from_numpy", "indices", "string"]

_NUMPY = {pa.int64(): np.int64, pa.int32(): np.int32, pa.float64(): np.float64}
"""The numeric types and their numpy dtypes."""


def _validity(valid: np.ndarray | None) -> Any:
    """The validity bitmap (least significant bit first), or none when every row is valid."""
    if valid is None or valid.all():
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def from_numpy(values: np.ndarray, typ: Any, valid: np.ndarray | None = None) -> Any:
    """``values`` (a 1-D numpy array) as an Arrow array of the numeric or bool type
    ``typ``; rows where ``valid`` is false are null."""
    n = len(values)
    if typ == pa.bool_():
        data = np.packbits(np.asarray(values, np.bool_), bitorder="little")
    else:
        data = np.ascontiguousarray(values, _NUMPY[typ])
    return pa.Array.from_buffers(typ, n, [_validity(valid), pa.py_buffer(data)])


def indices(values: Any) -> Any:
    """Row numbers (anything numpy takes) as an int64 array, for ``Array.take``."""
    return from_numpy(np.asarray(values, np.int64), pa.int64())


def _offsets(lengths: np.ndarray) -> Any:
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise OverflowError("more than 2 GiB of values in one Arrow array")
    return pa.py_buffer(offsets.astype(np.int32))


def from_list(values: Sequence[Any], typ: Any) -> Any:
    """``values`` (``None`` for null) as an Arrow array of type ``typ`` -- what
    ``pyarrow.array(values, typ)`` gives for the frames table's types."""
    n = len(values)
    valid = np.fromiter((v is not None for v in values), np.bool_, n)
    if pa.types.is_list(typ):
        lengths = np.fromiter((0 if v is None else len(v) for v in values), np.int64, n)
        child = from_list(list(chain.from_iterable(v for v in values if v is not None)),
                          typ.value_type)
        return pa.Array.from_buffers(typ, n, [_validity(valid), _offsets(lengths)],
                                     children=[child])
    if typ == pa.string() or typ == pa.binary():
        data = [b"" if v is None else v.encode() if isinstance(v, str) else bytes(v)
                for v in values]
        lengths = np.fromiter(map(len, data), np.int64, n)
        return pa.Array.from_buffers(typ, n, [_validity(valid), _offsets(lengths),
                                              pa.py_buffer(b"".join(data))])
    if typ == pa.bool_():
        truth = np.fromiter((v is not None and bool(v) for v in values), np.bool_, n)
        return from_numpy(truth, typ, valid)
    zero = 0.0 if typ == pa.float64() else 0
    return from_numpy(np.fromiter((zero if v is None else v for v in values), _NUMPY[typ], n),
                      typ, valid)


def string(value: str) -> Any:
    """``value`` as an Arrow string scalar, to compare a column with (``pyarrow.compute``
    turns a Python value into one through ``pyarrow.scalar``, which imports pandas)."""
    return from_list([value], pa.string())[0]
