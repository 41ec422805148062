"""Every cuDNN call pymagma.dnn makes, checked on the CPU: descriptors are real cuDNN descriptors (they need no GPU),
the calls that need a handle go through our own prototype (so ctypes converts exactly as for the library) into a
recorder instead of the library.  Each (descriptor, data pointer) pair must describe the same array and each
alpha/beta must have the type cuDNN reads for the data, which catches swapped x/y/w/dy arguments without a GPU."""

from __future__ import annotations

import ctypes
import math
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from pymagma import _cudnn as cd
from pymagma import _native, array, dnn, memory
from pymagma.array import DeviceArray

from .helpers import BF16_CASE

pytestmark = pytest.mark.native

#: calls that need a cudnnHandle_t (a GPU): recorded instead of run (descriptor setters and queries run for real)
HANDLE_CALLS = {
    name for name in cd.PROTOTYPES
    if (name.startswith(("cudnnConvolution", "cudnnPooling", "cudnnActivation", "cudnnSoftmax", "cudnnFind",
                         "cudnnBatchNormalization", "cudnnDropout", "cudnnGetReduction"))
        or "Algorithm" in name or "WorkspaceSize" in name
        or name in ("cudnnReduceTensor", "cudnnOpTensor", "cudnnAddTensor", "cudnnScaleTensor", "cudnnSetTensor"))
    and ("Descriptor" not in name or "Dropout" in name) and name != "cudnnDropoutGetReserveSpaceSize"
} | {"cudnnSetDropoutDescriptor", "cudnnRestoreDropoutDescriptor"}


class Recorder:
    """Stands in for the handle-taking cuDNN calls; knows the arrays by their pointers."""

    def __init__(self):
        self.arrays: dict[int, DeviceArray] = {}
        self.buffers: list[np.ndarray] = []
        self.calls: list[tuple[str, tuple]] = []
        self.set_values: list = []  # what cudnnSetTensor read through its value pointer, in the tensor's dtype

    def device_array(self, host: np.ndarray) -> DeviceArray:
        self.buffers.append(host)
        arr = DeviceArray(host.shape, host.dtype, host.ctypes.data, host.strides, owner=host)
        self.arrays[arr.ptr] = arr
        return arr

    def bind(self, real_bind):
        def bind(name):
            if name not in HANDLE_CALLS:
                return real_bind(name)
            restype, argtypes = cd.PROTOTYPES[name]

            def call(*args):
                self.calls.append((name, args))
                if name == "cudnnSetTensor":
                    arr = self.arrays[args[2].value]
                    raw = ctypes.string_at(args[3].value, arr.itemsize)
                    self.set_values.append(np.frombuffer(raw, arr.dtype)[0])
                ctypes.CFUNCTYPE(restype, *argtypes)(lambda *converted: 0)(*args)  # arity and ctypes types
                self.answer_query(name, args)
                return 0

            return call

        return bind

    @staticmethod
    def answer_query(name: str, args) -> None:
        """Fill the out-parameters of the queries dnn makes (counts, sizes, one algorithm)."""
        if name.endswith("AlgorithmMaxCount"):
            args[-1]._obj.value = 1
        elif name.endswith("Algorithm_v7") or name.startswith("cudnnFind"):
            returned, perf = (args[-2], args[-1]) if name.endswith("_v7") else (args[-4], args[-3])
            returned._obj.value = 1
            perf[0].algo, perf[0].status, perf[0].memory = 1, 0, 0
        elif name.endswith(("WorkspaceSize", "GetStatesSize")):
            args[-1]._obj.value = 64

    def check_pairs(self, name: str, args) -> int:
        """Every descriptor followed by one of our arrays' pointers describes that array; returns pairs seen."""
        seen = 0
        for desc, ptr in zip(args, args[1:]):
            if not isinstance(desc, cd.TensorDescriptor | cd.FilterDescriptor) or not isinstance(ptr, ctypes.c_void_p):
                continue
            arr = self.arrays.get(ptr.value or 0)
            if arr is None:
                continue
            assert [d for d in desc.shape if d != 1] == [d for d in arr.shape if d != 1], (name, desc.shape, arr.shape)
            assert math.prod(desc.shape) == arr.size and desc.dtype == dnn.data_type(arr.dtype), name
            seen += 1
        return seen

    def check_scalars(self, name: str, args, dtype) -> None:
        scalars = [a._obj for a in args if type(a).__name__ == "CArgObject" and isinstance(a._obj, ctypes.c_float
                                                                                               | ctypes.c_double)]
        want = ctypes.c_double if np.dtype(dtype) == np.float64 else ctypes.c_float
        assert all(type(s) is want for s in scalars), (name, [type(s).__name__ for s in scalars])


