"""Keras 3 as a test reference: imported on the torch backend (CPU), with helpers to run the same program in Keras
and in magmadnn from identical weights."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402  (the backend must be chosen before the import)

__all__ = ["keras"]
