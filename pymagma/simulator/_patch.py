"""Reversible attribute replacement: how the simulator stands in for pymagma's native layer."""

from __future__ import annotations

_MISSING = object()


class Patches:
    """Records each ``setattr`` so that :meth:`undo` restores every attribute, newest first."""

    def __init__(self):
        self._saved: list[tuple[object, str, object]] = []

    def setattr(self, target, name: str, value) -> None:
        self._saved.append((target, name, getattr(target, name, _MISSING)))
        setattr(target, name, value)

    def undo(self) -> None:
        while self._saved:
            target, name, old = self._saved.pop()
            if old is _MISSING:
                delattr(target, name)
            else:
                setattr(target, name, old)
