"""The GPU tests of pymagma.kernels, run on the CPU simulator (:mod:`pymagma.simulator`): every kernel program
compiled by the host C++ compiler against a small emulation of CUDA (``pymagma/simulator/cuda_host.h``), launched
with the argument lists pymagma builds for the GPU.  This checks the kernels' arithmetic, indexing, broadcasting,
reductions (threads and barriers) and the Python side that drives them; only the GPU itself (NVRTC's code, real
launches) is left to the gpu-marked run."""

from __future__ import annotations

import pytest

from pymagma import kernels, simulator
from pymagma.simulator import kernels as simulated_kernels
from tests.pymagma.array_api.test_elementwise_complex_gpu import (  # noqa: F401  (complex64 and complex128)
    test_casts_to_complex_equal_numpy,
    test_complex_binary_promotes_and_equals_numpy,
    test_complex_data_movement_equals_numpy,
    test_complex_divided_by_a_subnormal_is_the_exact_quotient,
    test_complex_functions_equal_numpy,
    test_complex_is_not_ordered,
    test_complex_linalg_through_magma_equals_numpy,
    test_complex_parts_sign_and_tests,
    test_complex_special_values_equal_numpys_c99,
    test_complex_sum_prod_mean_and_scans_equal_numpy,
    test_complex_to_bool_and_refused_real_casts,
    test_complex_unique_equals_numpy,
)
from tests.pymagma.array_api.test_elementwise_gpu import (  # noqa: F401  (the array API's kernel families)
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
from tests.pymagma.array_api.test_manipulation_gpu import (  # noqa: F401  (manipulation, indexing, later elementwise functions)
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
from tests.pymagma.array_api.test_reductions_gpu import (  # noqa: F401  (reductions, scans, sorts, searching, sets)
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
    test_argmax_argmin_with_ties,
    test_argmax_nan_wins_like_numpy,
    test_bias_add_over_nchw_channels_and_dense_rows,
    test_binary_with_a_python_scalar_in_the_arrays_dtype,
    test_binary_with_broadcasting_and_strides,
    test_broadcast_divide_materialises_a_broadcast_divided,
    test_cast_between_all_pairs,
    test_check_kernels_record_the_first_bad_value_in_c_order,
    test_copy_into_a_strided_view_pads_without_the_host,
    test_copy_of_transposed_and_reversed_views,
    test_every_binary_op_has_a_reference,
    test_every_unary_op_has_a_reference,
    test_fill,
    test_integer_casts_are_exact_and_wrap_like_numpy,
    test_normal_is_box_muller_of_the_same_stream_and_has_the_right_moments,
    test_reduce_over_axes,
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


def test_every_kernel_instantiation_ran(emulated_gpu, request):
    """Runs last in this module: the tests above launched every kernel the programs define, in every dtype."""
    if request.config.option.keyword or getattr(request.config.option, "lf", False):
        pytest.skip("counts the launches of a whole-module run")
    expected = {e for name in kernels.programs.SHIPPED for e in kernels.program(name).expressions}
    missing = expected - set(emulated_gpu.launched)
    assert not missing, " ".join(sorted(missing))
