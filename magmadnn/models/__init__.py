"""Models: ``Sequential`` stacks, functional graph ``Model``s and ``Model`` subclasses (``register`` names a subclass
for saving), training, and saving.

``load(path)`` rebuilds a model saved with ``model.save(path)`` (or a checkpoint) from its JSON architecture and
weights; see :mod:`.persistence` for the file contents and :mod:`magmadnn.saving` for the containers.
"""

from ..saving import ArchitectureMismatchError, ModelFileError
from .config import clone_model, load_model, model_from_config, model_from_json
from .model import Model, NonFiniteLossError, NonFiniteParameterError
from .sequential import Sequential
from .subclassing import register

load = load_model

__all__ = ["Model", "Sequential", "NonFiniteLossError", "NonFiniteParameterError", "ArchitectureMismatchError",
           "ModelFileError", "load", "load_model", "model_from_config",
           "model_from_json", "clone_model", "register"]
