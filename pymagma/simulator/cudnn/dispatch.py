"""The simulated cuDNN library: which call is a model and which the real libcudnn answers, the ctypes plumbing of
each call, stream order, and the NumPy model of every handle-taking call pymagma makes."""

from __future__ import annotations

import ctypes
import math
import threading
from ctypes import c_int, c_size_t, c_void_p

import numpy as np

from ... import _cudnn as cd
from ...errors import NotSimulatedError
from .. import plans as _plans
from ..runtime import COMPUTE_CAPABILITY
from . import numerics as num
from .descriptors import (
    Descriptors,
    DropoutConfig,
    ModelError,
    Pooling,
    Status,
    Tensor,
    blend,
    compute_dtype,
    host_view,
    read_scalar,
    require,
)
from .numerics import ConvGeometry
from .planned import Planner

_ALGOS = {"forward": cd.ConvFwdAlgo, "backward_data": cd.ConvBwdDataAlgo, "backward_filter": cd.ConvBwdFilterAlgo}
#: (kind, algorithm) -> the first compute capability that lacks it, as cuDNN 9's header documents
UNSUPPORTED_FROM = {("forward", int(cd.ConvFwdAlgo.WINOGRAD)): (9, 0),
                    ("backward_data", int(cd.ConvBwdDataAlgo.WINOGRAD)): (9, 0),
                    ("backward_filter", int(cd.ConvBwdFilterAlgo.WINOGRAD)): (0, 0)}  # not implemented anywhere
_STATES_BYTES = 64  # what cudnnDropoutGetStatesSize answers: room for (magic, seed, forward count)
_STATES_MAGIC = 0x53494D44524F5055  # marks a states buffer set up by cudnnSetDropoutDescriptor


#: The convolution calls of each kind, by role (each role has a ``_make_<role>`` model factory).
_CONV_CALLS = {
    kind: {"run": f"cudnnConvolution{name}", "get_v7": f"cudnnGetConvolution{name}Algorithm_v7",
           "find_ex": f"cudnnFindConvolution{name}AlgorithmEx", "workspace": f"cudnnGetConvolution{name}WorkspaceSize",
           "max_count": f"cudnnGetConvolution{name}AlgorithmMaxCount"}
    for kind, name in (("forward", "Forward"), ("backward_data", "BackwardData"), ("backward_filter", "BackwardFilter"))
}


def is_host_call(name: str) -> bool:
    """Whether a cuDNN function runs on the host alone (no handle argument: descriptors, sizes, versions, texts),
    so that the real libcudnn answers it on the simulator too."""
    return name in HOST_CALLS


_KINDS = ("Tensor", "Filter", "Convolution", "Pooling", "Activation", "Dropout", "OpTensor", "ReduceTensor")
#: The cuDNN functions that take no handle and touch no device memory: the real libcudnn runs them here too.
#: Every other function pymagma declares is modelled, or NotSimulatedError.
HOST_CALLS = frozenset(
    [f"cudnn{verb}{kind}Descriptor" for verb in ("Create", "Destroy") for kind in _KINDS]
    + [f"cudnnSet{name}" for name in (
        "ActivationDescriptor", "ActivationDescriptorSwishBeta", "Convolution2dDescriptor", "ConvolutionGroupCount",
        "ConvolutionMathType", "ConvolutionNdDescriptor", "Filter4dDescriptor", "FilterNdDescriptor",
        "OpTensorDescriptor", "Pooling2dDescriptor", "PoolingNdDescriptor", "ReduceTensorDescriptor",
        "Tensor4dDescriptor", "Tensor4dDescriptorEx", "TensorNdDescriptor")]
    + [f"cudnnGet{name}" for name in (
        "Convolution2dForwardOutputDim", "ConvolutionGroupCount", "ConvolutionMathType",
        "ConvolutionNdForwardOutputDim", "CudartVersion", "ErrorString", "Filter4dDescriptor", "LastErrorString",
        "Pooling2dForwardOutputDim", "PoolingNdForwardOutputDim", "Tensor4dDescriptor", "TensorNdDescriptor",
        "TensorSizeInBytes", "Version")]
    + ["cudnnDeriveBNTensorDescriptor", "cudnnDropoutGetReserveSpaceSize"])


