"""The layer registry and the names and seeds layers are given.

``register`` makes a layer class known by its class name, the name model files store; ``layer_class`` finds it
again when a model is rebuilt from a configuration or a file. A layer without a name gets Keras' default
(``Conv2DTranspose`` -> ``conv2d_transpose``, then ``conv2d_transpose_1``, ...); seeds are derived from a model's
seed and integer tags (``derive_seed``) so that every layer and stream draws independently.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

__all__ = ["register", "layer_class", "derive_seed"]

_REGISTRY: dict[str, type] = {}
_NAME_COUNTS: Counter = Counter()
#: the class every registered class derives from (``base.Layer``, set by ``layers.base`` when it defines it)
_LAYER: list[type] = []


def register(cls=None, *, package: str | None = None, name: str | None = None):
    """Class decorator: make a layer class known by its class name to ``layer_class`` (used when rebuilding models
    from a configuration or a file). ``@register`` and ``@register()`` both work (Keras'
    ``@keras.saving.register_keras_serializable()``; ``package`` is accepted and unused: files store class names)."""
    def add(cls):
        if not (isinstance(cls, type) and issubclass(cls, _LAYER[0])):
            raise TypeError(f"register: expected a Layer subclass, got {cls!r}")
        for key in {cls.__name__, name or cls.__name__}:  # files store the class name; ``name`` is an alias
            known = _REGISTRY.get(key)
            if known is not None and known.__module__.startswith("magmadnn.") and \
                    not cls.__module__.startswith("magmadnn."):
                raise ValueError(f"register: {key!r} is magmadnn's built-in {known.__module__}.{key}; give the "
                                 "custom layer class another name")
            _REGISTRY[key] = cls
        return cls

    return add if cls is None else add(cls)


def layer_class(name: str, custom_objects: dict | None = None) -> type:
    """The layer class stored under ``name``: from ``custom_objects`` first, then the registered classes."""
    if custom_objects and name in custom_objects:
        return custom_objects[name]
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown layer class {name!r}: decorate its class with @magmadnn.layers.register (before loading), or "
            f"pass custom_objects={{{name!r}: {name}}} to load_model / model_from_config; known layers: "
            f"{sorted(_REGISTRY)}") from None


def _snake(name: str) -> str:
    """Keras' default layer names: ``Conv2DTranspose`` -> ``conv2d_transpose``, ``RMSNorm`` -> ``rms_norm``."""
    words = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", words).lower()


def _auto_name(cls) -> str:
    base = _snake(cls.__name__)
    count = _NAME_COUNTS[base]
    _NAME_COUNTS[base] += 1
    return base if count == 0 else f"{base}_{count}"


def derive_seed(seed: int, *tags: int) -> int:
    """A deterministic 32-bit seed from ``seed`` and integer tags (distinct tags give independent streams)."""
    return int(np.random.SeedSequence([int(seed), *(int(t) for t in tags)]).generate_state(1)[0])


def _fresh_seed() -> int:
    return int(np.random.SeedSequence().generate_state(1)[0])
