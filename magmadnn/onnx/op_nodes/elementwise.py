"""Element-wise operators: arithmetic, math functions, activations, comparisons and logic, Where, Clip, Cast,
variadic Max/Min/Sum/Mean, Softmax/LogSoftmax/Hardmax on any axis, Dropout and Identity."""

from __future__ import annotations

import math

import numpy as np

from ._registry import Form, op
from ._runtime import ONNX_DTYPES, F, T, Tensor, arith, half_rounding, is_float, tensor

_ARITH = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide"}


def _batch_of_broadcast(view):
    """An element-wise result keeps the batch axis when a batched input has the result's full rank and every other
    input either has a batch axis or broadcasts along axis 0 (fewer axes, or size 1 there)."""
    ranks = [view.rank(k) for k in range(len(view.inputs)) if view.has(k)]
    if any(r is None for r in ranks):
        return any(view.batched(k) for k in range(len(view.inputs)))
    top = max(ranks)
    ok = False
    for k in range(len(view.inputs)):
        if not view.has(k):
            continue
        rank, batched = view.rank(k), view.batched(k)
        if batched and rank == top:
            ok = True
        elif rank == top and not batched:
            shape = view.shape(k)
            if shape is None or not len(shape) or shape[0] != 1:
                return False
    return ok


@op(*_ARITH)
def arithmetic(view):
    kind = _ARITH[view.node.op_type]
    return Form(lambda a, b: arith(a, b, kind), keeps_batch=_batch_of_broadcast(view))


_UNARY = {"Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh",
          "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh", "Sqrt": "sqrt", "Log": "log",
          "Abs": "abs", "Floor": "floor", "Ceil": "ceil", "Round": "round", "Sign": "sign", "Reciprocal": "reciprocal",
          "Erf": "erf", "Neg": "negative"}


@op(*_UNARY)
def unary(view):
    kind = _UNARY[view.node.op_type]

    def run(x):
        if kind == "negative" and is_float(x):
            return F.negative(x)
        return T.unary(x, kind)

    return run


_ACTIVATIONS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Softplus": "softplus", "Softsign": "softsign",
                "Exp": "exponential"}


@op(*_ACTIVATIONS)
def activation(view):
    view.only()
    kind = _ACTIVATIONS[view.node.op_type]
    return lambda x: F.activation(x, kind) if is_float(x) else T.unary(x, "exp")


@op("LeakyRelu")
def leaky_relu(view):
    view.only("alpha")
    alpha = float(view.attr("alpha", 0.01))
    return lambda x: F.activation(x, "leaky_relu", alpha)


@op("Elu")
def elu(view):
    view.only("alpha")
    alpha = float(view.attr("alpha", 1.0))
    return lambda x: F.activation(x, "elu", alpha)


@op("Selu")
def selu(view):
    view.only("alpha", "gamma")
    alpha = float(view.attr("alpha", 1.67326319217681884765625))
    gamma = float(view.attr("gamma", 1.05070102214813232421875))

    def run(x):
        neg = F.multiply(F.subtract(F.activation(T.minimum(x, 0.0), "exponential"), 1.0), alpha)
        return F.multiply(F.add(F.activation(x, "relu"), neg), gamma)

    return run


@op("Celu")
def celu(view):
    view.only("alpha")
    alpha = float(view.attr("alpha", 1.0))

    def run(x):
        neg = F.multiply(F.subtract(F.activation(F.divide(T.minimum(x, 0.0), alpha), "exponential"), 1.0), alpha)
        return F.add(F.activation(x, "relu"), neg)

    return run


@op("Gelu")
def gelu(view):
    view.only("approximate")
    approximate = view.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise view.error(f"approximate={approximate!r} is not supported (none, tanh)")
    return lambda x: F.gelu(x, approximate=approximate == "tanh")


@op("HardSigmoid")
def hard_sigmoid(view):
    view.only("alpha", "beta")
    alpha, beta = float(view.attr("alpha", 0.2)), float(view.attr("beta", 0.5))
    return lambda x: F.clip(F.add(F.multiply(x, alpha), beta), 0.0, 1.0)


@op("HardSwish")
def hard_swish(view):
    view.only()
    return lambda x: F.multiply(x, F.clip(F.add(F.multiply(x, 1.0 / 6.0), 0.5), 0.0, 1.0))


@op("Mish")
def mish(view):
    view.only()
    return lambda x: F.multiply(x, F.activation(F.activation(x, "softplus"), "tanh"))


@op("Swish")
def swish(view):
    view.only("alpha")
    alpha = float(view.attr("alpha", 1.0))
    return lambda x: F.multiply(x, F.activation(F.multiply(x, alpha) if alpha != 1.0 else x, "sigmoid"))


@op("ThresholdedRelu")
def thresholded_relu(view):
    view.only("alpha")
    alpha = float(view.attr("alpha", 1.0))
    return lambda x: T.where(T.compare(x, alpha, "greater"), x, 0.0)


