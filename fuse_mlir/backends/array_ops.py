"""The array-framework kernel table of the array walker: the operations it needs, with NumPy's names and semantics.

A backend (torch, jax) subclasses :class:`ArrayOps` with its primitives
(einsum, gathers, reductions, elementwise math, ...); the builtins (softmax,
gelu, rope, attention, tucker_dense, topk, ...) are written once here on top
of them, with :mod:`fuse_mlir.interp.numpy_builtins`' semantics. The walker
that evaluates tensor_eq with such a table is :mod:`fuse_mlir.backends.array_walk`.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from typing import Any

import numpy as np

from fuse_mlir.interp import numpy_builtins as nb

Array = Any

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715
_GELU_CLIP = 10.0  # as numpy_builtins: tanh's argument is beyond 43 there, where tanh is exactly +-1


class ArrayOps:
    """A framework's kernel table: the array operations the walker needs, with NumPy's names and semantics.

    Subclasses implement the primitives; the builtins (softmax, gelu, rope,
    attention, ...) are written once here on top of them.
    """

    name = "arrays"

    # -- primitives (framework specific) ------------------------------------------

    def asarray(self, x: np.ndarray) -> Array:
        raise NotImplementedError

    def to_numpy(self, x: Array) -> np.ndarray:
        raise NotImplementedError

    def astype(self, x: Array, dtype: np.dtype) -> Array:
        raise NotImplementedError

    def numpy_dtype(self, x: Array) -> np.dtype:
        raise NotImplementedError

    def argmax_bool(self, flags: Array) -> Array:
        """The position of the first true entry of a 1-d boolean array (0 when none)."""
        raise NotImplementedError

    def zeros(self, shape: Sequence[int], dtype: np.dtype) -> Array:
        raise NotImplementedError

    def arange(self, n: int) -> Array:
        """0..n-1 as int64."""
        raise NotImplementedError

    def transpose(self, x: Array, perm: Sequence[int]) -> Array:
        raise NotImplementedError

    def reshape(self, x: Array, shape: Sequence[int]) -> Array:
        raise NotImplementedError

    def broadcast_to(self, x: Array, shape: Sequence[int]) -> Array:
        raise NotImplementedError

    def einsum(self, spec: str, *xs: Array) -> Array:
        raise NotImplementedError

    def where(self, c: Array, a: Array, b: Array) -> Array:
        raise NotImplementedError

    def reduce(self, x: Array, axes: tuple[int, ...], kind: str, keepdims: bool = False) -> Array:
        """``kind`` in sum/max/min/mean/prod/any over ``axes`` (any gives bool)."""
        raise NotImplementedError

    def unary(self, fn: str, x: Array) -> Array:
        """exp/log/sqrt/abs/tanh/sin/cos/isfinite/floor elementwise."""
        raise NotImplementedError

    def maximum(self, a: Array, b: Array) -> Array:
        raise NotImplementedError

    def minimum(self, a: Array, b: Array) -> Array:
        raise NotImplementedError

    def power(self, a: Array, b: Array) -> Array:
        raise NotImplementedError

    def clip(self, x: Array, lo: float, hi: float) -> Array:
        raise NotImplementedError

    def concatenate(self, xs: Sequence[Array], axis: int) -> Array:
        raise NotImplementedError

    def stack(self, xs: Sequence[Array], axis: int) -> Array:
        raise NotImplementedError

    def take(self, x: Array, index: tuple[Any, ...]) -> Array:
        """``x[index]`` with NumPy advanced indexing (integer arrays broadcast against each other)."""
        return x[index]

    def set_at(self, x: Array, index: tuple[Any, ...], value: Array) -> Array:
        """A copy of ``x`` with ``x[index] = value``."""
        raise NotImplementedError

    def argsort_stable(self, x: Array, axis: int) -> Array:
        raise NotImplementedError

    def flip(self, x: Array, axis: int) -> Array:
        raise NotImplementedError

    def take_along_axis(self, x: Array, idx: Array, axis: int) -> Array:
        raise NotImplementedError

    def svd_u(self, x: Array) -> Array:
        """The left singular vectors of a matrix (reduced)."""
        raise NotImplementedError

    def matmul(self, a: Array, b: Array) -> Array:
        raise NotImplementedError

    def scalar(self, value: float | int, dtype: np.dtype) -> Array:
        return self.asarray(np.asarray(value, dtype=dtype))

    # -- shared helpers --------------------------------------------------------

    def ne0(self, x: Array) -> Array:
        return x != 0

    def align(self, x: Array, names: Sequence[str], target: Sequence[str]) -> Array:
        """``x`` (axes ``names``) with axes in ``target`` order, size-1 axes for names it lacks."""
        names = list(names)
        order = [names.index(n) for n in target if n in names]
        if order != list(range(len(order))):
            x = self.transpose(x, order)
        it = iter(x.shape)
        shape = [next(it) if n in names else 1 for n in target]
        return self.reshape(x, shape) if tuple(shape) != tuple(x.shape) else x

    # -- builtins (numpy_builtins semantics, written once) ------------------------

    def logistic(self, z: Array) -> Array:
        e = self.unary("exp", -self.unary("abs", z))
        return self.where(z >= 0, 1 / (1 + e), e / (1 + e))

    def gelu(self, x: Array) -> Array:
        xc = self.clip(x, -_GELU_CLIP, _GELU_CLIP)
        t = self.unary("tanh", _SQRT_2_OVER_PI * (xc + _GELU_A * xc * xc * xc))
        return 0.5 * self.maximum(x, self.scalar(-_GELU_CLIP, self.numpy_dtype(x))) * (1 + t)

    def gelu_grad(self, x: Array) -> Array:
        xc = self.clip(x, -_GELU_CLIP, _GELU_CLIP)
        x2 = xc * xc
        t = self.unary("tanh", _SQRT_2_OVER_PI * (xc + _GELU_A * x2 * xc))
        sech2 = (1 - t) * (1 + t)
        return 0.5 * (1 + t) + 0.5 * xc * sech2 * (_SQRT_2_OVER_PI * (1 + 3 * _GELU_A * x2))

    def sig(self, x: Array, dtype: np.dtype, t: Array | float | None) -> Array:
        if t is None or (isinstance(t, float) and t == 0):
            return self.astype(x > 0, dtype)
        if isinstance(t, float):
            return self.logistic(x / t)
        tz = t == 0
        soft = self.logistic(x / self.where(tz, self.scalar(1, dtype), t))
        return self.where(tz, self.astype(x > 0, dtype), soft)

    def shifted_exp(self, x: Array, axis: int) -> tuple[Array, Array]:
        m = self.reduce(x, (axis,), "max", keepdims=True)
        m = self.where(self.unary("isfinite", m), m, self.zeros((), self.numpy_dtype(x)))
        return self.unary("exp", x - m), m

    def softmax(self, x: Array, axis: int) -> Array:
        if array_size(x) == 0:
            return x
        e, _ = self.shifted_exp(x, axis)
        return e / self.reduce(e, (axis,), "sum", keepdims=True)

    def masked_softmax(self, x: Array, mask: Array, axis: int, fill: float | None = None) -> Array:
        dtype = self.numpy_dtype(x)
        keep = self.ne0(mask)
        fill_v = float(np.finfo(dtype).min) if fill is None else fill
        xm = self.where(keep, x, self.scalar(fill_v, dtype))
        if array_size(xm) == 0:
            return xm
        e, _ = self.shifted_exp(xm, axis)
        y = e / self.reduce(e, (axis,), "sum", keepdims=True)
        return self.where(keep, y, self.zeros((), dtype))

    def softmax_grad(self, y: Array, g: Array, axis: int) -> Array:
        return y * (g - self.reduce(y * g, (axis,), "sum", keepdims=True))

    def lnorm(self, x: Array, axis: int, eps: float = 1e-5) -> Array:
        if array_size(x) == 0:
            return x
        d = x - self.reduce(x, (axis,), "mean", keepdims=True)
        var = self.reduce(d * d, (axis,), "mean", keepdims=True)
        return d / self.unary("sqrt", var + eps)

    def logsumexp(self, x: Array, axis: int) -> Array:
        shape = [n for k, n in enumerate(x.shape) if k != axis]
        if x.shape[axis] == 0:
            return self.astype(self.zeros(shape, self.numpy_dtype(x)) - np.inf, self.numpy_dtype(x))
        if array_size(x) == 0:
            return self.zeros(shape, self.numpy_dtype(x))
        e, m = self.shifted_exp(x, axis)
        return self.unary("log", self.reduce(e, (axis,), "sum")) + self.reshape(m, shape)

    def reduce_checked(self, x: Array, axes: tuple[int, ...], kind: str) -> Array:
        """The reference's ``reduce``: empty axes give the identities (max/min: ``nb.reduce_identity``)."""
        out_shape = [n for k, n in enumerate(x.shape) if k not in axes]
        empty = [k for k in axes if x.shape[k] == 0]
        if kind in ("max", "min") and empty:
            dtype = self.numpy_dtype(x)
            return self.astype(self.zeros(out_shape, dtype) + nb.reduce_identity(kind, dtype), dtype)
        if kind == "any":
            return self.astype(self.reduce(self.ne0(x), axes, "any"), np.dtype(np.int8))
        if kind == "mean" and empty:
            return self.zeros(out_shape, np.dtype(np.float64)) + np.nan
        if not axes:
            return x
        return self.reduce(x, axes, kind)

    def attention(self, q: Array, k: Array, v: Array, mask: Array | None, scale: float | None, causal: bool) -> Array:
        d = q.shape[-1]
        lq, lk = q.shape[-2], k.shape[-2]
        s = (1.0 / math.sqrt(d) if d > 0 else 1.0) if scale is None else scale
        perm = list(range(len(k.shape)))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        scores = self.matmul(q, self.transpose(k, perm)) * self.scalar(s, self.numpy_dtype(q))
        keep: Array | None = None
        if causal:
            keep = self.asarray(np.tri(lq, lk, lk - lq, dtype=bool))
        if mask is not None:
            m = self.ne0(mask)
            keep = m if keep is None else keep & m
        p = self.softmax(scores, len(scores.shape) - 1) if keep is None else self.masked_softmax(scores, keep, -1)
        return self.matmul(p, v)

    def rope(self, x: Array, sa: int, fa: int, base: float) -> Array:
        d = x.shape[fa]
        if sa == fa:
            raise ValueError("rope: the sequence and feature axes must differ")
        if d % 2:
            raise ValueError(f"rope: the feature dimension must be even, got {d}")
        n = x.shape[sa]
        dtype = self.numpy_dtype(x)
        inv_freq = float(base) ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        ang = np.arange(n, dtype=np.float64)[:, None] * inv_freq[None, :]
        c = self.asarray(np.cos(ang).astype(dtype))
        s = self.asarray(np.sin(ang).astype(dtype))
        rest = [k for k in range(len(x.shape)) if k not in (sa, fa)]
        xm = self.transpose(x, [*rest, sa, fa])
        pairs = self.reshape(xm, [*xm.shape[:-1], d // 2, 2])
        x0 = self.take(pairs, (..., 0))
        x1 = self.take(pairs, (..., 1))
        out = self.reshape(self.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1), xm.shape)
        inverse = np.argsort([*rest, sa, fa]).tolist()
        return self.transpose(out, inverse)

    def tucker_dense(self, x: Array, rank: Any, threshold: float) -> Array:
        from fuse_mlir.interp.numpy_builtins import _tucker_ranks

        dtype = self.numpy_dtype(x)
        if len(x.shape) == 0:
            return self.astype(x > threshold, dtype)
        ranks = _tucker_ranks(tuple(x.shape), rank)
        if array_size(x) == 0:
            return self.zeros(x.shape, dtype)
        us: list[Array | None] = []
        for mode, (n, r) in enumerate(zip(x.shape, ranks)):
            if r >= n:
                us.append(None)
                continue
            order = [mode, *[k for k in range(len(x.shape)) if k != mode]]
            unfolded = self.reshape(self.transpose(x, order), [n, -1])
            us.append(self.take(self.svd_u(unfolded), (slice(None), slice(0, r))))
        approx = x
        for mode, u in enumerate(us):
            if u is not None:
                approx = self._mode_dot(approx, self.matmul(u, self.transpose(u, [1, 0])), mode)
        return self.astype((approx - threshold) > 0, dtype)

    def _mode_dot(self, t: Array, m: Array, mode: int) -> Array:
        letters = string.ascii_letters[: len(t.shape)]
        out = letters.replace(letters[mode], "Z")
        return self.einsum(f"Z{letters[mode]},{letters}->{out}", m, t)

    def topk(self, x: Array, k: int, axis: int) -> tuple[Array, Array]:
        n = x.shape[axis]
        if k < 0 or k > n:
            raise ValueError(f"topk: k = {k} is out of range for an axis of extent {n}")
        order = self.flip(self.argsort_stable(self.flip(x, axis), axis), axis)
        index = [slice(None)] * len(x.shape)
        index[axis] = slice(0, k)
        idx = self.astype((n - 1) - self.take(order, tuple(index)), np.dtype(np.int64))
        return idx, self.take_along_axis(x, idx, axis)


def array_size(x: Array) -> int:
    """The number of elements of an array of any framework (its shape's product)."""
    return math.prod(x.shape)
