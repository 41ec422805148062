"""The device backend's own kernel programs (magmadnn/backend/device/kernels/) on the CPU simulator: each registered
program's source compiled by the host C++ compiler against pymagma's emulation of CUDA, launched with the argument
lists the launchers build for the GPU (see tests/pymagma/test_kernels_emulated.py for pymagma's programs)."""

from __future__ import annotations

import pytest

from pymagma import simulator
from pymagma.simulator import kernels as simulated_kernels

from .test_device_kernels_fused_gpu import (  # noqa: F401  (the same, for the fused kernels)
    test_attention_over_interleaved_heads_and_its_backward,
    test_bias_activation_and_its_backward,
    test_bias_activation_keeps_nan_and_infinity,
    test_keras_cross_entropy_of_probabilities_and_its_gradient,
    test_layer_norm_backward_with_parameters_equals_the_three_kernels_bit_for_bit,
    test_mean_softmax_cross_entropy_and_its_gradient,
    test_multi_tensor_updates_check_every_tensor_before_the_first_launch,
    test_multi_tensor_updates_equal_the_single_tensor_kernels_bit_for_bit,
)
from .test_device_kernels_gpu import (  # noqa: F401  (collected here, without the gpu mark, on the emulator)
    test_adam_and_adamw,
    test_dropout_is_the_uniform_stream_thresholded_in_the_arrays_dtype,
    test_embedding_gather_and_deterministic_scatter_add,
    test_layer_norm_forward_backward_and_parameter_sums,
    test_masked_softmax_forward_and_backward,
    test_max_pool2d_gives_the_gradient_to_the_first_maximum,
    test_max_pool2d_propagates_nan_and_refuses_bad_geometry,
    test_norm_and_embedding_arguments_are_checked,
    test_out_of_range_label_gives_nan_loss,
    test_pad2d_refuses_bad_arguments,
    test_pad2d_surrounds_with_zeros_bit_for_bit,
    test_recurrent_gate_kernels_in_every_dtype_match_their_float64_run,
    test_rmsprop_and_adagrad,
    test_sgd_momentum_and_nesterov,
    test_softmax_cross_entropy,
    test_softmax_cross_entropy_probs_and_backward,
    test_the_step_kernels_equal_the_eager_kernels_bit_for_bit,
)

pytestmark = pytest.mark.native


@pytest.fixture(scope="module", autouse=True)
def emulated_gpu():
    """The simulator for the whole module; yields its kernel launcher (``launched``: every expression run)."""
    if simulated_kernels.compiler() is None:
        pytest.skip("no host C++ compiler (g++ or clang++) to build the kernel emulation")
    with simulator.simulated("full") as simulation:
        yield simulation.kernels


#: Adam's second moment underflows in float16 (g = 1e-3 gives v = 1e-9, below float16's smallest subnormal), so
#: Adam's float16 kernel has no NumPy-matching test: float16 training keeps float32 optimizer state.
UNTESTED = {"adam<half_t>", "adam_at<half_t>", "adam_many<half_t>"}


def test_every_kernel_instantiation_ran(emulated_gpu, request):
    """Runs last in this module: the tests above launched every kernel the backend's programs define, in every
    dtype."""
    from magmadnn.backend.device import kernels

    if request.config.option.keyword or getattr(request.config.option, "lf", False):
        pytest.skip("counts the launches of a whole-module run")
    expected = {e for program in kernels.PROGRAMS.values() for e in program.expressions}
    missing = expected - set(emulated_gpu.launched)
    assert missing == UNTESTED, " ".join(sorted(missing ^ UNTESTED))
