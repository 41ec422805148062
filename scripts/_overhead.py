"""Host cost of the GPU path, measured without a GPU: ``python scripts/bench.py --overhead``.

On a GPU a small model's step is a few hundred microseconds of device work; how fast the host issues that work
decides the speed.  This runs magmadnn's device backend on pymagma's simulator in mode ``null`` (every native call
checked, nothing computed) and measures, per model and batch size:

- host microseconds per training step (forward, loss, backward, optimizer update) and per inference step;
- native calls per step, by library (CUDA runtime, MAGMA, cuDNN, kernel launches), counted in a second pass with
  every native call wrapped;
- microseconds of Python per native call: (step time - time inside the native calls) / calls, both timed in the
  metered pass — what pymagma and magmadnn cost around each call (the simulator's own time, inside the calls, is
  subtracted); and the same cost counted, not timed: Python function calls per step outside the native calls
  (``python_calls_per_step``, a profiler's count: the same on a loaded machine as on a quiet one);
- host microseconds per training and per inference step replayed as a CUDA graph (``compile(graph=True)``,
  :mod:`magmadnn.models.replay`: the step captured once, then per step the host writes the batch and the step's
  values into page-locked memory, queues one copy and one graph launch, and adds the tally's sample counts):
  the time outside the native calls (the simulator's replay of the graph's recorded work, inside
  ``cudaGraphLaunch``, grows with the graph; a GPU's launch does not), and the native calls per replayed step;
- host microseconds per replayed training step as users run it (``fit_replay_us``): ``fit`` with compile's default
  (``graph="auto"``) over batches of one sample, verbose 0, the batch's copy into the graph and the launch included,
  the loss read only at the epoch's end; the time outside the native calls per batch of an epoch (the difference
  between a fit over 256 batches and one over 16), ``fit_calls`` its native calls per batch, and ``fit_fixed_us``
  what one ``fit`` call costs beyond its batches (checks, callbacks, the epoch's snapshot, read and logs);
- PyTorch CPU eager's whole training step for the same model at batch 1 on one thread, in the same run: the
  reference for dispatch cost (its kernels included).

No timing is asserted anywhere; CI runs it as a smoke test with a few steps.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

MODELS = ("mlp", "lenet5", "resnet_small", "transformer")
INPUTS = {"mlp": (1, 28, 28), "lenet5": (1, 28, 28), "resnet_small": (3, 32, 32), "transformer": (16,)}
#: the small transformer's vocabulary, width, heads and MLP width (one pre-LayerNorm encoder block)
TRANSFORMER = {"vocab": 64, "dim": 32, "heads": 4, "mlp": 64}
LIBRARIES = ("cudart", "magma", "cudnn", "launcher")
COLUMNS = ["model", "batch", "train_us", "infer_us", "replayed_train_us", "replayed_infer_us", "replayed_calls",
           "fit_replay_us", "fit_calls", "fit_fixed_us",
           "calls_per_train_step", "cudart", "magma", "cudnn", "launcher", "python_us_per_call", "meter_us_per_call",
           "python_calls_per_step", "torch_cpu_step_us", "ratio_to_torch"]


# --------------------------------------------------------------------------------------------- counting calls
class Meter:
    """Counts and times every call into the native libraries in use (``pymagma._native.current``)."""

    def __init__(self):
        self.calls = dict.fromkeys(LIBRARIES, 0)
        self.seconds = 0.0
        self.inside = 0  # > 0 while a native call runs
        self._saved = self._pool = None

    def __enter__(self):
        from pymagma import _native

        libs = _native.current
        self._saved = {name: getattr(libs, name) for name in LIBRARIES}
        self._saved["magma_initialized"] = libs.magma_initialized  # what MAGMA's callers hold after magma_init
        for name in LIBRARIES:
            setattr(libs, name, _Metered(self._saved[name], name, self))
        libs.magma_initialized = libs.magma
        # the memory pool frees through the runtime it was made with (another one: not through the current one)
        self._pool = libs.memory_pool if libs.memory_pool.cudart is self._saved["cudart"] else None
        if self._pool is not None:
            self._pool.cudart = libs.cudart
        return self

    def __exit__(self, *exc):
        from pymagma import _native

        for name, target in self._saved.items():
            setattr(_native.current, name, target)
        if self._pool is not None:
            self._pool.cudart = self._saved["cudart"]

    def reset(self):
        self.calls = dict.fromkeys(LIBRARIES, 0)
        self.seconds = 0.0


class _Metered:
    """A native library whose function calls are counted and timed by a :class:`Meter`.

    Every look-up still goes to the library (its own ``__getattr__`` and ``bind``, Python code the unmetered call
    runs too, stay in the measurement); the wrapper of the function it answers is made once per (library, name) and
    per bound symbol, and kept while the library answers the same function (a failed look-up or bind is never kept).
    The meter's own cost per native call, reported as ``meter_us_per_call`` and not counted in
    ``python_us_per_call``: about 75 bytecodes for a function looked up as an attribute and 100 for one bound by
    symbol (a wrapper made per look-up: 102 and 91), measured at 1.4 and 1.5 us of process CPU time per call on a
    loaded 2-core machine (the same machine: 1.9 and 1.8 us with a new wrapper per look-up);
    ``test_bench_overhead.py`` bounds the bytecodes."""

    def __init__(self, target, library: str, meter: Meter):
        self._target, self._library, self._meter = target, library, meter
        self._kept: dict = {}  # name -> (the library's function, its wrapper)
        self._bound: dict = {}  # symbol -> (what the library's bind returned, its wrapper)

    def _wrap(self, kept: dict, key, fn):
        meter, library, clock = self._meter, self._library, time.perf_counter

        def call(*args):
            meter.inside += 1
            start = clock()
            try:
                return fn(*args)
            finally:
                meter.seconds += clock() - start
                meter.inside -= 1
                meter.calls[library] += 1

        kept[key] = (fn, call)
        return call

    def __getattr__(self, name: str):
        value = getattr(self._target, name)  # (the library's own look-up, at every look-up, as unmetered)
        kept = self._kept.get(name)
        if kept is not None and kept[0] == value:  # (a bound method: a new one per look-up, equal to the last)
            return kept[1]
        if name == "bind":
            wrap, bound = self._wrap, self._bound

            def bind(symbol):
                fn = value(symbol)  # (the library's own bind, at every call, as unmetered)
                kept = bound.get(symbol)
                return kept[1] if kept is not None and kept[0] is fn else wrap(bound, symbol, fn)

            self._kept[name] = (value, bind)
            return bind
        if callable(value) and not isinstance(value, type) and (
                name.startswith(("cuda", "magma", "cudnn")) or name in ("launch", "program")):
            return self._wrap(self._kept, name, value)
        return value


# --------------------------------------------------------------------------------------------- magmadnn steps
def build(name: str):
    """The magmadnn model ``name``: the zoo's, or the small transformer classifier (:func:`transformer`)."""
    from magmadnn import zoo

    if name == "transformer":
        return transformer()
    return zoo.build(name if name != "resnet_small" else "resnet", INPUTS[name], 10)


