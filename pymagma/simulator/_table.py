"""What a simulated library bound from a prototype table shares (cuBLAS, cuFFT): the native library's face
(``has``, ``missing``, ``bind``, attribute look-up) over the subclass's models, each call checked for the table's
arity and recorded in ``calls``."""

from __future__ import annotations

from ..errors import NotSimulatedError


class TableLibrary:
    """Subclasses set ``PROTOTYPES`` (name -> (restype, argtypes)), ``LABEL`` (the library's name in messages) and
    ``self._models`` (name -> model) and ``self.calls`` (a deque) in ``__init__``."""

    PROTOTYPES: dict = {}
    LABEL = "the library"

    def has(self, name: str) -> bool:
        return name in self.PROTOTYPES

    def missing(self) -> list[str]:
        return []

    def bind(self, name: str):
        if name not in self.PROTOTYPES:
            raise AttributeError(f"{self.LABEL} has no prototype for {name!r} in pymagma's table")
        model = self._models.get(name)
        if model is None:  # pragma: no cover - every table entry has a model (the seam test checks)
            raise NotSimulatedError(f"{name} is not simulated")
        arity = len(self.PROTOTYPES[name][1])

        def call(*args):
            if len(args) != arity:
                raise TypeError(f"{name}: {len(args)} arguments, the table has {arity}")
            self.calls.append(name)
            return int(model(*args))

        call.__name__ = name
        return call

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.bind(name)
