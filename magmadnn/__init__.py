"""magmadnn: deep learning in Python on the host (NumPy) or a GPU (pymagma)."""

from . import (
    backend,
    callbacks,
    data,
    distributed,
    functional,
    initializers,
    layers,
    losses,
    metrics,
    mixed_precision,
    models,
    optimizers,
    schedules,
    tuning,
)
from .autograd import Function, Parameter, Tensor, enable_grad, grad, is_grad_enabled, no_grad
from .models import Model, Sequential, load_model

__version__ = "0.1.0"
F = functional

__all__ = [
    "backend", "callbacks", "data", "functional", "F", "initializers", "layers", "losses", "metrics", "models",
    "optimizers", "schedules", "Function", "Parameter", "Tensor", "enable_grad", "grad", "is_grad_enabled", "no_grad",
    "Model", "Sequential", "load_model", "distributed", "tuning",
    "mixed_precision",
]
