"""Optional ops checking the values an op needs without a host read (:mod:`magmadnn.backend.faults`): a backend
whose arrays live in device memory adds all four; callers check NumPy data themselves and skip the check on a
backend without them."""

from __future__ import annotations

from ._spec import optional


@optional
def check_range(x, low, high, message):
    """Queue a check that every element of ``x`` is in ``[low, high)``; the first one that is not (in C order) is
    recorded, and raised as ``ValueError(message.format(bad=value))`` by the next read (``fault_error``)."""


@optional
def check_binary(x, message):
    """Queue a check that every element of ``x`` is 0 or 1 (booleans pass), recorded as ``check_range`` records."""


@optional
def fault_record(like):
    """The small array where checks on ``like``'s device record a failing value, or None before any check ran
    there; it is copied to the host along with what the host reads anyway."""


@optional
def fault_error(record, values):
    """The ``ValueError`` recorded in ``values`` (the host copy of ``record``), or None when it holds none; the
    record is cleared for the next check."""
