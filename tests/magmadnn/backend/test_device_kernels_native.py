"""The device backend's own kernel programs (magmadnn/backend/device/kernels/) compiled with the real NVRTC on the
CPU (no device needed), and each launcher's arguments against the parameters of the kernel it launches (as
tests/pymagma/test_kernels_native.py does for pymagma's programs)."""

from __future__ import annotations

import importlib
import re

import numpy as np
import pytest

from magmadnn.backend.device import kernels
from pymagma.kernels import compiler, programs
from tests.pymagma.helpers import BF16
from tests.pymagma.test_kernels_native import (  # noqa: F401  (fresh_cache: each test its own empty caches)
    capture_launches,
    fake_array,
    fresh_cache,
    launch_parameters,
    ptx_parameters,
)

pytestmark = pytest.mark.native


@pytest.fixture(scope="module")
def every_program(tmp_path_factory):
    """``every_program(arch, kind)``: every program of the backend compiled with NVRTC (once per target for the
    module, into the module's own disk cache, ``every_program.cache``; the memory cache is left as it was)."""
    done, cache = {}, tmp_path_factory.mktemp("every_program")

    def compiled(arch: str, kind: str) -> dict:
        if (arch, kind) not in done:
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("PYMAGMA_CACHE", str(cache))
                before = compiler.stats["compiles"]
                done[arch, kind] = {name: p.compile(arch, kind) for name, p in kernels.PROGRAMS.items()}
                assert compiler.stats["compiles"] - before == len(kernels.PROGRAMS)  # NVRTC ran, no cache hit
        return done[arch, kind]

    compiled.cache = cache
    return compiled


def test_the_backend_registers_its_programs_with_pymagma(every_program, monkeypatch):
    """One registry: each program is pymagma's registered Program of its own .cu file in this package's folder,
    compiled through pymagma's caches (read from the module's disk cache: the compiles are the test below's)."""
    from pymagma import kernels as pymagma_kernels

    compiled = every_program("sm_80", "ptx")
    monkeypatch.setenv("PYMAGMA_CACHE", str(every_program.cache))
    assert set(kernels.PROGRAMS) == set(kernels.SHIPPED)
    for name, (filename, expressions) in kernels.SHIPPED.items():
        program = pymagma_kernels.program(name)
        assert program is kernels.PROGRAMS[name]
        assert program.source == (kernels.KERNELS_DIR / filename).read_text()
        assert program.expressions == expressions and program.include_dirs[0] == kernels.KERNELS_DIR
        via_pymagma = pymagma_kernels.compile_program(name, "sm_80", "ptx")
        assert via_pymagma is program.compile("sm_80", "ptx")
        assert via_pymagma.image == compiled[name].image and via_pymagma.lowered == compiled[name].lowered


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ptx", "cubin"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_program_compiles_with_every_instantiation(arch, kind, every_program):
    """One NVRTC call per program holds all of its dtype instantiations; every one must be in the image."""
    compiled = every_program(arch, kind)
    for name, registered in kernels.PROGRAMS.items():
        program = compiled[name]
        assert set(program.lowered) == set(registered.expressions)
        if kind == "ptx":
            text = program.image.decode()
            assert re.search(rf"\.target\s+sm_{arch.split('_')[1]}\b", text)
            assert set(re.findall(r"\.entry\s+(\S+?)\s*\(", text)) >= set(program.lowered.values())
        else:
            assert program.image[:4] == b"\x7fELF"
            for symbol in program.lowered.values():
                assert symbol.encode() in program.image


def test_every_float_dtype_is_instantiated_for_every_float_kernel():
    for name, registered in kernels.PROGRAMS.items():
        for kernel in {e.split("<")[0] for e in registered.expressions}:
            for dtype in programs.FLOAT_DTYPES:
                assert programs.expression(kernel, dtype) in registered.expressions, (name, kernel, dtype)


def test_argument_errors_are_typed_and_explicit():
    x = fake_array((2, 3), np.float32)
    with pytest.raises(ValueError, match="velocity"):
        kernels.sgd_update(x, x, lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="shape"):
        kernels.adam_update(x, x, x, fake_array((3, 2), np.float32), step=1, lr=0.1)
    with pytest.raises(ValueError, match="step"):
        kernels.adam_update(x, x, x, x, step=0, lr=0.1)
    with pytest.raises(ValueError, match="2-D"):
        kernels.softmax_cross_entropy(fake_array((2, 3, 4), np.float32), fake_array((2,), np.int64))
    with pytest.raises(ValueError, match="labels must have shape"):
        kernels.softmax_cross_entropy(x, fake_array((3,), np.int64))