@op("Shrink")
def shrink(view):
    view.only("bias", "lambd")
    bias, lambd = float(view.attr("bias", 0.0)), float(view.attr("lambd", 0.5))

    def run(x):
        if not is_float(x):
            raise TypeError("Shrink of integers is not supported")
        return T.where(T.compare(x, -lambd, "less"), F.add(x, bias),
                       T.where(T.compare(x, lambd, "greater"), F.subtract(x, bias), 0.0))

    return run


@op("PRelu", weights=(1,))
def prelu(view):
    def run(x, slope):
        slope = tensor(slope, x)
        return F.add(F.activation(x, "relu"), F.multiply(slope, T.minimum(x, 0.0)))

    return Form(run, keeps_batch=_batch_of_broadcast(view))


@op("Pow")
def power(view):
    def run(a, b):
        if isinstance(b, (np.ndarray, float, int)) and np.ndim(b) == 0 and is_float(a):
            p = float(np.asarray(b))
            if p == 2.0:
                return F.multiply(a, a)
            if p == 1.0:
                return a
            if p == 0.5:
                return T.unary(a, "sqrt")
        if isinstance(a, Tensor) and not is_float(a):  # the base's type: computed in float64, truncated
            ns = a.data.__array_namespace__()
            bb = tensor(b, a).data
            return Tensor._of(ns.astype(ns.pow(ns.astype(a.data, np.float64), ns.astype(bb, np.float64)), a.dtype),
                              a.xp)
        b = tensor(b, a, dtype=a.dtype) if isinstance(a, Tensor) else b
        if isinstance(b, Tensor) and b.dtype != a.dtype:  # an integer exponent: the base's type
            b = T.astype(b, a.dtype)
        return T.pow(a, b)

    return Form(run, keeps_batch=_batch_of_broadcast(view))


_COMPARE = {"Equal": "equal", "Less": "less", "LessOrEqual": "less_equal", "Greater": "greater",
            "GreaterOrEqual": "greater_equal"}


@op(*_COMPARE)
def compare(view):
    kind = _COMPARE[view.node.op_type]

    def run(a, b):
        if isinstance(a, Tensor) and not isinstance(b, Tensor):
            b = tensor(b, a, dtype=a.dtype)
        elif isinstance(b, Tensor) and not isinstance(a, Tensor):
            a = tensor(a, b, dtype=b.dtype)
        return T.compare(a, b, kind)

    return Form(run, keeps_batch=_batch_of_broadcast(view))


_LOGIC = {"And": "logical_and", "Or": "logical_or", "Xor": "logical_xor", "BitwiseAnd": "bitwise_and",
          "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor"}


@op(*_LOGIC)
def logic(view):
    kind = _LOGIC[view.node.op_type]
    return Form(lambda a, b: T.logical(a, b, kind), keeps_batch=_batch_of_broadcast(view))


@op("Not")
def logical_not(view):
    return T.logical_not


@op("BitwiseNot")
def bitwise_not(view):
    def run(x):
        ns = x.data.__array_namespace__()
        return Tensor._of(ns.bitwise_invert(x.data), x.xp)

    return run


@op("IsNaN", "IsInf")
def is_special(view):
    kind = "isnan" if view.node.op_type == "IsNaN" else "isinf"
    positive, negative = int(view.attr("detect_positive", 1)), int(view.attr("detect_negative", 1))

    def run(x):
        ns = x.data.__array_namespace__()
        found = getattr(ns, kind)(x.data)
        if kind == "isinf" and not (positive and negative):
            found = ns.logical_and(found, x.data > 0 if positive else x.data < 0)
        return Tensor._of(found, x.xp)

    return run


@op("Where")
def where(view):
    def run(c, a, b):
        return T.where(c, a, b)

    return Form(run, keeps_batch=_batch_of_broadcast(view))


@op("Clip")
def clip(view):
    view.only("min", "max")
    low_attr, high_attr = view.attr("min"), view.attr("max")

    def run(x, low=None, high=None):
        low = low_attr if low is None else low
        high = high_attr if high is None else high
        if low is not None and not isinstance(low, Tensor) and high is not None and not isinstance(high, Tensor) \
                and is_float(x):
            low, high = float(np.asarray(low)), float(np.asarray(high))
            if low <= high:
                return F.clip(x, low, high)
        y = x
        if low is not None:
            y = T.maximum(y, tensor(low, x, dtype=x.dtype) if not isinstance(low, Tensor) else low)
        if high is not None:
            y = T.minimum(y, tensor(high, x, dtype=x.dtype) if not isinstance(high, Tensor) else high)
        return y

    return run


