#!/usr/bin/env python3
"""A mutation check of our own conventions: does the simulator catch the bugs a reviewer would most likely miss?

Each mutant below is one plausible convention bug in the binding (``pymagma/``) or the device backend
(``magmadnn/backend/device/``): an argument in the wrong role or order, alpha and beta swapped, a momentum factor
taken the wrong way round, saved statistics swapped, pivots in the wrong base, a leading dimension, transpose flag,
stride, descriptor or launch size that is wrong, a free made where it must wait, queued work run out of order.  It
is an exact source snippet (``old``, which must occur exactly once in its file: a stale or ambiguous mutant is
refused before anything runs) and its replacement (``new``), with
the simulator tests that should catch it (``tests``: pytest arguments, files and a ``-k`` expression, which applies
to every file of the selection).

For each mutant the repository's ``pymagma``, ``magmadnn``, ``tests`` and ``pyproject.toml`` are copied to a
temporary directory, the mutation is applied there, and pytest runs the mutant's tests in that copy (``-x``, a fixed
hypothesis seed, ``MAGMADNN_REQUIRE=native`` so that a skipped native test fails rather than passes vacuously, a
time limit per mutant).  The working tree is never modified, even when the script is killed.  Every distinct test
selection first runs unmutated ("the baseline must pass").

The table gives each mutant's first failing test ("caught by") or SURVIVED.  Exit status 1 when the baseline fails or
a mutant survives, times out or breaks the import (a mutant must be a valid program that computes the wrong thing);
2 for a stale mutant or a bad option.  Too slow for ``scripts/test.sh`` (minutes): run it with the project's
virtual environment before resolving a change to the conventions or the simulator::

    .venv/bin/python scripts/mutation_check.py [--jobs 2] [--only ID[,ID]] [--list] [--json PATH]

A mutant that survives is a gap: add a simulator test, against an independent NumPy reference, that catches it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: What each temporary copy holds: the packages, the tests and the pytest configuration.
COPIED = ("pymagma", "magmadnn", "tests", "pyproject.toml")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache")
PYTEST_OPTIONS = ("-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-rfE", "--hypothesis-seed=0")

# ------------------------------------------------------------------------------------------------ test selections
SIM_DEVICE = ("tests/pymagma/suites/test_simulated_device.py",)
ARRAYS = ("tests/pymagma/suites/test_simulated_device.py", "tests/pymagma/test_array.py")
HYBRID = ("tests/pymagma/test_hybrid.py", "tests/pymagma/suites/test_simulated_device.py")
CUDNN = ("tests/pymagma/simulator/test_cudnn.py",)
KERNELS = ("tests/pymagma/test_kernels_emulated.py",)
DEVICE_KERNELS = ("tests/magmadnn/backend/test_device_kernels_emulated.py",)  # the device backend's own programs
FUSED = ("tests/magmadnn/backend/test_device_kernels_emulated.py", "-k", "multi_tensor or bias_activation or "
         "mean_softmax or parameters_equals or interleaved_heads")  # the fused kernels (fewer launches per step)
KERAS_XENT = ("tests/magmadnn/test_losses_fused_device.py",)  # Keras' cross entropy of probabilities, fused
MANY_PLANS = ("tests/magmadnn/backend/test_optim_many_plans.py",)  # the multi-tensor updates' plans
UNWRAPPED = ("tests/magmadnn/backend/test_device_ops_unwrapped.py",)  # the device ops without a wrapper frame
OPTIMIZER_STEPS = ("tests/magmadnn/test_optimizers.py", "-k", "later_steps or own_is_used")  # a column at a time
STEP_PLANS = ("tests/magmadnn/test_optimizers_plans.py",)  # the optimizers' step plans against unplanned steps
LOSS_PLANS = ("tests/magmadnn/test_loss_plans.py",)  # a training batch's planned loss against the checked path
KERNEL_INPUTS = ("tests/magmadnn/backend/test_device_kernels_inputs.py",)  # the device kernels' argument checks
ARRAY_API_REDUCE = ("tests/pymagma/test_kernels_emulated.py", "-k",
                    "stable_nans_last or sum_prod_min_max or nans_anywhere")
HALF_GEMM = ("tests/pymagma/test_cublas_half_gemm.py",)
PLANNED_GEMM = ("tests/pymagma/test_blas_planned.py",)  # gemm's plans against the checked call and NumPy
PLANNED_MATMUL = ("tests/pymagma/test_blas_planned_matmul.py",)  # a framework's planned matmul, the same
EPILOGUE_PLANS = ("tests/magmadnn/backend/test_kernels_epilogue_plans.py",)  # the epilogue's planned launches
LINEAR_PLANS = ("tests/magmadnn/backend/test_linear_planned.py",)  # the device's linear ops on their plans
BIND = ("tests/pymagma/simulator/test_magma_bind.py",)  # a library's bind: C-level hits, refusals every time
PLANNED_LAUNCHES = ("tests/magmadnn/backend/test_reductions_planned.py",  # the planned launches of reductions,
                    "tests/magmadnn/backend/test_elementwise_planned.py",  # binaries and the channel bias
                    "tests/magmadnn/backend/test_linear_planned.py")
BIAS_PLANS = ("tests/pymagma/test_kernels_planned_bias_add.py",)  # the channel bias' planned launches
#: the caching pool: its statistics, threads, closed pools and the inline copy of its hit path
MEMORY = ("tests/pymagma/test_memory_pool.py", "tests/pymagma/suites/test_hot_paths.py",
          "tests/pymagma/test_graphs.py")
PLANS = ("tests/pymagma/test_dnn_plans.py",)  # the planned cuDNN calls against dnn's and the references
FORWARD = ("tests/magmadnn/models/test_forward.py",)  # the model's forward calling layers' plans directly
PLAN_APPLY = ("tests/magmadnn/layers/test_plans.py", "-k", "inline")  # a layer plan's inline Function.apply
STEP_SHORTCUTS = ("tests/magmadnn/models/test_step_shortcuts.py",)  # the training step's own shortcuts
LAYER_CALL = ("tests/magmadnn/layers/test_base.py", "-k", "repeated_call")  # a built layer's repeated call
POOLING = ("tests/magmadnn/backend/test_pooling.py", "-k", "device")  # the op set's pooling on the simulated device
#: the device backend's cuDNN ops finding their plans in one look-up (geometry by identity, arrays by value)
DEVICE_PLANS = ("tests/magmadnn/backend/test_device_cudnn_plans.py",)
#: the device backend's cuDNN calls made in the op's own frame, and its kept pooling and padding launches
INLINE_CUDNN = ("tests/magmadnn/backend/test_device_cudnn_inline.py",)
#: answers kept by the identity of their arguments (the device convolution's and pooling's geometry)
SAME_OBJECTS = ("tests/pymagma/suites/test_bad_inputs.py", "tests/magmadnn/backend/test_conv.py", "-k",
                "same_objects or (device and (in_place or equal_geometries))")
STREAMS = ("tests/pymagma/simulator/test_streams.py",)  # the simulator's queued work when host code runs inside it
STREAM_ORDER = ("tests/pymagma/test_simulator.py", "-k", "created_stream_runs_when_something_orders_it")
#: frees held back to a safe point (a finalizer's, a capturing thread's) and the simulator's held frees
DEFERRED = ("tests/pymagma/test_graphs.py", "tests/pymagma/simulator/test_streams.py")
PAD2D = ("tests/magmadnn/backend/test_device_kernels_emulated.py", "-k", "pad2d")
ARRAY_API_LINALG = ("tests/pymagma/array_api/test_linalg.py",)
FFT = ("tests/pymagma/test_fft.py", "tests/pymagma/simulator/test_cufft.py")
#: the device parity cases and the op set's conformance tests (one file per topic of backend/ops/), on the device
#: a host array's upload in one frame (pymagma.asarray): its bytes, its error paths, its refusal during a capture
UPLOAD = ("tests/pymagma/test_array_upload.py",)
BACKEND = ("tests/magmadnn/backend/test_device.py", "tests/magmadnn/backend/test_ops.py",
           *(f"tests/magmadnn/backend/test_{p.stem}.py" for p in sorted(ROOT.glob("magmadnn/backend/ops/[!_]*.py"))
             if (ROOT / "tests/magmadnn/backend" / f"test_{p.stem}.py").exists()),
           "-k", "device")


@dataclass(frozen=True)
class Mutant:
    id: str
    what: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTANTS = [
    # the framework ops' planned launches (reductions, binaries, the channel bias, a reduction's gradient): a kept
    # launch found by the call's layouts; what the key does not hold checked per call
    Mutant("reduction-plan-skips-axis-type", "a planned reduction takes a float axis equal to a planned int one",
           "pymagma/kernels/reductions.py",
           "axis is None or type(axis) is int or type(axis) is tuple and set(map(type, axis)) <= ints):",
           "True):", PLANNED_LAUNCHES),
    Mutant("reduction-plan-skips-array-type", "a planned reduction launches a host array of a planned layout",
           "pymagma/kernels/reductions.py",
           "        if a.__class__ is device_array and type(keepdims) is bool and (",
           "        if type(keepdims) is bool and (", PLANNED_LAUNCHES),
    Mutant("channel-sum-plan-skips-array-type", "a planned channel sum launches a host array of a planned layout",
           "pymagma/kernels/reductions.py",
           "        if a.__class__ is device_array:\n            plan = plans.get(",
           "        if True:\n            plan = plans.get(", PLANNED_LAUNCHES),
    Mutant("bias-add-op-skips-bias-layout", "the device's planned bias_add reads a strided bias as contiguous",
           "pymagma/kernels/elementwise.py", "x.device == b.device and x.is_c_contiguous and b.is_c_contiguous:",
           "x.device == b.device and x.is_c_contiguous:", PLANNED_LAUNCHES),
    Mutant("bias-add-op-skips-dtype", "the device's planned bias_add adds a bias of another dtype",
           "pymagma/kernels/elementwise.py",
           "if x.__class__ is device_array and b.__class__ is device_array and x.dtype is b.dtype and \\",
           "if x.__class__ is device_array and b.__class__ is device_array and \\", PLANNED_LAUNCHES),
    Mutant("binary-op-skips-devices", "a planned binary reads an operand from another device",
           "pymagma/kernels/elementwise.py", "a.dtype is b.dtype and \\\n                a.device == b.device:",
           "a.dtype is b.dtype:", PLANNED_LAUNCHES),
    Mutant("binary-op-skips-dtype", "a planned binary reads a 0-d operand of another dtype",
           "pymagma/kernels/elementwise.py", "a.dtype is b.dtype and \\\n                a.device == b.device:",
           "a.device == b.device:", PLANNED_LAUNCHES),
    Mutant("binary-plan-skips-devices", "pymagma's planned binary reads an operand from another device",
           "pymagma/kernels/elementwise.py", "a.dtype is b.dtype and \\\n            a.device == b.device:",
           "a.dtype is b.dtype:", PLANNED_LAUNCHES),
    Mutant("broadcast-divide-op-skips-array-type", "a planned broadcast_divide launches a host array",
           "pymagma/kernels/elementwise.py",
           "        if a.__class__ is device_array:\n            try:\n                plan = launches",
           "        if True:\n            try:\n                plan = launches",
           PLANNED_LAUNCHES),
    # --------------------------------------------------------------------- row-major BLAS on column-major MAGMA
    Mutant("gemm-operands-unswapped", "gemm passes A then B even when the plan computes C^T = B^T A^T",
           "pymagma/blas.py",
           "first, second = (b.ptr, a.ptr) if swapped else (a.ptr, b.ptr)",
           "first, second = a.ptr, b.ptr", SIM_DEVICE),
    Mutant("gemm-swapped-flags-crossed", "C^T = B^T A^T: transA taken from A's layout, transB from B's",
           "pymagma/_blas_plans.py",
           "return GemmCall(N if bt else T, N if at else T, n, m, k, sb, sa, sc, swapped=True)",
           "return GemmCall(N if at else T, N if bt else T, n, m, k, sb, sa, sc, swapped=True)", SIM_DEVICE),
    Mutant("gemm-colmajor-out-flags", "column-major C: a transposed-stored operand gets NoTrans, a plain one Trans",
           "pymagma/_blas_plans.py",
           "return GemmCall(T if at else N, T if bt else N, m, n, k, sa, sb, sc)",
           "return GemmCall(N if at else T, N if bt else T, m, n, k, sa, sb, sc)", SIM_DEVICE),
    Mutant("gemm-alpha-beta-swapped", "gemm passes beta where alpha goes and alpha where beta goes",
           "pymagma/blas.py",
           "alpha_p, first, lda, second, ldb, beta_p,",
           "beta_p, first, lda, second, ldb, alpha_p,", SIM_DEVICE),
    Mutant("gemm-lda-is-rows", "gemm's lda is the stored matrix's row count, not its leading dimension",
           "pymagma/blas.py",
           "c.A.ld, c.B.ld, c.C.ld, c.swapped,",
           "c.A.rows, c.B.ld, c.C.ld, c.swapped,", SIM_DEVICE),
    Mutant("gemm-ldc-is-rows", "gemm's ldc is the output's row count, not its leading dimension",
           "pymagma/blas.py",
           "c.A.ld, c.B.ld, c.C.ld, c.swapped,",
           "c.A.ld, c.B.ld, c.C.rows, c.swapped,", SIM_DEVICE),
    # the planned gemm: a plan answers only for the layouts, flags, scalar types and device count it was made for
    Mutant("gemm-plan-key-ignores-strides", "a gemm plan keyed by the operands' shapes only (a transposed view of the "
           "same shape reuses a contiguous operand's plan)", "pymagma/blas.py",
           "key = (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype,",
           "key = (a.shape, a.shape, a.dtype, b.shape, b.shape, b.dtype,", PLANNED_GEMM),
    Mutant("gemm-plan-key-ignores-flags", "a gemm plan keyed without the transpose flags", "pymagma/blas.py",
           "b.dtype, trans_a, trans_b, alpha, alpha.__class__,",
           "b.dtype, False, False, alpha, alpha.__class__,", PLANNED_GEMM),
    Mutant("gemm-plan-key-ignores-scalar-types", "a gemm plan keyed by alpha's and beta's values only (True reuses "
           "the plan of 1.0)", "pymagma/blas.py",
           "alpha, alpha.__class__,\n               beta, beta.__class__, None",
           "alpha, float,\n               beta, float, None", PLANNED_GEMM),
    Mutant("gemm-plan-key-ignores-out-layout", "a gemm plan into out keyed by out's shape only (a transposed out "
           "reuses a contiguous one's plan)", "pymagma/blas.py",
           "None if out is None else (out.shape, out.strides, out.dtype))",
           "None if out is None else (out.shape, out.shape, out.dtype))", PLANNED_GEMM),
    Mutant("gemm-plan-ignores-devices", "a planned gemm runs with several devices without making the operands' "
           "device current", "pymagma/blas.py",
           'libraries.__dict__.get("device_count") == 1 and',
           'libraries.__dict__.get("device_count") in (1, 2) and', PLANNED_GEMM),
    # a framework's planned matmul (blas.planned_matmul): gemm's plan run in the op's frame
    Mutant("matmul-plan-key-ignores-strides", "a planned matmul keyed by the operands' shapes only (a transposed "
           "view of the same shape reuses a contiguous operand's plan)", "pymagma/_blas_matmul.py",
           "signature = (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype,",
           "signature = (a.shape, a.shape, a.dtype, b.shape, b.shape, b.dtype,", PLANNED_MATMUL),
    Mutant("matmul-plan-key-ignores-flags", "a planned matmul keyed without the transpose flags",
           "pymagma/_blas_matmul.py",
           "b.strides, b.dtype, transpose_a, transpose_b)", "b.strides, b.dtype, False, False)", PLANNED_MATMUL),
    Mutant("matmul-plan-any-layout", "a planned matmul plans operands the framework copies first (strided views)",
           "pymagma/_blas_matmul.py", "a.dtype is b.dtype and _plain(a) and _plain(b):", "a.dtype is b.dtype:",
           PLANNED_MATMUL),
    Mutant("matmul-plan-skips-dtypes", "a planned matmul computes mixed dtypes instead of the framework's error",
           "pymagma/_blas_matmul.py", "a.dtype is b.dtype and _plain(a) and _plain(b):", "_plain(a) and _plain(b):",
           PLANNED_MATMUL),
    Mutant("matmul-plan-flags-crossed", "a planned matmul's first call gives transpose_b to A and transpose_a to B",
           "pymagma/_blas_matmul.py",
           "trans_a=bool(transpose_a),\n                                      trans_b=bool(transpose_b)",
           "trans_a=bool(transpose_b),\n                                      trans_b=bool(transpose_a)",
           PLANNED_MATMUL),
    Mutant("matmul-plan-ignores-device-count", "a planned matmul runs with several devices without making the "
           "operands' device current", "pymagma/_blas_matmul.py", 'if 1 == libraries.__dict__.get("device_count") and',
           'if libraries.__dict__.get("device_count") in (1, 2) and', PLANNED_MATMUL),
    Mutant("matmul-plan-ignores-devices", "a planned matmul multiplies operands that live on two devices",
           "pymagma/_blas_matmul.py", "elif a.device == b.device:", "elif True:", PLANNED_MATMUL),
    Mutant("matmul-plan-operands-unswapped", "a planned matmul passes A then B where the plan computes "
           "C^T = B^T A^T", "pymagma/_blas_matmul.py", "x, y = (b.ptr, a.ptr) if swapped else (a.ptr, b.ptr)",
           "x, y = a.ptr, b.ptr", PLANNED_MATMUL),
    Mutant("matmul-plan-tf32-never-set", "a planned matmul leaves the queue's math mode as it was",
           "pymagma/_blas_matmul.py", "if tf32 and bool(blas.allow_tf32) != queue.tf32:",
           "if tf32 and bool(blas.allow_tf32) != queue.tf32 and False:", PLANNED_MATMUL),
    Mutant("batched-stride-b-is-a", "strided batched gemm: B's batch stride given as A's",
           "pymagma/blas.py",
           "c.B.ptr + first * sb * size, c.B.ld, sb,",
           "c.B.ptr + first * sb * size, c.B.ld, sa,", SIM_DEVICE),
    Mutant("batched-beta-one", "pointer-array batched gemm accumulates into the output (beta 1 instead of beta)",
           "pymagma/blas.py",
           "scalar(beta, p), arrays[2].ptr, c.C.ld, count, q)",
           "scalar(1.0, p), arrays[2].ptr, c.C.ld, count, q)", SIM_DEVICE),
    Mutant("gemv-trans-flag", "gemv: NoTrans for a transposed-stored matrix and Trans for a plain one",
           "pymagma/_blas_plans.py",
           "return GemvCall(T if at else N, sa.rows, sa.cols,",
           "return GemvCall(N if at else T, sa.rows, sa.cols,", SIM_DEVICE),
    Mutant("gemv-incx-one", "gemv passes incx = 1 whatever x's element stride",
           "pymagma/blas.py",
           "c.A.ptr, c.A.ld, c.x, c.incx,",
           "c.A.ptr, c.A.ld, c.x, 1,", SIM_DEVICE),
    Mutant("trsm-uplo-ignores-layout", "trsm: uplo not flipped when A is stored transposed",
           "pymagma/_blas_plans.py",
           "uplo = LOWER if lower != at else UPPER",
           "uplo = LOWER if lower else UPPER", SIM_DEVICE),
    Mutant("trsm-side-ignores-layout", "trsm: side not flipped when B is stored transposed",
           "pymagma/_blas_plans.py",
           "side = LEFT if left != bt else RIGHT",
           "side = LEFT if left else RIGHT", SIM_DEVICE),
    Mutant("trsm-diag-inverted", "trsm: MagmaUnit for a non-unit diagonal and MagmaNonUnit for a unit one",
           "pymagma/_blas_plans.py",
           "_magma.MagmaUnit if unit else _magma.MagmaNonUnit",
           "_magma.MagmaNonUnit if unit else _magma.MagmaUnit", SIM_DEVICE),
    Mutant("syrk-uplo-ignores-layout", "syrk: uplo not flipped when C is stored transposed",
           "pymagma/_blas_plans.py",
           "return SyrkCall(LOWER if lower != ct else UPPER,",
           "return SyrkCall(LOWER if lower else UPPER,", SIM_DEVICE),
    # ------------------------------------------------------------------------------------ the column-major face
    Mutant("colmajor-transpose-dims", "column-major copy: magmablas transpose given m x n for the n x m source",
           "pymagma/_colmajor.py",
           'transpose")(n, m, src.ptr, n, work.ptr, m, a.queue.handle)',
           'transpose")(m, n, src.ptr, m, work.ptr, n, a.queue.handle)', HYBRID),
    Mutant("colmajor-gemm-k", "column-major gemm: k read from the wrong dimension of op(A)",
           "pymagma/_colmajor.py",
           "k = a.shape[1] if ta == N else a.shape[0]",
           "k = a.shape[0] if ta == N else a.shape[1]", HYBRID),
    Mutant("herk-upper", "herk_lower updates the upper triangle",
           "pymagma/_colmajor.py",
           "LOWER, N, n, k, scalar(alpha, p, cplx)",
           "UPPER, N, n, k, scalar(alpha, p, cplx)", HYBRID),
    Mutant("diagonal-stride", "zero_strict_triangle saves the first row (stride lda) instead of the diagonal",
           "pymagma/_colmajor.py",
           'getattr(lib, f"magma_{p}copy")(n, w.ptr, lda + 1, diag.ptr, 1, q)',
           'getattr(lib, f"magma_{p}copy")(n, w.ptr, lda, diag.ptr, 1, q)', SIM_DEVICE),
    # ------------------------------------------------------------------------------------------------- LAPACK
    Mutant("getrf-pivots-1-based", "lu_factor returns MAGMA's 1-based pivots (SciPy's are 0-based)",
           "pymagma/linalg/lu.py",
           "piv = np.stack([p for _, p in results]).reshape(*batch, -1) - 1",
           "piv = np.stack([p for _, p in results]).reshape(*batch, -1)", SIM_DEVICE),
    Mutant("getrf-batched-pivots-1-based", "getrf_batched's 1-based pivots returned as they are",
           "pymagma/linalg/lu.py",
           "piv = (ipiv.get()[:, :k] - 1).astype(np.int32)",
           "piv = ipiv.get()[:, :k].astype(np.int32)", SIM_DEVICE),
    Mutant("laswp-k1-0-based", "laswp called with 0-based k1, k2 (LAPACK counts rows from 1)",
           "pymagma/linalg/_common.py",
           "(k, b.ptr, k, 1, n, ipiv, 1, b.queue.handle)",
           "(k, b.ptr, k, 0, n - 1, ipiv, 1, b.queue.handle)", SIM_DEVICE),
    Mutant("lu-solve-pivots-0-based", "lu_solve hands SciPy's 0-based pivots to laswp, which wants 1-based",
           "pymagma/linalg/lu.py",
           "xs = [_solve_lu_device(_matrix(dlu, idx, batch), _matrix(piv, idx, batch, core=1) + 1,",
           "xs = [_solve_lu_device(_matrix(dlu, idx, batch), _matrix(piv, idx, batch, core=1),", SIM_DEVICE),
    Mutant("lu-solve-l-nonunit", "lu_solve's forward substitution uses L's stored diagonal (U's) instead of ones",
           "pymagma/linalg/_common.py",
           'blas.trsm(lu, x, side="left", lower=True, unit_diagonal=True)',
           'blas.trsm(lu, x, side="left", lower=True, unit_diagonal=False)', SIM_DEVICE),
    Mutant("lu-solve-batched-u-first", "batched lu_solve solves with U before L",
           "pymagma/linalg/_common.py",
           "for lower, unit in ((True, True), (False, False)):",
           "for lower, unit in ((False, False), (True, True)):", SIM_DEVICE),
    Mutant("potrf-upper", "cholesky asks potrf for the upper factor",
           "pymagma/linalg/cholesky.py",
           'getattr(magma(), f"magma_{p}potrf_gpu")(_magma.MagmaLower,',
           'getattr(magma(), f"magma_{p}potrf_gpu")(_magma.MagmaUpper,', SIM_DEVICE),
    Mutant("potrs-upper", "cho_solve tells potrs the factor is upper",
           "pymagma/linalg/cholesky.py",
           'getattr(magma(), f"magma_{p}potrs_gpu")(_magma.MagmaLower,',
           'getattr(magma(), f"magma_{p}potrs_gpu")(_magma.MagmaUpper,', SIM_DEVICE),
    Mutant("getrf-without-sync", "lu_factor calls getrf_gpu (on MAGMA's own queues) before our queue's copy is done",
           "pymagma/linalg/_common.py",
           "        _sync(w)\n        p = blas.precision(w)\n        getattr(magma(), f\"magma_{p}getrf_gpu\")",
           "        p = blas.precision(w)\n        getattr(magma(), f\"magma_{p}getrf_gpu\")", SIM_DEVICE),
    # ------------------------------------------------------------------------------------------ hybrid drivers
    Mutant("hybrid-potrf-panel-notrans", "hybrid Cholesky solves the panel with L_jj^{-1} instead of L_jj^{-H}",
           "pymagma/hybrid/_cholesky.py",
           "trsm(RIGHT, LOWER, C, 1.0, diag, panel, queue=main)",
           "trsm(RIGHT, LOWER, N, 1.0, diag, panel, queue=main)", HYBRID),
    Mutant("hybrid-potrf-unfinished-copy", "hybrid Cholesky factors a diagonal block before its copy to the host ends",
           "pymagma/hybrid/_cholesky.py",
           "                ready.synchronize()\n                with on_host():\n                    factor, info",
           "                with on_host():\n                    factor, info", HYBRID),
    Mutant("hybrid-potrs-second-notrans", "hybrid potrs solves L x = y twice instead of L^H x = y",
           "pymagma/hybrid/_cholesky.py",
           "trsm(LEFT, LOWER, C, 1.0, factor, b)",
           "trsm(LEFT, LOWER, N, 1.0, factor, b)", HYBRID),
    Mutant("reflector-trmm-conj-inverted", "block reflector applies T where T^H is asked and T^H where T is",
           "pymagma/hybrid/_reflectors.py",
           "trmm(LEFT, UPPER, C if conj else N, 1.0, t, work, queue=queue)",
           "trmm(LEFT, UPPER, N if conj else C, 1.0, t, work, queue=queue)", HYBRID),
    # -------------------------------------------------------------------------------------------------- cuDNN
    Mutant("conv-descriptor-stride-first", "cudnnSetConvolution2dDescriptor given the stride before the padding",
           "pymagma/_cudnn.py",
           "self, *padding, *stride, *dilation, int(mode), int(compute))",
           "self, *stride, *padding, *dilation, int(mode), int(compute))", CUDNN),
    Mutant("pool-descriptor-stride-first", "cudnnSetPooling2dDescriptor given the stride before the padding",
           "pymagma/_cudnn.py",
           "int(mode), int(nan), *window, *padding, *stride)",
           "int(mode), int(nan), *window, *stride, *padding)", CUDNN),
    Mutant("conv-bwd-filter-x-dy-swapped", "backward filter passes dy's data where x goes and x's where dy goes",
           "pymagma/dnn.py",
           '"backward_filter": (x, y, w)}[kind]',
           '"backward_filter": (y, x, w)}[kind]', CUDNN),
    Mutant("conv-bwd-data-descriptors", "backward data passes the dx descriptor where dy's goes, and dy's for dx",
           "pymagma/dnn.py",
           '"backward_data": (w, y, conv, x)',
           '"backward_data": (w, x, conv, y)', CUDNN),
    Mutant("pool-bwd-x-y-swapped", "cudnnPoolingBackward gets x where y goes and y where x goes",
           "pymagma/dnn.py",
           "byref(alpha), _tensor(y), _ptr(y), _tensor(dy),\n            _ptr(dy), _tensor(x), _ptr(x), byref(beta)",
           "byref(alpha), _tensor(x), _ptr(x), _tensor(dy),\n            _ptr(dy), _tensor(y), _ptr(y), byref(beta)",
           CUDNN),
    Mutant("activation-bwd-x-y-swapped", "cudnnActivationBackward gets x where y goes and y where x goes",
           "pymagma/dnn.py",
           "byref(alpha), _like(y, x, xd), _ptr(y),\n            _like(dy, x, xd), _ptr(dy), xd, _ptr(x),",
           "byref(alpha), _like(y, x, xd), _ptr(x),\n            _like(dy, x, xd), _ptr(dy), xd, _ptr(y),",
           CUDNN),
    Mutant("pool-window-stride-swapped", "the pooling descriptor gets the stride as window and the window as stride",
           "pymagma/dnn.py",
           'return pooling_descriptor(POOL_MODES[mode], window, _tuple2(padding, "padding"), stride)',
           'return pooling_descriptor(POOL_MODES[mode], stride, _tuple2(padding, "padding"), window)', CUDNN),
    Mutant("softmax-modes-swapped", "softmax 'instance' is cuDNN's CHANNEL mode and 'channel' its INSTANCE mode",
           "pymagma/dnn.py",
           'SOFTMAX_MODES = {"instance": cd.SoftmaxMode.INSTANCE, "channel": cd.SoftmaxMode.CHANNEL}',
           'SOFTMAX_MODES = {"instance": cd.SoftmaxMode.CHANNEL, "channel": cd.SoftmaxMode.INSTANCE}', CUDNN),
    Mutant("bn-saved-mean-invstd-swapped", "batch-norm training writes the saved mean and inverse std swapped",
           "pymagma/dnn.py",
           "_ptr(save_mean), _ptr(save_inv))",
           "_ptr(save_inv), _ptr(save_mean))", CUDNN),
    Mutant("bn-inference-default-eps", "batch-norm inference ignores the caller's epsilon (always 1e-5)",
           "pymagma/dnn.py",
           "_ptr(var), float(eps))",
           "_ptr(var), 1e-5)", CUDNN),
    # ---------------------------------------------------------------------- planned cuDNN calls (dnn's plans)
    Mutant("plan-conv-bwd-filter-x-dy-swapped", "a planned backward filter passes dy's data where x goes, x's for dy",
           "pymagma/_dnn_plans.py",
           "d0, x.ptr, d1, dy.ptr, d2, algo",
           "d0, dy.ptr, d1, x.ptr, d2, algo", PLANS),
    Mutant("plan-conv-bwd-data-w-dy-swapped", "a planned backward data passes dy's data where w goes, w's for dy",
           "pymagma/_dnn_plans.py",
           "d0, w.ptr, d1, dy.ptr, d2, algo",
           "d0, dy.ptr, d1, w.ptr, d2, algo", PLANS),
    Mutant("plan-bn-saved-mean-invstd-swapped", "a planned batch-norm forward writes the saved mean and inverse std "
           "swapped", "pymagma/_dnn_plans.py",
           "float(max(eps, cd.BN_MIN_EPSILON)), mean.ptr, inv.ptr)",
           "float(max(eps, cd.BN_MIN_EPSILON)), inv.ptr, mean.ptr)", PLANS),
    Mutant("plan-bn-bwd-dscale-dbias-swapped", "a planned batch-norm backward writes dscale and dbias swapped",
           "pymagma/_dnn_plans.py",
           "scale.ptr, dscale.ptr, dbias.ptr, float(eps),",
           "scale.ptr, dbias.ptr, dscale.ptr, float(eps),", PLANS),
    Mutant("plan-activation-bwd-x-y-swapped", "a planned activation backward gets x where y goes and y where x goes",
           "pymagma/_dnn_plans.py",
           "xd, y.ptr, xd, dy.ptr, xd,\n                                              x.ptr,",
           "xd, x.ptr, xd, dy.ptr, xd,\n                                              y.ptr,", PLANS),
    Mutant("plan-conv-fwd-x-w-swapped", "a planned forward convolution passes w's data where x goes and x's for w",
           "pymagma/_dnn_plans.py",
           "d0, x.ptr, d1, w.ptr, d2, algo",
           "d0, w.ptr, d1, x.ptr, d2, algo", PLANS),
    Mutant("plan-conv-fwd-alpha-beta-swapped", "a planned forward convolution passes beta (0) as alpha, alpha (1) as "
           "beta", "pymagma/_dnn_plans.py",
           "self.alpha, d0, x.ptr, d1, w.ptr, d2, algo,\n" + " " * 46 +
           "space.ptr if size else None, size, self.beta, d3, y.ptr)",
           "self.beta, d0, x.ptr, d1, w.ptr, d2, algo,\n" + " " * 46 +
           "space.ptr if size else None, size, self.alpha, d3, y.ptr)",
           PLANS),
    Mutant("plan-conv-bwd-data-reuses-forward", "a planned backward data reuses the forward's cached call "
           "(function, descriptors, algorithm)", "pymagma/_dnn_plans.py",
           'self._calls.get("backward_data") or self._call("backward_data")',
           'self._calls.get("forward") or self._call("backward_data")', PLANS),
    Mutant("plan-conv-descriptors-of-forward", "every planned convolution call gets the forward's four descriptors",
           "pymagma/_dnn_plans.py",
           "(d.value for d in self.problem.ordered[kind])",
           '(d.value for d in self.problem.ordered["forward"])', PLANS),
    Mutant("plan-conv-keyed-without-tf32", "a convolution's plan is looked up as if TF32 were allowed, whatever "
           "pymagma.dnn.allow_tf32 says", "pymagma/_dnn_plans.py",
           "*_CONV_DEFAULTS[len(args) - 4:], not not dnn.allow_tf32)",
           "*_CONV_DEFAULTS[len(args) - 4:], True)", PLANS),
    Mutant("plan-bn-eps-ignored", "a planned batch-norm forward uses cuDNN's minimum epsilon, not the caller's",
           "pymagma/_dnn_plans.py",
           "float(max(eps, cd.BN_MIN_EPSILON)), mean.ptr, inv.ptr)",
           "float(cd.BN_MIN_EPSILON), mean.ptr, inv.ptr)", PLANS),
    Mutant("plan-bn-running-mean-var-swapped", "a planned batch-norm forward updates the running mean and variance "
           "swapped", "pymagma/_dnn_plans.py",
           "None if running_mean is None else running_mean.ptr, None if running_var is None else running_var.ptr,",
           "None if running_var is None else running_var.ptr, None if running_mean is None else running_mean.ptr,",
           PLANS),
    Mutant("plan-bn-fwd-alpha-beta-swapped", "a planned batch-norm forward passes beta (0) as alpha, alpha (1) as beta",
           "pymagma/_dnn_plans.py",
           "self.mode_value, self.alpha, self.beta,\n            self.xd, x.ptr,",
           "self.mode_value, self.beta, self.alpha,\n            self.xd, x.ptr,", PLANS),
    Mutant("plan-bn-bwd-saved-swapped", "a planned batch-norm backward reads the saved inverse std as the mean and "
           "back", "pymagma/_dnn_plans.py",
           "None if save_mean is None else save_mean.ptr, None if save_inv_std is None else save_inv_std.ptr)",
           "None if save_inv_std is None else save_inv_std.ptr, None if save_mean is None else save_mean.ptr)",
           PLANS),
    Mutant("plan-activation-fwd-alpha-beta-swapped", "a planned activation forward passes beta (0) as alpha, alpha "
           "(1) as beta", "pymagma/_dnn_plans.py",
           "self.desc, self.alpha, self.xd, x.ptr,\n" + " " * 45 + "self.beta,",
           "self.desc, self.beta, self.xd, x.ptr,\n" + " " * 45 + "self.alpha,",
           PLANS),
    Mutant("plan-activation-coef-dropped", "an activation plan's descriptor takes the mode's default coefficient, "
           "not the caller's", "pymagma/_dnn_plans.py",
           "descriptors = (dnn._activation_desc(mode, coef),",
           "descriptors = (dnn._activation_desc(mode, None),", PLANS),
    Mutant("plan-bound-once", "a plan keeps the cuDNN functions it bound first, whichever cuDNN object is in use "
           "later", "pymagma/_dnn_plans.py",
           "if kept is None or kept[0] is not cudnn:",
           "if kept is None:", PLANS),
    Mutant("plan-of-array-ignores-options", "the device backend's plan look-up by an array ignores the options "
           "(sigmoid gets relu's plan)", "pymagma/_dnn_plans.py",
           "key = (make, x.shape, x.dtype, x.device, options)",
           "key = (make, x.shape, x.dtype, x.device)", PLANS),
    Mutant("same-objects-keeps-lists", "an answer kept by the identity of its arguments is kept for a list (or a "
           "tuple holding one), which its owner may change in place", "pymagma/_checks.py",
           "            hash(objects)\n",
           "            hash(args[:by_value])\n", SAME_OBJECTS),
    Mutant("pool-expression-ignores-dtype", "max pooling's kernel expression found by its kernel alone (a float64 "
           "call after a float32 one runs the float32 kernel)", "magmadnn/backend/device/kernels/pool.py",
           '_EXPRESSIONS.get(("max_pool_forward", dtype))',
           '_EXPRESSIONS.get(("max_pool_forward", "float32"))', POOLING),
    Mutant("plan-key-ignores-types", "planned calls keyed by equal arguments only (2.0 reuses the plan of 2)",
           "pymagma/_dnn_plans.py",
           "key = (make, args, kinds, inner)",
           "key = (make, args, inner)", PLANS),
    Mutant("binary-fast-path-any-device", "binary's inline dtype and device check takes arrays of two devices",
           "pymagma/kernels/elementwise.py",
           "a.device == b.device else None",
           "True else None", ("tests/pymagma/suites/test_hot_paths.py",)),
    Mutant("reduce-plan-any-axis-tuple", "a reduction's plan keyed by a tuple axis whatever its elements' types "
           "((1.0,) reuses the plan of (1,))", "pymagma/kernels/reductions.py",
           "type(axis) is tuple and set(map(type, axis)) <= _INT",
           "type(axis) is tuple", ("tests/pymagma/suites/test_hot_paths.py",)),
    # -------------------------------------------------------- the memory pool's lock-free hits and its statistics
    Mutant("pool-miss-uncounted", "a request cudaMalloc answered not counted as a miss (the statistics, which count "
           "a hit as a request that missed nothing, call it a cache hit)", "pymagma/memory.py",
           "        next(self._misses)  # a request the cache did not answer (whether cudaMalloc succeeds or not)\n",
           "", MEMORY),
    Mutant("output-ignores-thread-pool", "an op's output (the pool's hit path inline in _empty) taken from the "
           "libraries' pool while its thread allocates from a pool of its own (a graph's arrays outside its pool)",
           "pymagma/array.py",
           '    pool = _overriding and _override.__dict__.get("pool") or _native.current.memory_pool\n'
           "    kept = pool.outputs.get(",
           "    pool = _native.current.memory_pool\n    kept = pool.outputs.get(", MEMORY),
    Mutant("pool-override-unannounced", "using_pool sets the thread's pool without announcing it to the hot paths "
           "(which then never read the thread's override)", "pymagma/memory.py",
           "    _overriding.append(pool)  # (before the override is set, taken away after it is undone: list ops are "
           "atomic)\n    _override.pool = pool\n    try:\n        yield pool\n    finally:\n        _override.pool = "
           "previous\n        _overriding.pop()\n",
           "    _override.pool = pool\n    try:\n        yield pool\n    finally:\n        _override.pool = previous\n",
           MEMORY),
    Mutant("freed-allocation-gives-back-again", "an Allocation freed explicitly gives its block back again when it "
           "dies (one block cached twice: two arrays share it)", "pymagma/memory.py",
           "        elif pool.live.pop(self.ptr, None) is not None:\n",
           "        elif pool.live.get(self.ptr) is not None:\n", MEMORY),
    Mutant("transpose-keeps-contiguity", ".T of a C-contiguous array marked C-contiguous (a reshape of it then "
           "skips the copy and reads the wrong order)", "pymagma/array.py",
           "        a.is_c_contiguous = self.is_c_contiguous if ndim < 2 else _is_c_contiguous_cached(shape, strides, "
           "self.itemsize)\n",
           "        a.is_c_contiguous = self.is_c_contiguous\n", ARRAYS + ("tests/pymagma/suites/test_hot_paths.py",)),
    Mutant("strided-view-marked-contiguous", "a basic-indexing view with strides marked C-contiguous (kept at "
           "creation: never checked again)", "pymagma/array.py",
           "itemsize, math.prod(shape)\n        a.nbytes, a.is_c_contiguous = a.size * itemsize, "
           "_is_c_contiguous_cached(shape, strides, itemsize)\n",
           "itemsize, math.prod(shape)\n        a.nbytes, a.is_c_contiguous = a.size * itemsize, True\n",
           ARRAYS + ("tests/pymagma/suites/test_hot_paths.py",)),
    Mutant("axes-view-marked-contiguous", "a view of permuted axes (transpose(axes)) marked C-contiguous (kept at "
           "creation: never checked again)", "pymagma/array.py",
           "            a.is_c_contiguous = _is_c_contiguous_cached(shape, strides, itemsize)\n",
           "            a.is_c_contiguous = True\n", ARRAYS + ("tests/pymagma/suites/test_hot_paths.py",)),
    Mutant("cudnn-call-keeps-old-library", "_cudnn.call keeps the functions it bound from the first cuDNN object "
           "(a meter's stand-in or the simulator swapped since never sees the calls)", "pymagma/_cudnn.py",
           "    if cudnn is not last:\n", "    if last is None:\n",
           ("tests/pymagma/test_cudnn_calls.py", "-k", "swapped_in")),
    Mutant("peak-misses-inline-hits", "a measured pool's hot-path lookup finds the cache (track_peak misses the peaks "
           "that inline cache hits reach)", "pymagma/memory.py",
           "    def get(self, key, default=None):\n        return default\n",
           "    def get(self, key, default=None):\n        return self.blocks.get(key, default)\n",
           ("tests/pymagma/test_memory_peak.py",)),
    Mutant("peak-tracking-left-on", "the pool keeps its measured class after the last track_peak block (every "
           "allocation pays the tracked path)", "pymagma/memory.py",
           "            if not pool._trackers:\n                pool.__class__ = Pool",
           "            if False:\n                pool.__class__ = Pool", ("tests/pymagma/test_memory_peak.py",)),
    Mutant("index-quick-path-no-lower-bound", "one int key's quick path accepts an index below -size (it addresses "
           "memory before the array)", "pymagma/_layouts.py",
           "            if not 0 <= i < n:\n                raise IndexError(f\"index {key} is out",
           "            if not i < n:\n                raise IndexError(f\"index {key} is out",
           ("tests/pymagma/test_array.py", "-k", "one_int_or_slice or basic_indexing")),
    Mutant("pool-closed-block-kept", "a block given back to a closed pool by a dying allocation stays cached (a "
           "destroyed graph's memory leaks)", "pymagma/memory.py",
           "        if self.closed:  # (read after the append",
           "        if False:  # (read after the append", MEMORY),
    Mutant("pool-release-keeps-held-bytes", "releasing the cache forgets the bytes cudaFree gave back (in use grows)",
           "pymagma/memory.py",
           "                    self._held -= size\n                    self._frees += 1\n",
           "                    self._frees += 1\n", MEMORY),
    # ------------------------------------------------- frees held back to a safe point, the simulator's streams
    Mutant("deferred-finalizer-frees-at-once", "a finalizer's free (a collected graph, a closed pool's block) made "
           "at once, wherever the garbage collector ran it", "pymagma/_deferred.py",
           'finalizer calls instead of freeing (see above)."""\n    _after_capture.append((fn, args))',
           'finalizer calls instead of freeing (see above)."""\n    fn(*args)', DEFERRED),
    Mutant("deferred-ignores-other-threads-capture", "held-back frees made while another thread captures a graph",
           "pymagma/_deferred.py",
           'if capturing or capture_state.__dict__.get("graph") is not None:',
           'if capture_state.__dict__.get("graph") is not None:', DEFERRED),
    Mutant("sim-free-inside-work-at-once", "the simulated cudaFree inside running device work drops the block at once",
           "pymagma/simulator/runtime.py",
           "if self._running():  # asked from inside running device work",
           "if False:  # asked from inside running device work", STREAMS),
    Mutant("sim-held-frees-never-made", "frees held back inside running work are dropped, never made (a leak)",
           "pymagma/simulator/streams.py",
           "self._release(*self._held.pop(0))",
           "self._held.pop(0)", STREAMS),
    Mutant("sim-flush-reenters-running-stream", "a synchronize inside a stream's running work runs its later work "
           "first", "pymagma/simulator/streams.py",
           "            if handle in running:\n                return\n",
           "", STREAMS),
    Mutant("sim-legacy-does-not-wait", "work on the legacy stream runs before the blocking streams' queued work",
           "pymagma/simulator/streams.py",
           "            if handle in LEGACY:\n                self.flush_blocking()\n",
           "", STREAM_ORDER),
    Mutant("sim-legacy-waits-non-blocking", "the legacy stream waits for non-blocking streams too",
           "pymagma/simulator/streams.py",
           "                if work.blocking:\n                    self.flush(handle)",
           "                if True:\n                    self.flush(handle)", STREAM_ORDER),
    # ------------------------------------------------- the model's forward pass calling layers' plans directly
    Mutant("forward-plan-ignores-mask", "the forward pass replays a layer's plan for a masked input (the mask "
           "dropped)", "magmadnn/models/forward.py",
           'getattr(x, "_mask", None) is None and not layer.makes_mask', "not layer.makes_mask", FORWARD),
    Mutant("forward-plan-ignores-stamp", "the forward pass replays plans made before a trainable flag changed",
           "magmadnn/models/forward.py",
           "layer._plans_at == _autograd._trainable_changes and x.__class__ is Tensor",
           "layer._plans_at is not None and x.__class__ is Tensor", FORWARD),
    Mutant("forward-plan-key-ignores-training", "the forward pass looks a plan up without the training flag (an "
           "inference call replays the training plan)", "magmadnn/models/forward.py",
           "plan = layer._plans.get((data.shape, data.dtype, training))",
           "plan = layer._plans.get((data.shape, data.dtype, True))", FORWARD),
    Mutant("forward-pair-plan-ignores-mask", "the forward pass replays a two-input layer's plan (a residual Add) "
           "for a masked second input (the full call's refusal skipped)", "magmadnn/models/forward.py",
           'getattr(b, "_mask", None) is None and not layer.makes_mask', "not layer.makes_mask", FORWARD),
    Mutant("forward-pair-plan-ignores-stamp", "the forward pass replays two-input plans made before a trainable "
           "flag changed", "magmadnn/models/forward.py",
           "if layer._plans_at == _autograd._trainable_changes and a.__class__ is Tensor",
           "if layer._plans_at is not None and a.__class__ is Tensor", FORWARD),
    Mutant("layer-call-fast-path-ignores-shape", "a built layer's repeated call skips its checks for a batch of "
           "another per-sample shape", "magmadnn/layers/base.py",
           " and inputs.data.shape[1:] == self.input_shape:", ":", LAYER_CALL),
    Mutant("layer-call-fast-path-keeps-activity-losses", "a built layer's repeated call keeps the previous calls' "
           "activity penalties", "magmadnn/layers/base.py",
           "if self._activity_losses:  # (called", "if False:  # (called", LAYER_CALL),
    # ------------------------------------------------------------------------------ magmadnn's device adapters
    Mutant("bn-momentum-not-complemented", "cuDNN's exponentialAverageFactor given the op set's momentum as it is",
           "magmadnn/backend/device/normalization.py",
           "scratch, momentum=1.0 - momentum,",
           "scratch, momentum=momentum,", BACKEND),
    Mutant("bn-backward-saved-swapped", "batch-norm backward gets the saved inverse std as the mean and vice versa",
           "magmadnn/backend/device/normalization.py",
           "gamma, mean_, inv_std, eps=eps)",
           "gamma, inv_std, mean_, eps=eps)", INLINE_CUDNN),  # (the method's call: a backward after a library swap)
    Mutant("pads-width-height-order", "asymmetric padding: the explicit extra pads taken as (left, right, top, bottom)",
           "magmadnn/backend/device/conv.py",
           "return (ph, pw), (t - ph, b - ph, l - pw, r - pw)",
           "return (ph, pw), (l - pw, r - pw, t - ph, b - ph)", BACKEND),
    Mutant("adapter-activation-dy-y", "the op set's activation_backward maps dy and y into cuDNN's order swapped",
           "magmadnn/backend/device/activations.py",
           "y, dy = y if y.is_c_contiguous else _contiguous(y), dy if dy.is_c_contiguous else _contiguous(dy)",
           "y, dy = dy if dy.is_c_contiguous else _contiguous(dy), y if y.is_c_contiguous else _contiguous(y)",
           BACKEND),
    Mutant("adapter-softmax-dy-y", "the op set's softmax_backward maps dy and y into cuDNN's order swapped",
           "magmadnn/backend/device/activations.py",
           "return _dnn.softmax_backward(_axis_as_channels(y, axis), _axis_as_channels(dy, axis),\n"
           '                                 mode="channel")',
           "return _dnn.softmax_backward(_axis_as_channels(dy, axis), _axis_as_channels(y, axis),\n"
           '                                 mode="channel")', BACKEND),
    Mutant("matmul-transpose-flags-crossed", "matmul gives transpose_b to A and transpose_a to B",
           "magmadnn/backend/device/linear.py",
           "trans_a=bool(transpose_a), trans_b=bool(transpose_b)",
           "trans_a=bool(transpose_b), trans_b=bool(transpose_a)", LINEAR_PLANS),
    Mutant("dense-rows-view-fortran-order", "a rank > 2 dense takes its rows of x in column-major order (a "
           "reshape to the transposed shape, transposed back)",
           "magmadnn/functional/linear.py",
           "x = xp.reshape(x, (rows, x.shape[-1]))",
           "x = xp.transpose(xp.reshape(x, (x.shape[-1], rows)))", ("tests/magmadnn/test_functional_dense_rows.py",)),
    Mutant("dense-rows-grad-view-fortran-order", "a rank > 2 dense takes the rows of its output gradient in "
           "column-major order",
           "magmadnn/functional/linear.py",
           "g = xp.reshape(g, (self.x.shape[0], g.shape[-1]))",
           "g = xp.transpose(xp.reshape(g, (g.shape[-1], self.x.shape[0])))",
           ("tests/magmadnn/test_functional_dense_rows.py",)),
    Mutant("embedding-plan-rows-dim-swapped", "a planned gather launches with the table's rows and width swapped",
           "magmadnn/backend/device/kernels/embeddings.py",
           "[table.ptr, indices.ptr, out.ptr, c_longlong(n), c_longlong(rows), c_longlong(dim)])",
           "[table.ptr, indices.ptr, out.ptr, c_longlong(n), c_longlong(dim), c_longlong(rows)])",
           ("tests/magmadnn/backend/test_embeddings_plans.py",)),
    Mutant("embedding-plan-strided-indices", "a planned scatter-add reads non-contiguous indices as if contiguous",
           "magmadnn/backend/device/kernels/embeddings.py",
           "        if not indices.is_c_contiguous:\n            indices = contiguous(indices)\n"
           "        device = dy.device",
           "        device = dy.device", ("tests/magmadnn/backend/test_embeddings_plans.py",)),
    Mutant("embedding-layer-plan-skips-range-check", "a planned Embedding hands device ids to the gather without "
           "queueing their range check", "magmadnn/layers/embedding.py",
           "                if check_range is not None:\n                    check_range(data, 0, rows, message)\n",
           "", ("tests/magmadnn/layers/test_plans_sequence.py",)),
    Mutant("embedding-layer-plan-any-ids", "a planned Embedding takes ids of any array class as the device ids it "
           "planned for (host ids neither checked at once nor uploaded)", "magmadnn/layers/embedding.py",
           "if own and data.__class__ is ids and table.xp is xp:", "if own:",
           ("tests/magmadnn/layers/test_plans_sequence.py",)),
    Mutant("check-plan-strided-values", "a planned range check reads non-contiguous values as if contiguous",
           "pymagma/kernels/check.py",
           "bounds_site = decided\n        if not x.is_c_contiguous:\n            x = contiguous(x)\n",
           "bounds_site = decided\n", ("tests/pymagma/kernels/test_check_plans.py",)),
    Mutant("check-binary-plan-strided-values", "a planned 0/1 check reads non-contiguous values as if contiguous",
           "pymagma/kernels/check.py",
           "site_c = decided\n        if not x.is_c_contiguous:\n            x = contiguous(x)\n",
           "site_c = decided\n", ("tests/pymagma/kernels/test_check_plans.py",)),
    Mutant("check-plan-any-dtype", "a planned range check answers for values of any dtype (an unchecked dtype "
           "launched)", "pymagma/kernels/check.py",
           "key = (\"check_range\", x.__class__, x.dtype, x.device,", "key = (\"check_range\", x.__class__, x.device,",
           ("tests/pymagma/kernels/test_check_plans.py",)),
    Mutant("check-plan-any-record-strides", "a planned range check takes a strided record of the planned shape",
           "pymagma/kernels/check.py",
           "key = (\"check_range\", x.__class__, x.dtype, x.device, record.__class__, record.shape, record.strides,",
           "key = (\"check_range\", x.__class__, x.dtype, x.device, record.__class__, record.shape,",
           ("tests/pymagma/kernels/test_check_plans.py",)),
    Mutant("check-binary-plan-any-record-strides", "a planned 0/1 check takes a strided record of the planned shape",
           "pymagma/kernels/check.py",
           "key = (\"check_binary\", x.__class__, x.dtype, x.device, record.__class__, record.shape, record.strides,",
           "key = (\"check_binary\", x.__class__, x.dtype, x.device, record.__class__, record.shape,",
           ("tests/pymagma/kernels/test_check_plans.py",)),
    Mutant("check-plan-any-site-type", "a planned range check takes a float site equal to the planned one",
           "pymagma/kernels/check.py", "high.__class__, high, site.__class__, site)", "high.__class__, high, site)",
           ("tests/pymagma/kernels/test_check_plans.py",)),
    Mutant("check-binary-plan-any-site-type", "a planned 0/1 check takes a float site equal to the planned one",
           "pymagma/kernels/check.py", "record.dtype, record.device, site.__class__, site)",
           "record.dtype, record.device, site)", ("tests/pymagma/kernels/test_check_plans.py",)),
    Mutant("check-plan-any-low", "a planned range check launches with the low bound of the call that planned it",
           "pymagma/kernels/check.py", "record.device, low.__class__, low, high.__class__,",
           "record.device, high.__class__,", ("tests/pymagma/kernels/test_check_plans.py",)),
    Mutant("faults-plan-skips-the-launch", "a planned device range check queues no check kernel (bad ids after "
           "the plan go unreported)", "magmadnn/backend/device/faults.py",
           "            _dk.check_range(x, low, high, record, site)\n            return",
           "            return", ("tests/magmadnn/backend/test_faults_plans.py",)),
    Mutant("faults-plan-any-message", "a planned device range check reports with the message of the call that "
           "planned it", "magmadnn/backend/device/faults.py", "high.__class__, high, message)",
           "high.__class__, high)", ("tests/magmadnn/backend/test_faults_plans.py",)),
    Mutant("faults-plan-any-dtype", "a planned device range check reports a float with the site of integer values "
           "(its bits printed as an integer)", "magmadnn/backend/device/faults.py",
           "key = (x.__class__, x.dtype, x.device,", "key = (x.__class__, x.device,",
           ("tests/magmadnn/backend/test_faults_plans.py",)),
    Mutant("mean-plan-any-keepdims", "a planned mean takes the gradient's shape of the call that planned it, "
           "whatever its keepdims", "magmadnn/functional/operators.py",
           "axis.__class__, axis, keepdims.__class__, keepdims)", "axis.__class__, axis)",
           ("tests/magmadnn/test_functional_mean_plans.py",)),
    Mutant("binary-broadcast-shape-by-rank", "binary's broadcast shape kept and looked up by the first operand's "
           "shape and the second's rank (not its shape)", "pymagma/kernels/elementwise.py",
           "pair = (a.shape, b.shape) if", "pair = (a.shape, b.ndim) if",
           ("tests/pymagma/test_kernels_broadcast_shapes.py",)),
    Mutant("conv-interior-view-contiguous", "a convolution's input gradient with asymmetric padding (the interior "
           "view of the padded gradient) marked C-contiguous", "magmadnn/backend/device/conv.py",
           "view.is_c_contiguous = contiguous", "view.is_c_contiguous = True", DEVICE_PLANS),
    Mutant("conv-interior-view-at-origin", "a convolution's input gradient with asymmetric padding taken from the "
           "padded gradient's first row and column (the top and left pads not skipped)",
           "magmadnn/backend/device/conv.py",
           "(slice(None), slice(None), slice(t, t + h), slice(l, l + wd))",
           "(slice(None), slice(None), slice(0, h), slice(0, wd))", DEVICE_PLANS),
    Mutant("seen-keeps-lists", "the device convolution and pooling keep the plan of a geometry in a list by its "
           "identity (the caller may change the list in place)", "magmadnn/backend/device/conv.py",
           "        hash(answer[0])\n", "        hash(answer[1:])\n",
           ("tests/magmadnn/backend/test_device_cudnn_plans.py", "tests/magmadnn/backend/test_conv.py", "-k",
            "in_place")),
    Mutant("activation-plan-looked-up-elsewhere", "the device activation looks its plan up under another planner's "
           "key (every call misses and works the plan out again)", "magmadnn/backend/device/activations.py",
           "_ACTIVATION_PLAN = _plans.activation_plan\n", "_ACTIVATION_PLAN = _plans.batch_norm_plan\n",
           DEVICE_PLANS),
    Mutant("avg-pool-bwd-no-factor", "padded average pooling backward forgets the real-element count factor",
           "magmadnn/backend/device/pooling.py",
           "_dnn.pool2d_backward(y_area, _k.multiply(dy, factor), xin,",
           "_dnn.pool2d_backward(y_area, dy, xin,", BACKEND),
    # ----------------------------------------------------------------------------------------------- kernels
    Mutant("pad2d-top-left-swapped", "the zero padding kernel puts the left pad above and the top pad to the left",
           "magmadnn/backend/device/kernels/pool.py",
           "PadGeometry(n * c, h, w, padded[2], padded[3], top, left)",
           "PadGeometry(n * c, h, w, padded[2], padded[3], left, top)", PAD2D),
    Mutant("pad2d-pads-read-tlbr", "pad2d reads its pads as (top, left, bottom, right), not (top, bottom, left, right)",
           "magmadnn/backend/device/kernels/pool.py",
           'top, bottom, left, right = (_checks.count(p, "pad2d: pad") for p in pads)',
           'top, left, bottom, right = (_checks.count(p, "pad2d: pad") for p in pads)', PAD2D),
    Mutant("pad2d-input-plane-padded-height", "the pad2d kernel steps between input planes by the padded height",
           "magmadnn/backend/device/kernels/pool.cu",
           "x[(plane * g.h + r) * g.w + c]", "x[(plane * g.hp + r) * g.w + c]", PAD2D),
    Mutant("pad2d-last-column-copied", "the pad2d kernel copies one column past the input's width (c > w, not c >= w)",
           "magmadnn/backend/device/kernels/pool.cu",
           "c >= g.w) ? zero :", "c > g.w) ? zero :", PAD2D),
    Mutant("adam-step-0-based", "Adam's bias correction counts steps from 0 (1 - beta^(step + 1))",
           "magmadnn/backend/device/kernels/optim.py",
           "bc1, bc2 = _bias_corrections(beta1, beta2, step)",
           "bc1, bc2 = _bias_corrections(beta1, beta2, step + 1)", DEVICE_KERNELS),
    Mutant("sgd-momentum-wd-order", "the SGD kernel gets weight decay where momentum goes and vice versa",
           "magmadnn/backend/device/kernels/optim.py",
           "c_double(momentum), c_double(weight_decay), c_int(int(nesterov) |",
           "c_double(weight_decay), c_double(momentum), c_int(int(nesterov) |", DEVICE_KERNELS),
    Mutant("rmsprop-rho-eps-order", "the RMSprop kernel gets eps where rho goes and vice versa",
           "magmadnn/backend/device/kernels/optim.py",
           "c_double(lr), c_double(rho),\n          c_double(eps)",
           "c_double(lr), c_double(eps),\n          c_double(rho)", DEVICE_KERNELS),
    Mutant("dropout-keep-probability", "dropout's kernel given the keep probability 1 - rate as its rate",
           "magmadnn/backend/device/kernels/dropout.py",
           "c_longlong(x.size), c_double(float(rate))",  # (the planned call launches with the rate kept here)
           "c_longlong(x.size), c_double(1.0 - float(rate))", DEVICE_KERNELS),
    # ------------------------------------------------------------- fused kernels (fewer launches per step)
    Mutant("many-find-half-open", "the multi-tensor update gives a tensor's first element to the tensor before it",
           "magmadnn/backend/device/kernels/optim.cu",
           "if (t.start[mid] <= i) lo = mid;", "if (t.start[mid] < i) lo = mid;", FUSED),
    Mutant("many-replayed-bc1-misread", "the replayed multi-tensor Adam reads bc2 where bc1 is",
           "magmadnn/backend/device/kernels/optim.cu", "bc1 = values[1];", "bc1 = values[2];", FUSED),
    Mutant("many-chunk-drops-a-tensor", "each launch of a multi-tensor update leaves its last tensor out",
           "magmadnn/backend/device/kernels/optim.py",
           "zip(*members[first:first + MANY])", "zip(*members[first:first + MANY - 1])", FUSED),
    Mutant("many-plan-ignores-replaced-arrays", "a multi-tensor update's plan is reused after a parameter or state "
           "array was replaced (its old pointers launched)", "magmadnn/backend/device/kernels/optim.py",
           "elif len(column) != len(held) or not all(map(operator.is_, column, map(_deref, held))):",
           "elif len(column) != len(held):", MANY_PLANS),
    Mutant("many-plan-trusts-gradient-shapes", "a multi-tensor update's plan launches gradients of another shape "
           "than their parameters'", "magmadnn/backend/device/kernels/optim.py",
           "and list(map(_shape, grads)) == self.shapes\n", "\n", MANY_PLANS),
    Mutant("many-plan-keeps-old-gradients", "a multi-tensor update's plan launches the gradients of the step it was "
           "made in", "magmadnn/backend/device/kernels/optim.py",
           "table.a[1][:len(rows)] = list(map(_pointer, map(grads.__getitem__, rows)))", "pass", MANY_PLANS),
    Mutant("optimizer-columns-skip-constraints", "the optimizers' step a column at a time applies no constraint",
           "magmadnn/_foreach.py",
           "if not _plain_parameters(params) or not all(map(_is_none, map(_CONSTRAINT, params))):",
           "if not _plain_parameters(params):", OPTIMIZER_STEPS),
    Mutant("optimizer-columns-ignore-trainable", "the optimizers' step a column at a time updates frozen weights",
           "magmadnn/_foreach.py", "if _plain_parameters(params) and all(map(_TRAINABLE, params)):",
           "if _plain_parameters(params):", OPTIMIZER_STEPS),
    # the optimizers' step plans (_foreach.StepPlan, _foreach.planned_step)
    Mutant("step-plan-ignores-generation", "an optimizer's step plan outlives a clipping option or hyperparameter "
           "set after it was made", "magmadnn/_foreach.py",
           "plan.generation == _configurable.generation and", "plan.generation is not None and", STEP_PLANS),
    Mutant("step-plan-ignores-replaced-update", "an optimizer's step plan keeps its rule after the class's update "
           "was replaced", "magmadnn/_foreach.py",
           "and plan.update is plan.cls.update and", "and", STEP_PLANS),
    Mutant("step-plan-ignores-device-values", "a planned step passes the host learning rate while a step is "
           "captured (the replayed graph keeps the first step's rate)", "magmadnn/_foreach.py",
           "and opt._device_values is None and n):", "and n):",
           ("tests/magmadnn/models/test_replay.py", "-k", "thirty_replayed")),
    Mutant("planned-step-ignores-trainable", "a planned optimizer step updates frozen weights", "magmadnn/_foreach.py",
           "and all(map(_TRAINABLE, params)) and all(map(_is_none, map(_CONSTRAINT, params)))):",
           "and all(map(_is_none, map(_CONSTRAINT, params)))):", STEP_PLANS),
    Mutant("planned-step-skips-constraints", "a planned optimizer step applies no constraint", "magmadnn/_foreach.py",
           "and all(map(_TRAINABLE, params)) and all(map(_is_none, map(_CONSTRAINT, params)))):",
           "and all(map(_TRAINABLE, params))):", STEP_PLANS),
    Mutant("many-inline-hyper-skips-finite", "the multi-tensor SGD's inline check passes a NaN or infinite rate",
           "magmadnn/backend/device/kernels/optim.py", "if not math.isfinite(lr + momentum + weight_decay):",
           "if False:", KERNEL_INPUTS),
    # a training batch's planned loss (SoftmaxCrossEntropy.of_batch) and the cross entropy's inline label checks
    Mutant("loss-plan-key-ignores-smoothing", "a loss's batch plan is keyed without its label smoothing (set later, "
           "the plain plan answers)", "magmadnn/_loss_plans.py",
           "key = (self.__class__, self.reduction, self.label_smoothing, self.ignore_index,",
           "key = (self.__class__, self.reduction, self.ignore_index,", LOSS_PLANS),
    Mutant("loss-plan-key-ignores-labels-shape", "a loss's batch plan is keyed without the labels' shape (labels of "
           "another length use the plan)", "magmadnn/_loss_plans.py",
           "data.shape, data.dtype, targets.shape, targets.dtype)", "data.shape, data.dtype, targets.dtype)",
           LOSS_PLANS),
    Mutant("loss-plan-for-subclasses", "a subclass overriding checked or prepare gets the base class's batch plan",
           "magmadnn/_loss_plans.py", "all(getattr(type(self), m) is getattr(self._planned, m)",
           "all(getattr(self._planned, m) is getattr(self._planned, m)", LOSS_PLANS),
    Mutant("xent-mean-index-labels-any-length", "the mean cross entropy's inline check takes int64 labels of any "
           "length", "magmadnn/backend/device/kernels/loss.py",
           "labels.dtype is _INT64 and labels.shape == (rows,):", "labels.dtype is _INT64:", KERNEL_INPUTS),
    Mutant("foreach-sgd-forgets-nesterov", "the optimizers' multi-tensor SGD drops Nesterov momentum",
           "magmadnn/_foreach.py", "nesterov=opt.nesterov, weight_decay", "nesterov=False, weight_decay",
           ("tests/magmadnn/test_optimizers.py", "-k", "nesterov")),
    Mutant("bias-act-channel-of-rows", "the epilogue takes the channel of element i as i % channels (NCHW wrong)",
           "magmadnn/backend/device/kernels/epilogue.cu",
           "const i64 c = (i / inner) % channels;", "const i64 c = i % channels;", FUSED),
    Mutant("bias-act-db-sums-dy", "the epilogue's bias gradient sums dy instead of the activation's gradient",
           "magmadnn/backend/device/kernels/epilogue.cu",
           "part += Traits<T>::load(d);", "part += Traits<T>::load(dy[i]);", FUSED),
    # the epilogue's planned launches (a call's checked plan found by its arguments; the operands checked per call)
    Mutant("epilogue-plan-skips-x-layout", "a planned bias + activation launches a strided x as if it were "
           "contiguous", "magmadnn/backend/device/kernels/epilogue.py",
           "x.is_c_contiguous and b.is_c_contiguous and x.device == b.device:",
           "b.is_c_contiguous and x.device == b.device:", EPILOGUE_PLANS),
    Mutant("epilogue-plan-skips-bias-layout", "a planned bias + activation reads a strided bias as contiguous",
           "magmadnn/backend/device/kernels/epilogue.py",
           "x.is_c_contiguous and b.is_c_contiguous and x.device == b.device:",
           "x.is_c_contiguous and x.device == b.device:", EPILOGUE_PLANS),
    Mutant("epilogue-plan-skips-devices", "a planned bias + activation adds a bias from another device",
           "magmadnn/backend/device/kernels/epilogue.py",
           "x.is_c_contiguous and b.is_c_contiguous and x.device == b.device:",
           "x.is_c_contiguous and b.is_c_contiguous:", EPILOGUE_PLANS),
    Mutant("epilogue-backward-plan-skips-z-shape", "a planned epilogue gradient reads a z of another shape",
           "magmadnn/backend/device/kernels/epilogue.py",
           "z.__class__ is _DeviceArray and z.dtype is dtype and z.shape == shape and",
           "z.__class__ is _DeviceArray and z.dtype is dtype and", EPILOGUE_PLANS),
    Mutant("epilogue-backward-plan-skips-z-layout", "a planned epilogue gradient reads a strided z as contiguous",
           "magmadnn/backend/device/kernels/epilogue.py",
           "z.device == device and z.is_c_contiguous)", "z.device == device)", EPILOGUE_PLANS),
    Mutant("epilogue-backward-plan-skips-y-dtype", "a planned epilogue gradient reads a y of another dtype",
           "magmadnn/backend/device/kernels/epilogue.py",
           "y.__class__ is _DeviceArray and y.dtype is dtype and", "y.__class__ is _DeviceArray and", EPILOGUE_PLANS),
    Mutant("epilogue-backward-plan-skips-devices", "a planned epilogue gradient reads a y from another device",
           "magmadnn/backend/device/kernels/epilogue.py",
           "y.device == device and y.is_c_contiguous)", "y.is_c_contiguous)", EPILOGUE_PLANS),
    Mutant("bias-add-plan-skips-x-layout", "a planned channel bias launches a strided x as if it were contiguous",
           "pymagma/kernels/elementwise.py",
           "            x.device == bias.device and x.is_c_contiguous and bias.is_c_contiguous:",
           "            x.device == bias.device and bias.is_c_contiguous:", BIAS_PLANS),
    Mutant("bias-add-plan-skips-devices", "a planned channel bias adds a bias from another device",
           "pymagma/kernels/elementwise.py",
           "            x.device == bias.device and x.is_c_contiguous and bias.is_c_contiguous:",
           "            x.is_c_contiguous and bias.is_c_contiguous:", BIAS_PLANS),
    Mutant("bias-add-plan-ignores-out", "a planned channel bias writes a new array when given out",
           "pymagma/kernels/elementwise.py",
           "if out is None and x.__class__ is bias.__class__ is _DeviceArray and x.dtype is bias.dtype and",
           "if x.__class__ is bias.__class__ is _DeviceArray and x.dtype is bias.dtype and", BIAS_PLANS),
    Mutant("xent-mean-grad-by-classes", "the mean loss's gradient divides the upstream gradient by the classes",
           "magmadnn/backend/device/kernels/loss.cu",
           ": A(1)) / (A)rows));  // stored", ": A(1)) / (A)classes));  // stored",
           FUSED),
    Mutant("keras-xent-weight-dropped", "Keras' fused cross entropy of probabilities ignores the sample weights",
           "magmadnn/backend/device/kernels/loss.cu",
           "part += Traits<T>::load(Traits<T>::store(row * Traits<T>::load(packed[r * (cols + 1) + cols])));",
           "part += Traits<T>::load(Traits<T>::store(row));", KERAS_XENT),
    Mutant("keras-xent-grad-not-through-sum", "the fused categorical gradient leaves out the division by the row sum",
           "magmadnn/backend/device/kernels/loss.cu",
           "dp[r * cols + j] = Traits<T>::store(gr * (dq - centre) / total);",
           "dp[r * cols + j] = Traits<T>::store(gr * (dq - centre));", KERAS_XENT),
    Mutant("keras-xent-binary-smoothing-full", "the fused binary gradient smooths targets by e instead of e / 2",
           "magmadnn/backend/device/kernels/loss.cu",
           "const A tj = Traits<T>::load(t[j]) * (A(1) - e) + e * A(0.5);\n                const A pj",
           "const A tj = Traits<T>::load(t[j]) * (A(1) - e) + e;\n                const A pj", KERAS_XENT),
    Mutant("norm-fused-skips-a-param-block", "layer norm's one-launch backward leaves its first parameter block out",
           "magmadnn/backend/device/kernels/norm.cu", "if (b < row_blocks) {", "if (b <= row_blocks) {", FUSED),
    Mutant("attention-heads-query-head-ignored", "attention over interleaved heads reads head 0's query for all",
           "magmadnn/backend/device/kernels/attention.cu",
           "const T* qi = q + ((b * d.tq + i) * d.heads + h) * d.dk;",
           "const T* qi = q + ((b * d.tq + i) * d.heads) * d.dk;", FUSED),
    Mutant("attention-heads-ds-unscaled", "attention's backward leaves the score scale out of the scores' gradient",
           "magmadnn/backend/device/kernels/attention.cu",
           "dsr[j] = Traits<T>::store((A)scale * Traits<T>::load(pr[j])",
           "dsr[j] = Traits<T>::store(Traits<T>::load(pr[j])", FUSED),
    Mutant("broadcast-divide-multiplies", "a reduction's gradient multiplied by the count instead of divided",
           "pymagma/kernels/elementwise.cu", "Traits<T>::load(x[ox]) / (A)divisor);",
           "Traits<T>::load(x[ox]) * (A)divisor);",
           ("tests/pymagma/test_kernels_emulated.py", "-k", "broadcast_divide")),
    Mutant("random-launch-half-short", "random kernels launched for n // 2 pairs (the last odd element unset)",
           "pymagma/kernels/random.py",
           'programs.expression(kernel, name), out, (n + 1) // 2,',
           'programs.expression(kernel, name), out, n // 2,', KERNELS),
    Mutant("copy-ignores-out-strides", "the strided copy writes out as if it were C-contiguous",
           "pymagma/kernels/elementwise.py",
           "s = make_strides3(x.shape, _elem_strides(x), _elem_strides(out))",
           "s = make_strides3(x.shape, _elem_strides(x), _c_strides(x.shape))", KERNELS),
    Mutant("array-api-tri-row-col-swapped", "tril/triu measure the diagonal as row - col instead of col - row",
           "pymagma/kernels/array_api.cu",
           "i64 d = i % cols - (i / cols) % rows;",
           "i64 d = (i / cols) % rows - i % cols;", (*KERNELS, "-k", "tril")),
    Mutant("array-api-take-unit-stride", "take's offsets ignore the element stride of the gathered axis",
           "pymagma/array_api/_indexing.py",
           "off = checked_offsets(indices, indices.shape, n, strides[a], a)",
           "off = checked_offsets(indices, indices.shape, n, 1, a)", (*KERNELS, "-k", "take")),
    Mutant("reduce-assumes-contiguous", "reductions read the kept axes with C-contiguous strides",
           "pymagma/kernels/reductions.py",
           "s = make_strides3(kept_shape, [strides[d] for d in kept], _c_strides(kept_shape))\n    r = ",
           "s = make_strides3(kept_shape, _c_strides(kept_shape), _c_strides(kept_shape))\n    r = ", KERNELS),
    Mutant("bias-add-channels-inner-swapped", "bias_add passes the inner size where the channel count goes",
           "pymagma/kernels/elementwise.py",
           "c_longlong(x.size), c_longlong(x.shape[1]), c_longlong(inner)])",
           "c_longlong(x.size), c_longlong(inner), c_longlong(x.shape[1])])", KERNELS),
    # ------------------------------------------------------------------ the array API's reductions and sorts
    Mutant("sort-merge-takes-right-on-ties", "the per-row merge sort takes the right run's element on ties (unstable)",
           "pymagma/kernels/array_api_reduce.cu",
           "if (ar_before<T>(descending, x[base + a[j] * x_stride], x[base + a[i] * x_stride])) b[k++] = a[j++];",
           "if (!ar_before<T>(descending, x[base + a[i] * x_stride], x[base + a[j] * x_stride])) b[k++] = a[j++];",
           ARRAY_API_REDUCE),
    Mutant("min-max-drops-nan", "min and max skip a NaN that is not the first element (NumPy propagates it)",
           "pymagma/kernels/array_api_reduce.cu",
           "if (v != v || (op == 2 ? v < best : best < v)) best = v;",
           "if (op == 2 ? v < best : best < v) best = v;", ARRAY_API_REDUCE),
    # ------------------------------------------------------------------------------------------- DeviceArrays
    Mutant("transpose-into-dims", "copy_into's device transpose given cols x rows and the wrong output ld",
           "pymagma/_copies.py",
           "transpose(rows, cols, src.ptr + s_off, max(ld, 1), dst.ptr + d_off, max(cols, 1), q)",
           "transpose(cols, rows, src.ptr + s_off, max(ld, 1), dst.ptr + d_off, max(rows, 1), q)", ARRAYS),
    Mutant("memcpy2d-pitches-swapped", "copy_into's 2-D memcpy gets the source pitch for the destination and back",
           "pymagma/_copies.py",
           "d_str[-2] if shape[-2] > 1 else width, src.ptr + s_off,\n"
           "                              s_str[-2] if shape[-2] > 1 else width,",
           "s_str[-2] if shape[-2] > 1 else width, src.ptr + s_off,\n"
           "                              d_str[-2] if shape[-2] > 1 else width,", ARRAYS),
    # ------------------------------------------------------------------------------------- cuBLAS half gemm
    Mutant("gemm-ex-transposes-swapped", "cublasGemmEx given transB where transA goes and back",
           "pymagma/_blas_half.py",
           '_cublas.call("cublasGemmEx", handle, c.transA - N, c.transB - N,',
           '_cublas.call("cublasGemmEx", handle, c.transB - N, c.transA - N,', HALF_GEMM),
    Mutant("gemm-ex-magma-enum", "cublasGemmEx given MAGMA's trans values (111/112) instead of cuBLAS's (0/1)",
           "pymagma/_blas_half.py",
           "head = (handle, c.transA - N, c.transB - N, c.m, c.n, c.k, ctypes.byref(al))",
           "head = (handle, c.transA, c.transB, c.m, c.n, c.k, ctypes.byref(al))", HALF_GEMM),
    Mutant("gemm-ex-lds-swapped", "cublasGemmEx given B's leading dimension for A and A's for B",
           "pymagma/_blas_half.py",
           "c.A.ld, second, at, c.B.ld, ctypes.byref(be)",
           "c.B.ld, second, at, c.A.ld, ctypes.byref(be)", HALF_GEMM),
    Mutant("gemm-ex-operands-unswapped", "cublasGemmEx passes A then B even when the plan computes C^T = B^T A^T",
           "pymagma/_blas_half.py",
           "first, second = (b.ptr, a.ptr) if c.swapped else (a.ptr, b.ptr)\n    if a.dtype == np.float16",
           "first, second = a.ptr, b.ptr\n    if a.dtype == np.float16", HALF_GEMM),
    Mutant("gemm-ex-ldc-rows", "cublasGemmEx given the row count of C as its leading dimension",
           "pymagma/_blas_half.py",
           "ctypes.byref(be), out.ptr, ct, c.C.ld,",
           "ctypes.byref(be), out.ptr, ct, c.m,", HALF_GEMM),
    Mutant("gemm-strided-ex-strides-swapped", "cublasGemmStridedBatchedEx given B's batch stride for A and back",
           "pymagma/_blas_half.py",
           "c.A.ptr, at, c.A.ld, sa, c.B.ptr, at, c.B.ld, sb,",
           "c.A.ptr, at, c.A.ld, sb, c.B.ptr, at, c.B.ld, sa,", HALF_GEMM),
    Mutant("half-batch-strides-in-c-items", "half batched strides counted in C's items (float32 out)",
           "pymagma/_blas_plans.py",
           "items = [x.dtype.itemsize for x in (b, a, c) if call.swapped] or [x.dtype.itemsize for x in (a, b, c)]",
           "items = [c.dtype.itemsize] * 3", HALF_GEMM),
    Mutant("gemm-ex-float32-out-ignored", "a float32 out_dtype of half operands gets the half type",
           "pymagma/_blas_half.py",
           "wanted = np.dtype(out_dtype) if out_dtype is not None else",
           "wanted = a.dtype if out_dtype is not None else", HALF_GEMM),
    Mutant("hgemmx-lds-swapped", "magma_hgemmx given B's leading dimension for A and A's for B",
           "pymagma/_blas_half.py",
           "first, c.A.ld, second,\n                             c.B.ld, ctypes.c_float(beta)",
           "first, c.B.ld, second,\n                             c.A.ld, ctypes.c_float(beta)", HALF_GEMM),
    Mutant("hgemmx-ldc-rows", "magma_hgemmx given the row count of C as its leading dimension",
           "pymagma/_blas_half.py",
           "ctypes.c_float(beta), out.ptr, c.C.ld, out.queue.handle)",
           "ctypes.c_float(beta), out.ptr, c.m, out.queue.handle)", HALF_GEMM),
    # a library's bind: a routine bound before is found at once until what its checks read changes
    Mutant("bind-kept-while-hidden-changes", "a routine bound before stays bound when its family is hidden in place",
           "pymagma/simulator/exports.py", "        result = method(self, *args)\n        self._changed()\n",
           "        result = method(self, *args)\n", BIND),
    Mutant("bind-kept-when-hidden-is-assigned", "a routine bound before stays bound when a new hidden set is given",
           "pymagma/simulator/magma.py",
           "self._hidden = HiddenFamilies(families, self._bound.clear)\n        self._bound.clear()",
           "self._hidden = HiddenFamilies(families, self._bound.clear)", BIND),
    Mutant("bind-kept-when-exports-change", "a routine bound before stays bound under an export list without it",
           "pymagma/simulator/magma.py", "self._exports = names\n        self._bound.clear()",
           "self._exports = names", BIND),
    Mutant("tf32-never-set", "allow_tf32 never reaches the queue's cuBLAS handle",
           "pymagma/blas.py",
           "fast path, inline)\n    if tf32 and queue.tf32 != bool(allow_tf32):",
           "fast path, inline)\n    if tf32 and queue.tf32 != bool(allow_tf32) and False:", HALF_GEMM),
    Mutant("gemm-plan-tf32-never-set", "a planned gemm (the second call of one signature) leaves the queue's math "
           "mode as it was", "pymagma/blas.py",
           "or out.queue\n            if tf32 and queue.tf32 != bool(allow_tf32):",
           "or out.queue\n            if tf32 and queue.tf32 != bool(allow_tf32) and False:", HALF_GEMM),
    # --------------------------------------------------------------------- the array API's linalg extension
    Mutant("api-diagonal-offset-mirrored", "linalg.diagonal/trace: a positive offset walks below the diagonal",
           "pymagma/array_api/_norms.py",
           "rows, cols = (0, offset) if offset >= 0 else (-offset, 0)",
           "rows, cols = (offset, 0) if offset >= 0 else (0, -offset)", ARRAY_API_LINALG),
    Mutant("api-tensordot-axes-sorted", "tensordot contracts x2's axes in sorted order, not in the order given",
           "pymagma/array_api/_products.py",
           "right = x2.transpose(*a2, *[i for i in range(x2.ndim) if i not in a2])",
           "right = x2.transpose(*sorted(a2), *[i for i in range(x2.ndim) if i not in a2])", ARRAY_API_LINALG),
    Mutant("api-integer-matmul-first-row", "integer matmul multiplies every column of a by b's first row",
           "pymagma/array_api/_products.py",
           "term = multiply(a[..., :, j:j + 1], b[..., j:j + 1, :])",
           "term = multiply(a[..., :, j:j + 1], b[..., 0:1, :])", ARRAY_API_LINALG),
    Mutant("hybrid-svd-scale-not-undone", "the hybrid svd's LAPACK scaling is applied twice instead of undone",
           "pymagma/linalg/svd.py",
           "        s = s / s.dtype.type(factor)",
           "        s = s * s.dtype.type(factor)", ARRAY_API_LINALG),
    # --------------------------------------------------------------------- cuFFT (the plan's layout arguments)
    Mutant("fft-stride-and-distance-swapped", "the innermost stride passed as idist and the batch distance as istride",
           "pymagma/_fft.py", "    return n, tuple(embed), st[-1], batch, dist",
           "    return n, tuple(embed), dist, batch, st[-1]", FFT),
    Mutant("fft-embed-is-the-size", "inembed[k] taken as the transform size, not the rows' pitch in memory",
           "pymagma/_fft.py", "embed.append(st[k - 1] // st[k])", "embed.append(n[k])", FFT),
    Mutant("fft-batches-merged-blindly", "batch axes of different strides merged into one idist",
           "pymagma/_fft.py", "        if step != dist * batch:\n            return None",
           "        if False:\n            return None", FFT),
    Mutant("fft-output-layout-from-input", "the output described with the input's stride and distance",
           "pymagma/_fft.py", "_, oembed, ostride, _, odist = o", "_, oembed, ostride, _, odist = described", FFT),
    Mutant("fft-half-spectrum-size", "the R2C output keeps (n + 1) // 2 values, not n // 2 + 1 (one short for even n)",
           "pymagma/_fft.py", "    return n // 2 + 1", "    return (n + 1) // 2", FFT),
    Mutant("fft-normalisation-missing", "cuFFT's unnormalised result returned for norm='forward'/'backward'",
           "pymagma/_fft.py", 'return 1.0 / count if (norm == "forward") == forward else 1.0', "return 1.0", FFT),
    Mutant("fft-normalisation-direction", "the 1/n put on the direction norm does not name",
           "pymagma/_fft.py", '(norm == "forward") == forward else 1.0', '(norm == "forward") != forward else 1.0',
           FFT),
    Mutant("fft-inverse-runs-forward", "CUFFT_FORWARD for the inverse transforms too",
           "pymagma/_fft.py", "return _cufft.FORWARD if forward else _cufft.INVERSE", "return _cufft.FORWARD", FFT),
    Mutant("fft-c2r-overwrites-the-input", "the caller's half spectrum handed to C2R, which overwrites it",
           "pymagma/_fft.py", "    if not owned:  # C2R overwrites what it reads", "    if False:", FFT),
    Mutant("fft-hfft-not-conjugated", "hfft transforms the half spectrum without conjugating it",
           "pymagma/fft.py", "    _fft.conjugate(spectrum)\n", "    spectrum = spectrum\n", FFT),
    Mutant("fft-ifftshift-as-fftshift", "ifftshift rolls by n // 2 like fftshift (wrong for odd n)",
           "pymagma/fft.py", "(-1 if inverse else 1)", "1", FFT),

    # ------------------------------------------------------------------- the one-frame upload's inline checks
    Mutant("upload-copy-error-unchecked", "asarray's inline cudaMemcpy ignores a failing return code",
           "pymagma/array.py", "if int(err := result[0] if isinstance(result, tuple) else result) != 0:",
           "if False and int(err := result[0] if isinstance(result, tuple) else result) != 0:", UPLOAD),
    Mutant("upload-get-device-error-unchecked", "asarray's inline cudaGetDevice ignores a failing return code",
           "pymagma/array.py", "if int((result := libraries.cudart.cudaGetDevice())[0]) != 0:",
           "if False and int((result := libraries.cudart.cudaGetDevice())[0]) != 0:", UPLOAD),
    Mutant("upload-replaced-require-device-skipped", "asarray asks require_device only before the count is read",
           "pymagma/array.py",
           'if not libraries.__dict__.get("device_count") or (runtime.require_device, runtime.device_count) != '
           "_ORIGINAL:", 'if not libraries.__dict__.get("device_count"):', UPLOAD),
    Mutant("upload-copy-kind-wrong", "asarray's inline copy names the device-to-host kind",
           "pymagma/array.py", "rt.cudaMemcpyKind.cudaMemcpyHostToDevice)",
           "rt.cudaMemcpyKind.cudaMemcpyDeviceToHost)", UPLOAD),
    Mutant("upload-during-capture", "asarray of host data no longer refused while the thread captures a graph",
           "pymagma/array.py", 'if runtime.capture_state.__dict__.get("graph") is not None:  # (refuse_during_',
           'if False:  # (refuse_during_', UPLOAD),
    Mutant("upload-pool-error-raw", "asarray lets the pool's MemoryError out without NumPy's words",
           "pymagma/array.py", "raise _out_of_memory(shape, checked, device, exc) from None", "raise", UPLOAD),

    # ------------------------------------- blocks given back by weak-reference tokens the pool keeps (no finalizer)
    Mutant("output-token-not-kept", "an output's token (the fast path inline in _empty) not kept in the pool's live: "
           "it dies at once and the block never comes back", "pymagma/array.py",
           "        live[ptr] = token\n        out.owner = pool  # (as",
           "        out.owner = pool  # (as", MEMORY),
    Mutant("lease-token-not-kept", "Pool.lease's token not kept in live (only the user reaches it: lost with the "
           "user, the block never comes back)", "pymagma/memory.py",
           "        token.ptr = ptr\n        self.live[ptr] = token\n", "        token.ptr = ptr\n", MEMORY),
    Mutant("trusted-token-not-kept", "Allocation.trusted's token not kept in live", "pymagma/memory.py",
           "        pool.live[ptr] = token\n        a._pool = pool\n", "        a._pool = pool\n", MEMORY),
    Mutant("upload-token-not-kept", "the upload's token (inline in asarray) not kept in live", "pymagma/array.py",
           "            live[ptr] = token\n            out.owner = pool\n    except MemoryError",
           "            out.owner = pool\n    except MemoryError", UPLOAD + MEMORY),
    Mutant("relaxed-pool-token", "a graph's (relaxed) pool gives blocks back by the free list's append, not a "
           "keeper's finalizer (a closed pool never frees what comes back)", "pymagma/memory.py",
           "        if self.relaxed:\n            keeper = _Keeper()",
           "        if False:\n            keeper = _Keeper()", MEMORY),
    Mutant("measured-pool-outputs-hit", "a measured pool's kept output look-ups hit (track_peak misses the peaks "
           "of outputs taken from the cache)", "pymagma/memory.py",
           "        return {}  # (what is stored in it is dropped)", '        return self.__dict__["outputs"]',
           ("tests/pymagma/test_memory_peak.py",)),
    # ------------------------------------------------- a layer plan's inline Function.apply (magmadnn.layers.plans)
    Mutant("plan-apply-records-under-no-grad", "a planned two-weight call records its Function inside no_grad",
           "magmadnn/layers/plans.py",
           "if (x.requires_grad or w0.requires_grad or w1.requires_grad) and _state.enabled:",
           "if x.requires_grad or w0.requires_grad or w1.requires_grad:", PLAN_APPLY),
    Mutant("plan-apply-input-grad-flags", "a planned one-weight call marks every input as needing its gradient",
           "magmadnn/layers/plans.py",
           "fn.inputs, fn.needs_input_grad = (x, w0), (x.requires_grad, w0.requires_grad)",
           "fn.inputs, fn.needs_input_grad = (x, w0), (True, True)", PLAN_APPLY),
    Mutant("plan-apply-records-without-grad", "a planned call without weights records its Function for an input "
           "that needs no gradient", "magmadnn/layers/plans.py",
           "if x.requires_grad and _state.enabled:", "if _state.enabled:", PLAN_APPLY),
    Mutant("plan-pair-apply-grad-flags", "a planned two-input call (Add) marks both inputs as needing their gradient",
           "magmadnn/layers/plans.py", "fn.inputs, fn.needs_input_grad = (a, b), (a.requires_grad, b.requires_grad)",
           "fn.inputs, fn.needs_input_grad = (a, b), (True, True)", PLAN_APPLY),
    Mutant("plan-batch-norm-records-under-no-grad", "a planned BatchNorm call records its Function inside no_grad",
           "magmadnn/layers/normalization.py",
           "if (x.requires_grad or gamma.requires_grad or beta.requires_grad) and _state.enabled:",
           "if x.requires_grad or gamma.requires_grad or beta.requires_grad:", PLAN_APPLY),
    Mutant("loss-plan-records-under-no-grad", "a planned cross-entropy batch records its Function inside no_grad",
           "magmadnn/_loss_plans.py", "if outputs.requires_grad and _state.enabled:", "if outputs.requires_grad:",
           ("tests/magmadnn/test_loss_plans.py", "-k", "records")),
    # ------------------------------------------------------- the training step's shortcuts (magmadnn.models.step)
    Mutant("step-direct-update-ignores-own-step", "train_step runs the planned update of an optimizer whose step is "
           "its own (a subclass's, one set on the instance)", "magmadnn/models/step.py",
           'getattr(opt.step, "__func__", None) is _BASE_STEP and opt._step_plan', "opt._step_plan",
           STEP_SHORTCUTS),
    Mutant("step-direct-update-ignores-count", "train_step runs the planned update for another parameter count "
           "(Optimizer.step's refusal skipped)", "magmadnn/models/step.py",
           "and opt._count == len(params) and _foreach", "and _foreach", STEP_SHORTCUTS),
    # ------------------------------------------------- the unwrapped device ops' plans (what their keys skip)
    Mutant("xent-mean-grad-plan-ignores-dloss-shape", "the planned mean softmax gradient takes a dloss of any shape",
           "magmadnn/backend/device/kernels/loss.py",
           "None if dloss is None else (dloss.__class__, dloss.shape, dloss.dtype, dloss.device))",
           "None if dloss is None else (dloss.__class__, dloss.dtype, dloss.device))", UNWRAPPED),
    Mutant("xent-mean-grad-plan-ignores-dloss-dtype", "the planned mean softmax gradient takes a dloss of any dtype",
           "magmadnn/backend/device/kernels/loss.py",
           "None if dloss is None else (dloss.__class__, dloss.shape, dloss.dtype, dloss.device))",
           "None if dloss is None else (dloss.__class__, dloss.shape, dloss.device))", UNWRAPPED),
    Mutant("xent-mean-grad-plan-ignores-labels-dtype", "the planned mean softmax gradient takes labels of any dtype",
           "magmadnn/backend/device/kernels/loss.py", "labels.__class__, labels.shape, labels.dtype,\n",
           "labels.__class__, labels.shape,\n", UNWRAPPED),
    Mutant("xent-mean-grad-plan-ignores-probs-shape", "the planned mean softmax gradient takes probs of any shape",
           "magmadnn/backend/device/kernels/loss.py",
           "key = (probs.__class__, probs.shape, probs.dtype, probs.device, labels.__class__",
           "key = (probs.__class__, probs.dtype, probs.device, labels.__class__", UNWRAPPED),
    Mutant("xent-mean-grad-plan-strided-probs", "the planned mean softmax gradient reads strided probs as contiguous",
           "magmadnn/backend/device/kernels/loss.py",
           "    if not probs.is_c_contiguous:\n        probs = contiguous(probs)\n    if not labels.is_c_contiguous:\n"
           "        labels = contiguous(labels)\n    if dloss is not None and not dloss.is_c_contiguous:\n"
           "        dloss = contiguous(dloss)\n    device = probs.device\n",
           "    device = probs.device\n", UNWRAPPED),
    Mutant("check-plan-ignores-queue", "a planned range check writes the record of a queue no longer the default one",
           "magmadnn/backend/device/faults.py",
           "queue_ref() is queue and (record := record_ref()) is not None:\n            _dk.check_range(",
           "(record := record_ref()) is not None:\n            _dk.check_range(", UNWRAPPED),
    Mutant("sgd-op-rate-unchecked", "the SGD op takes a rate that is not finite",
           "magmadnn/backend/device/kernels/optim.py", "if not math.isfinite(lr + momentum + weight_decay):",
           "if False:", UNWRAPPED),
    Mutant("adam-op-rate-unchecked", "the Adam op takes a rate that is not finite",
           "magmadnn/backend/device/kernels/optim.py", "if not math.isfinite(lr + beta1 + beta2 + eps + weight_decay):",
           "if False:", UNWRAPPED),
    Mutant("check-binary-plan-ignores-dtype", "a planned 0/1 check reads values of another dtype as the planned one's",
           "pymagma/kernels/check.py", 'key = ("check_binary", x.__class__, x.dtype, x.device,',
           'key = ("check_binary", x.__class__, x.device,', UNWRAPPED),
    Mutant("faults-binary-plan-ignores-message", "a planned 0/1 check reports another check's message",
           "magmadnn/backend/device/faults.py", 'key = ("binary", x.__class__, x.dtype, x.device, message)',
           'key = ("binary", x.__class__, x.dtype, x.device)', UNWRAPPED),
    Mutant("dropout-plan-seed-unchecked", "a planned dropout takes a negative seed (wrapped to 2**64 - 1)",
           "magmadnn/backend/device/kernels/dropout.py", "and 0 <= seed < _LIMIT and", "and", UNWRAPPED),
    Mutant("dropout-plan-ignores-shape", "a planned dropout launches over another shape's size",
           "magmadnn/backend/device/kernels/dropout.py",
           "key = (x.__class__, x.shape, x.dtype, x.device, rate.__class__, rate)",
           "key = (x.__class__, x.dtype, x.device, rate.__class__, rate)", UNWRAPPED),
    # ------------------------------------------------------- the device backend's inline cuDNN calls and kept launches
    Mutant("inline-conv-fwd-x-w-swapped", "the device's inline forward convolution passes w's data where x goes",
           "magmadnn/backend/device/conv.py",
           "d0, xin.ptr, d1, w.ptr, d2, algo,\n                                                      space.ptr,",
           "d0, w.ptr, d1, xin.ptr, d2, algo,\n                                                      space.ptr,",
           INLINE_CUDNN),
    Mutant("inline-conv-bwd-data-w-dy-swapped", "the device's inline backward data passes dy's data where w goes",
           "magmadnn/backend/device/conv.py",
           "d0, w.ptr, d1, dy.ptr, d2, algo,\n                                                           space.ptr,",
           "d0, dy.ptr, d1, w.ptr, d2, algo,\n                                                           space.ptr,",
           INLINE_CUDNN),
    Mutant("inline-conv-bwd-filter-x-dy-swapped", "the device's inline backward filter passes dy's data where x goes",
           "magmadnn/backend/device/conv.py",
           "d0, xin.ptr, d1, dy.ptr, d2,\n"
           "                                                             algo, space.ptr,",
           "d0, dy.ptr, d1, xin.ptr, d2,\n"
           "                                                             algo, space.ptr,",
           INLINE_CUDNN),
    Mutant("inline-conv-keeps-swapped-out-cudnn", "the device's inline forward convolution calls the function it was "
           "bound to, whichever cuDNN object is in use", "magmadnn/backend/device/conv.py",
           "    if home and plan.cudnn is libraries.cudnn and (not not _dnn.allow_tf32, xin.__class__, w.__class__,",
           "    if home and plan.cudnn is not None and (not not _dnn.allow_tf32, xin.__class__, w.__class__,",
           INLINE_CUDNN),
    Mutant("inline-conv-ignores-tf32", "the device's inline forward convolution ignores pymagma.dnn.allow_tf32",
           "magmadnn/backend/device/conv.py",
           "(not not _dnn.allow_tf32, xin.__class__, w.__class__,", "(plan.tf32, xin.__class__, w.__class__,",
           DEVICE_PLANS),
    Mutant("inline-conv-strided-w", "the device's forward convolution passes a strided w to its inline call as it is",
           "magmadnn/backend/device/conv.py",
           "    w = w if w.is_c_contiguous else _contiguous(w)\n    # ConvPlan.forward, inline",
           "    # ConvPlan.forward, inline", INLINE_CUDNN),
    Mutant("inline-conv-workspace-kept", "the device's inline forward convolution never gives its workspace back",
           "magmadnn/backend/device/conv.py",
           "plan.beta, d3, y.ptr)\n            finally:\n                blocks.append(space)",
           "plan.beta, d3, y.ptr)\n            finally:\n                pass", INLINE_CUDNN),
    Mutant("inline-bn-saved-mean-invstd-swapped", "the device's inline batch norm writes the saved mean and inverse "
           "std swapped", "magmadnn/backend/device/normalization.py",
           "_BN_MIN_EPSILON)),\n            mean_.ptr, inv_std.ptr)",
           "_BN_MIN_EPSILON)),\n            inv_std.ptr, mean_.ptr)", INLINE_CUDNN),
    Mutant("inline-bn-momentum-as-is", "the device's inline batch norm gives cuDNN the op set's momentum, not 1 - it",
           "magmadnn/backend/device/normalization.py",
           "1.0 - momentum, running_mean.ptr", "momentum, running_mean.ptr", INLINE_CUDNN),
    Mutant("inline-bn-parameters-unchecked", "the device's inline batch norm takes parameters of any layout",
           "magmadnn/backend/device/normalization.py",
           "x.device) == plan.forward_layouts", "x.device) != None", INLINE_CUDNN),
    Mutant("inline-bn-bwd-layouts-unchecked", "the device's inline batch-norm backward takes operands of any layout",
           "magmadnn/backend/device/normalization.py",
           "inv_std.device) == plan.backward_layouts", "inv_std.device) != None", INLINE_CUDNN),
    Mutant("inline-bn-bwd-dscale-dbias-swapped", "the device's inline batch-norm backward writes dscale and dbias "
           "swapped", "magmadnn/backend/device/normalization.py",
           "gamma.ptr,\n            dscale.ptr, dbias.ptr, eps,", "gamma.ptr,\n            dbias.ptr, dscale.ptr, eps,",
           INLINE_CUDNN),
    Mutant("inline-activation-bwd-x-y-swapped", "the device's inline activation backward gets x where y goes",
           "magmadnn/backend/device/activations.py",
           "xd, y.ptr, xd, dy.ptr, xd, x.ptr,", "xd, x.ptr, xd, dy.ptr, xd, y.ptr,", INLINE_CUDNN),
    Mutant("inline-activation-strided-dy", "the device's activation backward passes a strided dy to its inline call",
           "magmadnn/backend/device/activations.py",
           "y, dy = y if y.is_c_contiguous else _contiguous(y), dy if dy.is_c_contiguous else _contiguous(dy)",
           "y = y if y.is_c_contiguous else _contiguous(y)", INLINE_CUDNN),
    Mutant("kept-max-pool-offsets-y-swapped", "the device's kept max-pooling launch writes the maxima's offsets "
           "where y goes", "magmadnn/backend/device/pooling.py",
           "[x.ptr, y.ptr, offsets.ptr, g]", "[x.ptr, offsets.ptr, y.ptr, g]", INLINE_CUDNN),
    Mutant("kept-max-pool-bwd-any-offsets", "the device's kept max-pooling backward takes offsets of any dtype",
           "magmadnn/backend/device/pooling.py",
           "ctx.dtype != _INT32 or", "False or", INLINE_CUDNN),
    Mutant("kept-launch-of-a-list", "a pooling or padding launch is kept for a geometry of any type (a list its "
           "owner changes in place)", "magmadnn/backend/device/kernels/pool.py",
           "        if value.__class__ is not tuple or not all(",
           "        if False and not all(", INLINE_CUDNN),
    Mutant("inline-activation-strided-x", "the device's activation forward passes a strided x to its inline call",
           "magmadnn/backend/device/activations.py",
           "        x = x if x.is_c_contiguous else _contiguous(x)\n        options = (kind, float(alpha)) if kind == "
           "\"elu\" else (kind, None)\n        # pymagma",
           "        options = (kind, float(alpha)) if kind == \"elu\" else (kind, None)\n        # pymagma",
           INLINE_CUDNN),
    Mutant("inline-bn-strided-x", "the device's batch norm passes a strided x to its inline call",
           "magmadnn/backend/device/normalization.py",
           "    x = x if x.is_c_contiguous else _contiguous(x)\n    # pymagma._dnn_plans.batch_norm_plan_of",
           "    # pymagma._dnn_plans.batch_norm_plan_of", INLINE_CUDNN),
    Mutant("inline-bn-bwd-strided-dy", "the device's batch-norm backward passes a strided dy to its inline call",
           "magmadnn/backend/device/normalization.py",
           "x, dy = x if x.is_c_contiguous else _contiguous(x), dy if dy.is_c_contiguous else _contiguous(dy)",
           "x = x if x.is_c_contiguous else _contiguous(x)", INLINE_CUDNN),
    Mutant("inline-conv-bwd-data-strided-dy", "the device's backward data passes a strided dy to its inline call",
           "magmadnn/backend/device/conv.py",
           "dy, w = dy if dy.is_c_contiguous else _contiguous(dy), w if w.is_c_contiguous else _contiguous(w)",
           "w = w if w.is_c_contiguous else _contiguous(w)", INLINE_CUDNN),
    Mutant("inline-bn-bwd-saved-swapped", "the device's inline batch-norm backward reads the saved inverse std as "
           "the mean and back", "magmadnn/backend/device/normalization.py",
           "dbias.ptr, eps, mean_.ptr, inv_std.ptr)", "dbias.ptr, eps, inv_std.ptr, mean_.ptr)", INLINE_CUDNN),
    # the host: fit's data check per batch where a later fit skips the whole-array pass; geometry plans by identity
    Mutant("fit-batches-skip-finite-check", "a later fit's shuffled batches no longer check the data they gather",
           "magmadnn/models/batches.py", 'finite_array(batch[i], what, "fit", index)', "pass",
           ("tests/magmadnn/backend/test_host_plans.py", "-k", "changed_in_place")),
    Mutant("host-plans-by-value", "the host's geometry plans keyed by the tuples' values (2 and 2.0 alike)",
           "magmadnn/backend/host/_common.py", "key = args[:by_value] + tuple(map(id, objects))", "key = args",
           ("tests/magmadnn/backend/test_host_plans.py", "-k", "same_objects or planned")),
    # ----------------------------------------------- the device convolution's and activation's one-comparison checks
    Mutant("inline-conv-pad-launch-skipped", "the device's forward convolution's inline zero padding never launches "
           "its kept launch", "magmadnn/backend/device/conv.py", "            if grid:  # (common._run, inline)\n"
           "                libraries.launcher.launch(\"pool\"", "            if not grid:  # (common._run, inline)\n"
           "                libraries.launcher.launch(\"pool\"", INLINE_CUDNN),
    Mutant("inline-conv-bwd-data-dy-layout-unchecked", "the device's inline backward data never compares dy's shape "
           "with the plan's", "magmadnn/backend/device/conv.py",
           "(not not _dnn.allow_tf32, dy.__class__, w.__class__, dy.shape,",
           "(not not _dnn.allow_tf32, dy.__class__, w.__class__, plan.y_shape,", INLINE_CUDNN),
    Mutant("inline-conv-bwd-filter-dy-layout-unchecked", "the device's inline backward filter never compares dy's "
           "shape with the plan's", "magmadnn/backend/device/conv.py",
           "xin.__class__, dy.__class__, xin.shape, dy.shape, xin.dtype",
           "xin.__class__, dy.__class__, xin.shape, plan.y_shape, xin.dtype", INLINE_CUDNN),
    Mutant("inline-activation-bwd-dy-layout-unchecked", "the device's inline activation backward never compares dy's "
           "layout with the plan's", "magmadnn/backend/device/activations.py",
           "y.__class__, dy.__class__, y.shape, y.dtype, y.device, dy.shape, dy.dtype, dy.device)",
           "y.__class__, dy.__class__, y.shape, y.dtype, y.device, y.shape, y.dtype, y.device)", INLINE_CUDNN),
    Mutant("output-owner-not-pool", "an op's output (inline in _empty) no longer holds its pool: a pool nothing else "
           "holds, and the runtime its blocks live in, can go while the array still uses one",
           "pymagma/array.py", "        out.owner = pool  # (as", "        out.owner = None  # (as",
           ("tests/pymagma/test_memory_pool.py", "-k", "keeps_its_pool")),
]