def test_adam_passes_the_op_sets_bias_corrections(monkeypatch):
    """The Adam launcher's bias corrections are ``ops.optim.adam_bias_corrections``' values, bit for bit."""
    from magmadnn.backend.ops.optim import adam_bias_corrections

    launches = []
    monkeypatch.setattr(kernels.optim, "_run", lambda program, expression, like, n, args, grid=None:
                        launches.append(args))
    x = fake_array((4,), np.float32)
    for step, beta1, beta2 in ((1, 0.9, 0.999), (7, 0.8, 0.95), (10**6, 0.9, 0.999)):
        kernels.adam_update(x, x, x, x, step=step, lr=0.1, beta1=beta1, beta2=beta2)
        assert (launches[-1][-2].value, launches[-1][-1].value) == adam_bias_corrections(beta1, beta2, step)


def test_launch_arguments_match_the_compiled_kernel_parameters(monkeypatch, every_program):
    """What each launcher passes to cuLaunchKernel, in order, has the size and kind (floating or not) of the
    parameters of the kernel it launches: a missing, extra or swapped argument fails here, without a GPU."""

    launches = []
    capture_launches(monkeypatch, launches, [importlib.import_module(name) for name in [
        *(f"{kernels.__name__}.{n}" for n in kernels.PROGRAMS), "pymagma.kernels.elementwise",
        "pymagma.kernels.reductions"]])  # pymagma's own (a mean, a copy) are checked by its own test
    for dtype in (np.float32, np.float64, np.float16) + ((BF16,) if BF16 is not None else ()):
        _launch_every_kernel(dtype)
    launches = [launch for launch in launches if launch[0] in kernels.PROGRAMS]
    launched = {expression.split("<")[0] for _, expression, _ in launches}
    assert launched == {e.split("<")[0] for p in kernels.PROGRAMS.values() for e in p.expressions}
    for program, expression, args in launches:
        compiled = every_program("sm_80", "ptx")[program]
        assert launch_parameters(args) == ptx_parameters(compiled, expression), expression


