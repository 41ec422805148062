"""The gradient cases of ``test_op_nodes_gradients.py`` beyond its own: one ONNX node per registered differentiable
operator with PyTorch's same computation, and the operators that are not differentiable, with the reason.

A case is ``(operator, attributes, graph inputs [(name, array)], constants {name: array} (initializers, in input
order after the graph inputs), PyTorch's function of the graph inputs[, options])``; options: ``order`` (the node's
inputs by name, "" for an absent one), ``outputs`` (how many; the float ones are compared, joined), ``opset``,
``tol`` ((rtol, atol) for cases leaving float64).
"""

from __future__ import annotations

import numpy as np
import torch

tF = torch.nn.functional
RNG = np.random.default_rng(2)

#: operator -> why it has no gradient case
NOT_DIFFERENTIABLE = {
    **{op: "a comparison: a bool result" for op in ("Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual")},
    **{op: "logic on bool or integer tensors" for op in ("And", "Or", "Xor", "Not", "BitwiseAnd", "BitwiseOr",
                                                         "BitwiseXor", "BitwiseNot")},
    **{op: "piecewise constant: its gradient is zero almost everywhere" for op in ("Ceil", "Floor", "Round",
                                                                                     "Sign", "Hardmax")},
    **{op: "an integer result (indices)" for op in ("ArgMax", "ArgMin")},
    **{op: "a bool result" for op in ("IsNaN", "IsInf")},
    **{op: "its result is a shape or size, not a function of the values" for op in ("Shape", "Size")},
    **{op: "its values do not depend on a float input (only on shapes or integer arguments)" for op in (
        "ConstantOfShape", "EyeLike", "Range")},
}


#: ONNX's attributes are float32: its defaults as PyTorch must see them
_EPS = float(np.float32(1e-5))
_F32_ALPHA, _F32_GAMMA = float(np.float32(1.67326319217681884765625)), float(np.float32(1.05070102214813232421875))


def _r(*shape):
    return RNG.standard_normal(shape)


def _dilated_average(x):
    """A 2x2 average pool with dilations (2, 1) and a row of padding at each end, not counting the padding."""
    n, c, h, w = x.shape
    window = {"kernel_size": (2, 2), "dilation": (2, 1), "padding": (1, 0)}
    total = tF.unfold(x, **window).view(n, c, 4, -1).sum(2)
    count = tF.unfold(torch.ones(1, 1, h, w, dtype=x.dtype), **window).sum(1)
    return (total / count).view(n, c, h, w - 1)


def _u(*shape, low=-0.9, high=0.9):
    return RNG.uniform(low, high, shape)


def _unary(op, fn, x=None, options=None, **attrs):
    return (op, attrs, [("X", _r(3, 4) if x is None else x)], {}, fn, options or {})