# --------------------------------------------------------------------------------------------------- running
@dataclass
class Outcome:
    status: str  # "caught", "SURVIVED", "TIMEOUT", "BROKEN" (collection/import error), "ERROR" (pytest itself)
    caught_by: str
    seconds: float
    output: str


def check_mutants(mutants) -> list[str]:
    """Problems that make a mutant stale or ambiguous (its snippet not exactly once in its file, or a no-op)."""
    problems, seen = [], set()
    for m in mutants:
        if m.id in seen:
            problems.append(f"{m.id}: duplicate id")
        seen.add(m.id)
        path = ROOT / m.file
        if not path.is_file():
            problems.append(f"{m.id}: {m.file} does not exist")
            continue
        count = path.read_text().count(m.old)
        if count != 1:
            problems.append(f"{m.id}: its snippet occurs {count} times in {m.file} (must be exactly once): "
                            f"{m.old!r}")
        if m.old == m.new:
            problems.append(f"{m.id}: the replacement equals the snippet")
        for arg in m.tests:
            if arg.startswith("tests/") and not (ROOT / arg.split("::")[0]).exists():
                problems.append(f"{m.id}: test selection {arg} does not exist")
    return problems


def _copy_tree(dest: Path) -> None:
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=IGNORED)
        else:
            shutil.copy2(src, dest / name)


