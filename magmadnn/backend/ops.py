"""The backend op set: every op's name, signature and semantics, written down once.

A backend is a module (or module-like object) with a ``name`` and exactly these functions; :func:`check` proves it.
Autograd, functional, layers, models, optimizers, losses and metrics touch backend arrays only through them, so a
backend's arrays need not be NumPy arrays (the conformance suite runs one whose arrays refuse every NumPy call).

Conventions every backend follows (and adapts its library to, in one place of its own module):

- **Arrays**: C-ordered, NCHW for images; float32 by default, float64 everywhere (gradient checks use it). An array
  exposes ``shape`` (tuple), ``dtype`` (NumPy dtype), ``ndim`` and ``size``; nothing else is assumed.
- **Half operands** (float16, bfloat16 from ``ml_dtypes``: a layer's compute dtype under a mixed policy, see
  :mod:`magmadnn.mixed_precision`): an op computes on them in float32 and rounds each float result once to the half
  type (the host converts around its float32 code; the device's kernels, cuBLAS GemmEx and cuDNN accumulate in
  float32). The optimizer updates and the batch-norm statistics only ever see float32 (the master weights).
- **Scalars and promotion**: a Python scalar operand takes the array operand's dtype; two arrays must share a dtype
  (no silent promotion); integer label arrays are int64 (``asarray`` of host integers keeps their dtype).
- **Results**: every op returns new arrays and never aliases an input, except the in-place ops, which are named
  as such: the ``*_update`` ops (the optimizer ones update their ``p`` and state arguments,
  ``running_stat_update`` its ``running``) and ``batch_norm_train`` (updates ``running_mean``/``running_var``).
  ``reshape`` may return a view; callers never write through it.
- **Padding** is ``((top, bottom), (left, right))``, resolved by :mod:`.geometry` ("same" may be asymmetric, with the
  extra pixel bottom/right); a backend whose library pads symmetrically only pads explicitly.
- **Pooling**: max ignores padding, its gradient goes to the first maximum of the window in row-major order (as
  PyTorch's; a backend whose library leaves ties undocumented, as cuDNN does, saves the offsets of the maxima in the
  forward and scatters from them, so the rule holds on every device); average divides by the number of real
  (unpadded) elements of each window.
- **Batch norm**: ``running = momentum * running + (1 - momentum) * batch`` (Keras' and ONNX's momentum; PyTorch's
  is ``1 - momentum``); the running variance takes the unbiased batch variance (PyTorch) or, with
  ``unbiased=False``, the biased one (Keras); normalisation uses the biased one; ``eps`` is added to the variance.
- **Activations**: kinds in :data:`.geometry.ACTIVATIONS`, each Keras 3's function of that name ("gelu" exact,
  "gelu_tanh" the tanh approximation); ``alpha`` is the leaky-ReLU slope / ELU scale.
- **Random numbers**: ``rng(seed)`` is a :class:`.random.Stream`; each ``uniform``/``normal``/``dropout_forward``
  call takes one offset and draws the Philox4x32-10 stream defined there, so the same seed gives the same numbers on
  every backend (up to the final rounding of transcendental functions in ``normal``).
- **Contexts**: ``ctx``/``saved`` values a forward returns are opaque to callers and handed back unchanged to the
  matching backward of the same backend.
"""

from __future__ import annotations

import inspect

__all__ = ["OPS", "ATTRIBUTES", "OPTIONAL", "signature", "problems", "check"]

_SPEC: dict[str, inspect.Signature] = {}


def _op(fn):
    _SPEC[fn.__name__] = inspect.signature(fn)
    return fn


# ----------------------------------------------------------------------------------------------- creation/transfer
@_op
def asarray(x, dtype=None):
    """``x`` (host array, scalar, nested list or this backend's array) as this backend's array; host floats of
    Python type become float32, NumPy arrays keep their dtype unless ``dtype`` is given."""


@_op
def to_numpy(a):
    """A host NumPy copy of ``a``: the only op that moves data to the host."""


@_op
def zeros(shape, dtype=...):
    """A new zero array (float32 by default)."""


@_op
def ones(shape, dtype=...):
    """A new array of ones."""


@_op
def full(shape, value, dtype=...):
    """A new array filled with ``value``."""


@_op
def zeros_like(a):
    """Zeros of ``a``'s shape and dtype."""


