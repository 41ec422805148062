"""Keras layer arguments magmadnn does not implement: accepted at Keras' default value, else a TypeError naming the
magmadnn way (or saying only the default is supported)."""

from __future__ import annotations

__all__ = ["KERAS_DEFAULTS", "KERAS_ONLY_ARGUMENTS"]

KERAS_DEFAULTS = {
    "kernel_regularizer": None, "bias_regularizer": None, "activity_regularizer": None,
    "embeddings_regularizer": None, "recurrent_regularizer": None, "kernel_constraint": None,
    "bias_constraint": None, "embeddings_constraint": None, "recurrent_constraint": None,
    "dropout": 0.0, "recurrent_dropout": 0.0, "input_length": None, "batch_input_shape": None, "batch_size": None,
    "batch_shape": None, "sparse": None, "ragged": None, "optional": False, "tensor": None, "noise_shape": None,
    "data_format": None, "center": True, "scale": True, "beta_initializer": "zeros", "gamma_initializer": "ones",
    "moving_mean_initializer": "zeros", "moving_variance_initializer": "ones", "synchronized": False,
    "activation": "tanh", "recurrent_activation": "sigmoid", "unroll": False, "stateful": False,
    "unit_forget_bias": True, "use_cudnn": "auto", "recurrent_initializer": "orthogonal", "autocast": True,
}
_PENALTY = ("weight penalties are not layer arguments here: use the optimizer's weight_decay= (AdamW, "
            "SGD(weight_decay=)) or add the penalty to a callable loss")
KERAS_ONLY_ARGUMENTS = {
    **dict.fromkeys(("kernel_regularizer", "bias_regularizer", "activity_regularizer", "embeddings_regularizer",
                     "recurrent_regularizer"), _PENALTY),
    **dict.fromkeys(("kernel_constraint", "bias_constraint", "embeddings_constraint", "recurrent_constraint"),
                    "weight constraints are not supported; clip in a callback's on_train_batch_end"),
    **dict.fromkeys(("dropout", "recurrent_dropout"),
                    "recurrent layers take no dropout here: put a Dropout layer before or after the layer"),
    "input_length": "not needed (Keras 3 deprecates it too): leave it out",
    **dict.fromkeys(("batch_input_shape", "batch_shape", "batch_size"),
                    "shapes here are per sample: Input(shape=the shape without the batch axis)"),
}


def _refuse_keras_only(who: str, arguments: dict) -> None:
    """Keras layer arguments at Keras' default value pass; any other value (or an unknown argument) is a
    TypeError naming the magmadnn way."""
    for name, value in sorted(arguments.items()):
        if name not in KERAS_DEFAULTS:
            raise TypeError(f"{who}: unexpected argument {name!r}")
        default = KERAS_DEFAULTS[name]
        if value is default or (value is not None and default is not None and value == default) or (
                name == "sparse" and value is False):
            continue
        hint = KERAS_ONLY_ARGUMENTS.get(name, f"only Keras' default {name}={default!r} is supported here")
        raise TypeError(f"{who}: Keras' argument {name}={value!r} is not supported; {hint}")