_I64 = np.int64
MORE_CASES = {
    "abs": _unary("Abs", torch.abs),
    "acos": _unary("Acos", torch.acos, _u(3, 4)),
    "acosh": _unary("Acosh", torch.acosh, _u(3, 4, low=1.2, high=3.0)),
    "asin": _unary("Asin", torch.asin, _u(3, 4)),
    "asinh": _unary("Asinh", torch.asinh),
    "atan": _unary("Atan", torch.atan),
    "atanh": _unary("Atanh", torch.atanh, _u(3, 4)),
    "cos": _unary("Cos", torch.cos),
    "cosh": _unary("Cosh", torch.cosh),
    "erf": _unary("Erf", torch.erf),
    "exp": _unary("Exp", torch.exp),
    "log": _unary("Log", torch.log, _u(3, 4, low=0.2, high=3.0)),
    "neg": _unary("Neg", torch.neg),
    "reciprocal": _unary("Reciprocal", torch.reciprocal, _u(3, 4, low=0.5, high=2.0)),
    "sin": _unary("Sin", torch.sin),
    "sinh": _unary("Sinh", torch.sinh),
    "sqrt": _unary("Sqrt", torch.sqrt, _u(3, 4, low=0.2, high=3.0)),
    "tan": _unary("Tan", torch.tan, _u(3, 4)),
    "tanh": _unary("Tanh", torch.tanh),
    "sigmoid": _unary("Sigmoid", torch.sigmoid),
    "relu": _unary("Relu", torch.relu),
    "softplus": _unary("Softplus", tF.softplus),
    "softsign": _unary("Softsign", tF.softsign),
    "leaky_relu": _unary("LeakyRelu", lambda x: tF.leaky_relu(x, 0.25), alpha=0.25),
    "elu": _unary("Elu", lambda x: tF.elu(x, 0.75), alpha=0.75),
    "selu": _unary("Selu", lambda x: _F32_GAMMA * torch.where(x > 0, x, _F32_ALPHA * torch.expm1(x))),
    "celu": _unary("Celu", lambda x: tF.celu(x, 1.5), alpha=1.5),
    "gelu": _unary("Gelu", tF.gelu),
    "gelu_tanh": _unary("Gelu", lambda x: tF.gelu(x, approximate="tanh"), approximate="tanh"),
    "hard_sigmoid": _unary("HardSigmoid", lambda x: torch.clamp(x * 0.25 + 0.375, 0, 1), alpha=0.25,
                           beta=0.375),
    "hard_swish": _unary("HardSwish", tF.hardswish),
    "mish": _unary("Mish", tF.mish),
    "thresholded_relu": _unary("ThresholdedRelu", lambda x: tF.threshold(x, 0.25, 0.0), alpha=0.25),
    "shrink": _unary("Shrink", lambda x: tF.softshrink(x, 0.375), bias=0.375, lambd=0.375),
    "identity": _unary("Identity", lambda x: x),
    "dropout_inference": _unary("Dropout", lambda x: x),
    "softmax": ("Softmax", {"axis": 1}, [("X", _r(2, 3, 4))], {}, lambda x: torch.softmax(x, 1)),
    "log_softmax": ("LogSoftmax", {"axis": -1}, [("X", _r(2, 3, 4))], {}, lambda x: torch.log_softmax(x, -1)),
    "lp_normalization": ("LpNormalization", {"axis": -1, "p": 2}, [("X", _r(3, 4))], {},
                         lambda x: x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)),
    "cast": ("Cast", {"to": 1}, [("X", _r(3, 4))], {}, lambda x: x.float(), {"tol": (1e-6, 1e-6)}),
    "cast_like": ("CastLike", {}, [("X", _r(3, 4))], {"L": np.zeros(1, np.float32)}, lambda x: x.float(),
                  {"tol": (1e-6, 1e-6)}),
    "prelu": ("PRelu", {}, [("X", _r(2, 3, 4)), ("S", _r(3, 1))], {}, lambda x, s: torch.where(x > 0, x, s * x)),
    "clip": ("Clip", {}, [("X", _r(3, 4))], {"lo": np.array(-0.5), "hi": np.array(0.6)},
             lambda x: torch.clamp(x, -0.5, 0.6)),
    "add": ("Add", {}, [("A", _r(2, 3, 4)), ("B", _r(3, 1))], {}, torch.add),
    "sub": ("Sub", {}, [("A", _r(2, 3, 4)), ("B", _r(4))], {}, torch.sub),
    "mul": ("Mul", {}, [("A", _r(2, 3, 4)), ("B", _r(1, 4))], {}, torch.mul),
    "div": ("Div", {}, [("A", _r(2, 3)), ("B", _u(2, 3, low=0.5, high=2.0))], {}, torch.div),
    "pow": ("Pow", {}, [("A", _u(2, 3, low=0.3, high=2.0)), ("B", _r(2, 3))], {}, torch.pow),
    "mod_fmod": ("Mod", {"fmod": 1}, [("A", _r(3, 4) * 3), ("B", _u(3, 4, low=0.5, high=1.5))], {}, torch.fmod),
    "max": ("Max", {}, [("A", _r(3, 4)), ("B", _r(3, 4)), ("C", _r(4))], {},
            lambda a, b, c: torch.maximum(torch.maximum(a, b), c)),
    "min": ("Min", {}, [("A", _r(3, 4)), ("B", _r(3, 4))], {}, torch.minimum),
    "sum": ("Sum", {}, [("A", _r(3, 4)), ("B", _r(3, 4)), ("C", _r(1, 4))], {}, lambda a, b, c: a + b + c),
    "mean": ("Mean", {}, [("A", _r(3, 4)), ("B", _r(3, 4))], {}, lambda a, b: (a + b) / 2),
    "where": ("Where", {}, [("A", _r(3, 4)), ("B", _r(3, 4))], {"C": RNG.random((3, 4)) > 0.5},
              lambda a, b: torch.where(torch.tensor(MORE_CASES["where"][3]["C"]), a, b),
              {"order": ["C", "A", "B"]}),
    "matmul": ("MatMul", {}, [("A", _r(2, 3, 4)), ("B", _r(4, 5))], {}, torch.matmul),
    "gemm": ("Gemm", {"transB": 1, "alpha": 0.5, "beta": 2.0}, [("A", _r(3, 4)), ("B", _r(5, 4)), ("C", _r(5))], {},
             lambda a, b, c: 0.5 * a @ b.T + 2.0 * c),
    "einsum": ("Einsum", {"equation": "bij,bjk->bik"}, [("A", _r(2, 3, 4)), ("B", _r(2, 4, 5))], {},
               lambda a, b: torch.einsum("bij,bjk->bik", a, b)),
    "conv": ("Conv", {"pads": [1, 0, 1, 0], "strides": [1, 2], "group": 2}, [("X", _r(2, 4, 5, 6)),
                                                                           ("W", _r(6, 2, 3, 3)), ("B", _r(6))], {},
             lambda x, w, b: tF.conv2d(tF.pad(x, (0, 0, 1, 1)), w, b, stride=(1, 2), groups=2)),
    "conv1d": ("Conv", {"pads": [1, 1]}, [("X", _r(2, 3, 7)), ("W", _r(4, 3, 3))], {},
               lambda x, w: tF.conv1d(x, w, padding=1)),
    "conv_transpose": ("ConvTranspose", {"strides": [2, 2]}, [("X", _r(2, 3, 4, 4)), ("W", _r(3, 2, 3, 3)),
                                                              ("B", _r(2))], {},
                       lambda x, w, b: tF.conv_transpose2d(x, w, b, stride=2)),
    "max_pool": ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}, [("X", _r(2, 3, 4, 6))], {},
                 lambda x: tF.max_pool2d(x, 2)),
    "average_pool": ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1,
                                     "ceil_mode": 1, "strides": [2, 2]}, [("X", _r(2, 3, 6, 5))], {},
                     lambda x: tF.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True)),
    "max_pool_dilated": ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 1]},
                         [("X", _r(2, 3, 5, 6))], {}, lambda x: tF.max_pool2d(x, 2, 1, 1, dilation=2)),
    "average_pool_dilated": ("AveragePool", {"kernel_shape": [2, 2], "dilations": [2, 1], "pads": [1, 0, 1, 0]},
                             [("X", _r(2, 3, 5, 6))], {}, lambda x: _dilated_average(x)),
    "lp_pool": ("LpPool", {"kernel_shape": [2, 2], "strides": [2, 2], "p": 3}, [("X", _r(2, 3, 4, 6))], {},
                lambda x: (tF.avg_pool2d(x.abs() ** 3, 2) * 4) ** (1 / 3)),
    "conv_transpose_groups_output_shape": (
        "ConvTranspose", {"strides": [2, 2], "group": 2, "output_shape": [8, 10]},
        [("X", _r(2, 4, 4, 4)), ("W", _r(4, 3, 3, 3)), ("B", _r(6))], {},
        lambda x, w, b: tF.pad(tF.conv_transpose2d(x, w, stride=2, groups=2)[:, :, 1:], (0, 1)) + b.view(1, -1, 1, 1)),
    "conv_transpose_same": ("ConvTranspose", {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
                            [("X", _r(2, 3, 4, 4)), ("W", _r(3, 2, 3, 3))], {},
                            lambda x, w: tF.conv_transpose2d(x, w, stride=2)[:, :, :8, :8]),
    "einsum_ellipsis": ("Einsum", {"equation": "...ij,...jk->...ik"}, [("A", _r(2, 3, 4, 5)), ("B", _r(2, 3, 5, 2))],
                        {}, lambda a, b: torch.einsum("...ij,...jk->...ik", a, b)),
    "grid_sample": ("GridSample", {"padding_mode": "zeros"}, [("X", _r(2, 3, 4, 5)), ("G", 1.2 * _r(2, 3, 2, 2))], {},
                    lambda x, g: tF.grid_sample(x, g, align_corners=False), {"opset": 20}),
    "grid_sample_reflection": ("GridSample", {"padding_mode": "reflection", "align_corners": 1},
                               [("X", _r(2, 3, 4, 5)), ("G", 1.2 * _r(2, 3, 2, 2))], {},
                               lambda x, g: tF.grid_sample(x, g, padding_mode="reflection", align_corners=True),
                               {"opset": 20}),
    "affine_grid": ("AffineGrid", {"align_corners": 0}, [("T", _r(2, 2, 3))], {"S": np.array([2, 3, 4, 5])},
                    lambda t: tF.affine_grid(t, [2, 3, 4, 5], align_corners=False), {"opset": 20}),
    "global_average_pool": ("GlobalAveragePool", {}, [("X", _r(2, 3, 4, 5))], {},
                            lambda x: x.mean(dim=(2, 3), keepdim=True)),
    "global_max_pool": ("GlobalMaxPool", {}, [("X", _r(2, 3, 4, 5))], {}, lambda x: x.amax(dim=(2, 3), keepdim=True)),
    "batch_norm": ("BatchNormalization", {"epsilon": 2.0 ** -10}, [("X", _r(2, 3, 4, 5)), ("S", _r(3)), ("B", _r(3))],
                   {"M": _r(3), "V": _u(3, low=0.5, high=2.0)},
                   lambda x, s, b: tF.batch_norm(x, torch.tensor(MORE_CASES["batch_norm"][3]["M"]),
                                                 torch.tensor(MORE_CASES["batch_norm"][3]["V"]), s, b, eps=2.0 ** -10)),
    "instance_norm": ("InstanceNormalization", {}, [("X", _r(2, 3, 4, 5)), ("S", _r(3)), ("B", _r(3))], {},
                      lambda x, s, b: tF.instance_norm(x, weight=s, bias=b, eps=_EPS)),
    "group_norm": ("GroupNormalization", {"num_groups": 2}, [("X", _r(2, 4, 3, 5)), ("S", _r(4)), ("B", _r(4))], {},
                   lambda x, s, b: tF.group_norm(x, 2, s, b, eps=_EPS)),
    "rms_norm": ("RMSNormalization", {"axis": -1}, [("X", _r(2, 3, 4)), ("S", _r(4))], {},
                 lambda x, s: tF.rms_norm(x, (4,), s, eps=_EPS)),
    "concat": ("Concat", {"axis": 1}, [("A", _r(2, 3)), ("B", _r(2, 4))], {}, lambda a, b: torch.cat([a, b], 1)),
    "split": ("Split", {"axis": 1}, [("X", _r(2, 5))], {"S": np.array([2, 3], _I64)},
              lambda x: torch.cat([p.reshape(-1) for p in torch.split(x, [2, 3], 1)]), {"outputs": 2}),
    "flatten": ("Flatten", {"axis": 2}, [("X", _r(2, 3, 4))], {}, lambda x: x.reshape(6, 4)),
    "reshape": ("Reshape", {}, [("X", _r(2, 3, 4))], {"S": np.array([0, -1], _I64)}, lambda x: x.reshape(2, 12)),
    "transpose": ("Transpose", {"perm": [2, 0, 1]}, [("X", _r(2, 3, 4))], {}, lambda x: x.permute(2, 0, 1)),
    "squeeze": ("Squeeze", {}, [("X", _r(2, 1, 4))], {"A": np.array([1], _I64)}, lambda x: x.squeeze(1)),
    "unsqueeze": ("Unsqueeze", {}, [("X", _r(2, 4))], {"A": np.array([0, 3], _I64)},
                  lambda x: x.unsqueeze(0).unsqueeze(3)),
    "expand": ("Expand", {}, [("X", _r(3, 1))], {"S": np.array([2, 3, 4], _I64)}, lambda x: x.expand(2, 3, 4)),
    "tile": ("Tile", {}, [("X", _r(2, 3))], {"R": np.array([2, 3], _I64)}, lambda x: x.repeat(2, 3)),
    "slice": ("Slice", {}, [("X", _r(4, 6))], {"s": np.array([1, 5], _I64), "e": np.array([4, 0], _I64),
                                               "a": np.array([0, 1], _I64), "t": np.array([2, -2], _I64)},
              lambda x: x[1:4:2][:, [5, 3, 1]]),
    "gather": ("Gather", {"axis": 1}, [("X", _r(3, 4))], {"I": np.array([[0, 3], [3, -1]], _I64)},
               lambda x: x[:, [[0, 3], [3, 3]]]),
    "gather_elements": ("GatherElements", {"axis": 1}, [("X", _r(3, 4))], {"I": np.array([[0, 3], [1, 1], [2, 0]],
                                                                                          _I64)},
                        lambda x: torch.gather(x, 1, torch.tensor([[0, 3], [1, 1], [2, 0]]))),
    "pad_constant": ("Pad", {"mode": "constant"}, [("X", _r(2, 3)), ("V", _r(1))],
                     {"P": np.array([1, 0, 2, 1], _I64)},
                     lambda x, v: torch.cat([torch.cat([v.expand(1, 3), x, v.expand(2, 3)], 0),
                                             v.expand(5, 1)], 1), {"order": ["X", "P", "V"]}),
    "pad_reflect": ("Pad", {"mode": "reflect"}, [("X", _r(2, 3, 5))], {"P": np.array([0, 0, 2, 0, 0, 1], _I64)},
                    lambda x: tF.pad(x, (2, 1), mode="reflect")),
    "pad_edge": ("Pad", {"mode": "edge"}, [("X", _r(1, 2, 3, 4))], {"P": np.array([0, 0, 1, 2, 0, 0, 1, 1], _I64)},
                 lambda x: tF.pad(x, (2, 1, 1, 1), mode="replicate")),
    "space_to_depth": ("SpaceToDepth", {"blocksize": 2}, [("X", _r(2, 3, 4, 6))], {},
                       lambda x: x.reshape(2, 3, 2, 2, 3, 2).permute(0, 3, 5, 1, 2, 4).reshape(2, 12, 2, 3)),
    "upsample": ("Upsample", {"mode": "nearest"}, [("X", _r(1, 2, 3, 4))], {"S": np.array([1, 1, 2, 3], np.float32)},
                 lambda x: tF.interpolate(x, scale_factor=(2, 3), mode="nearest"), {"opset": 9}),
    "trilu": ("Trilu", {"upper": 0}, [("X", _r(2, 4, 5))], {"k": np.array(1, _I64)}, lambda x: torch.tril(x, 1)),
    "cumsum": ("CumSum", {"exclusive": 1, "reverse": 1}, [("X", _r(3, 4))], {"A": np.array(1, _I64)},
               lambda x: x.flip(1).cumsum(1).flip(1) - x),
    "one_hot": ("OneHot", {"axis": 0}, [("V", _r(2))], {"I": np.array([0, 2, -1], _I64), "D": np.array(4, _I64)},
                lambda v: v[0] + (v[1] - v[0]) * tF.one_hot(torch.tensor([0, 2, 3]), 4).T.double(),
                {"order": ["I", "D", "V"]}),
    "topk": ("TopK", {"axis": 1}, [("X", _r(3, 5))], {"K": np.array([2], _I64)},
             lambda x: torch.topk(x, 2, 1).values, {"outputs": 2}),
    **{f"reduce_{op[6:].lower()}": (op, {"keepdims": 0}, [("X", x)], {"A": np.array([1], _I64)}, fn)
       for op, x, fn in (
        ("ReduceSum", _r(2, 3, 4), lambda x: x.sum(1)), ("ReduceMean", _r(2, 3, 4), lambda x: x.mean(1)),
        ("ReduceMax", _r(2, 3, 4), lambda x: x.amax(1)), ("ReduceMin", _r(2, 3, 4), lambda x: x.amin(1)),
        ("ReduceProd", _r(2, 3, 4), lambda x: x.prod(1)), ("ReduceL1", _r(2, 3, 4), lambda x: x.abs().sum(1)),
        ("ReduceL2", _r(2, 3, 4), lambda x: x.square().sum(1).sqrt()),
        ("ReduceLogSum", _u(2, 3, 4, low=0.2, high=2.0), lambda x: x.sum(1).log()),
        ("ReduceLogSumExp", _r(2, 3, 4), lambda x: x.logsumexp(1)),
        ("ReduceSumSquare", _r(2, 3, 4), lambda x: x.square().sum(1)))},
}


def _rnn_case():
    torch.manual_seed(1)
    module = torch.nn.RNN(3, 4, bidirectional=True).double()
    p = {n: t.detach().numpy() for n, t in module.named_parameters()}
    w = np.stack([p["weight_ih_l0"], p["weight_ih_l0_reverse"]])
    r = np.stack([p["weight_hh_l0"], p["weight_hh_l0_reverse"]])
    b = np.stack([np.concatenate([p["bias_ih_l0"], p["bias_hh_l0"]]),
                  np.concatenate([p["bias_ih_l0_reverse"], p["bias_hh_l0_reverse"]])])

    def reference(x):  # ONNX's Y (T, 2, B, H) from PyTorch's (T, B, 2H)
        y = module(x)[0]
        return y.reshape(y.shape[0], y.shape[1], 2, 4).permute(0, 2, 1, 3)

    return ("RNN", {"hidden_size": 4, "direction": "bidirectional"}, [("X", _r(5, 2, 3))], {"W": w, "R": r, "B": b},
            reference)


MORE_CASES["rnn_bidirectional"] = _rnn_case()