@_op
def copy(a):
    """A new array equal to ``a``."""


# ----------------------------------------------------------------------------------------------------- elementwise
@_op
def add(a, b):
    """``a + b`` with NumPy broadcasting (either may be a Python scalar)."""


@_op
def subtract(a, b):
    """``a - b`` with broadcasting."""


@_op
def multiply(a, b):
    """``a * b`` with broadcasting."""


@_op
def divide(a, b):
    """``a / b`` with broadcasting."""


@_op
def negative(a):
    """``-a``."""


@_op
def power(a, p):
    """``a ** p`` for a scalar exponent ``p``."""


@_op
def sqrt(a):
    """Elementwise square root."""


@_op
def log(a):
    """Elementwise natural logarithm (``-inf`` at 0, NaN below)."""


@_op
def clip(a, low, high):
    """``min(max(a, low), high)`` for scalars ``low <= high``."""


@_op
def isfinite_all(a):
    """Python ``bool``: every element of ``a`` is finite (one scalar read for a device backend)."""


# ------------------------------------------------------------------------------------------ reductions and shape
@_op
def sum(a, axis=None, keepdims=False):  # noqa: A001
    """Sum over ``axis`` (None: all axes) as an array (0-d for a full reduction)."""


@_op
def mean(a, axis=None, keepdims=False):
    """Mean over ``axis``."""


@_op
def argmax(a, axis=None):
    """int64 indices of the first maximum along ``axis``."""


@_op
def reshape(a, shape):
    """``a`` with a new shape of the same size (may be a view; never written through)."""


@_op
def transpose(a, axes=None):
    """``a`` with permuted axes (reversed when None), as a new array."""


@_op
def sum_to_shape(a, shape):
    """Sum ``a`` down to ``shape``, undoing broadcasting (leading axes and axes of size 1)."""


@_op
def matmul(a, b, transpose_a=False, transpose_b=False):
    """``op(a) @ op(b)`` for 2-D or stacked (..., m, k) operands; transposes of the last two axes as flags."""


@_op
def bias_add(x, b):
    """``x + b`` with ``b`` (C,) along axis 1 (dense rows or NCHW channels)."""


@_op
def bias_grad(dy):
    """The gradient of ``bias_add`` with respect to ``b``: ``channel_sum(dy)``."""


@_op
def channel_sum(a):
    """Sum of ``a`` over every axis but 1: the per-channel totals, shape (C,)."""


# ------------------------------------------------------------------------------------------ activations, softmax
@_op
def activation_forward(x, kind, alpha=0.0):
    """``act(x)`` for ``kind`` in :data:`.geometry.ACTIVATIONS`."""


@_op
def activation_backward(dy, x, y, kind, alpha=0.0):
    """dx of ``activation_forward``; ``y`` is its output (``x`` may be None for relu/sigmoid/tanh, ``y`` may be None
    for the others)."""


@_op
def softmax(x, axis=-1):
    """Softmax along ``axis`` (stable for any input)."""


@_op
def log_softmax(x, axis=-1):
    """Log-softmax along ``axis``."""


@_op
def softmax_backward(dy, y, axis=-1):
    """dx of ``softmax`` given its output ``y``."""


@_op
def log_softmax_backward(dy, y, axis=-1):
    """dx of ``log_softmax`` given its output ``y``."""


@_op
def softmax_cross_entropy(logits, labels):
    """Per-sample cross entropy of softmax(logits (N, C)) with int labels (N,) or one-hot/soft labels (N, C):
    ``(loss (N,), probs (N, C))``."""


@_op
def softmax_cross_entropy_backward(probs, labels, dloss):
    """dlogits of ``softmax_cross_entropy`` for ``dloss`` (N,)."""


# ----------------------------------------------------------------------------------------------------- convolution
@_op
def conv2d_forward(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, bias=None, saved=None,
                   activation=None):
    """Cross-correlation of x (N, C, H, W) with w (K, C/groups, R, S) -> (N, K, Ho, Wo), plus ``bias`` (K,), then
    ``activation`` (one of :data:`.geometry.FUSED_ACTIVATIONS`) when given. ``saved``, when a dict, may be filled with
    whatever lets ``conv2d_backward_filter`` skip work."""