@pytest.fixture
def recorder(monkeypatch):
    try:
        cd.lib.cdll  # noqa: B018
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cuDNN is not installed: {exc}")
    rec = Recorder()
    monkeypatch.setattr(cd.lib, "bind", rec.bind(cd.lib.bind))
    monkeypatch.setattr(cd, "_called", (None, {}))  # what call() bound from cd.lib before is bound again, recorded
    monkeypatch.setattr(dnn, "handle", lambda device=None: SimpleNamespace(value=0x1000))
    monkeypatch.setattr(_native.current, "cudnn_algorithms", {})
    monkeypatch.setattr(_native.current, "cudnn_dropout_states", {})
    monkeypatch.setattr(array, "empty", lambda shape, dtype=np.float32, device=None:
                        rec.device_array(np.zeros(shape, dtype)))
    monkeypatch.setattr(array, "_empty", lambda shape, dtype, device: rec.device_array(np.zeros(shape, dtype)))
    def workspace(nbytes, device=None):
        return SimpleNamespace(ptr=rec.device_array(np.zeros(max(nbytes, 1), np.uint8)).ptr, nbytes=nbytes)

    monkeypatch.setattr(memory, "alloc", workspace)
    monkeypatch.setattr(memory.Allocation, "trusted", staticmethod(workspace))
    monkeypatch.setattr("pymagma.runtime.get_device", lambda: 0)
    monkeypatch.setattr("pymagma.runtime.set_device", lambda d: None if d == 0 else pytest.fail(f"device {d}"))
    monkeypatch.setattr("pymagma.runtime._thread", threading.local())
    return rec


def run_every_dnn_function(rec: Recorder, dtype) -> None:
    rng = np.random.default_rng(0)

    def dev(*shape, dtype=dtype):
        return rec.device_array(rng.standard_normal(shape).astype(dtype))

    def param(*shape):  # batch-norm parameters: float32 for half-precision data, as cuDNN requires
        return dev(*shape, dtype=np.float64 if dtype == np.float64 else np.float32)

    x, w, b = dev(2, 3, 7, 6), dev(4, 3, 3, 2), dev(4)
    y = dnn.conv2d_forward(x, w, b, stride=(2, 1), padding=1)
    dnn.conv2d_forward(x, w, padding=1, autotune=True, workspace_limit=1 << 10)
    dnn.conv2d_backward_data(y, w, x.shape, stride=(2, 1), padding=1)
    dnn.conv2d_backward_filter(x, y, w.shape, stride=(2, 1), padding=1)
    dnn.conv2d_backward_bias(y)
    for mode in ("max", "avg"):
        p = dnn.pool2d_forward(x, 2, mode=mode)
        dnn.pool2d_backward(p, p, x, 2, mode=mode)
    a = dnn.activation_forward(x, "tanh")
    dnn.activation_backward(a, a, x, "tanh")
    s = dnn.softmax_forward(dev(5, 7), log=True)
    dnn.softmax_backward(s, s, log=True)
    for mode, pshape in (("spatial", (3,)), ("per_activation", (3, 7, 6))):
        out, mean, inv = dnn.batch_norm_forward_training(x, param(*pshape), param(*pshape), param(*pshape),
                                                         param(*pshape), mode=mode)
        dnn.batch_norm_forward_inference(x, param(*pshape), param(*pshape), param(*pshape), param(*pshape),
                                         mode=mode)
        dnn.batch_norm_backward(x, out, param(*pshape), mean, inv, mode=mode)
    d, reserve = dnn.dropout_forward(x, 0.25, seed=3)
    dnn.dropout_backward(d, reserve, 0.5, seed=3)
    dnn.add_tensor(dev(1, 3, 1, 1), x)
    dnn.op_tensor("mul", x, dev(1, 3, 1, 1))
    dnn.scale_tensor(x, 0.5)
    dnn.set_tensor(x, 1.5)
    dnn.reduce_tensor("sum", x, (0, 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16_CASE])
