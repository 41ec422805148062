"""Planned checks (pymagma.simulator.plans): a call whose signature passed every check once skips the checks on the
null device, yet a call that must be refused is refused after the plan was made exactly as without plans (same
error, status and text) in modes null and full; in mode full plans change no result, bit for bit."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_float, c_int, c_void_p

import numpy as np
import pytest

import pymagma
from pymagma import _cudnn as cd
from pymagma import _magma as M
from pymagma import dnn, simulator
from pymagma.errors import CudnnError, DeviceMemoryError
from pymagma.simulator import magma as sim_magma
from pymagma.simulator import plans
from tests.pymagma.test_magma_args import VALID, build_call

pytestmark = pytest.mark.native


@pytest.fixture(params=["null", "full"])
def sim(request):
    try:
        cd.lib.cdll  # noqa: B018
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cuDNN is not installed: {exc}")
    with simulator.simulated(request.param) as simulation:
        yield simulation


class Conv:
    """A 1x1x4x4 by 1x1x3x3 float32 forward convolution on buffers of exactly their size (``cudaMalloc``)."""

    def __init__(self, sim):
        self.sim, self.runtime = sim, sim.runtime
        self.xd = cd.TensorDescriptor((1, 1, 4, 4), cd.DataType.FLOAT)
        self.wd = cd.FilterDescriptor((1, 1, 3, 3), cd.DataType.FLOAT)
        self.conv = cd.ConvolutionDescriptor((0, 0), (1, 1), (1, 1), cd.DataType.FLOAT)
        self.yd = cd.TensorDescriptor((1, 1, 2, 2), cd.DataType.FLOAT)
        self.x, self.w, self.y = self.malloc(64), self.malloc(36), self.malloc(16)
        self.one, self.zero = c_float(1), c_float(0)
        self.handle = dnn.handle().value

    def malloc(self, nbytes: int) -> int:
        status, ptr = self.runtime.cudaMalloc(nbytes)
        assert int(status) == 0
        return ptr

    def __call__(self, y=None, handle=None, yd=None):
        y = self.y if y is None else y
        cd.call("cudnnConvolutionForward", self.handle if handle is None else handle, byref(self.one), self.xd,
                c_void_p(self.x), self.wd, c_void_p(self.w), self.conv, 0, c_void_p(), 0, byref(self.zero),
                self.yd if yd is None else yd, c_void_p(y or None))


def refusal(call):
    """(error type, cuDNN status, text) of what ``call`` raises (None: it ran)."""
    try:
        call()
    except (CudnnError, DeviceMemoryError) as exc:
        return type(exc), getattr(exc, "status", None), str(exc)
    return None


def refused_as_unplanned(sim, call):
    """``call``'s refusal with plans on, after its good twin was planned (the caller made it), and with plans off:
    the same, and a refusal."""
    planned = refusal(call)
    sim.cudnn.planning = False
    try:
        unplanned = refusal(call)
    finally:
        sim.cudnn.planning = True
    assert planned is not None
    assert planned == unplanned
    return planned


def warm(sim, conv: Conv) -> None:
    conv()
    conv()
    if sim.mode == "null":
        assert sim.cudnn.planner.plans  # the signature is planned


def test_a_planned_call_skips_the_checks_only_on_the_null_device(sim, monkeypatch):
    conv = Conv(sim)
    warm(sim, conv)
    checked = []
    geometry = sim.cudnn._geometry
    monkeypatch.setattr(sim.cudnn, "_geometry", lambda *a: checked.append(a) or geometry(*a))
    conv()
    assert len(checked) == (0 if sim.mode == "null" else 1)
    sim.cudnn.planning = False
    conv()
    assert len(checked) == (1 if sim.mode == "null" else 2)


def test_a_descriptor_set_again_to_a_wrong_shape_is_refused(sim):
    conv = Conv(sim)
    warm(sim, conv)
    cd.call("cudnnSetTensorNdDescriptor", conv.yd, int(cd.DataType.FLOAT), 4, (c_int * 4)(1, 1, 3, 3),
            (c_int * 4)(9, 9, 3, 1))
    _, status, text = refused_as_unplanned(sim, conv)
    assert status == cd.Status.BAD_PARAM and "y has shape (1, 1, 3, 3)" in text


def test_a_destroyed_descriptor_has_no_plan_and_its_successor_is_read_again(sim):
    conv = Conv(sim)
    warm(sim, conv)
    address = conv.yd.value
    assert address in sim.cudnn.planner.versions.of
    conv.yd.destroy()
    assert address not in sim.cudnn.planner.versions.of  # no plan can match a destroyed descriptor
    conv.yd = cd.TensorDescriptor((1, 1, 3, 3), cd.DataType.FLOAT)  # (malloc may hand out the same address)
    _, status, text = refused_as_unplanned(sim, conv)
    assert status == cd.Status.BAD_PARAM and "y has shape (1, 1, 3, 3)" in text


def test_a_buffer_too_small_for_its_descriptor_is_refused(sim):
    conv = Conv(sim)
    warm(sim, conv)
    small = conv.malloc(8)
    kind, _, text = refused_as_unplanned(sim, lambda: conv(y=small))
    assert kind is DeviceMemoryError
    assert "cudnnConvolutionForward y: 16 bytes at offset 0 overrun the simulated allocation of 8 bytes" in text


def test_a_buffer_freed_and_allocated_again_smaller_is_refused(sim):
    conv = Conv(sim)
    warm(sim, conv)
    assert int(sim.runtime.cudaFree(conv.y)[0]) == 0
    conv.y = conv.malloc(12)  # malloc may hand out the same address: the plan's range is checked against it
    kind, _, text = refused_as_unplanned(sim, conv)
    assert kind is DeviceMemoryError and "overrun the simulated allocation of 12 bytes" in text


def test_a_null_pointer_and_a_destroyed_handle_are_refused(sim):
    conv = Conv(sim)
    warm(sim, conv)
    _, status, text = refused_as_unplanned(sim, lambda: conv(y=0))
    assert status == cd.Status.BAD_PARAM_NULL_POINTER and "y is a null pointer" in text
    handle = ctypes.c_void_p()
    cd.call("cudnnCreate", byref(handle))
    conv.handle = handle.value
    warm(sim, conv)
    cd.call("cudnnDestroy", handle)
    _, status, text = refused_as_unplanned(sim, conv)
    assert status == cd.Status.BAD_PARAM and "was not made by cudnnCreate" in text


def _magma_call(overrides=None):
    sig = M.SIGNATURES["magma_sgemm"]
    args, _ = build_call(sig, dict(overrides or {}), VALID)
    return lambda: M.initialized().bind("magma_sgemm")(*args)


def test_a_planned_magma_call_still_rejects_bad_arguments():
    with simulator.simulated("null") as sim:
        _magma_call()()
        _magma_call()()
        assert sim.magma.plans and not sim_magma.take_rejected()
        outcomes = []
        for planning in (True, False):
            sim.magma.planning = planning
            _magma_call({"ldda": 1})()
            outcomes.append([(r.routine, r.arg, r.name, r.value, r.by) for r in sim_magma.take_rejected()])
            with pytest.raises(sim_magma.MagmaCallError, match=r"magma_sgemm\(m\) got float"):
                _magma_call({"m": 4.0})()
        assert outcomes[0] == outcomes[1] == [("magma_sgemm", 8, "ldda", 1, "cublas")]


def _conv_results(sim) -> list[np.ndarray]:
    """Forward, backward-data and backward-filter of a small convolution, batch norm forward and backward, and an
    activation forward and backward, on the simulated device, each run twice."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 6, 6)).astype(np.float32), rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    out = []
    for _ in range(2):
        y = dnn.conv2d_forward(pymagma.asarray(x), pymagma.asarray(w), padding=1)
        dy = pymagma.asarray(rng.standard_normal(y.shape).astype(np.float32))
        out += [y.get(), dnn.conv2d_backward_data(dy, pymagma.asarray(w), x.shape, padding=1).get(),
                dnn.conv2d_backward_filter(pymagma.asarray(x), dy, w.shape, padding=1).get()]
        act = dnn.activation_forward(y, "relu")
        out += [act.get(), dnn.activation_backward(act, dy, y, "relu").get()]
    return out


