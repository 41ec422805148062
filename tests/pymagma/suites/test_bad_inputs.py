"""A user's mistakes across pymagma's public API: one row per case (the call, the exception type, words its message
must contain).  Every case is rejected with a typed error before any native call; the calls that need a device run
on the simulated one (``pymagma.simulator``, mode "full"), so a bad value that slipped through would reach the
simulated MAGMA/cuDNN/kernels, whose argument checks would then report a different error.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import pymagma
from pymagma import array, blas, dnn, graphs, kernels, linalg, memory, queue, runtime, simulator
from pymagma.array import copy_into
from pymagma.errors import LinAlgError


@pytest.fixture
def d():
    """Small device arrays on the simulated device: ``a`` (2, 4), ``b`` (4, 3), ``c`` (2, 3), vectors ``v3``/``v4``,
    a 3-D stack ``s``, an NCHW ``x`` with filters ``w``, a float64 ``a64`` and an int32 ``i32``."""
    with simulator.simulated("full"):
        def up(shape, dtype=np.float32):
            return pymagma.asarray(np.arange(np.prod(shape), dtype=dtype).reshape(shape))

        yield SimpleNamespace(a=up((2, 4)), b=up((4, 3)), c=up((2, 3)), v3=up(3), v4=up(4), s=up((2, 2, 4)),
                              x=up((1, 2, 4, 4)), w=up((3, 2, 2, 2)), a64=up((2, 4), np.float64),
                              sq=up((3, 3)), i32=up((2, 2), np.int32), scalar=up(()))


X4, W4 = (1, 2, 4, 4), (3, 2, 2, 2)

ROWS = [
    # ------------------------------------------------------------------------------------------- array creation
    ("empty float dim", lambda d: pymagma.empty((2.5, 3)), TypeError, ["shape[0] must be an integer", "2.5"]),
    ("empty float size", lambda d: pymagma.empty(2.0), TypeError, ["shape must be an integer", "2.0"]),
    ("empty str size", lambda d: pymagma.empty("3"), TypeError, ["shape must be an integer"]),
    ("empty None", lambda d: pymagma.ones(None), TypeError, ["shape must be an integer", "None"]),
    ("empty negative", lambda d: pymagma.empty((-1, 2)), ValueError, ["negative dimension"]),
    ("zeros bad dtype", lambda d: pymagma.zeros(2, dtype="U3"), TypeError, ["unsupported dtype"]),
    ("full float dim", lambda d: array.full((2, 2.5), 1.0), TypeError, ["shape[1] must be an integer"]),
    ("empty negative device", lambda d: pymagma.empty(3, device=-1), ValueError, ["device", "-1"]),
    ("empty float device", lambda d: pymagma.empty(3, device=1.5), TypeError, ["device must be an integer"]),
    ("empty missing device", lambda d: pymagma.empty(3, device=5), ValueError, ["device 5 does not exist"]),
    ("asarray ragged", lambda d: pymagma.asarray([[1, 2], [3]]), ValueError, ["inhomogeneous"]),
    ("asarray strings", lambda d: pymagma.asarray(np.array(["a"])), TypeError, ["unsupported dtype"]),
    ("memory negative", lambda d: memory.alloc(-1), ValueError, ["nbytes must be between 0", "-1"]),
    ("memory float", lambda d: memory.alloc(1.5), TypeError, ["nbytes must be an integer", "1.5"]),
    ("bucket negative", lambda d: memory.bucket_size(-5), ValueError, ["nbytes", "-5"]),
    ("pinned_buffer negative", lambda d: memory.pinned_buffer(-1).__enter__(), ValueError,
     ["nbytes must be between 0", "-1"]),
    ("pinned_buffer float", lambda d: memory.pinned_buffer(1.5).__enter__(), TypeError,
     ["nbytes must be an integer", "1.5"]),
    ("2-D copy to 1-D host", lambda d: runtime.memcpy_2d_dtoh(np.ones(3), d.a.ptr, 16), ValueError,
     ["memcpy_2d_dtoh needs a 2-D host array", "(3,)"]),
    ("2-D copy to read-only host", lambda d: runtime.memcpy_2d_dtoh(np.broadcast_to(np.ones((2, 2)), (2, 2)),
                                                                    d.a.ptr, 16), ValueError, ["must be writable"]),
    ("2-D copy to strided host", lambda d: runtime.memcpy_2d_dtoh(np.ones((2, 4))[:, ::2], d.a.ptr, 16), ValueError,
     ["C-contiguous"]),
    ("2-D copy from 1-D host", lambda d: runtime.memcpy_2d_htod(d.a.ptr, 16, np.ones(3)), ValueError,
     ["memcpy_2d_htod needs a 2-D host array", "(3,)"]),
    ("2-D copy from list", lambda d: runtime.memcpy_2d_htod(d.a.ptr, 16, [[1.0, 2.0]]), TypeError,
     ["numpy.ndarray host buffer", "list"]),
    ("transfer_queue float device", lambda d: queue.transfer_queue(1.5), TypeError,
     ["device must be an integer", "1.5"]),
    ("transfer_queue missing device", lambda d: queue.transfer_queue(5), ValueError, ["device 5 does not exist"]),
    ("default_queue negative device", lambda d: queue.default_queue(-1), ValueError, ["device", "-1"]),
    ("wait_event None", lambda d: queue.default_queue().wait_event(None), TypeError,
     ["wait_event: event must be", "NoneType"]),
    # ------------------------------------------------------------------------------------------- views, transfer
    ("reshape float", lambda d: d.a.reshape(2.5, 4), TypeError, ["reshape: shape[0] must be an integer"]),
    ("reshape size", lambda d: d.a.reshape(5, 5), ValueError, ["cannot reshape", "size 8"]),
    ("reshape two -1", lambda d: d.a.reshape(-1, -1), ValueError, ["one unknown dimension"]),
    ("transpose repeat", lambda d: d.s.transpose(0, 0, 1), ValueError, ["not a permutation"]),
    ("transpose range", lambda d: d.a.transpose(0, 5), ValueError, ["out of range", "2-D"]),
    ("transpose float", lambda d: d.a.transpose(0.5, 1), TypeError, ["axes[0] must be an integer"]),
    ("index list", lambda d: d.a[[0, 1]], TypeError, ["basic indexing"]),
    ("index float", lambda d: d.a[1.5], TypeError, ["basic indexing", "float"]),
    ("index bounds", lambda d: d.a[10], IndexError, ["index 10 is out of bounds", "size 2"]),
    ("index too many", lambda d: d.a[0, 0, 0], IndexError, ["too many indices"]),
    ("index ellipses", lambda d: d.a[..., ...], IndexError, ["single ellipsis"]),
    ("np.asarray", lambda d: np.asarray(d.a), TypeError, ["implicit conversion", ".get()"]),
    ("np.array dtype", lambda d: np.array(d.a, dtype=np.float64), TypeError, [".get()"]),
    ("numpy ufunc", lambda d: np.exp(d.a), TypeError, [".get()"]),
    ("set shape", lambda d: d.a.set(np.ones((3, 3))), ValueError, ["shape mismatch", "(3, 3)"]),
    ("set device array", lambda d: d.a.set(d.c), TypeError, ["copy_into"]),
    ("len 0-d", lambda d: len(d.scalar), TypeError, ["0-d"]),
    ("mT of 1-D", lambda d: d.v3.mT, ValueError, ["at least 2 dimensions"]),
    ("copy_into shape", lambda d: copy_into(d.a, d.c), ValueError, ["copy_into", "(2, 3)", "(2, 4)"]),
    # ------------------------------------------------------------------------------------------- blas
    ("matmul host a", lambda d: blas.matmul(np.ones((2, 2)), d.a), TypeError, ["matmul: a", "pymagma.asarray"]),
    ("@ host b", lambda d: d.a @ np.ones((4, 3), np.float32), TypeError, ["meets a host NumPy array", "asarray"]),
    ("host @ device", lambda d: np.ones((3, 2), np.float32) @ d.a, TypeError, ["pymagma"]),
    ("* NumPy scalar", lambda d: d.a * np.float32(2), TypeError, ["NumPy scalar (float32)", "float(v)"]),
    ("NumPy scalar +", lambda d: np.int64(2) + d.a, TypeError, ["numpy.add met a DeviceArray"]),
    ("matmul out host", lambda d: blas.matmul(d.a, d.b, out=np.empty((2, 3))), TypeError, ["matmul: out"]),
    ("matmul scalar", lambda d: blas.matmul(d.scalar, d.a), ValueError, ["scalars (0-d)"]),
    ("gemm inner", lambda d: blas.gemm(d.a, d.c), ValueError, ["inner dimensions", "(2, 4)", "(2, 3)"]),
    ("gemm 3-D", lambda d: blas.gemm(d.s, d.b), ValueError, ["2-D operands", "gemm_batched"]),
    ("gemm beta no out", lambda d: blas.gemm(d.a, d.b, beta=1.0), ValueError, ["beta != 0", "out"]),
    ("gemm alpha str", lambda d: blas.gemm(d.a, d.b, alpha="2"), TypeError, ["alpha/beta must be a number", "'2'"]),
    ("gemm dtypes", lambda d: blas.gemm(d.a64, d.b), TypeError, ["different dtypes", "float32", "float64"]),
    ("gemm out host", lambda d: blas.gemm(d.a, d.b, out=np.empty((2, 3))), TypeError, ["gemm: out"]),
    ("gemm out shape", lambda d: blas.gemm(d.a, d.b, out=d.a), ValueError, ["out has shape (2, 4)", "(2, 3)"]),
    ("gemm int dtype", lambda d: blas.gemm(d.i32, d.i32), TypeError, ["int32", "float32"]),
    ("batched method", lambda d: blas.gemm_batched(d.s, d.b, method="fast"), ValueError, ["method", "'fast'"]),
    ("batched 1-D", lambda d: blas.gemm_batched(d.v4, d.b), ValueError, ["at least 2 dimensions"]),
    ("batched inner", lambda d: blas.gemm_batched(d.s, d.c), ValueError, ["inner dimensions"]),
    ("gemv shapes", lambda d: blas.gemv(d.a, d.v3), ValueError, ["(m, n) matrix and an (n,) vector", "(3,)"]),
    ("gemv host x", lambda d: blas.gemv(d.a, np.ones(4, np.float32)), TypeError, ["gemv: x", "pymagma.asarray"]),
    ("axpy sizes", lambda d: blas.axpy(2.0, d.v3, d.v4), ValueError, ["axpy: sizes differ"]),
    ("axpy alpha None", lambda d: blas.axpy(None, d.v3, d.v3), TypeError, ["alpha/beta must be a number"]),
    ("dot host", lambda d: blas.dot(np.ones(3), d.v3), TypeError, ["dot: x", "pymagma.asarray"]),
    ("scal host", lambda d: blas.scal(2.0, np.ones(3)), TypeError, ["scal: x"]),
    ("nrm2 int", lambda d: blas.nrm2(d.i32), TypeError, ["int32"]),
    ("asum int", lambda d: blas.asum(d.i32), TypeError, ["int32", "float32"]),
    ("asum host", lambda d: blas.asum(np.ones(3)), TypeError, ["asum: x", "pymagma.asarray"]),
    ("trsm side", lambda d: blas.trsm(d.sq, d.b[:3], side="up"), ValueError, ["side must be", "'up'"]),
    ("trsm not square", lambda d: blas.trsm(d.a, d.b), ValueError, ["square 2-D a"]),
    ("syrk out shape", lambda d: blas.syrk(d.a, out=d.sq), ValueError, ["syrk: out has shape (3, 3)", "(2, 2)"]),
    ("native batch -1", lambda d: blas.check_native_sizes("magma_sgetrf_batched", batch_count=-1), ValueError,
     ["magma_sgetrf_batched: batch_count must be between 0", "-1"]),
    ("native n 2**31", lambda d: blas.check_native_sizes("magma_sgemm", n=2**31), ValueError,
     ["magma_sgemm: n", "2147483648"]),
    ("native float", lambda d: blas.check_native_sizes("magma_sgemm", m=2.0), TypeError, ["m must be an integer"]),
    # ------------------------------------------------------------------------------------------- linalg
    ("solve not square", lambda d: linalg.solve(d.a, d.v4), LinAlgError, ["square"]),
    ("inv int dtype", lambda d: linalg.inv(d.i32), TypeError, ["int32", "float32"]),
    ("cholesky 1-D", lambda d: linalg.cholesky(d.v3), LinAlgError, ["two dimensions"]),
    ("solve rhs size", lambda d: linalg.solve(d.sq, d.v4), ValueError, ["incompatible"]),
    ("solve mixed dtypes", lambda d: linalg.solve(d.sq, np.ones(3)), TypeError, ["different dtypes"]),
    ("list of device arrays", lambda d: linalg.solve([d.v3, d.v3, d.v3], d.v3), TypeError, [".get()"]),
    ("matrix_power not square", lambda d: linalg.matrix_power(d.a, 2), LinAlgError, ["square"]),
    ("matrix_power 1-D", lambda d: linalg.matrix_power(d.v3, 2), LinAlgError, ["two dimensions"]),
    ("matrix_power float n", lambda d: linalg.matrix_power(d.sq, 2.0), TypeError,
     ["exponent must be an integer", "2.0"]),
    ("matrix_power str n", lambda d: linalg.matrix_power(np.eye(2), "2"), TypeError, ["exponent must be an integer"]),
    ("matrix_power int dtype", lambda d: linalg.matrix_power(d.i32, 2), TypeError, ["int32", "float32"]),
    ("multi_dot one array", lambda d: linalg.multi_dot([d.a]), ValueError, ["Expecting at least two arrays"]),
    ("multi_dot 3-D", lambda d: linalg.multi_dot([d.a, d.s, d.b]), LinAlgError, ["3-dimensional", "two-dim"]),
    ("multi_dot 0-d", lambda d: linalg.multi_dot([d.scalar, d.a]), LinAlgError, ["0-dimensional"]),
    ("multi_dot aligned", lambda d: linalg.multi_dot([d.a, d.c, d.b]), ValueError,
     ["not aligned", "(2, 4)", "(2, 3)"]),
    ("multi_dot int dtype", lambda d: linalg.multi_dot([d.i32, d.i32]), TypeError, ["int32", "float32"]),
    ("multi_dot out host", lambda d: linalg.multi_dot([d.a, d.b], out=np.empty((2, 3), np.float32)), TypeError,
     ["out must be a DeviceArray"]),
    ("multi_dot out shape", lambda d: linalg.multi_dot([d.a, d.b], out=d.a), ValueError,
     ["not acceptable", "(2, 3)", "(2, 4)"]),
    ("multi_dot out dtype", lambda d: linalg.multi_dot([d.a, d.b], out=pymagma.empty((2, 3), np.float64)),
     ValueError, ["not acceptable", "float32"]),
    ("norm axis float", lambda d: linalg.norm(d.a, axis=1.0), TypeError, ["'axis' must be", "1.0"]),
    ("norm axes float", lambda d: linalg.norm(d.a, axis=(0, 1.5)), TypeError, ["axis[1] must be an integer"]),
    ("norm axis range", lambda d: linalg.norm(d.a, axis=2), np.exceptions.AxisError, ["axis 2 is out of bounds"]),
    ("norm duplicate axes", lambda d: linalg.norm(d.a, axis=(1, -1)), ValueError, ["Duplicate axes"]),
    ("norm three axes", lambda d: linalg.norm(d.s, axis=(0, 1, 2)), ValueError, ["Improper number of dimensions"]),
    ("norm vector fro", lambda d: linalg.norm(d.v3, "fro"), ValueError, ["Invalid norm order 'fro' for vectors"]),
    ("norm matrix ord 3", lambda d: linalg.norm(d.a, 3), ValueError, ["Invalid norm order for matrices"]),
    ("norm int dtype", lambda d: linalg.norm(d.i32), TypeError, ["int32", "float32"]),
    # ------------------------------------------------------------------------------------------- dnn geometry
    ("conv stride float", lambda d: dnn.conv2d_output_shape(X4, W4, stride=(1.5, 2)), TypeError,
     ["stride[0] must be an integer", "1.5"]),
    ("conv groups float", lambda d: dnn.conv2d_output_shape(X4, W4, groups=1.5), TypeError,
     ["groups must be an integer", "1.5"]),
    ("pool window float", lambda d: dnn.pool2d_output_shape(X4, 2.5), TypeError, ["window must be an integer", "2.5"]),
    ("conv stride triple", lambda d: dnn.conv2d_output_shape(X4, W4, stride=(1, 2, 3)), ValueError,
     ["stride must be an int or a pair"]),
    ("conv stride 0", lambda d: dnn.conv2d_output_shape(X4, W4, stride=0), ValueError, ["stride >= 1"]),
    ("conv padding -1", lambda d: dnn.conv2d_output_shape(X4, W4, padding=-1), ValueError, ["padding >= 0"]),
    ("conv dilation str", lambda d: dnn.conv2d_output_shape(X4, W4, dilation="2"), TypeError, ["dilation"]),
    ("conv groups mismatch", lambda d: dnn.conv2d_output_shape(X4, W4, groups=2), ValueError, ["groups=2"]),
    ("conv 3-D x", lambda d: dnn.conv2d_output_shape((2, 4, 4), W4), ValueError, ["4-D x"]),
    ("conv float x dim", lambda d: dnn.conv2d_output_shape((1, 2, 4.0, 4), W4), TypeError, ["x shape[2]"]),
    ("pool window too big", lambda d: dnn.pool2d_output_shape(X4, 5), ValueError, ["window 5 exceeds"]),
    ("pool numpy ints ok", lambda d: dnn.pool2d_output_shape(X4, np.int64(5)), ValueError, ["window 5 exceeds"]),
    # ------------------------------------------------------------------------------------------- dnn on the device
    ("conv host x", lambda d: dnn.conv2d_forward(np.ones(X4, np.float32), d.w), TypeError, ["pymagma.asarray"]),
    ("conv stride float dev", lambda d: dnn.conv2d_forward(d.x, d.w, stride=(1.5, 2)), TypeError, ["stride[0]"]),
    ("conv groups float dev", lambda d: dnn.conv2d_forward(d.x, d.w, groups=1.5), TypeError, ["groups"]),
    ("conv workspace -1", lambda d: dnn.conv2d_forward(d.x, d.w, workspace_limit=-1), ValueError,
     ["workspace_limit", "-1"]),
    ("bwd data float shape", lambda d: dnn.conv2d_backward_data(pymagma.zeros((1, 3, 3, 3)), d.w, (1, 2, 4.5, 4)),
     TypeError, ["x shape[2]", "4.5"]),
    ("pool window float dev", lambda d: dnn.pool2d_forward(d.x, 2.5), TypeError, ["window must be an integer"]),
    ("pool mode", lambda d: dnn.pool2d_forward(d.x, 2, mode="median"), ValueError, ["pooling mode", "'median'"]),
    ("activation mode", lambda d: dnn.activation_forward(d.x, mode="gelu"), ValueError, ["activation", "'gelu'"]),
    ("softmax mode", lambda d: dnn.softmax_forward(d.x, mode="row"), ValueError, ["softmax mode", "'row'"]),
    ("dropout rate 1", lambda d: dnn.dropout_forward(d.x, 1.0), ValueError, ["[0, 1)", "1.0"]),
    ("dropout rate str", lambda d: dnn.dropout_forward(d.x, "0.5"), TypeError, ["real number", "'0.5'"]),
    ("dropout seed float", lambda d: dnn.dropout_state(seed=1.5), TypeError, ["seed must be an integer", "1.5"]),
    ("dropout seed -1", lambda d: dnn.dropout_state(seed=-1), ValueError, ["seed must be between 0", "-1"]),
    ("handle device -1", lambda d: dnn.handle(device=-1), ValueError, ["device", "-1"]),
    # ------------------------------------------------------------------------------------------- kernels
    ("uniform seed float", lambda d: kernels.uniform((2, 2), seed=1.5), TypeError, ["seed must be an integer"]),
    ("uniform seed -1", lambda d: kernels.uniform((2, 2), seed=-1), ValueError, ["seed must be between 0", "-1"]),
    ("uniform offset big", lambda d: kernels.uniform((2, 2), seed=0, offset=2**64), ValueError, ["offset"]),
    ("uniform float shape", lambda d: kernels.uniform((2.5, 2), seed=0), TypeError, ["shape[0] must be an integer"]),
    ("reduce axis float", lambda d: kernels.reduce("sum", d.a, axis=1.5), TypeError, ["axis must be an integer"]),
    ("reduce axis range", lambda d: kernels.reduce("sum", d.a, axis=5), ValueError, ["axis 5 is out of range"]),
    ("reduce op", lambda d: kernels.reduce("median", d.a), ValueError, ["unknown reduction", "'median'"]),
    ("argmax axes tuple", lambda d: kernels.argmax(d.a, axis=(0, 1)), TypeError, ["argmax axis must be an integer"]),
    ("unary op", lambda d: kernels.unary("nope", d.a), ValueError, ["unknown unary op", "'nope'"]),
    ("binary dtypes", lambda d: kernels.add(d.a, d.a64), TypeError, ["dtypes differ"]),
    ("kernel host input", lambda d: kernels.relu(np.ones(3, np.float32)), TypeError, ["pymagma.asarray"]),
    # ------------------------------------------------------------------------------------------- graphs
    ("graph capture mode", lambda d: graphs.capture(mode="loose").__enter__(), ValueError,
     ["capture mode", "'loose'"]),
    ("graph host read", lambda d: _in_capture(lambda: d.a.get()), pymagma.GraphCaptureError,
     ["DeviceArray.get", "CUDA graph"]),
    # ------------------------------------------------------------------------------------------- simulator
    ("simulator mode", lambda d: simulator.enable("bogus"), ValueError, ["simulator mode", "'bogus'"]),
]


def _in_capture(action):
    with graphs.capture():
        action()


@pytest.mark.parametrize(("call", "error", "words"), [pytest.param(c, e, w, id=i) for i, c, e, w in ROWS])
def test_bad_input_gets_a_clear_typed_error(d, call, error, words):
    with pytest.raises(error) as info:
        call(d)
    message = str(info.value)
    missing = [w for w in words if w not in message]
    assert not missing, f"{type(info.value).__name__}: {message!r} lacks {missing}"


def test_the_matrix_is_big_and_its_ids_are_unique():
    assert len(ROWS) >= 50 and len({r[0] for r in ROWS}) == len(ROWS)


def test_numpy_integers_are_accepted_wherever_a_size_is(d):
    """The counterpart of the float rows: NumPy integer types are sizes like Python ints (operator.index)."""
    i = np.int64
    assert pymagma.empty((i(2), np.int32(3))).shape == (2, 3)
    assert d.a.reshape(i(4), i(2)).shape == (4, 2)
    assert d.s.transpose(i(2), i(0), i(1)).shape == (4, 2, 2)
    assert dnn.conv2d_output_shape(X4, W4, stride=(i(1), np.int16(2)), groups=np.uint8(1)) == (1, 3, 3, 2)
    assert dnn.pool2d_output_shape(X4, i(2)) == (1, 2, 2, 2)
    assert kernels.reduce("sum", d.a, axis=i(1)).shape == (2,)


def test_checks_answered_once_per_arguments_still_refuse_an_equal_float(d):
    """Shapes, geometries and plans are checked once per distinct arguments and cached: a float equal to an int
    that passed (2.0 == 2, same hash) is still a TypeError, as on a first call."""
    cases = [
        (lambda: d.a.reshape(4, 2), lambda: d.a.reshape(4.0, 2)),
        (lambda: dnn.conv2d_forward(d.x, d.w, stride=1), lambda: dnn.conv2d_forward(d.x, d.w, stride=1.0)),
        (lambda: dnn.conv2d_forward(d.x, d.w, padding=(1, 1)), lambda: dnn.conv2d_forward(d.x, d.w, padding=(1, 1.0))),
        (lambda: kernels.reduce("sum", d.a, axis=1), lambda: kernels.reduce("sum", d.a, axis=1.0)),
    ]
    for good, bad in cases:
        good()
        good()  # answered from the cache
        with pytest.raises(TypeError, match="integer"):
            bad()


def test_answers_once_per_arguments_tell_the_types_inside_nested_tuples_apart():
    """Equal arguments whose types differ at any depth (a pad's pair inside the padding, deeper still) are answered
    apart: each distinct typing reaches the function once, and a repeated one is answered from the cache."""
    from pymagma._checks import once_per_arguments

    seen = []

    @once_per_arguments
    def plan(*args):
        seen.append(args)
        return len(seen)

    typings = [(((1, 1), (0, 2)),), (((1, 1), (0, 2.0)),), (((1, 1.0), (0, 2)),), ((1, ((2, 3), 4)),),
               ((1, ((2, 3.0), 4)),), ((1, ((2, (3,)), 4)),), ((1, ((2, (3.0,)), 4)),)]
    answers = [plan(*args) for args in typings]
    assert answers == list(range(1, len(typings) + 1))
    assert [plan(*args) for args in typings] == answers and len(seen) == len(typings)


def test_answers_by_the_same_objects_follow_what_may_change():
    """same_objects answers a call with the very argument objects of an earlier one from its keep; equal arguments
    of other objects, other types or values, and every call with a list (or a tuple holding one, which may change in
    place) reach the function again, and an error is never kept."""
    from pymagma._checks import once_per_arguments, same_objects

    seen = []

    def plan(shape, geometry):
        if geometry == "bad":
            raise ValueError("bad geometry")
        seen.append((shape, geometry))
        return (shape, str(geometry), len(seen))

    fast = same_objects(once_per_arguments(plan), by_value=1)
    pads = ((1, 1), (0, 2))
    first = fast((2, 3), pads)
    assert fast((2, 3), pads) is first and len(seen) == 1  # the same objects: kept
    other = tuple(list(pads))  # equal, another object: answered by the cache by value
    assert other is not pads and fast((2, 3), other) == first and len(seen) == 1
    assert fast((2, 4), pads)[0] == (2, 4) and len(seen) == 2  # another shape (by value)
    assert fast((2, 3), ((1, 1), (0, 2.0)))[1] == "((1, 1), (0, 2.0))" and len(seen) == 3  # other types
    listed = [1, 1]
    assert fast((2, 3), listed)[1] == "[1, 1]"
    listed[1] = 5
    assert fast((2, 3), listed)[1] == "[1, 5]"  # changed in place: computed again
    holding = ((1, 1), [0, 2])
    assert fast((2, 3), holding)[1] == "((1, 1), [0, 2])"
    holding[1][0] = 7
    assert fast((2, 3), holding)[1] == "((1, 1), [7, 2])"
    bad = "bad"
    for _ in range(2):
        with pytest.raises(ValueError, match="bad geometry"):
            fast((2, 3), bad)


def test_the_device_count_is_asked_once_per_set_of_libraries(d):
    """``on_arrays_device`` asks for the device count before every call; the runtime is asked once."""
    cudart = pymagma._native.current.cudart
    asked = []
    real = cudart.cudaGetDeviceCount
    cudart.cudaGetDeviceCount = lambda: asked.append(1) or real()
    try:
        del pymagma._native.current.device_count  # forgotten: asked again once
        for _ in range(3):
            kernels.reduce("sum", blas.gemm(d.a, d.b), axis=0)
            dnn.activation_forward(d.x, "relu")
    finally:
        del cudart.cudaGetDeviceCount
    assert len(asked) == 1 and runtime.device_count() == 1