def _launch_every_kernel(dtype) -> None:
    x, row = fake_array((4, 3), dtype), fake_array((3,), dtype)
    kernels.softmax_cross_entropy(x, fake_array((4,), np.int64))
    kernels.softmax_cross_entropy(x, x, reduction="none")
    kernels.sgd_update(x, x, x, lr=0.1, momentum=0.9, nesterov=True)
    kernels.adam_update(x, x, x, x, step=2, lr=0.1)
    kernels.rmsprop_update(x, x, x, lr=0.1)
    kernels.adagrad_update(x, x, x, lr=0.1)
    kernels.softmax_cross_entropy_backward(x, fake_array((4,), np.int64), fake_array((4,), dtype))
    kernels.softmax_cross_entropy_backward(x, x, fake_array((4,), dtype))
    kernels.dropout(x, 0.5, seed=1)
    kernels.max_pool2d(fake_array((2, 3, 4, 4), dtype), (2, 2), (2, 2), ((1, 0), (0, 1)))
    kernels.pad2d(fake_array((2, 3, 4, 4), dtype), (0, 1, 2, 0))
    kernels.max_pool2d_backward(fake_array((2, 3, 2, 2), dtype), fake_array((2, 3, 2, 2), np.int32), (2, 3, 4, 4),
                                (2, 2), (2, 2))
    # attention
    scores = fake_array((2, 2, 3, 4), dtype)
    kernels.masked_softmax(scores, fake_array((2, 4), dtype), 0.5, causal=True)
    kernels.masked_softmax_backward(scores, scores, 0.5)
    # norm.cu, embeddings.cu
    kernels.layer_norm(x, row, row, eps=1e-5)
    kernels.layer_norm_backward(x, x, row, fake_array((4,), dtype), fake_array((4,), dtype), rms=True)
    kernels.layer_norm_param_grads(x, x, fake_array((4,), dtype), fake_array((4,), dtype))
    kernels.embedding(x, fake_array((2, 5), np.int64))
    kernels.embedding_backward(fake_array((2, 5, 3), dtype), fake_array((2, 5), np.int64), 7)
    # graph replay: per-step values read from device memory
    values, offsets = fake_array((3,), np.float64), fake_array((4,), np.int64)
    kernels.sgd_update_at(x, x, x, values=values, momentum=0.9, nesterov=True)
    kernels.adam_update_at(x, x, x, x, values=values)
    kernels.rmsprop_update_at(x, x, x, values=values)
    kernels.adagrad_update_at(x, x, x, values=values)
    kernels.dropout_at(x, 0.5, seed=1, offsets=offsets, slot=3)
    # fewer launches: multi-tensor updates (eager and replayed), epilogues, the mean loss, fused norm and attention
    for at in ({"lr": 0.1}, {"values": values}):
        kernels.sgd_update_many([x, row], [x, row], [x, row], momentum=0.9, nesterov=True, **at)
        kernels.adam_update_many([x, row], [x, row], [x, row], [x, row], step=2, **at)
        kernels.rmsprop_update_many([x, row], [x, row], [x, row], **at)
        kernels.adagrad_update_many([x, row], [x, row], [x, row], **at)
    kernels.bias_activation(x, row, "gelu")
    kernels.bias_activation_backward(x, x, x, "elu", 1.0)
    labels = fake_array((4,), np.int64)
    kernels.softmax_cross_entropy_mean(x, labels)
    kernels.softmax_cross_entropy_mean(x, x)
    kernels.softmax_cross_entropy_backward(x, labels, fake_array((), dtype), mean=True)
    kernels.softmax_cross_entropy_backward(x, x, fake_array((), dtype), mean=True)
    kernels.softmax_cross_entropy_backward(x, labels, None, mean=True)
    packed = fake_array((4, 4), dtype)  # Keras' cross entropies of probabilities: targets, then each row's weight
    kernels.keras_prob_xent(x, packed, True, 0.1, 1e-7, 0.25)
    kernels.keras_prob_xent_backward(x, packed, fake_array((), dtype), False, 0.0, 1e-7, 0.25)
    kernels.keras_prob_xent_backward(x, packed, None, True, 0.0, 1e-7, 0.25)
    kernels.layer_norm_backward_params(x, x, row, fake_array((4,), dtype), fake_array((4,), dtype))
    heads = fake_array((2, 3, 4), dtype)
    _, p = kernels.attention_heads(heads, heads, heads, 2, fake_array((2, 3), dtype), 0.5, causal=True)
    kernels.attention_heads_backward(heads, heads, heads, heads, fake_array((2, 2, 3, 3), dtype), 2, 0.5)

    # -- recurrent gates: N=2, T=3, u=4
    seq, state, last = fake_array((2, 3, 4), dtype), fake_array((4, 2, 4), dtype), fake_array((2, 4), dtype)
    kernels.lstm_gates_forward(fake_array((2, 3, 16), dtype), fake_array((2, 16), dtype), state, state,
                               fake_array((3, 2, 16), dtype), seq, 1)
    kernels.lstm_gates_backward(last, last, last, fake_array((3, 2, 16), dtype), state, fake_array((3, 2, 16), dtype),
                                fake_array((2, 3, 16), dtype), 2)
    kernels.gru_gates_forward(fake_array((2, 3, 12), dtype), fake_array((2, 12), dtype), fake_array((12,), dtype),
                              state, fake_array((3, 2, 12), dtype), fake_array((3, 2, 4), dtype), None, 0)
    kernels.gru_gates_backward(seq, last, fake_array((3, 2, 12), dtype), fake_array((3, 2, 4), dtype), state,
                               fake_array((3, 2, 12), dtype), fake_array((2, 3, 12), dtype), 1)


def test_a_multi_tensor_table_holds_each_tensors_buffers_and_first_index():
    """The ``*_many`` launches' table (filled a column at once): slot s of tensor t is the pointer of column s's
    entry t (NULL for an unused state, whole or in part), ``start`` the running element counts."""
    from magmadnn.backend.device.kernels import optim
    from pymagma.array import DeviceArray

    sizes = (3, 5, 7)
    columns = [[DeviceArray((n,), np.float32, 4096 * (10 * s + t + 1)) for t, n in enumerate(sizes)]
               for s in range(3)]
    for states in (columns[2], None, [columns[2][0], None, columns[2][2]]):
        ((dtype, like, total, table, at),) = optim._many_groups("test", (columns[0], columns[1], states), None)
        assert (dtype, like, total, at, table.count) == ("float32", columns[0][0], 15, None, 3)
        assert list(table.start[:4]) == [0, 3, 8, 15]
        for s, column in enumerate((columns[0], columns[1], states or [None] * 3, [None] * 3)):
            assert [table.a[s][t] for t in range(3)] == [None if a is None else a.ptr for a in column]
        assert all(table.a[s][t] is None for s in range(4) for t in range(3, optim.MANY))
    many = [DeviceArray((2,), np.float32, 4096 * (i + 1)) for i in range(optim.MANY + 2)]  # two launches
    first, second = optim._many_groups("test", (many, many, None), None)
    assert (first[3].count, second[3].count, second[1]) == (optim.MANY, 2, many[optim.MANY])
    assert list(second[3].start[:3]) == [0, 2, 4] and second[3].a[0][1] == many[-1].ptr
