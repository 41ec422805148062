"""The backend op set: every op's name, signature and semantics, written down once, one module per topic.

The topic modules (``core``, ``elementwise``, ``reductions``, ``shapes``, ``linear``, ``activations``, ``losses``,
``conv``, ``pooling``, ``normalization``, ``random``, ``optim``, ``loss_scaling``, ``embeddings``, ``attention``,
``recurrent``, ``math`` and ``indexing`` (what ONNX's operators add); the optional ``collectives``, ``graphs`` and
``faults``) carry the same names in every backend package
(:mod:`magmadnn.backend.host`, :mod:`magmadnn.backend.device`), so an op lives in ``<floor>/<topic>.py`` on each floor.

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

# the topic modules: importing one declares its ops
from . import (  # noqa: F401
    activations,
    attention,
    collectives,
    conv,
    core,
    elementwise,
    embeddings,
    faults,
    graphs,
    indexing,
    linear,
    loss_scaling,
    losses,
    math,
    normalization,
    optim,
    pooling,
    random,
    recurrent,
    reductions,
    shapes,
)
from ._spec import OPTIONAL_SPEC, SPEC

__all__ = ["OPS", "ATTRIBUTES", "OPTIONAL", "TOPICS", "OPTIONAL_TOPICS", "signature", "problems", "check"]

#: The op names, in the order the topic modules declared them.
OPS: tuple[str, ...] = tuple(SPEC)
#: The topic modules of every floor (ops, host, device), and those holding optional ops only (the device's twins).
TOPICS = ("core", "elementwise", "reductions", "shapes", "linear", "activations", "losses", "conv", "pooling",
          "normalization", "random", "optim", "loss_scaling", "embeddings", "attention", "recurrent",
          "math", "indexing")
OPTIONAL_TOPICS = ("collectives", "graphs", "faults")

#: Non-callable attributes every backend has.
ATTRIBUTES = ("name",)
#: What a backend may add: ``FUSED_ACTIVATIONS`` (kinds conv2d_forward fuses) and the optional ops (declared with
#: ``optional`` in the topic modules).
OPTIONAL = ("FUSED_ACTIVATIONS", *OPTIONAL_SPEC)


def signature(name: str) -> inspect.Signature:
    """The signature of op ``name``."""
    return SPEC[name]


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
        if not _compatible(SPEC[name], impl):
            found.append(f"op {name!r} has signature {impl}, the op set says {SPEC[name]}")
    for name, spec in OPTIONAL_SPEC.items():
        fn = getattr(backend, name, None)
        if callable(fn) and not _compatible(spec, inspect.signature(fn)):
            found.append(f"optional op {name!r} has signature {inspect.signature(fn)}, the op set says {spec}")
    found += [f"public function {n!r} is not in the op set (make it private or declare it in magmadnn/backend/ops)"
              for n in sorted(_extra_functions(backend))]
    return found


def _extra_functions(backend) -> set[str]:
    """Public functions of ``backend`` outside the op set (names a module file imported from outside its own package
    excepted)."""
    own = getattr(backend, "__name__", None) if getattr(backend, "__file__", None) else None
    inside = (own + ".") if own is not None else None
    extra = set()
    for n in dir(backend):
        value = getattr(backend, n)
        if n.startswith("_") or n in OPS or n in OPTIONAL or not callable(value) or isinstance(value, type):
            continue
        where = getattr(value, "__module__", own)
        if own is not None and where != own and not (where or "").startswith(inside):  # a backend package's own
            continue  # modules count as its own
        extra.add(n)
    return extra


def check(backend) -> None:
    """Raise ``TypeError`` listing every way ``backend`` departs from the op set."""
    found = problems(backend)
    if found:
        label = getattr(backend, "name", backend)
        raise TypeError(f"backend {label!r} does not implement the op set:\n  " + "\n  ".join(found))
