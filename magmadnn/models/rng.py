"""The random states a model carries (dropout streams, the shuffling generator): read and restored as plain values.

A backend :class:`magmadnn.backend.random.Stream`, a NumPy ``Generator`` or a legacy ``RandomState`` all work.
"""

from __future__ import annotations

__all__ = ["get_state", "set_state"]


def get_state(rng):
    """The state of ``rng`` (None for an object without one)."""
    if hasattr(rng, "state") and hasattr(rng, "take"):  # a backend random Stream
        return rng.state
    if hasattr(rng, "bit_generator"):
        return rng.bit_generator.state
    if hasattr(rng, "get_state"):
        return rng.get_state()
    return None


def set_state(rng, state) -> None:
    """Put ``rng`` in ``state`` (a value from :func:`get_state`; None leaves it as it is)."""
    if state is None:
        return
    if hasattr(rng, "state") and hasattr(rng, "take"):
        rng.state = state
    elif hasattr(rng, "bit_generator"):
        rng.bit_generator.state = state
    elif hasattr(rng, "set_state"):
        rng.set_state(state)