@op("Max", "Min", "Sum", "Mean")
def variadic(view):
    kind = view.node.op_type

    def run(*xs):
        like = next(x for x in xs if isinstance(x, Tensor))
        xs = [tensor(x, like, dtype=like.dtype) for x in xs]
        y = xs[0]
        for x in xs[1:]:
            y = T.maximum(y, x) if kind == "Max" else T.minimum(y, x) if kind == "Min" else arith(y, x, "add")
        return arith(y, float(len(xs)), "divide") if kind == "Mean" else y

    return Form(run, keeps_batch=_batch_of_broadcast(view))


@op("Mod")
def mod(view):
    fmod = int(view.attr("fmod", 0))

    def run(a, b):
        b = tensor(b, a, dtype=a.dtype)
        if is_float(a) and fmod:  # a - trunc(a / b) * b: differentiable in a and b, as PyTorch's fmod
            return F.subtract(a, F.multiply(T.unary(F.divide(a, b), "trunc"), b))
        if is_float(a):
            return T.remainder(a, b)
        ns = a.data.__array_namespace__()
        if fmod:
            out = a.data - b.data * ns.astype(
                ns.trunc(ns.astype(a.data, np.float64) / ns.astype(b.data, np.float64)), a.dtype)
        else:
            out = ns.remainder(a.data, b.data)
        return Tensor._of(out, a.xp)

    return Form(run, keeps_batch=_batch_of_broadcast(view))


@op("Cast", "CastLike")
def cast(view):
    if view.node.op_type == "Cast":
        view.only("to", "saturate", "round_mode")
        to = ONNX_DTYPES.get(int(view.attr("to")))
        half = to is not None and np.dtype(to) == np.float16
        if to is None or not view.holds(to):
            raise view.error(f"casting to ONNX type {view.attr('to')} is not supported")
    else:
        to, half = None, view.declared_half(1)
    if half:  # float16 computes in float32: the cast rounds to float16's values (see op_graph.FLOAT16)
        return lambda x, like=None: half_rounding(x)

    def run(x, like=None):
        target = to if to is not None else like.dtype
        if isinstance(x, np.ndarray):
            return x.astype(target)
        if np.dtype(target).kind in "iu" and is_float(x):
            ns = x.data.__array_namespace__()
            return Tensor._of(ns.astype(ns.trunc(x.data), target), x.xp)
        return T.astype(x, target)

    return run


@op("Identity")
def identity(view):
    return lambda x: x


@op("Dropout")
def dropout(view):
    view.only("seed", "is_test", "ratio")
    if view.has(2) and (view.const(2) is None or bool(view.const(2).reshape(-1)[0])):
        raise view.error("training_mode=True (or given at run time) is not supported: an imported graph runs "
                         "Dropout as in inference (export the model in eval mode)")

    def run(x, ratio=None, training_mode=None):
        mask = Tensor._of(x.data.__array_namespace__().ones(x.shape, dtype=bool, **_device(x)), x.xp)
        return [x, mask] if len(view.node.output) > 1 else x

    return run


def _device(x):
    return {} if isinstance(x.data, np.ndarray) else {"device": x.data.device}


def _softmax_axis(view, default_new):
    axis = int(view.attr("axis", -1 if view.opset >= 13 else 1))
    return axis


@op("Softmax", "LogSoftmax", "Hardmax")
def softmax(view):
    view.only("axis")
    kind = view.node.op_type
    if view.declared_half(0) and kind != "Hardmax":
        raise view.error("a float16 softmax is not supported: magmadnn computes it in float32 and rounds once, where "
                         "float16 arithmetic rounds each of its steps (cast its input to float32 in the model)")
    axis = _softmax_axis(view, True)
    rank = view.rank(0)
    legacy = view.opset < 13  # the axes from ``axis`` on are flattened into one

    def run(x):
        shape = x.shape
        a = axis % x.ndim
        if legacy:
            flat = math.prod(shape[a:])
            x2 = F.reshape(x, (*shape[:a], flat)) if a < x.ndim - 1 or a == 0 else x
            y = _along(x2, kind, x2.ndim - 1)
            return F.reshape(y, shape) if tuple(y.shape) != tuple(shape) else y
        return _along(x, kind, a)

    keeps = rank is None or (axis % rank != 0)
    return Form(run, keeps_batch=keeps)


def _along(x, kind, axis):
    if kind == "Softmax":
        return F.softmax(x, axis=axis) if x.ndim > 1 else F.reshape(F.softmax(F.reshape(x, (1, -1)), axis=-1), x.shape)
    if kind == "LogSoftmax":
        return F.log_softmax(x, axis=axis) if x.ndim > 1 else F.reshape(
            F.log_softmax(F.reshape(x, (1, -1)), axis=-1), x.shape)
    ns = x.data.__array_namespace__()
    best = ns.argmax(x.data, axis=axis, keepdims=True)
    size = x.shape[axis]
    ids = ns.reshape(ns.arange(size, **_device(x)), tuple(size if i == axis else 1 for i in range(x.ndim)))
    return Tensor._of(ns.astype(ns.equal(ids, best), x.dtype), x.xp)
