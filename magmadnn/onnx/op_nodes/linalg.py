"""Linear algebra: MatMul of any rank (1-D operands as NumPy's matmul), Gemm, Einsum in the forms exporters write."""

from __future__ import annotations

import numpy as np

from ._registry import Form, op
from ._runtime import F, T, Tensor, is_float, tensor


def matmul(a, b):
    like = a if isinstance(a, Tensor) else b
    a, b = tensor(a, like, dtype=like.dtype), tensor(b, like, dtype=like.dtype)
    if not is_float(a):
        ns = a.data.__array_namespace__()
        return Tensor._of(ns.matmul(a.data, b.data), a.xp)
    va, vb = a.ndim == 1, b.ndim == 1
    if va:
        a = F.reshape(a, (1, a.shape[0]))
    if vb:
        b = F.reshape(b, (b.shape[0], 1))
    y = F.matmul(a, b)
    if va or vb:
        shape = y.shape[:-2] + (() if va else (y.shape[-2],)) + (() if vb else (y.shape[-1],))
        y = F.reshape(y, shape)
    return y


@op("MatMul", weights=(1,))
def mat_mul(view):
    ra, rb = view.rank(0), view.rank(1)
    keeps = view.batched(0) and ra is not None and ra >= 2 and (rb is not None and (rb <= 2 or view.batched(1)))
    return Form(matmul, keeps_batch=bool(keeps))


@op("Gemm", weights=(1, 2))
def gemm(view):
    view.only("alpha", "beta", "transA", "transB")
    alpha, beta = float(view.attr("alpha", 1.0)), float(view.attr("beta", 1.0))
    ta, tb = int(view.attr("transA", 0)), int(view.attr("transB", 0))

    def run(a, b, c=None):
        a = F.transpose(a) if ta else a
        b = F.transpose(tensor(b, a)) if tb else tensor(b, a)
        y = F.matmul(a, b)
        if alpha != 1.0:
            y = F.multiply(y, alpha)
        if c is not None:
            c = tensor(c, y, dtype=y.dtype)
            y = F.add(y, c if beta == 1.0 else F.multiply(c, beta))
        return y

    return Form(run, keeps_batch=view.batched(0) and not ta)


@op("Einsum", weights=(1, 2))
def einsum(view):
    equation = given = view.attr("equation").replace(" ", "")
    lhs, _, out = equation.partition("->")
    terms = lhs.split(",")
    if "..." in equation:
        ranks = [view.rank(k) for k in range(len(terms))]
        if None in ranks:
            raise view.error("Einsum with an ellipsis needs the ranks of its inputs (unknown here)")
        equation = _without_ellipsis(equation, ranks)
        lhs, _, out = equation.partition("->")
        terms = lhs.split(",")
    if len(terms) == 1:
        (t,) = terms
        out = out if _ else "".join(sorted(c for c in t if t.count(c) == 1))
        if len(set(t)) != len(t):
            raise view.error(f"Einsum {given!r} (a diagonal) is not supported")

        def run1(x):
            summed = tuple(i for i, c in enumerate(t) if c not in out)
            y = F.sum(x, axis=summed) if summed else x
            rest = [c for c in t if c in out]
            perm = tuple(rest.index(c) for c in out)
            return F.transpose(y, perm) if perm != tuple(range(len(perm))) else y

        return Form(run1, keeps_batch=bool(out) and view.batched(0) and out[0] == t[0])
    if len(terms) != 2:
        raise view.error(f"Einsum {given!r} with {len(terms)} operands is not supported (one or two)")
    a_t, b_t = terms
    if not _:
        out = "".join(sorted(c for c in a_t + b_t if (a_t + b_t).count(c) == 1))
    if len(set(a_t)) != len(a_t) or len(set(b_t)) != len(b_t):
        raise view.error(f"Einsum {given!r} (a diagonal) is not supported")

    def run2(a, b):
        like = a if isinstance(a, Tensor) else b
        a, b = tensor(a, like, dtype=like.dtype), tensor(b, like, dtype=like.dtype)
        return _contract(a, a_t, b, b_t, out)

    return Form(run2, keeps_batch=bool(out) and view.batched(0) and out[0] == a_t[0])


def _without_ellipsis(equation: str, ranks) -> str:
    """``equation`` with each ``...`` spelled as letters it does not use (right-aligned over the operands, as
    NumPy broadcasts them; an implicit output puts them first)."""
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    counts = [rank - len(t.replace("...", "")) if "..." in t else 0 for t, rank in zip(terms, ranks)]
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in equation][:max(counts)]
    spelled = "".join(free)
    terms = [t.replace("...", spelled[len(free) - n:]) for t, n in zip(terms, counts)]
    if arrow:
        out = out.replace("...", spelled)
    else:
        letters = "".join(terms)
        out = spelled + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in spelled))
    return ",".join(terms) + "->" + out


def _contract(a, a_t, b, b_t, out):
    """Two-operand einsum as one batched matmul: batch letters (in both and the output), free letters of each,
    summed letters (in both, not in the output); letters of one operand only that the output lacks are summed
    first."""
    only_a = [c for c in a_t if c not in b_t and c not in out]
    only_b = [c for c in b_t if c not in a_t and c not in out]
    if only_a:
        a = F.sum(a, axis=tuple(a_t.index(c) for c in only_a))
        a_t = "".join(c for c in a_t if c not in only_a)
    if only_b:
        b = F.sum(b, axis=tuple(b_t.index(c) for c in only_b))
        b_t = "".join(c for c in b_t if c not in only_b)
    batch = [c for c in a_t if c in b_t and c in out]
    summed = [c for c in a_t if c in b_t and c not in out]
    free_a = [c for c in a_t if c not in b_t]
    free_b = [c for c in b_t if c not in a_t]
    size = {c: a.shape[i] for i, c in enumerate(a_t)}
    size.update({c: b.shape[i] for i, c in enumerate(b_t)})

    def prod(cs):
        return int(np.prod([size[c] for c in cs])) if cs else 1

    pa = F.transpose(a, tuple(a_t.index(c) for c in batch + free_a + summed))
    pb = F.transpose(b, tuple(b_t.index(c) for c in batch + summed + free_b))
    ma = F.reshape(pa, (prod(batch), prod(free_a), prod(summed)))
    mb = F.reshape(pb, (prod(batch), prod(summed), prod(free_b)))
    y = F.matmul(ma, mb)
    letters = batch + free_a + free_b
    y = F.reshape(y, tuple(size[c] for c in letters))
    perm = tuple(letters.index(c) for c in out)
    return F.transpose(y, perm) if perm != tuple(range(len(perm))) else y


__all__ = ["matmul", "T"]
