"""Block sizes of the hybrid drivers: the MAGMA provider's ``magma_get_?{kind}_nb`` answer where it exports one."""

from __future__ import annotations

from .. import _colmajor, _magma

DEFAULT_NB = 64


def block_size(kind: str, dtype, m: int, n: int, default: int = DEFAULT_NB) -> int:
    """MAGMA's block size for ``kind`` ("potrf", "geqrf", "sytrd") from the provider's ``magma_get_?{kind}_nb``,
    or ``default`` where it exports none (or pymagma's tables have no prototype)."""
    p = _magma.precision_of(dtype)
    name = f"magma_get_{p}{kind}_nb"
    lib = _colmajor.magma()
    if name in _magma.SIGNATURES and lib.has(name):
        args = (m, n) if kind == "geqrf" else (n,)
        return max(int(getattr(lib, name)(*args)), 1)
    return default
