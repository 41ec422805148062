"""The host's last-axis maximum and sum for its softmaxes (``backend/host/_rows.py``) against NumPy, and the
softmaxes built on them against PyTorch (NaN and infinities give the rows NumPy's path gives)."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn.backend import host
from magmadnn.backend.host import _rows

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("shape", [(7,), (5, 3), (2, 3, 4, 33), (4, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_last_max_and_sum_are_numpys(shape, dtype):
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(dtype)
    np.testing.assert_array_equal(_rows.last_max(x), np.max(x, axis=-1, keepdims=True))
    np.testing.assert_allclose(_rows.last_sum(x), np.sum(x, axis=-1, keepdims=True), rtol=1e-6, atol=1e-6)
    strided = np.swapaxes(x, 0, -1) if x.ndim > 1 else x[::2]  # not C-contiguous: NumPy's own reductions
    np.testing.assert_array_equal(_rows.last_max(strided), np.max(strided, axis=-1, keepdims=True))
    np.testing.assert_array_equal(_rows.last_sum(strided), np.sum(strided, axis=-1, keepdims=True))


def test_softmaxes_match_pytorch_and_numpys_nan_rows():
    x = np.random.default_rng(1).standard_normal((3, 4, 8, 8)).astype(np.float32)
    want = torch.softmax(torch.from_numpy(x), -1).numpy()
    np.testing.assert_allclose(host.softmax(x, -1), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(host.softmax(x, 1), torch.softmax(torch.from_numpy(x), 1).numpy(), rtol=1e-6,
                               atol=1e-7)
    np.testing.assert_allclose(host.masked_softmax(x, None, 0.5), torch.softmax(torch.from_numpy(x) * 0.5, -1),
                               rtol=1e-6, atol=1e-7)
    odd = np.array([[1, np.nan, 2], [np.nan, 1, 2], [np.inf, 1, 2], [1, 2, -np.inf]], np.float32)
    with np.errstate(invalid="ignore"):
        got, ref = host.softmax(odd, -1), torch.softmax(torch.from_numpy(odd), -1).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got[3], ref[3], rtol=1e-6)
