"""The GPU tests of pymagma.kernels, run on the CPU simulator (:mod:`pymagma.simulator`): every kernel program
compiled by the host C++ compiler against a small emulation of CUDA (``pymagma/simulator/cuda_host.h``), launched
with the argument lists pymagma builds for the GPU.  This checks the kernels' arithmetic, indexing, broadcasting,
reductions (threads and barriers) and the Python side that drives them; only the GPU itself (NVRTC's code, real
launches) is left to the gpu-marked run."""

from __future__ import annotations

import pytest

from pymagma import kernels, simulator
from pymagma.simulator import kernels as simulated_kernels

from .test_array_api_gpu import (  # noqa: F401  (the array API's kernel families)
    test_arithmetic_with_broadcasting_over_strided_operands_equals_numpy,
    test_astype_between_every_pair_equals_numpy,
    test_comparisons_return_bool_arrays_equal_to_numpy,
    test_every_cast_pair_and_bool_unary_on_strided_views,
    test_every_family_in_every_dtype,
    test_float_specials_follow_ieee_and_numpy,
    test_logical_and_bitwise_functions_equal_numpy,
    test_operators_scalars_and_in_place_forms,
    test_python_scalars_from_zero_d_arrays,
    test_unary_functions_equal_numpy,
)
from .test_array_api_manipulation_gpu import (  # noqa: F401  (manipulation, indexing, later elementwise functions)
    test_basic_getitem_and_setitem_equal_numpy,
    test_boolean_mask_getitem_and_setitem_equal_numpy,
    test_clip_equals_numpy,
    test_clip_nan_and_real_conj_imag,
    test_concat_and_stack_equal_numpy,
    test_diff_with_array_ends_equals_numpy,
    test_every_manipulation_and_indexing_kernel_in_every_dtype,
    test_float_function_specials_and_dtype_errors,
    test_indexing_details,
    test_integer_array_indexing_equals_numpy,
    test_inverse_and_hyperbolic_functions_equal_numpy,
    test_meshgrid_and_manipulation_errors,
    test_roll_tile_repeat_equal_numpy,
    test_take_and_take_along_axis_equal_numpy,
    test_tril_triu_equal_numpy,
    test_two_argument_float_functions_broadcast_and_equal_numpy,
    test_views_equal_numpy,
)
from .test_array_api_reduce_gpu import (  # noqa: F401  (reductions, scans, sorts, searching, sets)
    test_argmax_argmin_first_occurrence_and_nan_as_numpy,
    test_bad_arguments_are_typed_errors,
    test_cumulative_sum_and_prod_equal_numpy,
    test_diff_equals_numpy,
    test_empty_axes_identities_and_errors,
    test_every_kernel_in_every_dtype,
    test_long_reductions_equal_numpy,
    test_mean_var_std_equal_numpy,
    test_nans_anywhere_follow_numpy,
    test_nonzero_equals_numpy,
    test_searchsorted_equals_numpy,
    test_sort_and_argsort_are_stable_nans_last,
    test_sum_prod_min_max_count_nonzero_equal_numpy,
    test_unique_functions_equal_numpy_each_nan_distinct,
    test_where_broadcasts_three_operands_and_scalars,
)
from .test_kernels_gpu import (  # noqa: F401  (collected here, without the gpu mark, on the emulator)
    test_activation_backward,
    test_activation_backward_names_what_it_needs,
    test_adam_and_adamw,
    test_argmax_argmin_with_ties,
    test_argmax_nan_wins_like_numpy,
    test_bias_add_over_nchw_channels_and_dense_rows,
    test_binary_with_a_python_scalar_in_the_arrays_dtype,
    test_binary_with_broadcasting_and_strides,
    test_cast_between_all_pairs,
    test_check_kernels_record_the_first_bad_value_in_c_order,
    test_copy_into_a_strided_view_pads_without_the_host,
    test_copy_of_transposed_and_reversed_views,
    test_dropout_is_the_uniform_stream_thresholded_in_the_arrays_dtype,
    test_embedding_gather_and_deterministic_scatter_add,
    test_every_binary_op_has_a_reference,
    test_every_unary_op_has_a_reference,
    test_fill,
    test_integer_casts_are_exact_and_wrap_like_numpy,
    test_layer_norm_forward_backward_and_parameter_sums,
    test_masked_softmax_forward_and_backward,
    test_max_pool2d_gives_the_gradient_to_the_first_maximum,
    test_max_pool2d_propagates_nan_and_refuses_bad_geometry,
    test_norm_and_embedding_arguments_are_checked,
    test_normal_is_box_muller_of_the_same_stream_and_has_the_right_moments,
    test_out_of_range_label_gives_nan_loss,
    test_recurrent_gate_kernels_in_every_dtype_match_their_float64_run,
    test_reduce_over_axes,
    test_rmsprop_and_adagrad,
    test_sgd_momentum_and_nesterov,
    test_softmax_cross_entropy,
    test_softmax_cross_entropy_probs_and_backward,
    test_the_step_kernels_equal_the_eager_kernels_bit_for_bit,
    test_unary,
    test_uniform_and_normal_statistics_for_every_float_dtype,
    test_uniform_is_philox_and_deterministic,
    test_where_with_broadcasting,
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
UNTESTED = {"adam<half_t>", "adam_at<half_t>"}


def test_every_kernel_instantiation_ran(emulated_gpu, request):
    """Runs last in this module: the tests above launched every kernel the programs define, in every dtype."""
    if request.config.option.keyword or getattr(request.config.option, "lf", False):
        pytest.skip("counts the launches of a whole-module run")
    expected = {e for name in kernels.programs.SHIPPED for e in kernels.program(name).expressions}
    missing = expected - set(emulated_gpu.launched)
    assert missing == UNTESTED, " ".join(sorted(missing ^ UNTESTED))