def test_plans_change_no_result_in_full_mode():
    try:
        cd.lib.cdll  # noqa: B018
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cuDNN is not installed: {exc}")
    results = []
    for planning in (True, False):
        with simulator.simulated("full") as sim:
            sim.cudnn.planning = sim.magma.planning = planning
            results.append(_conv_results(sim))
            a = pymagma.asarray(np.arange(12.0, dtype=np.float32).reshape(3, 4))
            results[-1].append((a @ a.T).get())
    for planned, unplanned in zip(*results):
        np.testing.assert_array_equal(planned, unplanned)


def test_plans_follow_the_environment():
    assert plans.enabled_from_environment({})
    assert plans.enabled_from_environment({plans.ENV_VAR: "1"})
    for off in ("0", "off", " FALSE ", "no"):
        assert not plans.enabled_from_environment({plans.ENV_VAR: off})


def test_plans_are_bounded():
    kept = plans.Plans()
    for i in range(plans.LIMIT + 5):
        kept.remember(i, ())
    assert len(kept) <= plans.LIMIT


def test_a_call_made_inside_a_call_keeps_the_outer_calls_record(sim, monkeypatch):
    """A cuDNN call made while a model runs (a finalizer run by the garbage collector: cudnnDestroy of a handle)
    leaves the outer call's record of its operands intact: the outer call still checks and plans them."""
    conv = Conv(sim)
    inner = ctypes.c_void_p()
    cd.call("cudnnCreate", byref(inner))
    geometry = sim.cudnn._geometry

    def geometry_then_a_nested_call(*args):
        found = geometry(*args)
        cd.call("cudnnDestroy", inner)  # between the descriptor checks and the operands' views
        return found

    monkeypatch.setattr(sim.cudnn, "_geometry", geometry_then_a_nested_call)
    small = conv.malloc(8)
    with pytest.raises(DeviceMemoryError, match="cudnnConvolutionForward y: 16 bytes"):
        conv(y=small)
