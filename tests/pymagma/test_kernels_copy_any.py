"""``pymagma.kernels.copy_any``: a C-contiguous device copy of a view of any dtype equals NumPy's copy of the same
view, bit for bit (dtypes no kernel has go through their bytes); anything but a DeviceArray is a TypeError."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pymagma
from pymagma import kernels, simulator

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
          np.uint32, np.uint64, np.bool_, np.complex64, np.complex128]


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from(DTYPES), shape=st.tuples(st.integers(0, 4), st.integers(1, 5), st.integers(1, 4)),
       steps=st.tuples(st.sampled_from([1, 2, -1]), st.sampled_from([1, 2, -1])), transpose=st.booleans())
def test_copy_any_equals_numpys_copy_of_the_view(dtype, shape, steps, transpose):
    host = (np.random.default_rng(0).standard_normal(shape) * 50).astype(dtype)
    with simulator.simulated("full"):
        view = pymagma.asarray(host)[:, ::steps[0], ::steps[1]]
        want = host[:, ::steps[0], ::steps[1]]
        if transpose:
            view, want = view.transpose((2, 0, 1)), want.transpose((2, 0, 1))
        got = kernels.copy_any(view)
        assert got.is_c_contiguous and got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.get(), want)
        assert got.get().tobytes() == np.ascontiguousarray(want).tobytes()


@pytest.mark.parametrize("bad", [np.zeros(3), [1.0, 2.0], None, 3.0])
def test_copy_any_refuses_what_is_not_a_device_array(bad):
    with pytest.raises(TypeError, match=r"copy_any: expected a pymagma.DeviceArray"):
        kernels.copy_any(bad)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_copy_any_equals_numpys_copy_of_the_view_gpu(dtype):
    host = (np.random.default_rng(1).standard_normal((3, 6, 4)) * 50).astype(dtype)
    got = kernels.copy_any(pymagma.asarray(host)[:, ::-2].transpose((2, 0, 1)))
    np.testing.assert_array_equal(got.get(), host[:, ::-2].transpose((2, 0, 1)))
