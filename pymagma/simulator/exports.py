"""What the simulated MAGMA exports: the provider pymagma finds (mode ``"partial"``) and the families a test hides,
a set whose every change makes the library look its routines up again."""

from __future__ import annotations

import functools

from .. import _libs
from .. import _magma as M
from ..errors import LibraryNotFoundError


@functools.cache
def provider_exports(library) -> tuple[frozenset[str] | None, str]:
    """(table names the MAGMA provider pymagma finds exports, where from); ``(None, why)`` when there is none.

    ``library`` is pymagma's real ``_magma.library()`` (the provider found as ``_libs`` finds it, its symbols
    looked up as ``NativeLibrary.has`` does); read once per process."""
    try:
        provider = _libs.magma_provider()
        names = frozenset(n for n in M.SIGNATURES if library.has(n))
    except LibraryNotFoundError as exc:
        return None, f"no MAGMA provider ({str(exc).split(';')[0]})"
    kind = "partial provider" if provider.partial else "provider"
    return names, f"the {kind} {provider.path} (from {provider.source})"


class HiddenFamilies(set):
    """``SimulatedMagma.hidden``: the families reported as not exported; every change in place calls ``changed``
    (the library's bindings' clear, so that a routine bound before is looked up again)."""

    __slots__ = ("_changed",)

    def __init__(self, families=(), changed=lambda: None):
        super().__init__(families)
        self._changed = changed


def _notifying(name: str):
    method = getattr(set, name)

    def changed(self, *args):
        result = method(self, *args)
        self._changed()
        return result

    changed.__name__ = changed.__qualname__ = name
    return changed


for _name in ("add", "clear", "discard", "pop", "remove", "update", "difference_update", "intersection_update",
              "symmetric_difference_update", "__ior__", "__iand__", "__isub__", "__ixor__"):
    setattr(HiddenFamilies, _name, _notifying(_name))