@_op
def conv2d_backward_data(dy, w, x_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """dx (N, C, H, W) of ``conv2d_forward``."""


@_op
def conv2d_backward_filter(dy, x, w_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, saved=None):
    """dw (K, C/groups, R, S) of ``conv2d_forward``; ``saved`` is the dict the forward filled (optional)."""


@_op
def conv2d_backward_bias(dy):
    """db (K,) of ``conv2d_forward``."""


@_op
def pool2d_forward(x, mode, window, stride, padding=(0, 0)):
    """Max or average pooling of x (N, C, H, W) -> ``(y, ctx)``."""


@_op
def pool2d_backward(dy, x, y, ctx, mode, window, stride, padding=(0, 0)):
    """dx of ``pool2d_forward``."""


# ------------------------------------------------------------------------------------------ batch norm, dropout
@_op
def batch_norm_train(x, gamma, beta, running_mean, running_var, momentum, eps, unbiased=True):
    """Normalise x (N, F) or (N, C, H, W) with batch statistics -> ``(y, ctx)``; updates the running stats in place
    (``unbiased``: the running variance takes the unbiased batch variance, else the biased one)."""


@_op
def batch_norm_infer(x, gamma, beta, running_mean, running_var, eps):
    """Normalise with the running statistics."""


@_op
def batch_norm_backward(dy, x, gamma, ctx):
    """``(dx, dgamma, dbeta)`` of ``batch_norm_train``."""


@_op
def dropout_forward(x, rate, rng):
    """Inverted dropout -> ``(y, mask)``: one draw u of ``uniform(rng, x.shape, 0, 1, x.dtype)``, mask = 1/(1-rate)
    where u >= rate (compared in x's dtype) else 0, y = x * mask."""


@_op
def dropout_backward(dy, mask):
    """``dy * mask``."""


# ------------------------------------------------------------------------------------ in-place optimizer updates
@_op
def sgd_update(p, g, v, lr, momentum=0.0, nesterov=False, weight_decay=0.0, keras=False):
    """In place: g' = g + wd p; v = momentum v + g'; p -= lr (g' + momentum v if nesterov else v). ``keras``
    (Keras 3's rule, in every update op): the weight decay is decoupled, p -= lr wd p first, and g' = g."""


@_op
def adam_update(p, g, m, v, step, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False,
                keras=False):
    """In place Adam (``decoupled``: AdamW, p *= 1 - lr wd first); bias-corrected, ``step`` counts from 1;
    p -= lr/bc1 m / (sqrt(v/bc2) + eps), or with ``keras`` p -= lr sqrt(bc2)/bc1 m / (sqrt(v) + eps). ``lr`` may be
    a float64 vector of this backend holding {lr, bc1, bc2} (``step`` then unused): values computed or staged where
    the arrays live (graph replay, loss scaling)."""


@_op
def rmsprop_update(p, g, s, lr, rho=0.9, eps=1e-7, weight_decay=0.0, keras=False):
    """In place: s = rho s + (1-rho) g^2; p -= lr g / (sqrt(s) + eps), or with ``keras`` lr g / sqrt(s + eps)
    after the decoupled decay."""


@_op
def adagrad_update(p, g, s, lr, eps=1e-7, weight_decay=0.0, keras=False):
    """In place: s += g^2; p -= lr g / (sqrt(s) + eps), or with ``keras`` lr g / sqrt(s + eps) after the
    decoupled decay."""


@_op
def running_stat_update(running, batch, momentum):
    """In place: the batch-norm rule ``running = momentum running + (1 - momentum) batch``, computed as
    ``running -= (1 - momentum) (running - batch)``."""


# --------------------------------------------------------------------------------------------------------- random
@_op
def rng(seed=None):
    """A :class:`.random.Stream` keyed by ``seed`` (a fresh random key when None)."""


@_op
def uniform(rng, shape, low=0.0, high=1.0, dtype=...):
    """One draw: ``low + (high - low) * u`` rounded to ``dtype``."""


@_op
def normal(rng, shape, mean=0.0, std=1.0, dtype=...):
    """One draw: ``mean + std * z`` rounded to ``dtype``."""


# ------------------------------------------------------------------------------------------ attention
@_op
def masked_softmax(x, mask=None, scale=1.0, causal=False):
    """Attention probabilities from scores x (B, H, Tq, Tk): softmax over the last axis of ``scale * x`` where key j
    is kept when ``causal`` is False or j <= i (query i; PyTorch's ``is_causal``) and ``mask`` (B, Tk, x's dtype;
    None: every key) is nonzero at j. A row with no key kept is all zeros."""


@_op
def masked_softmax_backward(dy, y, scale=1.0):
    """dx of ``masked_softmax`` from its output ``y``: ``scale * y * (dy - sum(dy * y, axis=-1))``."""



# ---------------------------------------------------------------------------- shape and routing
@_op
def concatenate(arrays, axis):
    """The arrays (a list of one dtype, shapes equal but along ``axis``) joined along ``axis`` into a new array."""


@_op
def split(a, sizes, axis):
    """The inverse of ``concatenate``: a tuple of new arrays, ``sizes[i]`` long along ``axis`` (the sizes sum to
    ``a.shape[axis]``)."""


@_op
def upsample_nearest2d(x, size):
    """Nearest-neighbour upsampling of x (N, C, H, W) by integer factors ``size`` (sh, sw) -> (N, C, H sh, W sw):
    ``y[n, c, i, j] = x[n, c, i // sh, j // sw]``."""


@_op
def upsample_nearest2d_backward(dy, size):
    """dx of ``upsample_nearest2d``: each input pixel's gradient is the sum of its sh x sw output block."""

# ------------------------------------------------------------- normalization, embeddings, gradient clipping
@_op
def layer_norm_forward(x, gamma, beta, eps, rms=False):
    """Each row of ``x`` normalised over its last axis -> ``(y, ctx)``: ``y = (x - mean) / sqrt(var + eps) * gamma +
    beta`` with the biased variance of the row; ``rms``: ``y = x / sqrt(mean(x^2) + eps) * gamma + beta`` (no
    centring). ``gamma`` and ``beta`` (F,) of the last axis may each be None (no scale, no shift). Other axes are
    normalised by moving them last; GroupNorm normalises (N * groups, rest) rows."""


@_op
def layer_norm_backward(dy, x, gamma, ctx, rms=False):
    """``(dx, dgamma, dbeta)`` of ``layer_norm_forward``: dgamma = column sums of dy * xhat, dbeta = column sums of
    dy, each summed over the rows in order (deterministic); both None when ``gamma`` is None."""


@_op
def embedding_forward(table, indices):
    """The rows of ``table`` (V, D) picked by the int64 array ``indices`` (any shape) -> ``indices.shape + (D,)``. An
    index outside [0, V) is a ``ValueError`` where the indices can be checked without a device read (the host); a
    device backend never reads outside the table and gives that position a NaN row (a loss over it is NaN, so fit
    refuses the update; ``Model`` checks host data against every ``Embedding`` before a batch runs)."""


@_op
def embedding_backward(dy, indices, num_rows):
    """The table gradient (num_rows, D) of ``embedding_forward``: each row the sum of the rows of ``dy`` whose index
    it is, added in an order fixed by the indices (the same bits on every run; the device adds them in index
    order); indices outside the table add nothing."""


@_op
def clip_norm_scale(arrays, max_norm):
    """A 0-d array in the arrays' dtype: ``max_norm / max(norm, max_norm)`` with ``norm`` the L2 norm of every element
    of ``arrays`` together (a list), i.e. the factor that clips their global norm to ``max_norm`` (1 below it; NaN
    when the norm is NaN). Computed where the arrays live: nothing is read back."""

# ------------------------------------------------------------------------------- dynamic loss scaling
# Keras' LossScaleOptimizer decided where the gradients live: the finite check, the skip and the scale are arrays
# of the backend, so that nothing is read back per step and a step captured as a graph replays the decision.
@_op
def finite_flag(arrays):
    """A 0-d array in the arrays' dtype: 1 when every element of every array of ``arrays`` (a non-empty list) is
    finite, else 0. Computed where the arrays live: nothing is read back."""


@_op
def revert_update(a, saved, keep):
    """In place: ``a`` is left as it is when the 0-d ``keep`` is 1, else becomes ``saved`` (an update undone on the
    backend: a true select, so a NaN in the discarded operand never leaks); one shape and dtype."""


@_op
def loss_scale_update(scale, counter, finite, growth_steps):
    """In place, Keras' dynamic loss scale (0-d ``scale``, ``counter`` and the 0-d 1/0 flag ``finite``, one dtype):
    when ``finite`` is 1, ``counter += 1`` and, when that reaches ``growth_steps``, ``counter = 0`` and ``scale *=
    2``; when it is 0, ``counter = 0`` and ``scale *= 0.5`` (no lower bound, as Keras)."""


# ------------------------------------------------------------------------------- recurrent layers
# Sequences are batch-major (N, T, F). ``x_proj`` is the input projection of every step, ``x @ kernel + bias``
# (one matrix product for the whole sequence, made by the caller); the ops run the recurrence from a zero state.
@_op
def lstm_forward(x_proj, recurrent_kernel, return_sequences=True):
    """LSTM over x_proj (N, T, 4u) with recurrent_kernel (u, 4u), gates in the order i, f, g, o:
    z = x_proj[:, t] + h @ recurrent_kernel; i, f, o = sigmoid, g = tanh of their quarters of z;
    c = f c + i g; h = o tanh(c) -> ``(y, ctx)``, y every step's h (N, T, u) or the last one (N, u)."""


@_op
def lstm_backward(dy, recurrent_kernel, ctx):
    """``(dx_proj (N, T, 4u), drecurrent_kernel (u, 4u))`` of ``lstm_forward`` for dy of y's shape
    (backpropagation through time)."""


@_op
def gru_forward(x_proj, recurrent_kernel, recurrent_bias, return_sequences=True):
    """GRU over x_proj (N, T, 3u) with recurrent_kernel (u, 3u) and recurrent_bias (3u,), gates r, z, n (cuDNN's
    and PyTorch's formulation): q = h @ recurrent_kernel + recurrent_bias; r, z = sigmoid of x_proj's first two
    thirds + q's; n = tanh(x_proj's last third + r q's last third); h = (1 - z) n + z h -> ``(y, ctx)`` as
    ``lstm_forward``'s."""


@_op
def gru_backward(dy, recurrent_kernel, ctx):
    """``(dx_proj (N, T, 3u), drecurrent_kernel (u, 3u), drecurrent_bias (3u,))`` of ``gru_forward``."""


#: The op names, in the order above.
OPS: tuple[str, ...] = tuple(_SPEC)


# ------------------------------------------------------------------------------------------------- optional ops
# A backend may add these; when it has one, it has it with this signature and meaning (``problems`` checks the
# signature, the conformance suite the meaning). Who uses them falls back when a backend lacks them.
_OPTIONAL_SPEC: dict[str, inspect.Signature] = {}


def _optional(fn):
    _OPTIONAL_SPEC[fn.__name__] = inspect.signature(fn)
    return fn


@_optional
def for_index(n):
    """The same backend bound to device ``n`` (a backend with several devices)."""


# For data-parallel gradient exchange (:mod:`magmadnn.distributed`; without them it stages through NumPy arrays), a
# backend whose arrays live in device memory may add:
@_optional
def host_empty(shape, dtype=...):
    """A new C-contiguous host NumPy array in the memory this backend copies to fastest (page-locked)."""


@_optional
def copy_to_host(a, out):
    """``a`` into the C-contiguous host NumPy array ``out`` of the same size and dtype, once the work queued on
    ``a`` is done; returns ``out`` (``ValueError`` for another ``out``)."""


@_optional
def flat_pack(arrays, scale, out):
    """``scale * a`` of each array, flattened, one after the other into the 1-D array ``out``, which they fill
    (``ValueError`` otherwise); returns None once ``out`` is written, so that another library (MPI) may read it."""


@_optional
def flat_unpack(flat, shapes, divisor):
    """New arrays of ``shapes`` from the consecutive values at the start of the 1-D array ``flat`` (which may hold
    more), each divided by ``divisor``."""


# Graph replay (:mod:`magmadnn.models.graphed`, ``compile(graph=True)``): a backend that can capture its
# work as CUDA graphs adds:
@_optional
def graph_capture(like):
    """A context manager capturing the work queued in its block on ``like``'s queue as a graph with ``launch()``
    and ``destroy()``; work that cannot be captured raises an error naming it, and the block's arrays belong to the
    graph."""


@_optional
def staging_buffer(layout, like):
    """Static device arrays ``views`` of ``layout`` ``[(shape, dtype), ...]`` with host arrays to fill (``host()``)
    and ``upload()``, which queues their copy to the device on ``like``'s queue."""


@_optional
def copy_into(dst, src):
    """``src`` into the existing array ``dst`` of the same shape and dtype, queued on the device."""


@_optional
def constant(value, dtype=None):
    """``asarray(value, dtype)`` for a constant (a scalar operand, a loss's fixed matrix): made once per value and
    kept, never written (no op writes its inputs), so that a step captured as a graph after an eager run of it
    uploads nothing. Callers without it use ``asarray`` (``functional._base.constant``)."""


# Checks of the values an op needs, without a host read (:mod:`magmadnn.backend.faults`): a backend whose arrays live in
# device memory adds all four; callers check NumPy data themselves and skip the check on a backend without them.
@_optional
def check_range(x, low, high, message):
    """Queue a check that every element of ``x`` is in ``[low, high)``; the first one that is not (in C order) is
    recorded, and raised as ``ValueError(message.format(bad=value))`` by the next read (``fault_error``)."""


@_optional
def check_binary(x, message):
    """Queue a check that every element of ``x`` is 0 or 1 (booleans pass), recorded as ``check_range`` records."""


@_optional
def fault_record(like):
    """The small array where checks on ``like``'s device record a failing value, or None before any check ran
    there; it is copied to the host along with what the host reads anyway."""


@_optional
def fault_error(record, values):
    """The ``ValueError`` recorded in ``values`` (the host copy of ``record``), or None when it holds none; the
    record is cleared for the next check."""


#: Non-callable attributes every backend has.
ATTRIBUTES = ("name",)
#: What a backend may add: ``FUSED_ACTIVATIONS`` (kinds conv2d_forward fuses) and the optional ops below.
OPTIONAL = ("FUSED_ACTIVATIONS", *_OPTIONAL_SPEC)


def signature(name: str) -> inspect.Signature:
    """The signature of op ``name``."""
    return _SPEC[name]


def _compatible(spec: inspect.Signature, impl: inspect.Signature) -> bool:
    """Same parameter names in the same order, the same ones with defaults (default values are not compared:
    the dtype defaults are each backend's float32)."""
    want = [(p.name, p.default is inspect.Parameter.empty) for p in spec.parameters.values()]
    have = [(p.name, p.default is inspect.Parameter.empty) for p in impl.parameters.values()]
    return want == have


def problems(backend) -> list[str]:
    """What keeps ``backend`` from implementing exactly the op set (empty when it does)."""
    found = []
    for attr in ATTRIBUTES:
        if not isinstance(getattr(backend, attr, None), str):
            found.append(f"missing attribute {attr!r}")
    for name in OPS:
        fn = getattr(backend, name, None)
        if not callable(fn):
            found.append(f"missing op {name!r}")
            continue
        try:
            impl = inspect.signature(fn)
        except (TypeError, ValueError):  # builtins such as NumPy ufuncs: checked by the conformance suite
            continue
        if not _compatible(_SPEC[name], impl):
            found.append(f"op {name!r} has signature {impl}, the op set says {_SPEC[name]}")
    for name, spec in _OPTIONAL_SPEC.items():
        fn = getattr(backend, name, None)
        if callable(fn) and not _compatible(spec, inspect.signature(fn)):
            found.append(f"optional op {name!r} has signature {inspect.signature(fn)}, the op set says {spec}")
    found += [f"public function {n!r} is not in the op set (make it private or add it to ops.py)"
              for n in sorted(_extra_functions(backend))]
    return found


def _extra_functions(backend) -> set[str]:
    """Public functions of ``backend`` outside the op set (names a module file imported from elsewhere excepted)."""
    own = getattr(backend, "__name__", None) if getattr(backend, "__file__", None) else None
    extra = set()
    for n in dir(backend):
        value = getattr(backend, n)
        if n.startswith("_") or n in OPS or n in OPTIONAL or not callable(value) or isinstance(value, type):
            continue
        if own is not None and getattr(value, "__module__", own) != own:
            continue
        extra.add(n)
    return extra


def check(backend) -> None:
    """Raise ``TypeError`` listing every way ``backend`` departs from the op set."""
    found = problems(backend)
    if found:
        label = getattr(backend, "name", backend)
        raise TypeError(f"backend {label!r} does not implement the op set:\n  " + "\n  ".join(found))