def transformer():
    """A small transformer classifier: int64 tokens (16,) -> Embedding + PositionEmbedding, one pre-LayerNorm
    encoder block (MultiHeadAttention, a GELU MLP, residual adds), a final LayerNormalization, the mean over the
    tokens and 10 logits."""
    from magmadnn import layers as L
    from magmadnn.models import Model

    t = TRANSFORMER
    tokens = L.Input(INPUTS["transformer"], dtype="int64")
    x = L.PositionEmbedding()(L.Embedding(t["vocab"], t["dim"])(tokens))
    a = L.MultiHeadAttention(t["heads"], t["dim"] // t["heads"])(L.LayerNormalization()(x))
    x = L.Add()([x, a])
    m = L.Dense(t["dim"])(L.Dense(t["mlp"], activation="gelu")(L.LayerNormalization()(x)))
    x = L.LayerNormalization()(L.Add()([x, m]))
    return Model(tokens, L.Dense(10)(L.GlobalAveragePooling1D()(x)), name="transformer")


def magmadnn_model(name: str, device: str, graph: bool = False):
    from magmadnn.optimizers import SGD

    model = build(name)
    model.compile(optimizer=SGD(0.01, momentum=0.9), loss="cross_entropy", seed=0, device=device, graph=graph)
    return model


def _batch(name: str, batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    if name == "transformer":
        x = rng.integers(0, TRANSFORMER["vocab"], (batch, *INPUTS[name]))
    else:
        x = rng.standard_normal((batch, *INPUTS[name])).astype(np.float32)
    return x, rng.integers(0, 10, batch)


def magmadnn_steps(model, x, y):
    """(training step, inference step) callables: what ``fit``/``predict`` run per batch, without the host reads of
    progress updates."""
    from magmadnn.autograd import no_grad

    def train():
        model._train_step([x], y, check=False)

    def infer():
        with no_grad():
            model._forward(model._input_tensors([x]), training=False)

    return train, infer


def replayed_steps(model, x, y):
    """(training step, inference step) callables of a model compiled with ``graph=True``, each step captured
    already: what ``fit``/``predict`` run per batch once a batch shape is captured (the progress reads and predict's
    copy of the outputs to the host left out)."""
    from magmadnn.models import replay
    from magmadnn.models.step import Tally

    tally = Tally(model.xp, model._tally_names(False), model.dtype)

    def train():
        model._train_step([x], y, check=False, tally=tally)

    def infer():
        model._graphs.run("predict", [x])

    for _ in range(replay.WARMUP + 1):
        train()
        infer()
    if not all(isinstance(s, replay._Step) for s in model._graphs.steps.values()):
        raise RuntimeError(f"{model.name}: a step was not captured")
    return train, infer


FIT_SHORT, FIT_LONG = 16, 256  # batches of the two fits whose difference gives fit's cost per batch


def fit_replay(name: str, repeats: int = 5) -> tuple[float, float, float]:
    """``fit`` over batches of one sample, compile's default (every step replayed once captured), verbose 0:
    (seconds outside the native calls per batch, native calls per batch, seconds outside the native calls per fit
    call beyond its batches). Per batch: the difference between a fit over ``FIT_LONG`` and one over
    ``FIT_SHORT`` batches, divided by the difference in batches (an epoch's own costs, its snapshot and its read,
    cancel); per call: the short fit less its batches. Each the fastest of ``repeats`` metered fits (a difference of
    two noisy figures: the least disturbed of each)."""
    from magmadnn.models import replay
    from magmadnn.optimizers import SGD

    model = build(name)
    model.compile(optimizer=SGD(0.01, momentum=0.9), loss="cross_entropy", seed=0, device="gpu")
    x, y = _batch(name, FIT_LONG)
    model.fit(x[:replay.WARMUP + 2], y[:replay.WARMUP + 2], batch_size=1, verbose=0)  # captured
    if not any(isinstance(s, replay._Step) for s in model._graphs.steps.values()):
        raise RuntimeError(f"{name}: fit's step was not captured")
    short, short_calls = _outside_calls(lambda: model.fit(x[:FIT_SHORT], y[:FIT_SHORT], batch_size=1, verbose=0),
                                        1, repeats, pick=min)
    long, long_calls = _outside_calls(lambda: model.fit(x, y, batch_size=1, verbose=0), 1, repeats, pick=min)
    per_batch = (long - short) / (FIT_LONG - FIT_SHORT)
    return per_batch, (long_calls - short_calls) / (FIT_LONG - FIT_SHORT), short - FIT_SHORT * per_batch


def _per_step_seconds(step, steps: int, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - start) / steps)
    return statistics.median(times)


def _outside_calls(step, steps: int, repeats: int = 3, per: int = 1, pick=statistics.median) -> tuple[float, float]:
    """(seconds per step outside the native calls, native calls per step): the median (``pick``) of ``repeats``
    metered passes (``per``: steps made by one call of ``step``)."""
    times = []
    with Meter() as meter:
        for _ in range(repeats):
            meter.reset()
            start = time.perf_counter()
            for _ in range(steps):
                step()
            times.append((time.perf_counter() - start - meter.seconds) / (steps * per))
    return pick(times), sum(meter.calls.values()) / (steps * per)


def python_calls(step, steps: int = 3) -> float:
    """Python function calls per call of ``step`` outside the native calls (and outside the meter's own wrapper):
    the host's per-step work counted by a profiler, a measure no load on the machine changes."""
    import sys

    counted = [0]
    with Meter() as meter:
        def profile(frame, event, arg):
            if event == "call" and not meter.inside and frame.f_code.co_filename != __file__:
                counted[0] += 1

        sys.setprofile(profile)
        try:
            for _ in range(steps):
                step()
        finally:
            sys.setprofile(None)
    return counted[0] / steps


def _python_seconds(step, steps: int, repeats: int = 3) -> tuple[float, float, float, dict]:
    """(Python seconds per step, seconds per step inside the native calls, the meter's own seconds per step, native
    calls per step by library).

    Plain passes (no meter: the step as users run it) alternate with metered passes (every native call counted and
    timed); the Python is a plain pass's time less the time inside the native calls, medians of ``repeats``. The
    meter's wrapper (a metered pass's time less a plain one's) is reported on its own, not counted as the step's."""
    plain, metered, inside = [], [], []
    for _ in range(repeats):
        plain.append(_per_step_seconds(step, steps, repeats=1))
        with Meter() as meter:
            start = time.perf_counter()
            for _ in range(steps):
                step()
            metered.append((time.perf_counter() - start) / steps)
            inside.append(meter.seconds / steps)
            calls = {k: v / steps for k, v in meter.calls.items()}
    plain_s, native_s = statistics.median(plain), statistics.median(inside)
    return plain_s - native_s, native_s, statistics.median(metered) - plain_s, calls


def measure(name: str, batch: int, steps: int, warmup: int = 2) -> dict:
    """Host cost of ``name`` at ``batch`` on the null device (the simulator must be on in mode "null")."""
    model = magmadnn_model(name, "gpu")
    x, y = _batch(name, batch)
    train, infer = magmadnn_steps(model, x, y)
    for _ in range(warmup):
        train()
        infer()
    train_s, infer_s = _per_step_seconds(train, steps), _per_step_seconds(infer, steps)
    replay_train, replay_infer = replayed_steps(magmadnn_model(name, "gpu", graph=True), x, y)
    replay_train_s, replay_calls = _outside_calls(replay_train, steps)
    replay_infer_s, _ = _outside_calls(replay_infer, steps)
    fit_s, fit_calls, fit_fixed_s = fit_replay(name) if batch == 1 else (None, None, None)
    python_s, native_s, meter_s, calls = _python_seconds(train, steps)
    total_calls = sum(calls.values())
    return {"model": name, "batch": batch, "train_us": train_s * 1e6, "infer_us": infer_s * 1e6,
            "replayed_train_us": replay_train_s * 1e6, "replayed_infer_us": replay_infer_s * 1e6,
            "replayed_calls": replay_calls,
            "fit_replay_us": None if fit_s is None else fit_s * 1e6, "fit_calls": fit_calls,
            "fit_fixed_us": None if fit_fixed_s is None else fit_fixed_s * 1e6,
            "calls_per_train_step": total_calls, **calls, "native_us_per_train_step": native_s * 1e6,
            "python_us_per_call": python_s * 1e6 / total_calls if total_calls else None,
            "meter_us_per_call": meter_s * 1e6 / total_calls if total_calls else None,
            "python_calls_per_step": python_calls(train)}


# --------------------------------------------------------------------------------------------- PyTorch reference
def torch_model(name: str):
    import torch
    from torch import nn

    torch.manual_seed(0)
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    if name == "transformer":
        return _torch_transformer()
    if name == "lenet5":
        return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5),
                             nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(),
                             nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))

    def conv_bn(cin, cout, k, stride=1):
        return nn.Sequential(nn.Conv2d(cin, cout, k, stride, padding=k // 2, bias=False), nn.BatchNorm2d(cout))

    class Block(nn.Module):  # as magmadnn.zoo's residual block
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.a, self.b = conv_bn(cin, cout, 3, stride), conv_bn(cout, cout, 3)
            self.short = nn.Identity() if stride == 1 and cin == cout else conv_bn(cin, cout, 1, stride)

        def forward(self, x):
            return torch.relu(self.b(torch.relu(self.a(x))) + self.short(x))

    return nn.Sequential(conv_bn(3, 16, 3), nn.ReLU(), Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def _torch_transformer():
    """:func:`transformer`'s twin in PyTorch."""
    import torch
    from torch import nn

    t = TRANSFORMER

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(t["vocab"], t["dim"])
            self.position = nn.Parameter(torch.zeros(INPUTS["transformer"][0], t["dim"]))
            self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(t["dim"]) for _ in range(3))
            self.attention = nn.MultiheadAttention(t["dim"], t["heads"], batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(t["dim"], t["mlp"]), nn.GELU(), nn.Linear(t["mlp"], t["dim"]))
            self.head = nn.Linear(t["dim"], 10)

        def forward(self, tokens):
            x = self.embed(tokens) + self.position
            h = self.norm1(x)
            x = x + self.attention(h, h, h, need_weights=False)[0]
            x = self.norm3(x + self.mlp(self.norm2(x)))
            return self.head(x.mean(dim=1))

    return Net()


def torch_step_seconds(name: str, steps: int) -> float | None:
    """PyTorch CPU eager's whole training step at batch 1 on one thread (None without PyTorch)."""
    try:
        import torch
    except ImportError:
        return None
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        net = torch_model(name)
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        x, y = _batch(name, 1)
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)
        loss_fn = torch.nn.CrossEntropyLoss()

        def step():
            opt.zero_grad(set_to_none=True)
            loss_fn(net(xt), yt).backward()
            opt.step()

        for _ in range(2):
            step()
        return _per_step_seconds(step, steps)
    finally:
        torch.set_num_threads(threads)


# --------------------------------------------------------------------------------------------- array API calls
ELEMENTWISE_COLUMNS = ["call", "us", "cudart", "launcher"]


def elementwise(calls: int = 500) -> list[dict]:
    """Host microseconds and native calls of one array API elementwise call (``x.__array_namespace__()``) on the
    null device (the simulator must be on in mode "null"), for a few shapes of call."""
    import pymagma

    x = pymagma.asarray(np.ones((256, 256), np.float32))
    xp = x.__array_namespace__()
    y, row, x64 = xp.ones_like(x), xp.ones(256, dtype=xp.float32), xp.ones((256, 256))
    cases = {"x + y": lambda: x + y, "xp.add(x, row) (broadcast)": lambda: xp.add(x, row),
             "x[:, ::2] == y[:, ::2] (strided)": lambda: x[:, ::2] == y[:, ::2], "xp.exp(x)": lambda: xp.exp(x),
             "x + 1.0 (a scalar's upload)": lambda: x + 1.0, "x + x64 (a cast first)": lambda: x + x64}
    rows = []
    for name, call in cases.items():
        for _ in range(20):
            call()
        seconds = _per_step_seconds(call, calls)
        with Meter() as meter:
            for _ in range(calls):
                call()
        rows.append({"call": name, "us": seconds * 1e6, "cudart": meter.calls["cudart"] / calls,
                     "launcher": meter.calls["launcher"] / calls})
    return rows


FFT_COLUMNS = ["call", "us", "cudart", "magma", "launcher"]


def fft_and_gemm(calls: int = 500) -> list[dict]:
    """Host microseconds and native calls of one cached FFT call (the plan made before) next to one gemm call on the
    null device (the simulator must be on in mode "null"): a transform's host cost should not exceed a gemm's."""
    import pymagma
    import pymagma.array_api as xp
    from pymagma import blas

    x = pymagma.asarray(np.ones((8, 64, 64), np.complex64))
    a, c = pymagma.asarray(np.ones((64, 64), np.complex64)), pymagma.empty((64, 64), np.complex64)
    r = pymagma.asarray(np.ones((8, 64), np.float32))
    cases = {"blas.gemm(a, a, out=c) complex64 64x64": lambda: blas.gemm(a, a, out=c),
             "a @ a complex64 64x64": lambda: a @ a,
             "xp.fft.fft(x) 8x64x64": lambda: xp.fft.fft(x),
             "xp.fft.fftn(x, axes=(-2, -1)) batched 2-D": lambda: xp.fft.fftn(x, axes=(-2, -1)),
             "xp.fft.rfft(r) 8x64": lambda: xp.fft.rfft(r),
             "xp.fft.fft(x, norm='ortho') (+ a scal)": lambda: xp.fft.fft(x, norm="ortho")}
    rows = []
    for name, call in cases.items():
        for _ in range(20):
            call()
        seconds = _per_step_seconds(call, calls)
        with Meter() as meter:
            for _ in range(calls):
                call()
        rows.append({"call": name, "us": seconds * 1e6, **{k: meter.calls[k] / calls for k in FFT_COLUMNS[2:]}})
    return rows


# --------------------------------------------------------------------------------------------- the table
def device(on_gpu: bool = False):
    """Where the steps run: pymagma's null device, or (``on_gpu``) the GPU itself, the same figures timed on
    hardware (``gpu_check.sh`` tier 3): there the time inside the native calls is the libraries' and the driver's."""
    import contextlib

    from pymagma import simulator

    return contextlib.nullcontext() if on_gpu else simulator.simulated("null")


def run(models=MODELS, batches=(1, 128), steps: int = 20, on_gpu: bool = False) -> list[dict]:
    """One row per (model, batch): magmadnn's host cost on the null device (or the GPU) and PyTorch CPU's batch-1
    step."""
    torch_us = {}
    for name in models:
        seconds = torch_step_seconds(name, steps)
        torch_us[name] = None if seconds is None else seconds * 1e6
    rows = []
    with device(on_gpu):
        for name in models:
            for batch in batches:
                row = measure(name, batch, steps)
                row["torch_cpu_step_us"] = torch_us[name]
                row["ratio_to_torch"] = row["train_us"] / torch_us[name] if torch_us[name] else None
                rows.append(row)
    return rows
