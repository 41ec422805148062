"""``__array_namespace_info__()``: what pymagma.array_api supports, stated as the standard asks."""

from __future__ import annotations

from .. import runtime
from . import _dtypes

_KIND_NAMES = ("bool", "signed integer", "unsigned integer", "integral", "real floating", "complex floating",
               "numeric")


class Info:
    """The inspection namespace: capabilities, default device and dtypes, supported dtypes, devices."""

    __module__ = "pymagma.array_api"

    def capabilities(self) -> dict:
        """Boolean-mask indexing and data-dependent output shapes (a host read of the count); kernels address up
        to 8 dims."""
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 8}

    def default_device(self) -> int:
        return runtime.get_device()

    def devices(self) -> list[int]:
        return list(range(runtime.device_count()))

    def default_dtypes(self, *, device=None) -> dict:
        return {kind: _dtypes.DEFAULT[kind] for kind in ("real floating", "complex floating", "integral", "indexing")}

    def dtypes(self, *, device=None, kind=None) -> dict:
        """The supported dtypes by name, optionally of one ``kind`` (a kind name or a tuple of them)."""
        if kind is not None:
            kinds = kind if isinstance(kind, tuple) else (kind,)
            for k in kinds:
                if isinstance(k, str) and k not in _KIND_NAMES:
                    raise ValueError(f"dtypes: unknown kind {k!r}; known: {list(_KIND_NAMES)}")
        return {d.name: d for d in _dtypes.SUPPORTED if kind is None or _dtypes.isdtype(d, kind)}


def __array_namespace_info__() -> Info:
    return Info()
