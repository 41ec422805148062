"""magmadnn: deep learning in Python on the host (NumPy) or a GPU (pymagma)."""

__version__ = "0.1.0"

# core (autograd, functional API, backends)
from . import backend as backend  # noqa: E402
from . import functional as functional  # noqa: E402
from .autograd import Function as Function  # noqa: E402
from .autograd import Parameter as Parameter  # noqa: E402
from .autograd import Tensor as Tensor  # noqa: E402
from .autograd import enable_grad as enable_grad  # noqa: E402
from .autograd import is_grad_enabled as is_grad_enabled  # noqa: E402
from .autograd import no_grad as no_grad  # noqa: E402

F = functional
