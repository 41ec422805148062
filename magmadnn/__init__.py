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

# user-facing (layers, models, training)
from . import callbacks as callbacks  # noqa: E402
from . import initializers as initializers  # noqa: E402
from . import layers as layers  # noqa: E402
from . import losses as losses  # noqa: E402
from . import metrics as metrics  # noqa: E402
from . import models as models  # noqa: E402
from . import optimizers as optimizers  # noqa: E402
from . import schedules as schedules  # noqa: E402
from .models import Model as Model  # noqa: E402
from .models import Sequential as Sequential  # noqa: E402
from .models import load_model as load_model  # noqa: E402