class SimulatedCudnn:
    """The simulated cuDNN: the calls that touch the device (they take a handle) as NumPy models; the host-side calls
    (descriptors, sizes, versions, error texts) run in the real libcudnn, which works without a GPU.  Stands in for
    the :class:`~pymagma._ffi.NativeLibrary` of ``pymagma._cudnn.library()``."""

    def __init__(self, real=None, streams=None):
        self.real = cd.lib if real is None else real
        real_bind = self._real_bind = self.real.bind
        self.streams = streams  #: the simulated runtime whose streams the device work is queued on
        self.desc = Descriptors(real_bind)
        self.planner = Planner(self)  #: planned checks (:mod:`pymagma.simulator.plans`)
        self.planner.enabled = _plans.enabled_from_environment()
        self.calls: list[str] = []
        self.handles: dict[int, int] = {}  # handle -> stream
        self.dropouts: dict[int, DropoutConfig] = {}  # dropout descriptor -> its settings
        self._handle_memory: dict[int, ctypes.Array] = {}
        self._bound: dict[str, object] = {}
        self._ties = np.random.default_rng(0)  # which tied maximum max-pool backward picks (undocumented)
        self.tf32 = False  #: model TF32 tensor-core rounding of float32 convolution operands where cuDNN may use it
        self._local = threading.local()
        self._models = {name[len("_model_"):]: getattr(self, name) for name in dir(self) if name.startswith("_model_")}
        for kind, names in _CONV_CALLS.items():
            for role, name in names.items():
                self._models[name] = getattr(self, f"_make_{role}")(kind)

    # ---------------------------------------------------------------------------------------- plumbing
    @property
    def planning(self) -> bool:
        """Whether calls are planned and descriptors read once per version (:mod:`pymagma.simulator.plans`)."""
        return self.planner.enabled

    @planning.setter
    def planning(self, on: bool) -> None:
        self.planner.enabled = on

    @property
    def names(self) -> frozenset[str]:
        """The cuDNN functions this simulator answers instead of the library."""
        return frozenset(self._models)

    def bind(self, name: str):
        """The callable for ``name``: its model, the real library's function for a host-side call, or
        :class:`NotSimulatedError` for a call that would touch the device without a model."""
        call = self._bound.get(name)
        if call is None:
            call = self._bound[name] = self._binding(name)
        return call

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.bind(name)

    @property
    def cdll(self):
        return self.real.cdll

    @property
    def path(self) -> str:
        return self.real.path

    def has(self, name: str) -> bool:
        return name in self._models or (is_host_call(name) and self.real.has(name))

    def missing(self) -> list[str]:
        return sorted(n for n in cd.PROTOTYPES if not self.has(n))

    def _binding(self, name: str):
        if name not in cd.PROTOTYPES:
            raise AttributeError(f"cuDNN has no prototype for {name!r} in pymagma's tables")
        if name == "cudnnGetLastErrorString":
            return self._last_error_string
        if name == "cudnnDestroyDropoutDescriptor":
            return self._destroy_dropout_descriptor(self._real_bind(name))
        model = self._models.get(name)
        if model is None:
            if not is_host_call(name):
                raise NotSimulatedError(f"{name} is not simulated: it takes a cuDNN handle (device work) and "
                                        "pymagma.simulator.cudnn has no model of it")
            return self.planner.versioned(name, self._real_bind(name))
        return self.planner.wrap(name, model)

    def _enqueue(self, handle, work) -> None:
        """Run a model's device work (the function it returned) in the order of the handle's stream."""
        def run():
            with np.errstate(all="ignore"):
                work()

        stream = self.handles.get(int(handle), 0)
        if self.streams is None:
            run()
        else:
            self.streams.submit(stream, run)

    def _sync(self, handle) -> None:
        """A call that returns once its device work is done (cudnnFind*AlgorithmEx): the handle's stream first."""
        if self.streams is not None and self.streams.capturing(self.handles.get(int(handle), 0)):
            self.streams.refuse_in_capture(self.handles.get(int(handle), 0), "cudnnFind*AlgorithmEx")
        if self.streams is not None:
            self.streams.flush(self.handles.get(int(handle), 0))

    def _last_error_string(self, buf, size) -> None:
        message = getattr(self._local, "error", "")
        if not message:
            self._real_bind("cudnnGetLastErrorString")(buf, size)
            return
        self._local.error = ""
        raw = message.encode()[: max(int(size) - 1, 0)] + b"\0"
        ctypes.memmove(buf, raw, min(len(raw), int(size)))

    def _destroy_dropout_descriptor(self, real):
        def destroy(desc):
            self.dropouts.pop(getattr(desc, "value", desc) or 0, None)
            status = real(desc)
            self.planner.touch(_plans.address(desc), forget=True)
            return status

        return destroy

    def _handle(self, handle) -> None:
        require(bool(handle) and int(handle) in self.handles, lambda: f"handle {handle} was not made by cudnnCreate",
                 Status.BAD_PARAM)

    # -------------------------------------------------------------------------------------- the handle
    def _model_cudnnCreate(self, out) -> None:
        require(bool(out), "handle pointer is null", Status.BAD_PARAM_NULL_POINTER)
        memory = ctypes.create_string_buffer(8)
        handle = ctypes.addressof(memory)
        self._handle_memory[handle], self.handles[handle] = memory, 0
        out[0] = handle

    def _model_cudnnDestroy(self, handle) -> None:
        self._handle(handle)
        del self.handles[int(handle)], self._handle_memory[int(handle)]

    def _model_cudnnSetStream(self, handle, stream) -> None:
        self._handle(handle)
        self.handles[int(handle)] = int(stream or 0)

    def _model_cudnnGetStream(self, handle, out) -> None:
        self._handle(handle)
        out[0] = self.handles[int(handle)] or None

    # ------------------------------------------------------------------------------------- convolution
    def _geometry(self, x_desc, w_desc, conv_desc, y_desc) -> ConvGeometry:
        x, w = self.desc.tensor(x_desc, "x"), self.desc.filter(w_desc)
        conv, y = self.desc.convolution(conv_desc), self.desc.tensor(y_desc, "y")
        require(x.data_type == w.data_type == y.data_type,
                 f"x, w and y data types differ ({x.data_type}, {w.data_type}, {y.data_type})")
        sd = len(x.shape) - 2
        require(len(w.shape) == sd + 2 and len(conv.pads) == sd,
                 f"x {x.shape}, w {w.shape} and a {len(conv.pads)}-D convolution do not agree")
        (n, c), (k, cg), g = x.shape[:2], w.shape[:2], conv.groups
        require(c == cg * g and k % g == 0, lambda: f"groups={g}: x has {c} channels, w {w.shape} needs {cg}*{g} and "
                                             f"{k} filters divisible by the groups")
        out = []
        for size, kk, p, s, d in zip(x.shape[2:], w.shape[2:], conv.pads, conv.strides, conv.dilations):
            out.append((size + 2 * p - (d * (kk - 1) + 1)) // s + 1)
        require(min(out) > 0 and y.shape == (n, k, *out),
                 f"y has shape {y.shape}; x {x.shape}, w {w.shape} and the convolution give {(n, k, *out)}")
        return ConvGeometry(x, w, y, conv)

    def _order(self, kind: str, d0, d1, conv, d3):
        """(x, w, conv, y) descriptors from a call's argument order for ``kind``."""
        if kind == "forward":
            return d0, d1, conv, d3
        if kind == "backward_data":
            return d3, d0, conv, d1
        return d0, d3, conv, d1

    @staticmethod
    def workspace_size(kind: str, algo: int) -> int:
        """Bytes of workspace the simulated ``algo`` needs: none for algorithm 0, a little for the others."""
        return 256 * int(algo)

    def _algorithm_list(self, kind: str) -> list[int]:
        """The heuristics' order: an algorithm the device cannot run first (its status says so: a caller must read
        it), then one that needs a workspace (a caller must size it), then the rest."""
        algos = [int(a) for a in _ALGOS[kind]]
        unsupported = [a for a in algos if not self.supported(kind, a)]
        return unsupported + [1, 0] + [a for a in algos if a not in (0, 1) and a not in unsupported]

    def compute_capability(self) -> tuple[int, int]:
        """The architecture of the device the simulator pretends to be (its simulated runtime's)."""
        return tuple(getattr(self.streams, "compute_capability", COMPUTE_CAPABILITY))

    def supported(self, kind: str, algo: int) -> bool:
        """Whether cuDNN 9 runs ``algo`` on the simulated device's architecture (its header: Winograd forward and
        backward-data not on Hopper and newer, Winograd backward-filter not implemented)."""
        since = UNSUPPORTED_FROM.get((kind, int(algo)))
        return since is None or self.compute_capability() < since

    def _require_supported(self, kind: str, algo: int) -> None:
        require(self.supported(kind, algo), lambda: f"{kind} algorithm {_ALGOS[kind](algo).name} does not run "
                f"on compute capability {self.compute_capability()}", Status.NOT_SUPPORTED)

    def _fill_perf(self, kind: str, conv_desc, requested: int, returned, perf, algos, timed: bool) -> None:
        """Write cudnnConvolution*AlgoPerf_t results: every listed algorithm succeeds (timed ones get made-up,
        increasing times; heuristics report -1)."""
        require(requested > 0, f"requestedAlgoCount must be positive, got {requested}")
        math_type = c_int()
        self.desc.call("cudnnGetConvolutionMathType", c_void_p(conv_desc), ctypes.byref(math_type))
        algos = algos[:requested]
        for i, algo in enumerate(algos):
            status = 0 if self.supported(kind, algo) else int(Status.NOT_SUPPORTED)
            perf[i].algo, perf[i].status, perf[i].memory = algo, status, self.workspace_size(kind, algo)
            perf[i].time = 0.01 * (i + 1) if timed else -1.0
            perf[i].determinism, perf[i].mathType = int(cd.Determinism.DETERMINISTIC), math_type.value
        returned[0] = len(algos)

    def uses_tf32(self, geom: ConvGeometry) -> bool:
        """Whether the convolution reads its float32 operands as TF32: only with :attr:`tf32` on (the simulator's
        option, off by default), on Ampere or newer, for float data whose math type allows it (DEFAULT, TENSOR_OP,
        TENSOR_OP_ALLOW_CONVERSION; FMA never)."""
        return (self.tf32 and self.compute_capability() >= (8, 0) and geom.x.data_type == cd.DataType.FLOAT
                and geom.conv.math != int(cd.MathType.FMA))

    def _run_conv(self, kind: str, geom: ConvGeometry, ptrs, alpha: float, beta: float) -> None:
        """ptrs: (x, w, y) data pointers; writes the kind's output (y, x or w)."""
        xp, wp, yp = ptrs
        ct = compute_dtype(geom.conv.compute_type)
        rounded = self.uses_tf32(geom)

        def operand(tensor: Tensor, ptr, what: str) -> np.ndarray:
            data = tensor.view(ptr, what)
            return (num.tf32(data) if rounded else data).astype(ct)

        if kind == "forward":
            value = geom.forward(operand(geom.x, xp, "x"), operand(geom.w, wp, "w"))
            blend(geom.y.view(yp, "y"), value, alpha, beta)
        elif kind == "backward_data":
            value = geom.backward_data(operand(geom.y, yp, "dy"), operand(geom.w, wp, "w"))
            blend(geom.x.view(xp, "dx"), value, alpha, beta)
        else:
            value = geom.backward_filter(operand(geom.x, xp, "x"), operand(geom.y, yp, "dy"))
            blend(geom.w.view(wp, "dw"), value, alpha, beta)

    @staticmethod
    def _views(geom: ConvGeometry, ptrs) -> None:
        """Refuse null data pointers at the call (before the work is queued)."""
        for t, p, what in zip((geom.x, geom.w, geom.y), ptrs, "xwy"):
            t.view(p, what)

    @staticmethod
    def _data_ptrs(kind: str, p0, p1, p3):
        """(x, w, y) pointers from a call's argument order."""
        return {"forward": (p0, p1, p3), "backward_data": (p3, p0, p1), "backward_filter": (p0, p3, p1)}[kind]

    def _make_run(self, kind: str):
        def run(handle, alpha, d0, p0, d1, p1, conv, algo, workspace, ws_size, beta, d3, p3):
            self._handle(handle)
            geom = self._geometry(*self._order(kind, d0, d1, conv, d3))
            require(algo in {int(a) for a in _ALGOS[kind]}, f"{algo} is not a {kind} convolution algorithm")
            self._require_supported(kind, algo)
            need = self.workspace_size(kind, algo)
            require(ws_size >= need and (bool(workspace) or need == 0),
                     f"algorithm {algo} needs {need} bytes of workspace, got {ws_size} at {workspace}")
            dt = geom.x.data_type
            ptrs = self._data_ptrs(kind, p0, p1, p3)
            scale = read_scalar(alpha, dt, "alpha"), read_scalar(beta, dt, "beta")
            self._views(geom, ptrs)
            def work():  # the device work, run in stream order (again at each replay of a graph)
                self._run_conv(kind, geom, ptrs, *scale)

            return work

        return run

    def _make_max_count(self, kind: str):
        def max_count(handle, out):
            self._handle(handle)
            out[0] = len(_ALGOS[kind])

        return max_count

    def _make_get_v7(self, kind: str):
        def get(handle, d0, d1, conv, d3, requested, returned, perf):
            self._handle(handle)
            self._geometry(*self._order(kind, d0, d1, conv, d3))
            self._fill_perf(kind, conv, requested, returned, perf, self._algorithm_list(kind), timed=False)

        return get

    def _make_find_ex(self, kind: str):
        def find(handle, d0, p0, d1, p1, conv, d3, p3, requested, returned, perf, workspace, ws_size):
            self._handle(handle)
            geom = self._geometry(*self._order(kind, d0, d1, conv, d3))
            fits = [a for a in self._algorithm_list(kind)
                    if self.workspace_size(kind, a) <= (ws_size if workspace else 0)]
            self._fill_perf(kind, conv, requested, returned, perf, fits, timed=True)
            self._sync(handle)  # Find*Ex runs the algorithms before it returns
            if not getattr(self.streams, "null", False):
                self._run_conv(kind, geom, self._data_ptrs(kind, p0, p1, p3), 1.0, 0.0)  # Find* writes the output

        return find

    def _make_workspace(self, kind: str):
        def size(handle, d0, d1, conv, d3, algo, out):
            self._handle(handle)
            self._geometry(*self._order(kind, d0, d1, conv, d3))
            require(algo in {int(a) for a in _ALGOS[kind]}, f"{algo} is not a {kind} convolution algorithm")
            self._require_supported(kind, algo)
            out[0] = self.workspace_size(kind, algo)

        return size

    def _model_cudnnConvolutionBackwardBias(self, handle, alpha, dy_desc, dy, beta, db_desc, db) -> None:
        self._handle(handle)
        dyt, dbt = self.desc.tensor(dy_desc, "dy"), self.desc.tensor(db_desc, "db")
        require(len(dyt.shape) == len(dbt.shape) and dbt.shape[1] == dyt.shape[1]
                 and all(n == 1 for i, n in enumerate(dbt.shape) if i != 1),
                 f"db {dbt.shape} must be (1, K, 1, ...) for dy {dyt.shape}")
        axes = tuple(i for i in range(len(dyt.shape)) if i != 1)
        dt = dyt.data_type
        src, out = dyt.view(dy, "dy"), dbt.view(db, "db")
        a, b = read_scalar(alpha, dt, "alpha"), read_scalar(beta, dt, "beta")
        def work():  # the device work, run in stream order (again at each replay of a graph)
            blend(out, src.astype(dyt.compute).sum(axis=axes, keepdims=True), a, b)

        return work

    # ---------------------------------------------------------------------------------------- pooling
    def _pool_setup(self, pool_desc, x_desc, y_desc) -> tuple[Pooling, Tensor, Tensor]:
        pool = self.desc.pooling(pool_desc)
        x, y = self.desc.tensor(x_desc, "x"), self.desc.tensor(y_desc, "y")
        require(pool.mode in {int(m) for m in cd.PoolingMode}, f"pooling mode {pool.mode} is not a mode")
        require(len(x.shape) == len(pool.window) + 2 and x.data_type == y.data_type,
                 f"x {x.shape} does not fit a {len(pool.window)}-D pooling, or x and y types differ")
        out = tuple((s + 2 * p - k) // st + 1 for s, k, p, st in zip(x.shape[2:], pool.window, pool.pads,
                                                                        pool.strides))
        require(min(out) > 0 and y.shape == x.shape[:2] + out,
                 f"y has shape {y.shape}; x {x.shape} pooled gives {x.shape[:2] + out}")
        return pool, x, y

    @staticmethod
    def _is_max(pool: Pooling) -> bool:
        return pool.mode in (cd.PoolingMode.MAX, cd.PoolingMode.MAX_DETERMINISTIC)

    def _model_cudnnPoolingForward(self, handle, pool_desc, alpha, x_desc, x, beta, y_desc, y) -> None:
        self._handle(handle)
        pool, xt, yt = self._pool_setup(pool_desc, x_desc, y_desc)
        dt = xt.data_type
        src, dst = xt.view(x, "x"), yt.view(y, "y")
        a, b = read_scalar(alpha, dt, "alpha"), read_scalar(beta, dt, "beta")
        def work():  # the device work, run in stream order (again at each replay of a graph)
            blend(dst, self._pool_forward(pool, xt, src.astype(xt.compute), yt.shape[2:]), a, b)

        return work

    def _pool_forward(self, pool: Pooling, xt: Tensor, data: np.ndarray, out) -> np.ndarray:
        sd = len(pool.window)
        window_axes = tuple(range(2 + sd, 2 + 2 * sd))
        if self._is_max(pool):
            if pool.nan == cd.NanPropagation.NOT_PROPAGATE:
                data = np.where(np.isnan(data), -np.inf, data)
            win = num.windows(num.pad(data, pool.pads, -np.inf), pool.window, pool.strides, (1,) * sd, out)
            return win.max(axis=window_axes)
        win = num.windows(num.pad(data, pool.pads), pool.window, pool.strides, (1,) * sd, out)
        return win.sum(axis=window_axes) / self._pool_divisor(pool, xt)

    @staticmethod
    def _pool_divisor(pool: Pooling, x: Tensor):
        if pool.mode == cd.PoolingMode.AVERAGE_COUNT_EXCLUDE_PADDING:
            return num.pool_counts(pool, x.shape[2:])
        return math.prod(pool.window)

    def _model_cudnnPoolingBackward(self, handle, pool_desc, alpha, y_desc, y, dy_desc, dy, x_desc, x, beta,
                                    dx_desc, dx) -> None:
        self._handle(handle)
        pool, xt, yt = self._pool_setup(pool_desc, x_desc, y_desc)
        dyt, dxt = self.desc.tensor(dy_desc, "dy"), self.desc.tensor(dx_desc, "dx")
        require(dyt.shape == yt.shape and dxt.shape == xt.shape,
                 f"dy {dyt.shape} / dx {dxt.shape} must match y {yt.shape} / x {xt.shape}")
        dt = xt.data_type
        ys, dys, xs, dst = yt.view(y, "y"), dyt.view(dy, "dy"), xt.view(x, "x"), dxt.view(dx, "dx")
        a, b = read_scalar(alpha, dt, "alpha"), read_scalar(beta, dt, "beta")
        def work():  # the device work, run in stream order (again at each replay of a graph)
            grad = dys.astype(dyt.compute)
            sd, out = len(pool.window), yt.shape[2:]
            data = xs.astype(xt.compute)
            padded = tuple(s + 2 * p for s, p in zip(xt.shape[2:], pool.pads))
            dxp = np.zeros(xt.shape[:2] + padded, grad.dtype)
            forward = self._pool_forward(pool, xt, data, yt.shape[2:])
            self._check_forward("cudnnPoolingBackward", forward, ys.astype(yt.compute), yt)
            if self._is_max(pool):
                # cuDNN finds each window's maximum by comparing x with y: the gradient goes to a position where x
                # equals y.  Which of several tied positions it picks is not documented, so the model picks one at
                # random (seeded, a new draw per call): a caller that relies on a tie rule fails here, not on a GPU
                win = num.windows(num.pad(data, pool.pads, -np.inf), pool.window, pool.strides, (1,) * sd, out)
                flat = win.reshape(win.shape[: 2 + sd] + (-1,))
                target = ys.astype(yt.compute)[..., None]
                hits = (flat == target) | (np.isnan(flat) & np.isnan(target))
                chosen = np.argmax(hits * (1.0 + self._ties.random(hits.shape)), axis=-1)
                offsets = np.unravel_index(chosen, pool.window)
                grids = np.meshgrid(*(np.arange(n) for n in grad.shape), indexing="ij", sparse=True)
                coords = list(grids[:2]) + [grids[2 + i] * pool.strides[i] + offsets[i] for i in range(sd)]
                flat_index = np.ravel_multi_index(coords, dxp.shape)
                dxp = np.bincount(flat_index.ravel(), weights=grad.ravel(), minlength=dxp.size).reshape(dxp.shape)
            else:
                share = grad / self._pool_divisor(pool, xt)
                cols = np.broadcast_to(share[(Ellipsis,) + (None,) * sd], share.shape + tuple(pool.window))
                num.scatter_windows(dxp, cols, pool.strides, (1,) * sd, out)
            crop = tuple(slice(p, p + s) for p, s in zip(pool.pads, xt.shape[2:]))
            blend(dst, dxp[(slice(None), slice(None)) + crop].astype(grad.dtype), a, b)

        return work

    # ------------------------------------------------------------------------------------- activation
    @staticmethod
    def _alpha_beta(alpha, beta, data_type: int) -> tuple[float, float]:
        """The scaling parameters, read from host memory at the call, as cuDNN does."""
        return read_scalar(alpha, data_type, "alpha"), read_scalar(beta, data_type, "beta")

    def _same_shapes(self, **tensors) -> None:
        shapes = {name: t.shape for name, t in tensors.items()}
        require(len(set(shapes.values())) == 1, lambda: f"shapes differ: {shapes}")

    def _model_cudnnActivationForward(self, handle, act_desc, alpha, x_desc, x, beta, y_desc, y) -> None:
        self._handle(handle)
        mode, _, coef = self.desc.activation(act_desc)
        xt, yt = self.desc.tensor(x_desc, "x"), self.desc.tensor(y_desc, "y")
        self._same_shapes(x=xt, y=yt)
        num.activation(mode, coef, np.zeros(0))  # refuses a mode the call does not support
        src, dst, a, b = xt.view(x, "x"), yt.view(y, "y"), *self._alpha_beta(alpha, beta, xt.data_type)
        def work():  # the device work, run in stream order (again at each replay of a graph)
            blend(dst, num.activation(mode, coef, src.astype(xt.compute)), a, b)

        return work

    def _model_cudnnActivationBackward(self, handle, act_desc, alpha, y_desc, y, dy_desc, dy, x_desc, x, beta,
                                       dx_desc, dx) -> None:
        self._handle(handle)
        mode, _, coef = self.desc.activation(act_desc)
        yt, dyt = self.desc.tensor(y_desc, "y"), self.desc.tensor(dy_desc, "dy")
        xt, dxt = self.desc.tensor(x_desc, "x"), self.desc.tensor(dx_desc, "dx")
        self._same_shapes(y=yt, dy=dyt, x=xt, dx=dxt)
        num.activation(mode, coef, np.zeros(0))  # refuses a mode the call does not support
        ys, xs, dys, dst = yt.view(y, "y"), xt.view(x, "x"), dyt.view(dy, "dy"), dxt.view(dx, "dx")
        a, b = self._alpha_beta(alpha, beta, xt.data_type)
        def work():  # the device work, run in stream order (again at each replay of a graph)
            data = xs.astype(xt.compute)
            # cuDNN reads y (its formulas for sigmoid and tanh use it) but does not document which input each mode's
            # derivative comes from: y must be the forward of x, or the call is refused here
            self._check_forward("cudnnActivationBackward", num.activation(mode, coef, data), ys, yt)
            blend(dst, num.activation_grad(mode, coef, data, dys.astype(dyt.compute)), a, b)

        return work

    @staticmethod
    def _check_forward(call: str, expected: np.ndarray, given: np.ndarray, desc: Tensor) -> None:
        """Refuse a backward call whose ``y`` is not the forward of its ``x`` (a binding that passes another array in
        ``y``'s place would compute a wrong gradient on a GPU)."""
        ok = num.consistent(expected, given, desc.dtype)
        if not ok.all():
            at = tuple(int(i) for i in np.argwhere(~ok)[0])
            raise ModelError(Status.BAD_PARAM, f"{call}: y is not the forward of x with this descriptor (at {at}: "
                                               f"y = {given[at]!r}, the forward of x gives {expected[at]!r}); cuDNN "
                                               "reads y, so y must be the output of the forward call on x")

    # ---------------------------------------------------------------------------------------- softmax
    def _model_cudnnSoftmaxForward(self, handle, algo, mode, alpha, x_desc, x, beta, y_desc, y) -> None:
        self._handle(handle)
        xt, yt = self.desc.tensor(x_desc, "x"), self.desc.tensor(y_desc, "y")
        self._same_shapes(x=xt, y=yt)
        axes = num.softmax_axes(mode, len(xt.shape))
        require(algo in {int(a) for a in cd.SoftmaxAlgorithm}, f"softmax algorithm {algo} is not an algorithm")
        src, dst, a, b = xt.view(x, "x"), yt.view(y, "y"), *self._alpha_beta(alpha, beta, xt.data_type)
        def work():  # the device work, run in stream order (again at each replay of a graph)
            data = src.astype(xt.compute)
            with np.errstate(over="ignore", invalid="ignore"):
                if algo == cd.SoftmaxAlgorithm.FAST:  # no max subtraction: may overflow, as documented
                    e = np.exp(data)
                    value = e / e.sum(axis=axes, keepdims=True)
                elif algo in (cd.SoftmaxAlgorithm.ACCURATE, cd.SoftmaxAlgorithm.LOG):
                    shifted = data - data.max(axis=axes, keepdims=True)
                    logs = shifted - np.log(np.exp(shifted).sum(axis=axes, keepdims=True))
                    value = logs if algo == cd.SoftmaxAlgorithm.LOG else np.exp(logs)
                else:  # pragma: no cover - checked at the call
                    raise ModelError(Status.BAD_PARAM, f"softmax algorithm {algo} is not an algorithm")
            blend(dst, value, a, b)

        return work

    def _model_cudnnSoftmaxBackward(self, handle, algo, mode, alpha, y_desc, y, dy_desc, dy, beta, dx_desc,
                                    dx) -> None:
        self._handle(handle)
        yt, dyt, dxt = (self.desc.tensor(d, w) for d, w in ((y_desc, "y"), (dy_desc, "dy"), (dx_desc, "dx")))
        self._same_shapes(y=yt, dy=dyt, dx=dxt)
        require(algo in {int(a) for a in cd.SoftmaxAlgorithm}, f"softmax algorithm {algo} is not an algorithm")
        axes = num.softmax_axes(mode, len(yt.shape))
        ys, dys, dst = yt.view(y, "y"), dyt.view(dy, "dy"), dxt.view(dx, "dx")
        a, b = self._alpha_beta(alpha, beta, yt.data_type)
        def work():  # the device work, run in stream order (again at each replay of a graph)
            out, grad = ys.astype(yt.compute), dys.astype(dyt.compute)
            if algo == cd.SoftmaxAlgorithm.LOG:
                value = grad - np.exp(out) * grad.sum(axis=axes, keepdims=True)
            else:
                value = out * (grad - (grad * out).sum(axis=axes, keepdims=True))
            blend(dst, value, a, b)

        return work

    # ------------------------------------------------------------------------------------- batch norm
    def _bn_setup(self, mode: int, x_desc, bn_desc) -> tuple[Tensor, Tensor, tuple]:
        xt, bn = self.desc.tensor(x_desc, "x"), self.desc.tensor(bn_desc, "bnScaleBiasMeanVar")
        nd = len(xt.shape)
        if mode in (cd.BatchNormMode.SPATIAL, cd.BatchNormMode.SPATIAL_PERSISTENT):
            axes, want = (0,) + tuple(range(2, nd)), (1, xt.shape[1]) + (1,) * (nd - 2)
        else:
            require(mode == cd.BatchNormMode.PER_ACTIVATION, f"batch-norm mode {mode} is not a mode")
            axes, want = (0,), (1,) + xt.shape[1:]
        require(bn.shape == want, lambda: f"the batch-norm parameter descriptor has shape {bn.shape}, expected {want}")
        want_type = cd.DataType.DOUBLE if xt.data_type == cd.DataType.DOUBLE else cd.DataType.FLOAT
        require(bn.data_type == want_type, lambda: f"batch-norm parameters must have data type {want_type.name}")
        return xt, bn, axes

    @staticmethod
    def _epsilon(eps: float) -> None:
        require(eps >= cd.BN_MIN_EPSILON, lambda: f"epsilon {eps} is below CUDNN_BN_MIN_EPSILON {cd.BN_MIN_EPSILON}")

    def _model_cudnnBatchNormalizationForwardTraining(self, handle, mode, alpha, beta, x_desc, x, y_desc, y, bn_desc,
                                                      scale, bias, factor, running_mean, running_var, eps,
                                                      save_mean, save_inv_var) -> None:
        self._handle(handle)
        xt, bn, axes = self._bn_setup(mode, x_desc, bn_desc)
        yt = self.desc.tensor(y_desc, "y")
        self._same_shapes(x=xt, y=yt)
        self._epsilon(eps)
        require(bool(running_mean) == bool(running_var), "give both running mean and variance, or neither")
        require(bool(save_mean) == bool(save_inv_var), "give both saved mean and inverse variance, or neither")
        src, dst, a, b = xt.view(x, "x"), yt.view(y, "y"), *self._alpha_beta(alpha, beta, xt.data_type)
        scale_view, bias_view = bn.view(scale, "bnScale"), bn.view(bias, "bnBias")
        def work():  # the device work, run in stream order (again at each replay of a graph)
            data = src.astype(xt.compute)
            mean = data.mean(axis=axes, keepdims=True)
            var = data.var(axis=axes, keepdims=True)
            inv = 1 / np.sqrt(var + eps)
            gamma, shift = scale_view.astype(bn.compute), bias_view.astype(bn.compute)
            value = gamma * (data - mean) * inv + shift
            blend(dst, value, a, b)
            if running_mean:
                count = math.prod(xt.shape[a] for a in axes)
                unbiased = var * count / max(count - 1, 1)
                for ptr, batch, what in ((running_mean, mean, "resultRunningMean"),
                                         (running_var, unbiased, "resultRunningVariance")):
                    stat = bn.view(ptr, what)
                    stat[...] = (1 - factor) * stat + factor * batch
            if save_mean:
                bn.view(save_mean, "resultSaveMean")[...] = mean
                bn.view(save_inv_var, "resultSaveInvVariance")[...] = inv

        return work

    def _model_cudnnBatchNormalizationForwardInference(self, handle, mode, alpha, beta, x_desc, x, y_desc, y, bn_desc,
                                                       scale, bias, mean, var, eps) -> None:
        self._handle(handle)
        xt, bn, _ = self._bn_setup(mode, x_desc, bn_desc)
        yt = self.desc.tensor(y_desc, "y")
        self._same_shapes(x=xt, y=yt)
        self._epsilon(eps)
        params = [bn.view(p, w) for p, w in ((var, "estimatedVariance"), (scale, "bnScale"), (mean, "estimatedMean"),
                                             (bias, "bnBias"))]
        src, dst, a, b = xt.view(x, "x"), yt.view(y, "y"), *self._alpha_beta(alpha, beta, xt.data_type)
        def work():  # the device work, run in stream order (again at each replay of a graph)
            v, gamma, m, shift = (p.astype(bn.compute) for p in params)
            value = gamma * (src.astype(xt.compute) - m) * (1 / np.sqrt(v + eps)) + shift
            blend(dst, value, a, b)

        return work

    def _model_cudnnBatchNormalizationBackward(self, handle, mode, alpha_data, beta_data, alpha_param, beta_param,
                                               x_desc, x, dy_desc, dy, dx_desc, dx, bn_desc, scale, dscale, dbias,
                                               eps, save_mean, save_inv_var) -> None:
        self._handle(handle)
        xt, bn, axes = self._bn_setup(mode, x_desc, bn_desc)
        dyt, dxt = self.desc.tensor(dy_desc, "dy"), self.desc.tensor(dx_desc, "dx")
        self._same_shapes(x=xt, dy=dyt, dx=dxt)
        self._epsilon(eps)
        require(bool(save_mean) == bool(save_inv_var), "give both saved mean and inverse variance, or neither")
        dt = xt.data_type
        xs, dys, dst, scale_view = xt.view(x, "x"), dyt.view(dy, "dy"), dxt.view(dx, "dx"), bn.view(scale, "bnScale")
        ad, bd = read_scalar(alpha_data, dt, "alphaDataDiff"), read_scalar(beta_data, dt, "betaDataDiff")
        a, b = read_scalar(alpha_param, dt, "alphaParamDiff"), read_scalar(beta_param, dt, "betaParamDiff")
        dscale_view, dbias_view = bn.view(dscale, "resultBnScaleDiff"), bn.view(dbias, "resultBnBiasDiff")
        def work():  # the device work, run in stream order (again at each replay of a graph)
            data, grad = xs.astype(xt.compute), dys.astype(dyt.compute)
            batch_mean = data.mean(axis=axes, keepdims=True)
            batch_inv = 1 / np.sqrt(data.var(axis=axes, keepdims=True) + eps)
            if save_mean:  # cuDNN's cache of the forward: it must be the forward's, for this x and eps
                mean, inv = bn.read(save_mean, "savedMean"), bn.read(save_inv_var, "savedInvVariance")
                saved = (("savedMean", mean, batch_mean), ("savedInvVariance", inv, batch_inv))
                for what, given, expected in saved:
                    if not num.consistent(expected, given, np.float32).all():
                        raise ModelError(Status.BAD_PARAM, f"cudnnBatchNormalizationBackward: {what} is not the "
                                                           f"forward's for this x and epsilon (got "
                                                           f"{np.ravel(given)[:4]}, the batch gives "
                                                           f"{np.ravel(expected)[:4]})")
            else:
                mean, inv = batch_mean, batch_inv
            count = math.prod(xt.shape[a] for a in axes)
            xhat = (data - mean) * inv
            gbias = grad.sum(axis=axes, keepdims=True)
            gscale = (grad * xhat).sum(axis=axes, keepdims=True)
            gx = scale_view.astype(bn.compute) * inv / count * (count * grad - gbias - xhat * gscale)
            blend(dst, gx, ad, bd)
            blend(dscale_view, gscale, a, b)
            blend(dbias_view, gbias, a, b)

        return work

    # ---------------------------------------------------------------------------------------- dropout
    def _model_cudnnDropoutGetStatesSize(self, handle, out) -> None:
        self._handle(handle)
        out[0] = _STATES_BYTES

    def _dropout_settings(self, desc, handle, rate, states, states_bytes, seed) -> DropoutConfig:
        self._handle(handle)
        require(bool(desc), "dropout descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        require(0.0 <= rate <= 1.0, f"dropout rate {rate} is outside [0, 1]")
        require(not states or states_bytes >= _STATES_BYTES,
                 f"dropout states of {states_bytes} bytes; cudnnDropoutGetStatesSize says {_STATES_BYTES}")
        config = DropoutConfig(float(rate), int(states or 0), int(states_bytes), int(seed))
        self.dropouts[int(desc)] = config
        self.planner.touch(int(desc))
        return config

    @staticmethod
    def _states(config: DropoutConfig) -> np.ndarray:
        require(bool(config.states), "the dropout descriptor has no states buffer", Status.BAD_PARAM_NULL_POINTER)
        return host_view(config.states, (3,), (1,), np.uint64, "dropout states")

    def _model_cudnnSetDropoutDescriptor(self, desc, handle, rate, states, states_bytes, seed) -> None:
        config = self._dropout_settings(desc, handle, rate, states, states_bytes, seed)
        if config.states:  # seeding the generator: the states start over (on the device, in stream order)
            view = self._states(config)
            def work():  # the device work, run in stream order (again at each replay of a graph)
                view[...] = (_STATES_MAGIC, config.seed, 0)

            return work

    def _model_cudnnRestoreDropoutDescriptor(self, desc, handle, rate, states, states_bytes, seed) -> None:
        self._dropout_settings(desc, handle, rate, states, states_bytes, seed)

    def _dropout_setup(self, handle, desc, x_desc, y_desc, reserve, reserve_bytes):
        self._handle(handle)
        config = self.dropouts.get(int(desc or 0))
        require(config is not None, "the dropout descriptor was never set with cudnnSetDropoutDescriptor",
                 Status.BAD_PARAM_NOT_FINALIZED)
        xt, yt = self.desc.tensor(x_desc, "x"), self.desc.tensor(y_desc, "y")
        self._same_shapes(x=xt, y=yt)
        need = c_size_t()
        self.desc.call("cudnnDropoutGetReserveSpaceSize", c_void_p(x_desc), ctypes.byref(need))
        require(reserve_bytes >= need.value, f"reserve space of {reserve_bytes} bytes, {need.value} needed")
        require(math.prod(xt.shape) <= 8 * reserve_bytes, "the reserve space cannot hold the mask")
        mask_bytes = host_view(reserve, (int(reserve_bytes),), (1,), np.uint8, "reserveSpace")
        return config, xt, yt, mask_bytes

    def _model_cudnnDropoutForward(self, handle, desc, x_desc, x, y_desc, y, reserve, reserve_bytes) -> None:
        config, xt, yt, mask_bytes = self._dropout_setup(handle, desc, x_desc, y_desc, reserve, reserve_bytes)
        states, src, dst = self._states(config), xt.view(x, "x"), yt.view(y, "y")
        def work():  # the device work, run in stream order (again at each replay of a graph)
            if int(states[0]) != _STATES_MAGIC:  # device memory: checked in stream order, as a kernel would
                raise ModelError(Status.BAD_PARAM_NOT_FINALIZED, "cudnnDropoutForward: the dropout states were never "
                                                                 "initialised")
            generator = np.random.Generator(np.random.Philox(key=int(states[1]), counter=[0, 0, 0, int(states[2])]))
            states[2] += 1
            keep = generator.random(xt.shape) >= config.rate
            packed = np.packbits(keep.ravel())
            mask_bytes[: packed.size] = packed
            data = src.astype(xt.compute)
            scale = 1.0 / (1.0 - config.rate) if config.rate < 1 else 0.0
            dst[...] = np.where(keep, data * scale, 0)

        return work

    def _model_cudnnDropoutBackward(self, handle, desc, dy_desc, dy, dx_desc, dx, reserve, reserve_bytes) -> None:
        config, dyt, dxt, mask_bytes = self._dropout_setup(handle, desc, dy_desc, dx_desc, reserve, reserve_bytes)
        src, dst = dyt.view(dy, "dy"), dxt.view(dx, "dx")
        def work():  # the device work, run in stream order (again at each replay of a graph)
            count = math.prod(dyt.shape)
            keep = np.unpackbits(mask_bytes, count=count).reshape(dyt.shape).astype(bool)
            scale = 1.0 / (1.0 - config.rate) if config.rate < 1 else 0.0
            dst[...] = np.where(keep, src.astype(dyt.compute) * scale, 0)

        return work

    # ----------------------------------------------------------------------------------- tensor arithmetic
    def _model_cudnnAddTensor(self, handle, alpha, a_desc, a, beta, c_desc, c) -> None:
        self._handle(handle)
        at, ct = self.desc.tensor(a_desc, "A"), self.desc.tensor(c_desc, "C")
        num.check_broadcast(at, ct, "cudnnAddTensor A")
        src, dst, al, be = at.view(a, "A"), ct.view(c, "C"), *self._alpha_beta(alpha, beta, ct.data_type)
        def work():  # the device work, run in stream order (again at each replay of a graph)
            blend(dst, np.broadcast_to(src.astype(at.compute), ct.shape).astype(ct.compute), al, be)

        return work

    def _model_cudnnOpTensor(self, handle, op_desc, alpha1, a_desc, a, alpha2, b_desc, b, beta, c_desc, c) -> None:
        self._handle(handle)
        op, compute, nan = self.desc.op_tensor(op_desc)
        at, bt, ct = (self.desc.tensor(d, w) for d, w in ((a_desc, "A"), (b_desc, "B"), (c_desc, "C")))
        require(at.shape == ct.shape, f"cudnnOpTensor: A {at.shape} must have C's shape {ct.shape}")
        ctype = compute_dtype(compute)
        dt = ct.data_type
        ops = cd.OpTensorOp
        unary = op in (ops.SQRT, ops.NOT)
        if not unary:
            require(op in (ops.ADD, ops.MUL, ops.MIN, ops.MAX), f"op-tensor operation {op} is not an operation")
            num.check_broadcast(bt, ct, "cudnnOpTensor B")
        a1, a2 = read_scalar(alpha1, dt, "alpha1"), None if unary else read_scalar(alpha2, dt, "alpha2")
        av, bv = at.view(a, "A"), None if unary else bt.view(b, "B")
        dst, be = ct.view(c, "C"), read_scalar(beta, dt, "beta")
        def work():  # the device work, run in stream order (again at each replay of a graph)
            lhs = a1 * av.astype(ctype)
            if unary:
                value = np.sqrt(lhs) if op == ops.SQRT else (lhs == 0).astype(ctype)
            else:
                rhs = a2 * bv.astype(ctype)
                propagate = nan == cd.NanPropagation.PROPAGATE
                fn = {ops.ADD: np.add, ops.MUL: np.multiply, ops.MIN: np.minimum if propagate else np.fmin,
                      ops.MAX: np.maximum if propagate else np.fmax}[op]
                value = fn(lhs, rhs)
            blend(dst, value.astype(ctype), 1.0, be)

        return work

    def _model_cudnnScaleTensor(self, handle, y_desc, y, alpha) -> None:
        self._handle(handle)
        yt = self.desc.tensor(y_desc, "y")
        view, factor = yt.view(y, "y"), read_scalar(alpha, yt.data_type, "alpha")
        def work():  # the device work, run in stream order (again at each replay of a graph)
            view[...] = view.astype(yt.compute) * factor

        return work

    def _model_cudnnSetTensor(self, handle, y_desc, y, value) -> None:
        self._handle(handle)
        yt = self.desc.tensor(y_desc, "y")
        require(bool(value), "valuePtr is a null pointer", Status.BAD_PARAM_NULL_POINTER)
        dst, fill = yt.view(y, "y"), host_view(value, (1,), (1,), yt.dtype, "valuePtr")[0].copy()  # host, at the call
        def work():  # the device work, run in stream order (again at each replay of a graph)
            dst[...] = fill

        return work

    # -------------------------------------------------------------------------------------- reductions
    def _reduce_setup(self, reduce_desc, a_desc, c_desc):
        op, compute, nan, indices, indices_type = self.desc.reduce_tensor(reduce_desc)
        at, ct = self.desc.tensor(a_desc, "A"), self.desc.tensor(c_desc, "C")
        num.check_broadcast(ct, at, "cudnnReduceTensor C")
        require(op in {int(o) for o in cd.ReduceTensorOp}, f"reduce operation {op} is not an operation")
        wants_indices = indices == cd.ReduceTensorIndices.FLATTENED_INDICES and op in (
            cd.ReduceTensorOp.MIN, cd.ReduceTensorOp.MAX, cd.ReduceTensorOp.AMAX)
        require(not wants_indices or indices_type == cd.IndicesType.INT32,
                 "only 32-bit indices are supported", Status.NOT_SUPPORTED)
        return op, compute, nan, wants_indices, at, ct

    @staticmethod
    def reduction_workspace(at: Tensor, ct: Tensor) -> int:
        """Bytes the simulated reduction asks for: a partial result per output element when anything is reduced."""
        return 0 if at.shape == ct.shape else 8 * math.prod(ct.shape)

    def _model_cudnnGetReductionWorkspaceSize(self, handle, reduce_desc, a_desc, c_desc, out) -> None:
        self._handle(handle)
        *_, at, ct = self._reduce_setup(reduce_desc, a_desc, c_desc)
        out[0] = self.reduction_workspace(at, ct)

    def _model_cudnnGetReductionIndicesSize(self, handle, reduce_desc, a_desc, c_desc, out) -> None:
        self._handle(handle)
        _, _, _, wants_indices, _, ct = self._reduce_setup(reduce_desc, a_desc, c_desc)
        out[0] = 4 * math.prod(ct.shape) if wants_indices else 0

    def _model_cudnnReduceTensor(self, handle, reduce_desc, indices, indices_bytes, workspace, ws_bytes, alpha,
                                 a_desc, a, beta, c_desc, c) -> None:
        self._handle(handle)
        op, compute, nan, wants_indices, at, ct = self._reduce_setup(reduce_desc, a_desc, c_desc)
        need = self.reduction_workspace(at, ct)
        require(ws_bytes >= need and (bool(workspace) or need == 0),
                 f"workspace of {ws_bytes} bytes at {workspace}, {need} needed")
        axes = tuple(i for i, m in enumerate(ct.shape) if m == 1)
        if wants_indices:
            require(indices_bytes >= 4 * math.prod(ct.shape) and bool(indices), "the indices buffer is too small")
            where_view = host_view(indices, ct.shape, cd.contiguous_strides(ct.shape), np.uint32, "indices")
        dt = ct.data_type
        src, dst, al, be = at.view(a, "A"), ct.view(c, "C"), *self._alpha_beta(alpha, beta, dt)
        def work():  # the device work, run in stream order (again at each replay of a graph)
            value, where = num.reduce(op, nan, src.astype(compute_dtype(compute)), axes)
            blend(dst, value, al, be)
            if wants_indices:
                where_view[...] = where

        return work
