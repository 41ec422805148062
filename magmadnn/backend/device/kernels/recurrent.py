"""Launchers of recurrent.cu: the gates of one LSTM or GRU time step, forward and backward."""

from __future__ import annotations

from ctypes import c_int, c_longlong

from pymagma.kernels import programs
from pymagma.kernels.common import _device_array, _float_dtype, _ptr, _run, _same

# One launch per time step of an LSTM/GRU, one thread per (batch row, unit); recurrent.cu says the layouts. The
# state buffers are written in place; the caller runs the recurrent gemm of each step between the launches.

def _check_recurrent(what: str, step: int, x_shape, arrays: dict):
    """``x_shape`` = (N, T, G u); each named array must be a C-contiguous DeviceArray of the shape given with it,
    all of one float dtype and device; ``step`` in [0, T). Returns the dtype name."""
    items = [(name, a, shape) for name, (a, shape) in arrays.items() if a is not None]
    dtype = _float_dtype(items[0][1], what)
    _same([a for _, a, _ in items], what)
    for name, a, shape in items:
        if tuple(a.shape) != tuple(shape) or not a.is_c_contiguous:
            raise ValueError(f"{what}: {name} must be a C-contiguous array of shape {tuple(shape)}, got "
                             f"{tuple(a.shape)}{'' if a.is_c_contiguous else ' (strided)'}")
    if not 0 <= step < x_shape[1]:
        raise ValueError(f"{what}: step {step} is outside the sequence of {x_shape[1]} steps")
    return dtype


def _recurrent_geometry(x_proj, gates: int, what: str):
    if _device_array(x_proj, what).ndim != 3 or x_proj.shape[2] % gates:
        raise ValueError(f"{what}: x_proj must be (N, T, {gates} units), got shape {tuple(x_proj.shape)}")
    n, steps, width = (int(d) for d in x_proj.shape)
    return n, steps, width // gates


def lstm_gates_forward(x_proj, rec, cs, hs, gates, y, step: int) -> None:
    """LSTM step ``step``: gates of x_proj[:, step] + rec (N, 4u) into ``gates`` (T, N, 4u), cell and hidden state
    step + 1 into ``cs``/``hs`` (T + 1, N, u), and h into ``y`` (N, T, u) unless y is None."""
    n, steps, u = _recurrent_geometry(x_proj, 4, "lstm_gates_forward")
    dtype = _check_recurrent("lstm_gates_forward", step, x_proj.shape, {
        "x_proj": (x_proj, x_proj.shape), "rec": (rec, (n, 4 * u)), "cs": (cs, (steps + 1, n, u)),
        "hs": (hs, (steps + 1, n, u)), "gates": (gates, (steps, n, 4 * u)), "y": (y, (n, steps, u))})
    _run("recurrent", programs.expression("lstm_gates_forward", dtype), x_proj, n * u,
         [_ptr(x_proj), _ptr(rec), _ptr(cs), _ptr(hs), _ptr(gates), _ptr(y), c_longlong(n), c_longlong(steps),
          c_longlong(u), c_longlong(step), c_int(int(y is not None))])


def lstm_gates_backward(dy, dh, dc, gates, cs, dgates, dx_proj, step: int) -> None:
    """LSTM backward step ``step``: from dh (N, u, the recurrent part), dy ((N, T, u), or (N, u) for the last
    step only) and the carried cell gradient dc (N, u, updated in place), the gate gradients into ``dgates``
    (T, N, 4u) and ``dx_proj`` (N, T, 4u)."""
    n, steps, u = _recurrent_geometry(dx_proj, 4, "lstm_gates_backward")
    dy_seq = getattr(dy, "ndim", 0) == 3
    dtype = _check_recurrent("lstm_gates_backward", step, dx_proj.shape, {
        "dy": (dy, (n, steps, u) if dy_seq else (n, u)), "dh": (dh, (n, u)), "dc": (dc, (n, u)),
        "gates": (gates, (steps, n, 4 * u)), "cs": (cs, (steps + 1, n, u)), "dgates": (dgates, (steps, n, 4 * u)),
        "dx_proj": (dx_proj, dx_proj.shape)})
    _run("recurrent", programs.expression("lstm_gates_backward", dtype), dx_proj, n * u,
         [_ptr(dy), _ptr(dh), _ptr(dc), _ptr(gates), _ptr(cs), _ptr(dgates), _ptr(dx_proj), c_longlong(n),
          c_longlong(steps), c_longlong(u), c_longlong(step), c_int(int(dy_seq))])


def gru_gates_forward(x_proj, rec, bias, hs, gates, qn, y, step: int) -> None:
    """GRU step ``step``: from x_proj[:, step] and rec = h U (N, 3u) plus ``bias`` (3u,), the gates r, z, n into
    ``gates`` (T, N, 3u), q_n into ``qn`` (T, N, u), state step + 1 into ``hs`` and h into ``y`` unless None."""
    n, steps, u = _recurrent_geometry(x_proj, 3, "gru_gates_forward")
    dtype = _check_recurrent("gru_gates_forward", step, x_proj.shape, {
        "x_proj": (x_proj, x_proj.shape), "rec": (rec, (n, 3 * u)), "bias": (bias, (3 * u,)),
        "hs": (hs, (steps + 1, n, u)), "gates": (gates, (steps, n, 3 * u)), "qn": (qn, (steps, n, u)),
        "y": (y, (n, steps, u))})
    _run("recurrent", programs.expression("gru_gates_forward", dtype), x_proj, n * u,
         [_ptr(x_proj), _ptr(rec), _ptr(bias), _ptr(hs), _ptr(gates), _ptr(qn), _ptr(y), c_longlong(n),
          c_longlong(steps), c_longlong(u), c_longlong(step), c_int(int(y is not None))])


def gru_gates_backward(dy, dh, gates, qn, hs, dq, dx_proj, step: int) -> None:
    """GRU backward step ``step``: from dh (N, u, in place: replaced by its direct part z dh) and dy, the gate
    gradients into ``dx_proj`` (N, T, 3u) and the recurrent product's into ``dq`` (T, N, 3u)."""
    n, steps, u = _recurrent_geometry(dx_proj, 3, "gru_gates_backward")
    dy_seq = getattr(dy, "ndim", 0) == 3
    dtype = _check_recurrent("gru_gates_backward", step, dx_proj.shape, {
        "dy": (dy, (n, steps, u) if dy_seq else (n, u)), "dh": (dh, (n, u)), "gates": (gates, (steps, n, 3 * u)),
        "qn": (qn, (steps, n, u)), "hs": (hs, (steps + 1, n, u)), "dq": (dq, (steps, n, 3 * u)),
        "dx_proj": (dx_proj, dx_proj.shape)})
    _run("recurrent", programs.expression("gru_gates_backward", dtype), dx_proj, n * u,
         [_ptr(dy), _ptr(dh), _ptr(gates), _ptr(qn), _ptr(hs), _ptr(dq), _ptr(dx_proj), c_longlong(n),
          c_longlong(steps), c_longlong(u), c_longlong(step), c_int(int(dy_seq))])
