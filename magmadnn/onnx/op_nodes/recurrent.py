"""Recurrent operators: RNN, GRU and LSTM in every direction (forward, reverse, bidirectional), both layouts, with
biases, initial states, GRU's linear_before_reset and LSTM's peepholes, all outputs (Y, Y_h, Y_c) as ONNX writes
them; step by step as compositions of differentiable functions, the weights trainable."""

from __future__ import annotations

import numpy as np

from ._registry import Form, op
from ._runtime import F, host, tensor

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _row(p, d, like):
    """p[d] of a (directions, ...) parameter."""
    p = tensor(p, like)
    return F.reshape(F.slice_axis(p, 0, d, d + 1), p.shape[1:])


def _split(z, n, size):
    return [F.slice_axis(z, 1, k * size, (k + 1) * size) for k in range(n)]


def _direction(kind, x, w, r, b, h, c, p, size, backwards, before_reset):
    """One direction over x (T, B, F): every step's hidden state and the final (h, c)."""
    steps, batch = x.shape[0], x.shape[1]
    gates = _GATES[kind]
    proj = F.reshape(F.matmul(F.reshape(x, (steps * batch, x.shape[2])), F.transpose(w)), (steps, batch, -1))
    wb, rb = (None, None) if b is None else (F.slice_axis(b, 0, 0, gates * size),
                                            F.slice_axis(b, 0, gates * size, 2 * gates * size))
    if wb is not None:
        proj = F.add(proj, wb)
    rt = F.transpose(r)
    outs = [None] * steps
    for t in (range(steps - 1, -1, -1) if backwards else range(steps)):
        xt = F.reshape(F.slice_axis(proj, 0, t, t + 1), (batch, -1))
        if kind == "GRU":
            xz, xr, xh = _split(xt, 3, size)
            hz, hr, hh = _split(F.matmul(h, rt) if rb is None else F.add(F.matmul(h, rt), rb), 3, size)
            z, rr = F.sigmoid(F.add(xz, hz)), F.sigmoid(F.add(xr, hr))
            if before_reset:
                cand = F.tanh(F.add(xh, F.multiply(rr, hh)))
            else:
                rh = F.matmul(F.multiply(rr, h), F.slice_axis(rt, 1, 2 * size, 3 * size))
                if rb is not None:
                    rh = F.add(rh, F.slice_axis(rb, 0, 2 * size, 3 * size))
                cand = F.tanh(F.add(xh, rh))
            h = F.add(F.multiply(F.subtract(1.0, z), cand), F.multiply(z, h))
        else:
            zt = F.add(xt, F.matmul(h, rt))
            zt = zt if rb is None else F.add(zt, rb)
            if kind == "RNN":
                h = F.tanh(zt)
            else:
                zi, zo, zf, zc = _split(zt, 4, size)
                if p is not None:
                    pi, po, pf = (F.slice_axis(p, 0, k * size, (k + 1) * size) for k in range(3))
                    zi, zf = F.add(zi, F.multiply(pi, c)), F.add(zf, F.multiply(pf, c))
                c = F.add(F.multiply(F.sigmoid(zf), c), F.multiply(F.sigmoid(zi), F.tanh(zc)))
                zo = zo if p is None else F.add(zo, F.multiply(po, c))
                h = F.multiply(F.sigmoid(zo), F.tanh(c))
        outs[t] = F.reshape(h, (1, 1, batch, size))
    return F.concatenate(outs, axis=0), h, c


def _check_shapes(view, kind, size, directions, layout):
    """The weights' and initial states' shapes the node's hidden_size and direction say, where known at load: a file
    that disagrees (which onnxruntime also rejects) is refused, never run with the wrong sizes."""
    gates = _GATES[kind]
    state = (directions, None, size) if not layout else (None, directions, size)
    wanted = {1: (directions, gates * size, None), 2: (directions, gates * size, size),
              3: (directions, 2 * gates * size), 5: state, 6: state, 7: (directions, 3 * size)}
    for k, want in wanted.items():
        shape = view.shape(k) if view.has(k) else None
        if shape is None:
            continue
        if len(shape) != len(want) or any(a is not None and b is not None and a != b for a, b in zip(shape, want)):
            raise view.error(f"input {k} of shape {tuple(shape)} does not match hidden_size {size} and {directions} "
                             f"direction(s) (expected {tuple('?' if d is None else d for d in want)})")


@op("RNN", "GRU", "LSTM", host=(4,), weights=(1, 2, 3, 7))
def recurrent(view):
    kind = view.node.op_type
    view.only("hidden_size", "direction", "layout", "linear_before_reset", "activations", "input_forget")
    defaults = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind]
    acts = view.attr("activations")
    if acts is not None and [a.lower() for a in acts] != [a.lower() for a in defaults] * (len(acts) // len(defaults)):
        raise view.error(f"activations {acts} are not supported (only the defaults {defaults})")
    if int(view.attr("input_forget", 0)):
        raise view.error("input_forget=1 is not supported")
    size, layout = int(view.attr("hidden_size")), int(view.attr("layout", 0))
    direction = view.attr("direction", "forward")
    before_reset = bool(view.attr("linear_before_reset", 0))
    outputs = len(view.node.output)
    _check_shapes(view, kind, size, 2 if direction == "bidirectional" else 1, layout)

    def run(x, w, r, b=None, lens=None, h0=None, c0=None, p=None):
        if layout:
            x = F.transpose(x, (1, 0, 2))
            h0 = None if h0 is None else F.transpose(tensor(h0, x), (1, 0, 2))
            c0 = None if c0 is None else F.transpose(tensor(c0, x), (1, 0, 2))
        steps, batch = x.shape[0], x.shape[1]
        if lens is not None and np.any(host(lens) != steps):
            raise view.error("sequence_lens shorter than the sequence are not supported")
        n = 2 if direction == "bidirectional" else 1
        zeros = tensor(np.zeros((batch, size), np.dtype(x.dtype)), x)
        ys, hs, cs = [], [], []
        for d in range(n):
            backwards = direction == "reverse" or d == 1
            h = zeros if h0 is None else _row(h0, d, x)
            c = zeros if c0 is None else _row(c0, d, x)
            y, h, c = _direction(kind, x, _row(w, d, x), _row(r, d, x), None if b is None else _row(b, d, x), h, c,
                                 None if p is None else _row(p, d, x), size, backwards, before_reset)
            ys.append(y)
            hs.append(F.reshape(h, (1, batch, size)))
            cs.append(F.reshape(c, (1, batch, size)))
        y = ys[0] if n == 1 else F.concatenate(ys, axis=1)
        yh = hs[0] if n == 1 else F.concatenate(hs, axis=0)
        yc = cs[0] if n == 1 else F.concatenate(cs, axis=0)
        if layout:
            y, yh, yc = F.transpose(y, (2, 0, 1, 3)), F.transpose(yh, (1, 0, 2)), F.transpose(yc, (1, 0, 2))
        made = (y, yh, yc)[:outputs]
        return made if outputs > 1 else made[0]

    keeps = [True, bool(layout), bool(layout)][:outputs]
    return Form(run, keeps_batch=keeps if outputs > 1 else True)
