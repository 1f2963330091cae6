"""nsqviz.arrays: every frames-table type built from its buffers equals ``pyarrow.array``."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.arrays import from_list, from_numpy, indices, string
from nsqviz.records import frame_schema, packet_schema

_VALUES: dict[Any, Any] = {
    pa.string(): st.text(),
    pa.binary(): st.binary(),
    pa.bool_(): st.booleans(),
    pa.int32(): st.integers(-(2**31), 2**31 - 1),
    pa.int64(): st.integers(-(2**63), 2**63 - 1),
    pa.float64(): st.floats(allow_nan=False),
}


def _strategy(typ: Any) -> Any:
    if pa.types.is_list(typ):
        return st.lists(st.none() | _strategy(typ.value_type), max_size=4)
    return _VALUES[typ]


@pytest.mark.parametrize("typ", [*_VALUES, pa.list_(pa.string()), pa.list_(pa.int64())],
                         ids=str)
@settings(deadline=None, max_examples=60)
@given(data=st.data())
def test_from_list_is_pyarrow_array(typ: Any, data: Any) -> None:
    values = data.draw(st.lists(st.none() | _strategy(typ), max_size=20))
    got = from_list(values, typ)
    got.validate(full=True)
    assert got.equals(pa.array(values, typ))


def test_every_frames_table_type_is_built() -> None:
    for field in (*frame_schema(), *packet_schema()):
        assert from_list([None], field.type).type == field.type


def test_from_numpy_and_indices() -> None:
    values = np.array([3, -1, 7], np.int64)
    valid = values >= 0
    assert from_numpy(values, pa.int64(), valid).equals(pa.array([3, None, 7], pa.int64()))
    assert from_numpy(np.array([1.5]), pa.float64()).equals(pa.array([1.5]))
    assert from_numpy(np.array([True, False, True]), pa.bool_()).equals(
        pa.array([True, False, True]))
    assert indices([0, 2]).equals(pa.array([0, 2], pa.int64()))
    assert string("error").equals(pa.scalar("error"))


def test_no_pandas_import() -> None:
    """The point of the module: building arrays leaves pandas unimported."""
    code = ("import sys, numpy as np, pyarrow as pa; from nsqviz.arrays import *;"
            "from_list(['a', None], pa.string()); from_list([[1], None], pa.list_(pa.int64()));"
            "from_numpy(np.arange(3), pa.int64()); indices([1]); string('x');"
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert out.strip() == "False"
