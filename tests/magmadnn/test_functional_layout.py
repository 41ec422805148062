"""magmadnn.functional is a package of one idea a module; its face is the one the single module had."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from magmadnn import F, Function

#: ``functional.__all__`` as the single module ``functional.py`` had it, in its order.
PUBLIC = [
    "add", "subtract", "multiply", "divide", "negative", "power", "matmul", "sum", "mean", "reshape", "transpose",
    "flatten", "activation", "relu", "sigmoid", "tanh", "leaky_relu", "elu", "gelu", "softmax", "log_softmax",
    "dense", "conv2d", "conv2d_output_shape", "conv2d_padding", "max_pool2d", "avg_pool2d", "global_avg_pool2d",
    "batch_norm", "dropout", "softmax_cross_entropy", "mse", "matmul_nt", "masked_softmax",
    "scaled_dot_product_attention", "check_key_mask_values", "concatenate", "upsample_nearest2d", "global_max_pool2d",
    "conv_transpose2d", "conv_transpose2d_geometry", "layer_norm", "rms_norm", "group_norm", "embedding",
    "cross_entropy", "binary_cross_entropy_with_logits", "lstm", "gru", "log", "clip", "abs", "scale",
    "categorical_crossentropy", "binary_crossentropy", "mean_squared_error", "mean_absolute_error", "huber",
    "log_cosh", "kl_divergence",
]  # fmt: skip
PUBLIC += ["silu", "swish", "softplus", "softsign", "selu", "hard_sigmoid", "exponential"]  # added later
PUBLIC += ["conv1d", "conv1d_padding", "max_pool1d", "avg_pool1d", "slice_axis", "reverse", "lstm_steps",
           "gru_steps", "simple_rnn_steps"]  # the sequence layers (1-D conv and pooling, return_state, masks, RNNs)
PUBLIC += ["cast"]  # mixed precision: a float32 weight feeding a half computation
PUBLIC += ["maximum", "minimum", "pad_axis"]  # the merging and padding layers
PUBLIC += ["attention_heads"]  # MultiHeadAttention's fused path


def _modules():
    """The public modules (a ``_private`` one, such as the ONNX op nodes' ``_tensor_math``, is not F's face)."""
    return [importlib.import_module(f"{F.__name__}.{m.name}") for m in pkgutil.iter_modules(F.__path__)
            if not m.name.startswith("_")]


def test_the_public_names_are_those_of_the_single_module():
    assert F.__all__ == PUBLIC
    assert callable(F.register_sync_batch_norm)  # what magmadnn.distributed registers its batch norm with


def test_each_public_name_has_one_home_and_the_package_re_exports_it():
    homes = {}
    for module in _modules():
        for name in getattr(module, "__all__", ()):
            assert name not in homes, f"{name} in {homes.get(name)} and {module.__name__}"
            homes[name] = module.__name__
            assert getattr(F, name) is getattr(module, name), name
    assert sorted(homes) == sorted(PUBLIC)


def test_every_public_function_class_is_re_exported():
    for module in _modules():
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, Function) and value.__module__ == module.__name__:
                if not name.startswith("_"):
                    assert getattr(F, name) is value, f"{module.__name__}.{name} is not re-exported"