def test_every_cudnn_call_gets_matching_descriptors_pointers_and_scalars(recorder, dtype):
    run_every_dnn_function(recorder, dtype)
    names = {name for name, _ in recorder.calls}
    compute = {"cudnnConvolutionForward", "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter",
               "cudnnConvolutionBackwardBias", "cudnnFindConvolutionForwardAlgorithmEx", "cudnnPoolingForward",
               "cudnnPoolingBackward", "cudnnActivationForward", "cudnnActivationBackward", "cudnnSoftmaxForward",
               "cudnnSoftmaxBackward", "cudnnBatchNormalizationForwardTraining",
               "cudnnBatchNormalizationForwardInference", "cudnnBatchNormalizationBackward", "cudnnDropoutForward",
               "cudnnDropoutBackward", "cudnnRestoreDropoutDescriptor", "cudnnAddTensor", "cudnnOpTensor",
               "cudnnScaleTensor", "cudnnSetTensor", "cudnnReduceTensor"}
    assert compute <= names, sorted(compute - names)
    assert [float(v) for v in recorder.set_values] == [1.5]  # read in the tensor's own type (2 bytes for halves)
    for name, args in recorder.calls:
        recorder.check_scalars(name, args, dtype)
        pairs = recorder.check_pairs(name, args)
        if name in compute - {"cudnnRestoreDropoutDescriptor"}:
            least = 1 if name in ("cudnnScaleTensor", "cudnnSetTensor") else 2  # in-place on one tensor
            assert pairs >= least, f"{name}: only {pairs} descriptor/array pairs recognised"


def test_activation_coefficients_have_per_mode_defaults(monkeypatch):
    seen = []
    monkeypatch.setattr(dnn, "activation_descriptor", lambda mode, coef: seen.append((mode, coef)))
    for mode in ("relu", "elu", "swish"):
        dnn._activation_desc(mode, None)
    dnn._activation_desc("clipped_relu", 6.0)
    modes = cd.ActivationMode
    assert seen == [(modes.RELU, 0.0), (modes.ELU, 1.0), (modes.SWISH, 1.0), (modes.CLIPPED_RELU, 6.0)]
    with pytest.raises(ValueError, match="ceiling"):
        dnn._activation_desc("clipped_relu", None)
    with pytest.raises(ValueError, match="activation must be one of"):
        dnn._activation_desc("identity", None)  # cuDNN's IDENTITY fails in cudnnActivationForward


def test_strided_out_is_refused_before_cudnn_writes_it(recorder):
    x = recorder.device_array(np.ones((2, 3, 4, 4), np.float32))
    out = recorder.device_array(np.zeros((2, 3, 4, 4), np.float32).transpose(0, 1, 3, 2))
    with pytest.raises(ValueError, match="C-contiguous"):
        dnn.activation_forward(x, "relu", out=out)
    assert recorder.calls == []


def test_dimensions_beyond_int32_are_a_clear_error():
    try:
        cd.lib.cdll  # noqa: B018
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cuDNN is not installed: {exc}")
    with pytest.raises(ValueError, match="32-bit"):
        cd.TensorDescriptor((1, 1, 2, 2**31), cd.DataType.FLOAT, (2**32, 2**32, 2**31, 1))


def test_cudnn_calls_run_on_the_arrays_device_when_there_are_several(recorder, monkeypatch):
    current, seen = {"device": 0}, []
    monkeypatch.setattr("pymagma.runtime.device_count", lambda: 2)
    monkeypatch.setattr("pymagma.runtime.require_device", lambda: 2)
    monkeypatch.setattr("pymagma.runtime.get_device", lambda: current["device"])
    monkeypatch.setattr("pymagma.runtime.set_device", lambda d: current.update(device=int(d)))
    monkeypatch.setattr(dnn, "handle", lambda device=None: seen.append((device, current["device"])) or
                        SimpleNamespace(value=0x1000))
    host = np.ones((2, 3, 4, 4), np.float32)
    x = DeviceArray(host.shape, host.dtype, host.ctypes.data, owner=host, device=1)
    out = DeviceArray(host.shape, host.dtype, recorder.device_array(np.zeros_like(host)).ptr, device=1)
    dnn.activation_forward(x, "relu", out=out)
    dnn.scale_tensor(x, 2.0)
    assert seen == [(1, 1), (1, 1)] and current["device"] == 0
