"""Prototypes as data: a native library whose functions are declared once and bound on first use.

A ``Prototypes`` table maps a symbol name to ``(restype, argtypes)``.  ``NativeLibrary`` loads the shared
object lazily (through a loader callable, so discovery errors surface at first use, never at import) and binds a
symbol the first time it is looked up.  A symbol the library does not export raises ``MissingSymbolError`` naming
the symbol, the library file and the remedy, so one missing routine never breaks the rest.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping
from typing import Any

from .errors import MissingSymbolError

Prototype = tuple[Any, tuple]


class Bindings(dict):
    """Name -> bound function, a library's ``bind``: ``bind = Bindings(checked).__getitem__`` answers a name bound
    before with one C-level dict look-up (no Python frame between a caller and its native call); a name not bound yet
    goes to ``checked(name)``, which binds it with every check and keeps it here when it may be kept.  The owner
    clears it whenever what its checks read changes (a library that hides names, another export list)."""

    __slots__ = ("_checked",)

    def __init__(self, checked: Callable[[str], Any]):
        super().__init__()
        self._checked = checked

    def __missing__(self, name: str):
        return self._checked(name)


class NativeLibrary:
    """A lazily loaded shared library with a table of prototypes.

    ``loader`` returns a ``ctypes.CDLL`` (or raises ``LibraryNotFoundError``); ``remedy`` is appended to
    ``MissingSymbolError`` messages.  ``lib.fn(...)`` calls the bound function; ``lib.has("fn")`` tells whether the
    library exports it; ``lib.missing()`` lists the table's names it lacks.
    """

    def __init__(self, name: str, loader: Callable[[], ctypes.CDLL], prototypes: Mapping[str, Prototype],
                 remedy: str = "", aliases: Mapping[str, str] | None = None):
        self._name, self._loader, self._remedy = name, loader, remedy
        self.prototypes = dict(prototypes)
        self._aliases = dict(aliases or {})
        self._cdll: ctypes.CDLL | None = None
        self._bound = Bindings(self._bind)
        self.bind = self._bound.__getitem__  # (a C-level look-up once bound; see Bindings)

    @property
    def cdll(self) -> ctypes.CDLL:
        if self._cdll is None:
            self._cdll = self._loader()
        return self._cdll

    @property
    def path(self) -> str:
        return getattr(self.cdll, "_name", self._name)

    def symbol_name(self, name: str) -> str:
        """The exported symbol a table name binds to (``*_internal`` aliases for MAGMA's macros)."""
        return self._aliases.get(name, name)

    def has(self, name: str) -> bool:
        try:
            self.bind(name)
        except MissingSymbolError:
            return False
        return True

    def missing(self) -> list[str]:
        return sorted(n for n in self.prototypes if not self.has(n))

    def bind(self, name: str):
        """The bound function ``name`` (a MissingSymbolError when the library does not export it); an instance's
        ``bind`` is its :class:`Bindings`' look-up, this the same answer wherever that is replaced."""
        return self._bound[name]

    def _bind(self, name: str):
        if name not in self.prototypes:
            raise AttributeError(f"{self._name} has no prototype for {name!r}")
        symbol = self.symbol_name(name)
        try:
            fn = getattr(self.cdll, symbol)
        except AttributeError:
            raise MissingSymbolError(symbol, f"{self._name} ({self.path})", self._remedy) from None
        fn.restype, argtypes = self.prototypes[name]
        fn.argtypes = list(argtypes)
        self._bound[name] = fn
        return fn

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.bind(name)
