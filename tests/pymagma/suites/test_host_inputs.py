"""NumPy arrays given to the device-only APIs (pymagma.dnn, pymagma.kernels, pymagma.blas) are rejected with a
TypeError naming the argument, before any native call: a host pointer must never reach cuDNN, MAGMA or a kernel.
Runs without a GPU (a native call would raise NoDeviceError here instead)."""

from __future__ import annotations

import numpy as np
import pytest

from pymagma import blas, dnn, kernels
from pymagma.array import DeviceArray

X = np.ones((2, 3, 4, 4), np.float32)
W = np.ones((5, 3, 3, 3), np.float32)
DY = np.ones((2, 5, 2, 2), np.float32)
Y = np.ones((2, 3, 2, 2), np.float32)
C = np.ones(3, np.float32)
M = np.ones((4, 3), np.float32)


def on_device(host: np.ndarray) -> DeviceArray:
    """A DeviceArray over host memory (bookkeeping only; nothing here reaches a native call)."""
    return DeviceArray(host.shape, host.dtype, host.ctypes.data, host.strides, owner=host)


CALLS = {
    "conv2d_forward": lambda: dnn.conv2d_forward(X, W),
    "conv2d_forward mixed": lambda: dnn.conv2d_forward(on_device(X), W),
    "conv2d_backward_data": lambda: dnn.conv2d_backward_data(DY, W, X.shape),
    "conv2d_backward_filter": lambda: dnn.conv2d_backward_filter(X, DY, W.shape),
    "conv2d_backward_bias": lambda: dnn.conv2d_backward_bias(DY),
    "pool2d_forward": lambda: dnn.pool2d_forward(X, 2),
    "pool2d_backward": lambda: dnn.pool2d_backward(Y, Y, X, 2),
    "activation_forward": lambda: dnn.activation_forward(X),
    "activation_forward out": lambda: dnn.activation_forward(on_device(X), out=X),
    "activation_backward": lambda: dnn.activation_backward(X, X, X),
    "softmax_forward": lambda: dnn.softmax_forward(X),
    "softmax_backward": lambda: dnn.softmax_backward(X, X),
    "batch_norm_forward_training": lambda: dnn.batch_norm_forward_training(X, C, C),
    "batch_norm_forward_training params": lambda: dnn.batch_norm_forward_training(on_device(X), C, C),
    "batch_norm_forward_inference": lambda: dnn.batch_norm_forward_inference(X, C, C, C, C),
    "batch_norm_backward": lambda: dnn.batch_norm_backward(X, X, C),
    "dropout_forward": lambda: dnn.dropout_forward(X, 0.5),
    "dropout_backward": lambda: dnn.dropout_backward(X, np.zeros(8, np.uint8), 0.5),
    "add_tensor": lambda: dnn.add_tensor(C.reshape(1, 3, 1, 1), X),
    "op_tensor": lambda: dnn.op_tensor("add", X, X),
    "scale_tensor": lambda: dnn.scale_tensor(X, 2.0),
    "set_tensor": lambda: dnn.set_tensor(X, 1.0),
    "reduce_tensor": lambda: dnn.reduce_tensor("sum", X, 1),
    "kernels.relu": lambda: kernels.relu(X),
    "kernels.relu out": lambda: kernels.relu(on_device(X), out=X),
    "kernels.add": lambda: kernels.add(X, X),
    "kernels.add mixed": lambda: kernels.add(on_device(X), X),
    "kernels.bias_add": lambda: kernels.bias_add(X, C),
    "kernels.fill": lambda: kernels.fill(X, 1.0),
    "kernels.cast": lambda: kernels.cast(X, np.float16),
    "kernels.copy": lambda: kernels.copy(X),
    "kernels.reduce": lambda: kernels.reduce("sum", X),
    "kernels.argmax": lambda: kernels.argmax(X),
    "kernels.uniform": lambda: kernels.uniform(out=X, seed=0),
    "blas.gemm": lambda: blas.gemm(M, M.T),
    "blas.nrm2": lambda: blas.nrm2(C),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_host_arrays_are_a_type_error_before_any_native_call(call):
    with pytest.raises(TypeError, match=r"expected a pymagma\.DeviceArray, got ndarray \(use pymagma\.asarray\)"):
        call()
