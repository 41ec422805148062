"""magmadnn: deep learning in Python on the host (NumPy) or a GPU (pymagma)."""

from . import (  # noqa: F401  (Keras' Loss and Metric subclasses: see each module)
    backend,
    callbacks,
    constraints,
    custom_loss,
    data,
    distributed,
    functional,
    initializers,
    layers,
    losses,
    metric_state,
    metrics,
    mixed_precision,
    models,
    optimizers,
    regularizers,
    schedules,
    tuning,
    utils,
)
from .autograd import Function, Parameter, Tensor, enable_grad, grad, is_grad_enabled, no_grad
from .models import Model, Sequential, load_model

__version__ = "0.1.0"
F = functional

__all__ = [
    "backend", "callbacks", "data", "functional", "F", "initializers", "layers", "losses", "metrics", "models",
    "optimizers", "schedules", "Function", "Parameter", "Tensor", "enable_grad", "grad", "is_grad_enabled", "no_grad",
    "Model", "Sequential", "load_model", "distributed", "tuning",
    "mixed_precision", "utils", "regularizers", "constraints",
]