def _environment(copy: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["MAGMADNN_REQUIRE"] = "native"  # a skipped native test fails: no mutant survives by skipping
    env.pop("PYMAGMA_SIMULATOR", None)  # the tests turn the simulator on themselves
    return env


def _first_failure(output: str) -> str:
    match = re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)
    return match.group(1) if match else ""


def run(mutant: Mutant | None, tests: tuple[str, ...], timeout: float) -> Outcome:
    """pytest ``tests`` in a fresh copy of the repository, with ``mutant`` applied (None: unmutated)."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        copy = Path(tmp)
        _copy_tree(copy)
        if mutant is not None:
            path = copy / mutant.file
            path.write_text(path.read_text().replace(mutant.old, mutant.new, 1))
        probe = subprocess.run([sys.executable, "-c", "import pymagma, magmadnn; print(pymagma.__file__); "
                                "print(magmadnn.__file__)"], cwd=copy, env=_environment(copy),
                               capture_output=True, text=True, timeout=120)
        if probe.returncode != 0 or any(not Path(p).resolve().is_relative_to(copy.resolve())
                                        for p in probe.stdout.split()):
            return Outcome("BROKEN" if probe.returncode else "ERROR",
                           "import failed" if probe.returncode else "the copy's packages are not the ones imported",
                           time.monotonic() - start, probe.stdout + probe.stderr)
        try:
            done = subprocess.run([sys.executable, "-m", "pytest", *PYTEST_OPTIONS, *tests], cwd=copy,
                                  env=_environment(copy), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            return Outcome("TIMEOUT", f"no result within {timeout:.0f} s", time.monotonic() - start, out)
    output = done.stdout + done.stderr
    seconds = time.monotonic() - start
    if done.returncode == 0:
        return Outcome("SURVIVED" if mutant else "passed", "", seconds, output)
    failure = _first_failure(output)
    if done.returncode == 1:
        return Outcome("caught", failure or "(a failure; no test id found)", seconds, output)
    if "ERROR collecting" in output or "ImportError" in output or "SyntaxError" in output:
        return Outcome("BROKEN", failure or "collection error", seconds, output)
    return Outcome("ERROR", f"pytest exit status {done.returncode}", seconds, output)


def _table(rows) -> str:
    headers = ("ID", "WHAT", "FILE", "CAUGHT BY")
    cells = [headers] + [(m.id, m.what, m.file, o.caught_by if o.status == "caught" else
                          f"{o.status}: {o.caught_by}" if o.caught_by else o.status) for m, o in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(3)]
    lines = []
    for r in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3])
    lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * len(headers[3]))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated mutant ids to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and their tests, run nothing")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per test run (default 600)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)

    mutants = MUTANTS
    if args.only:
        wanted = [i.strip() for i in args.only.split(",") if i.strip()]
        unknown = sorted(set(wanted) - {m.id for m in MUTANTS})
        if unknown:
            parser.error(f"unknown mutant ids: {', '.join(unknown)}")
        mutants = [m for m in MUTANTS if m.id in wanted]
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    problems = check_mutants(mutants)
    if problems:
        print("stale or ambiguous mutants (update their snippets to the current source):", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 2
    if args.list:
        for m in mutants:
            print(f"{m.id:34} {m.file:30} {m.what}\n{'':34} tests: {' '.join(m.tests)}")
        print(f"{len(mutants)} mutants")
        return 0

    started = time.monotonic()
    selections = sorted({m.tests for m in mutants})
    print(f"baseline: {len(selections)} test selections, unmutated", flush=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        baselines = list(pool.map(lambda t: run(None, t, args.timeout), selections))
    failed = [(t, o) for t, o in zip(selections, baselines) if o.status != "passed"]
    for tests, outcome in zip(selections, baselines):
        print(f"  {outcome.status:8} {outcome.seconds:6.1f} s  {' '.join(tests)}", flush=True)
    if failed:
        for tests, outcome in failed:
            print(f"\nthe baseline must pass: {' '.join(tests)}: {outcome.status} {outcome.caught_by}\n"
                  f"{outcome.output[-3000:]}", file=sys.stderr)
        return 1

    def one(m: Mutant) -> Outcome:
        outcome = run(m, m.tests, args.timeout)
        print(f"  {m.id:34} {outcome.status:8} {outcome.seconds:6.1f} s  {outcome.caught_by}", flush=True)
        return outcome

    print(f"{len(mutants)} mutants, {args.jobs} at a time", flush=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        outcomes = list(pool.map(one, mutants))
    rows = list(zip(mutants, outcomes))
    elapsed = time.monotonic() - started
    print()
    print(_table(rows))
    bad = [(m, o) for m, o in rows if o.status != "caught"]
    print(f"\n{len(rows) - len(bad)} of {len(rows)} mutants caught in {elapsed:.0f} s ({args.jobs} jobs)")
    for m, o in bad:
        print(f"\n{m.id}: {o.status}\n{o.output[-2000:]}", file=sys.stderr)
    if args.json:
        sys.path.insert(0, str(ROOT))
        from magmadnn._atomic import write_text  # noqa: PLC0415 - an atomic write: a failed one keeps the old file

        write_text(args.json, json.dumps({
            "seconds": round(elapsed, 1), "jobs": args.jobs,
            "baseline": [{"tests": list(t), "status": o.status, "seconds": round(o.seconds, 1)}
                         for t, o in zip(selections, baselines)],
            "mutants": [{"id": m.id, "what": m.what, "file": m.file, "tests": list(m.tests), "status": o.status,
                         "caught_by": o.caught_by, "seconds": round(o.seconds, 1)} for m, o in rows],
        }, indent=2) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
