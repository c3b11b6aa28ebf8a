"""Named-index contractions with any number of distinct indices, for the array-library backends.

``einsum`` names each axis with one letter, so NumPy, torch and jax accept at
most 52 distinct indices in one call; an equation may use more (the native
backend has no such limit). :func:`contract_named` evaluates a contraction
with a kernel that is only asked for at most ``limit`` distinct indices:

- a *linear* projection (sum) first sums away, operand by operand, the indices
  that no other operand and not the result use, then contracts pairwise,
  each pair keeping only what the rest still needs (what einsum's own path
  does);
- a product of more than :data:`EINSUM_OPERANDS` factors is folded, the
  first factors into one operand, before anything else;
- whatever still has too many indices is split along one index: a kept index
  stacks the parts, a projected one combines them with the projection's
  operator (sum, max, ...). Every split removes one index, so this ends, and
  the work is no more than the tensors' sizes.

The module knows nothing of any array library: the caller passes the kernel
for small contractions and :class:`ArrayKit` (stack, zeros, combine).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

Array = Any
Names = Sequence[Hashable]
Kernel = Callable[[list[Array], list[tuple[Hashable, ...]], tuple[Hashable, ...]], Array]

EINSUM_LABELS = 52
"""Distinct indices one ``einsum`` subscript string can name (a-z, A-Z)."""

EINSUM_OPERANDS = 32
"""Operands one kernel call is given at most (NumPy's ``einsum`` refuses more than its ``NPY_MAXARGS``)."""


@dataclass(frozen=True)
class ArrayKit:
    """What :func:`contract_named` needs from an array library.

    ``stack(parts, axis)`` joins results along a new axis, ``zeros(shape)``
    builds the result of an empty contraction (in the result's dtype), and
    ``combine(a, b)`` merges two partial results over disjoint parts of a
    projected index (``+`` for sum, ``maximum`` for max, ...).
    """

    stack: Callable[[list[Array], int], Array]
    zeros: Callable[[tuple[int, ...]], Array]
    combine: Callable[[Array, Array], Array]


def distinct(names: Sequence[Names]) -> list[Hashable]:
    """The distinct index names of several operands, in order of first appearance."""
    seen: dict[Hashable, None] = {}
    for ns in names:
        for n in ns:
            seen.setdefault(n, None)
    return list(seen)


def contract_named(
    arrays: Sequence[Array],
    names: Sequence[Names],
    out: Names,
    kernel: Kernel,
    kit: ArrayKit,
    *,
    linear: bool,
    limit: int = EINSUM_LABELS,
) -> Array:
    """The product of ``arrays`` (axes ``names``) projected onto ``out``, with ``kernel`` for the pieces.

    ``kernel(arrays, names, out)`` computes the same thing for at most
    ``limit`` distinct names; ``linear`` says the projection distributes over
    the product (sum), which allows early sums and pairwise contraction.
    """
    ops = list(arrays)
    axes: list[tuple[Hashable, ...]] = [tuple(ns) for ns in names]
    result = tuple(out)
    while len(ops) > EINSUM_OPERANDS:  # a product of many factors: fold the first ones into one operand
        chunk, later = axes[:EINSUM_OPERANDS], axes[EINSUM_OPERANDS:]
        needed = {n for ns in later for n in ns} | set(result)
        # A linear projection may sum early what nothing else needs; max/min must see the whole product first.
        keep = tuple(n for n in distinct(chunk) if n in needed or not linear)
        folded = contract_named(ops[:EINSUM_OPERANDS], chunk, keep, kernel, kit, linear=linear, limit=limit)
        ops, axes = [folded, *ops[EINSUM_OPERANDS:]], [keep, *later]
    if len(distinct(axes)) <= limit:
        return kernel(ops, axes, result)
    if linear:
        ops, axes = _sum_lone_indices(ops, axes, result, kernel, kit, limit)
        while len(ops) > 2:
            rest = {n for ns in axes[2:] for n in ns} | set(result)
            keep = tuple(n for n in distinct(axes[:2]) if n in rest)
            first = contract_named(ops[:2], axes[:2], keep, kernel, kit, linear=True, limit=limit)
            ops, axes = [first, *ops[2:]], [keep, *axes[2:]]
        if len(distinct(axes)) <= limit:
            return kernel(ops, axes, result)
    return _split(ops, axes, result, kernel, kit, linear, limit)


def _sum_lone_indices(
    arrays: list[Array],
    names: list[tuple[Hashable, ...]],
    out: tuple[Hashable, ...],
    kernel: Kernel,
    kit: ArrayKit,
    limit: int,
) -> tuple[list[Array], list[tuple[Hashable, ...]]]:
    """Sum away each operand's indices that neither another operand nor the result uses."""
    new_arrays: list[Array] = []
    new_names: list[tuple[Hashable, ...]] = []
    for k, (a, ns) in enumerate(zip(arrays, names)):
        elsewhere = {n for j, other in enumerate(names) if j != k for n in other} | set(out)
        keep = tuple(dict.fromkeys(n for n in ns if n in elsewhere))
        if keep != ns:
            if len(set(ns)) <= limit:
                a = kernel([a], [ns], keep)
            else:
                a = _split([a], [ns], keep, kernel, kit, True, limit)
        new_arrays.append(a)
        new_names.append(keep)
    return new_arrays, new_names


def _split(
    arrays: list[Array],
    names: list[tuple[Hashable, ...]],
    out: tuple[Hashable, ...],
    kernel: Kernel,
    kit: ArrayKit,
    linear: bool,
    limit: int,
) -> Array:
    """Evaluate along each value of one index (the one of least extent), then stack or combine the parts."""
    extent: dict[Hashable, int] = {}
    for a, ns in zip(arrays, names):
        for n, size in zip(ns, a.shape):
            extent.setdefault(n, int(size))
    out_shape = tuple(extent[n] for n in out)
    if 0 in out_shape or (linear and 0 in extent.values()):
        return kit.zeros(out_shape)
    # An empty projected index under max/min is left to the kernel (it decides what that means); split others.
    candidates = [n for n in distinct(names) if extent[n] > 0]
    if not candidates:
        return kernel(arrays, names, out)
    axis = min(candidates, key=lambda n: extent[n])
    sub_names = [tuple(n for n in ns if n != axis) for ns in names]
    sub_out = tuple(n for n in out if n != axis)
    parts = []
    for v in range(extent[axis]):
        sub = [a[tuple(v if n == axis else slice(None) for n in ns)] for a, ns in zip(arrays, names)]
        parts.append(contract_named(sub, sub_names, sub_out, kernel, kit, linear=linear, limit=limit))
    if axis in out:
        return kit.stack(parts, out.index(axis))
    acc = parts[0]
    for p in parts[1:]:
        acc = kit.combine(acc, p)
    return acc


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy's broadcast of ``shapes`` (right-aligned; 1 stretches), for any rank.

    ``np.broadcast_shapes`` goes through ``np.broadcast``, which takes at
    most 32 dimensions; an equation with more indices is legal.
    """
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for k, n in enumerate(s, start=rank - len(s)):
            n = int(n)
            if n != 1:
                if out[k] not in (1, n):
                    raise ValueError(f"shapes {[tuple(x) for x in shapes]} do not broadcast")
                out[k] = n
    return tuple(out)
