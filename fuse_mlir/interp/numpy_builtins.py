"""NumPy implementations of the `.fuse` builtins: the reference interpreter's ground truth.

Every function is pure and works on positional axes (the caller has already arranged named
indices into positions). Dtype rules (LANGUAGE.md §8): floating inputs keep their dtype
(float32 stays float32); integer or boolean input to a transcendental function is computed in
float64 (also for int8/int16, where NumPy alone would pick float16/float32); boolean and 0/1
results are int8. Mixing dtypes promotes as NumPy does. Underflow to zero is never reported as
a floating-point error, since flushing ``exp`` of a very negative number to 0 is the right answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

__all__ = [
    "abs",
    "attention",
    "causal_mask",
    "concat",
    "cos",
    "exp",
    "flatten_last2",
    "gelu",
    "gelu_grad",
    "index_parity",
    "log",
    "logsumexp",
    "lnorm",
    "masked_softmax",
    "maximum",
    "minimum",
    "pow",
    "reduce",
    "relu",
    "rope",
    "select",
    "sig",
    "sin",
    "softmax",
    "softmax_grad",
    "sqrt",
    "step",
    "tanh",
    "topk",
    "tucker_dense",
]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715
# Beyond |x| = 10 the tanh argument of the GELU is > 43, where tanh is exactly +-1 in every
# float format; clipping there changes no result but keeps x**3 from overflowing.
_GELU_CLIP = 10.0


# --------------------------------------------------------------------------- helpers


def _as_float(x: ArrayLike) -> np.ndarray:
    """``x`` as an array of inexact dtype: floating/complex as is, anything else as float64."""
    a = np.asarray(x)
    if a.dtype.kind in "fc":
        return a
    return a.astype(np.float64)


def _float_dtype(*args: ArrayLike) -> np.dtype:
    """The NumPy result dtype of ``args`` (Python scalars weak), or float64 if that is not inexact."""
    dt = np.result_type(*args)
    return dt if dt.kind in "fc" else np.dtype(np.float64)


def _axis(axis: int, ndim: int) -> int:
    """``axis`` normalised into ``range(ndim)``; ValueError when out of range."""
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise TypeError(f"axis must be an integer, got {axis!r}")
    a = int(axis)
    if not -ndim <= a < ndim:
        raise ValueError(f"axis {axis} is out of range for an array of rank {ndim}")
    return a % ndim if ndim else a


# --------------------------------------------------------------------------- elementwise


def relu(x: ArrayLike) -> np.ndarray:
    """max(x, 0) elementwise, keeping x's dtype; NaN stays NaN."""
    return np.maximum(x, 0)


def step(x: ArrayLike) -> np.ndarray:
    """The Heaviside step x > 0 as int8 0/1 (0 at x == 0 and at NaN)."""
    return np.greater(x, 0).astype(np.int8)


def _logistic(z: np.ndarray) -> np.ndarray:
    """Numerically stable 1 / (1 + exp(-z)): only exp of non-positive numbers is ever taken."""
    with np.errstate(under="ignore"):
        e = np.exp(-np.abs(z))
        return np.where(z >= 0, 1 / (1 + e), e / (1 + e))


def sig(x: ArrayLike, T: ArrayLike | None = None) -> np.ndarray:
    """The logistic of x / T, overflow-free for any |x|; T None or 0 gives the hard step (x > 0) as floats.

    T may be a number or an array broadcastable to x; where T == 0 elementwise the step is used.
    """
    if T is None:
        xf = np.asarray(x)
        return np.greater(xf, 0).astype(_float_dtype(xf))
    if np.ndim(T) == 0 and not isinstance(T, np.ndarray | np.generic) and T == 0:
        xf = np.asarray(x)
        return np.greater(xf, 0).astype(_float_dtype(xf))
    dt = _float_dtype(x, T)
    tz = np.equal(T, 0)
    if not np.any(tz):
        return _logistic(np.true_divide(x, T)).astype(dt, copy=False)
    t_safe = np.where(tz, 1, T)
    soft = _logistic(np.true_divide(x, t_safe))
    hard = np.greater(x, 0)
    return np.where(tz, hard, soft).astype(dt, copy=False)


def gelu(x: ArrayLike) -> np.ndarray:
    """Tanh-approximated GELU 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), without overflow for large |x|."""
    xf = _as_float(x)
    xc = np.clip(xf, -_GELU_CLIP, _GELU_CLIP)
    t = np.tanh(_SQRT_2_OVER_PI * (xc + _GELU_A * xc * xc * xc))
    # Below -10, 1 + t is exactly 0, so the clipped factor changes nothing except gelu(-inf) = -0 (not NaN).
    return 0.5 * np.maximum(xf, -_GELU_CLIP) * (1 + t)


def gelu_grad(x: ArrayLike) -> np.ndarray:
    """Exact derivative of the tanh-approximated GELU: 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)."""
    xf = _as_float(x)
    xc = np.clip(xf, -_GELU_CLIP, _GELU_CLIP)
    x2 = xc * xc
    t = np.tanh(_SQRT_2_OVER_PI * (xc + _GELU_A * x2 * xc))
    sech2 = (1 - t) * (1 + t)
    return 0.5 * (1 + t) + 0.5 * xc * sech2 * (_SQRT_2_OVER_PI * (1 + 3 * _GELU_A * x2))


def exp(x: ArrayLike) -> np.ndarray:
    """e**x elementwise (float64 for integer input)."""
    return np.exp(_as_float(x))


def log(x: ArrayLike) -> np.ndarray:
    """Natural logarithm elementwise (float64 for integer input); log(0) = -inf and log(<0) = NaN as in NumPy."""
    return np.log(_as_float(x))


def sqrt(x: ArrayLike) -> np.ndarray:
    """Square root elementwise (float64 for integer input); negative input gives NaN as in NumPy."""
    return np.sqrt(_as_float(x))


def abs(x: ArrayLike) -> np.ndarray:  # noqa: A001 - the builtin's name in the language
    """Absolute value elementwise, keeping x's dtype (integers stay integers)."""
    return np.abs(x)


def tanh(x: ArrayLike) -> np.ndarray:
    """Hyperbolic tangent elementwise (float64 for integer input)."""
    return np.tanh(_as_float(x))


def sin(x: ArrayLike) -> np.ndarray:
    """Sine elementwise (float64 for integer input)."""
    return np.sin(_as_float(x))


def cos(x: ArrayLike) -> np.ndarray:
    """Cosine elementwise (float64 for integer input)."""
    return np.cos(_as_float(x))


INT_NEGATIVE_POWER = "an integer cannot be raised to a negative integer power (exponent {0})"
"""The error every backend gives for int ** negative int (NumPy refuses it too); ``{0}`` is the exponent."""


def negative_int_exponent(a: ArrayLike, b: ArrayLike) -> int | None:
    """The first (row-major, after broadcasting) negative exponent of an integer ``a ** b``, else None."""
    aa, bb = np.asarray(a), np.asarray(b)
    if aa.dtype.kind not in "iu" or bb.dtype.kind != "i":
        return None
    bad = np.broadcast_to(bb < 0, np.broadcast_shapes(aa.shape, bb.shape))
    if not bad.any():
        return None
    return int(np.broadcast_to(bb, bad.shape)[bad].flat[0])


def pow(a: ArrayLike, b: ArrayLike) -> np.ndarray:  # noqa: A001 - the builtin's name in the language
    """a ** b elementwise with NumPy's promotion (int ** int stays int; int ** negative int raises ValueError)."""
    bad = negative_int_exponent(a, b)
    if bad is not None:
        raise ValueError(INT_NEGATIVE_POWER.format(bad))
    return np.power(a, b)


def maximum(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Elementwise maximum of a and b; NaN in either argument gives NaN, and -0 < +0 (IEEE 754-2019's
    ``maximum``, what native code's ``llvm.maximum`` and MLIR's ``arith.maximumf`` compute; NumPy's own
    ``np.maximum`` returns its first argument for two zeros, so ``1 / max(-0, 0)`` would depend on the order)."""
    r = np.maximum(a, b)  # a Python scalar stays weak (NEP 50): np.asarray would make it a float64 array
    if r.dtype.kind != "f":
        return r
    # a zero maximum: +0 if either argument is +0, else -0
    return np.where(r == 0, np.where(_positive_zero(a) | _positive_zero(b), 0.0, -0.0).astype(r.dtype), r)


def minimum(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Elementwise minimum of a and b; NaN in either argument gives NaN, and -0 < +0 (IEEE 754-2019's
    ``minimum``: :func:`maximum` says why)."""
    r = np.minimum(a, b)
    if r.dtype.kind != "f":
        return r
    return np.where(r == 0, np.where(_negative_zero(a) | _negative_zero(b), -0.0, 0.0).astype(r.dtype), r)


def _positive_zero(x: ArrayLike) -> np.ndarray:
    return np.equal(x, 0) & ~np.signbit(x)


def _negative_zero(x: ArrayLike) -> np.ndarray:
    return np.equal(x, 0) & np.signbit(x)


def select(c: ArrayLike, a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """a where c != 0, else b (NaN in c counts as nonzero); a and b promote as in NumPy."""
    return np.where(np.not_equal(c, 0), a, b)


# --------------------------------------------------------------------------- along an axis


def _shifted_exp(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(exp(x - m), m) with m the max along ``axis`` (kept), shifting by 0 where m is not finite."""
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0).astype(x.dtype, copy=False)
    # x - m <= 0 wherever both are finite; overflow there only means "-inf", whose exp is 0.
    with np.errstate(under="ignore", over="ignore"):
        return np.exp(x - m), m


def softmax(x: ArrayLike, axis: int) -> np.ndarray:
    """exp(x) / sum(exp(x)) along ``axis``, shifted by the max; an all -inf slice gives NaN (as torch)."""
    xf = _as_float(x)
    ax = _axis(axis, xf.ndim)
    if xf.size == 0:
        return np.empty_like(xf)
    e, _ = _shifted_exp(xf, ax)
    with np.errstate(invalid="ignore", under="ignore"):
        return e / np.sum(e, axis=ax, keepdims=True)


def masked_softmax(x: ArrayLike, mask: ArrayLike, axis: int, fill: float | None = None) -> np.ndarray:
    """Softmax along ``axis`` of x with masked positions (mask == 0) set to ``fill`` first and to exactly 0 after.

    ``fill`` defaults to the dtype's most negative finite value; a fully masked slice gives all zeros.
    """
    xf = _as_float(x)
    keep = np.not_equal(mask, 0)
    fill_v = np.finfo(xf.dtype).min if fill is None else fill
    xm = np.where(keep, xf, xf.dtype.type(fill_v))
    ax = _axis(axis, xm.ndim)
    if xm.size == 0:
        return np.empty_like(xm)
    e, _ = _shifted_exp(xm, ax)
    with np.errstate(invalid="ignore", divide="ignore", under="ignore"):
        y = e / np.sum(e, axis=ax, keepdims=True)
    return np.where(keep, y, xm.dtype.type(0))


def softmax_grad(y: ArrayLike, g: ArrayLike, axis: int) -> np.ndarray:
    """Vector-Jacobian product of softmax: y * (g - sum(y * g, axis, keepdims)) with y the softmax output."""
    y = np.asarray(y)
    g = np.asarray(g)
    yg = y * g
    ax = _axis(axis, yg.ndim)
    return y * (g - np.sum(yg, axis=ax, keepdims=True))


def lnorm(x: ArrayLike, axis: int, eps: float = 1e-5) -> np.ndarray:
    """Layer normalisation (x - mean) / sqrt(var + eps) along ``axis``, population variance, no affine."""
    xf = _as_float(x)
    ax = _axis(axis, xf.ndim)
    if xf.size == 0:
        return np.empty_like(xf)
    d = xf - np.mean(xf, axis=ax, keepdims=True)
    var = np.mean(d * d, axis=ax, keepdims=True)
    return d / np.sqrt(var + eps)


def logsumexp(x: ArrayLike, axis: int) -> np.ndarray:
    """log(sum(exp(x))) reducing ``axis`` away, max-shifted; an all -inf (or empty) slice gives -inf."""
    xf = _as_float(x)
    ax = _axis(axis, xf.ndim)
    out_shape = xf.shape[:ax] + xf.shape[ax + 1 :]
    if xf.shape[ax] == 0:
        return np.full(out_shape, -np.inf, dtype=xf.dtype)
    if xf.size == 0:
        return np.empty(out_shape, dtype=xf.dtype)
    e, m = _shifted_exp(xf, ax)
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(np.sum(e, axis=ax)) + np.squeeze(m, axis=ax))


_REDUCE_KINDS = ("sum", "max", "min", "mean", "prod", "any")


def reduce_identity(kind: str, dtype: DTypeLike) -> int | float:
    """The identity of a max/min reduction in ``dtype``: what it gives over an empty axis.

    Floats: -inf for max, +inf for min. Integers (and booleans' int8): the
    dtype's smallest value for max, its largest for min.
    """
    dt = np.dtype(dtype)
    if kind not in ("max", "min"):
        raise ValueError(f"reduce_identity: {kind!r} is not max or min")
    if dt.kind == "f":
        return -math.inf if kind == "max" else math.inf
    info = np.iinfo(dt)
    return int(info.min) if kind == "max" else int(info.max)


def reduce(x: ArrayLike, axes: tuple[int, ...], kind: str) -> np.ndarray:
    """Reduce ``axes`` away with ``kind`` in sum/max/min/mean/prod/any ("avg" = mean; "any" gives int8 0/1).

    Empty axes give the reduction's identity (sum 0, prod 1, any 0, mean NaN, and, unlike NumPy, max -inf and
    min +inf for floats, the dtype's smallest and largest value for integers: :func:`reduce_identity`), so that
    every backend agrees with native code's accumulators and no value-independent run-time error remains.
    """
    a = np.asarray(x)
    k = "mean" if kind == "avg" else kind
    if k not in _REDUCE_KINDS:
        raise ValueError(f"unknown reduction kind {kind!r}; expected one of {', '.join(_REDUCE_KINDS)}")
    ax = tuple(_axis(i, a.ndim) for i in axes)
    if len(set(ax)) != len(ax):
        raise ValueError(f"reduce: repeated axis in {tuple(axes)}")
    out_shape = tuple(n for i, n in enumerate(a.shape) if i not in ax)
    empty = [i for i in ax if a.shape[i] == 0]
    if k == "any":
        return np.asarray(np.any(np.not_equal(a, 0), axis=ax), dtype=np.int8)
    if k in ("max", "min"):
        if empty:
            return np.full(out_shape, reduce_identity(k, a.dtype), dtype=a.dtype)
        r = np.asarray(np.max(a, axis=ax) if k == "max" else np.min(a, axis=ax))
        if r.dtype.kind != "f":
            return r
        # -0 < +0, as in maximum/minimum: a zero maximum is +0 if any +0 is reduced, a zero minimum -0 if any -0
        if k == "max":
            zero = np.where(np.any(_positive_zero(a), axis=ax), 0.0, -0.0)
        else:
            zero = np.where(np.any(_negative_zero(a), axis=ax), -0.0, 0.0)
        return np.asarray(np.where(r == 0, zero.astype(r.dtype), r))
    if k == "sum":
        return np.asarray(np.sum(a, axis=ax))
    if k == "prod":
        return np.asarray(np.prod(a, axis=ax))
    # mean
    if empty:
        return np.full(out_shape, np.nan, dtype=_float_dtype(a))
    return np.asarray(np.mean(a, axis=ax))


# --------------------------------------------------------------------------- constructors


def causal_mask(n: int, dtype: DTypeLike = np.float64) -> np.ndarray:
    """The n x n lower-triangular ones matrix: M[p, p'] = 1 where p' <= p, else 0."""
    if n < 0:
        raise ValueError(f"causal_mask: size must be non-negative, got {n}")
    return np.tri(n, n, 0, dtype=dtype)


def nonempty(extents: Sequence[int], dtype: DTypeLike = np.int8) -> np.ndarray:
    """``te.generate "nonempty"``: the 0-d 1 when every extent is positive, else 0."""
    return np.array(all(int(e) > 0 for e in extents), dtype=dtype)


def index_parity(n: int, parity: str) -> np.ndarray:
    """An int8 0/1 vector of length n: 1 at even indices for parity 'even', at odd indices for 'odd'."""
    if parity not in ("even", "odd"):
        raise ValueError(f"index_parity: parity must be 'even' or 'odd', got {parity!r}")
    if n < 0:
        raise ValueError(f"index_parity: length must be non-negative, got {n}")
    r = np.arange(n) % 2
    return (r == (0 if parity == "even" else 1)).astype(np.int8)


def concat(arrays: Sequence[ArrayLike], axis: int) -> np.ndarray:
    """Join ``arrays`` along ``axis`` (extents add; dtypes promote as in NumPy)."""
    if len(arrays) == 0:
        raise ValueError("concat: needs at least one array")
    arrs = [np.asarray(a) for a in arrays]
    return np.concatenate(arrs, axis=_axis(axis, arrs[0].ndim))


def flatten_last2(x: ArrayLike) -> np.ndarray:
    """Merge the last two axes into one of their product's extent, row-major (a view when possible)."""
    a = np.asarray(x)
    if a.ndim < 2:
        raise ValueError(f"flatten_last2: needs rank >= 2, got rank {a.ndim}")
    return a.reshape(*a.shape[:-2], a.shape[-2] * a.shape[-1])


# --------------------------------------------------------------------------- model blocks


def attention(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    mask: ArrayLike | None = None,
    scale: float | None = None,
    causal: bool = False,
) -> np.ndarray:
    """Scaled dot-product attention softmax(q k^T * scale, masked) v over (..., Lq, d), (..., Lk, d), (..., Lk, dv).

    Masked scores behave as in masked_softmax (fully masked rows give 0); ``causal`` keeps key j for query i when
    j <= i + (Lk - Lq), i.e. the queries are aligned to the end of the keys (plain tril when Lq == Lk).
    """
    dt = _float_dtype(q, k, v)
    qf = np.asarray(q).astype(dt, copy=False)
    kf = np.asarray(k).astype(dt, copy=False)
    vf = np.asarray(v).astype(dt, copy=False)
    if qf.ndim < 2 or kf.ndim < 2 or vf.ndim < 2:
        raise ValueError("attention: q, k and v need rank >= 2")
    d = qf.shape[-1]
    if kf.shape[-1] != d:
        raise ValueError(f"attention: q has feature size {d} but k has {kf.shape[-1]}")
    if vf.shape[-2] != kf.shape[-2]:
        raise ValueError(f"attention: k has {kf.shape[-2]} keys but v has {vf.shape[-2]}")
    lq, lk = qf.shape[-2], kf.shape[-2]
    s = (1.0 / math.sqrt(d) if d > 0 else 1.0) if scale is None else scale
    scores = np.matmul(qf, np.swapaxes(kf, -1, -2)) * dt.type(s)  # a scale never widens the dtype
    keep: np.ndarray | None = None
    if causal:
        keep = np.tri(lq, lk, lk - lq, dtype=bool)
    if mask is not None:
        m = np.not_equal(mask, 0)
        keep = m if keep is None else keep & m
    if keep is None:
        p = softmax(scores, -1)
    else:
        p = masked_softmax(scores, keep, -1)
    return np.matmul(p, vf)


def rope(x: ArrayLike, seq_axis: int, feature_axis: int, base: float = 10000.0) -> np.ndarray:
    """Rotary position embedding, interleaved (GPT-J / original RoFormer) convention: features (2m, 2m+1) at position p
    are rotated by the angle p * base**(-2m/d); angles are computed in float64 and the result keeps x's float dtype.
    """
    xf = _as_float(x)
    sa = _axis(seq_axis, xf.ndim)
    fa = _axis(feature_axis, xf.ndim)
    if sa == fa:
        raise ValueError("rope: the sequence and feature axes must differ")
    d = xf.shape[fa]
    if d % 2:
        raise ValueError(f"rope: the feature dimension must be even, got {d}")
    n = xf.shape[sa]
    inv_freq = float(base) ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # (d/2,)
    ang = np.arange(n, dtype=np.float64)[:, None] * inv_freq[None, :]  # (n, d/2)
    c = np.cos(ang).astype(xf.dtype, copy=False)
    s = np.sin(ang).astype(xf.dtype, copy=False)
    xm = np.moveaxis(xf, (sa, fa), (-2, -1))
    x0 = xm[..., 0::2]
    x1 = xm[..., 1::2]
    out = np.empty(xm.shape, dtype=xf.dtype)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return np.moveaxis(out, (-2, -1), (sa, fa))


#: tucker_dense's run-time error for a NaN or infinite element: the SVDs its approximation takes are undefined
#: there (NumPy raised "SVD did not converge", torch an internal LinAlgError, jax returned zeros).
TUCKER_NOT_FINITE = "tucker_dense: its argument holds a NaN or an infinity (it needs finite values)"


def tucker_ranks(shape: tuple[int, ...], rank: int | Sequence[int] | None) -> list[int]:
    """Per-mode truncation ranks for tucker_dense (see its docstring); ValueError for a rank that is not a
    positive int or one per mode (the lowering calls it to refuse a bad ``rank=`` at its call)."""
    if rank is None:
        return [max(1, min(n, math.ceil(math.sqrt(n)))) for n in shape]
    if isinstance(rank, int | np.integer) and not isinstance(rank, bool):
        if rank <= 0:
            raise ValueError(f"tucker_dense: rank must be positive, got {rank}")
        return [min(n, int(rank)) for n in shape]
    if not isinstance(rank, list | tuple):
        raise ValueError(f"tucker_dense: rank must be a positive integer or one per axis, got {rank!r}")
    ranks = list(rank)
    if len(ranks) != len(shape):
        raise ValueError(f"tucker_dense: {len(ranks)} ranks given for a tensor of rank {len(shape)}")
    for r in ranks:
        if isinstance(r, bool) or not isinstance(r, int | np.integer) or r <= 0:
            raise ValueError(f"tucker_dense: ranks must be positive integers, got {ranks}")
    return [min(n, int(r)) for n, r in zip(shape, ranks)]


def _mode_dot(t: np.ndarray, m: np.ndarray, mode: int) -> np.ndarray:
    """The mode-``mode`` product t x_mode m: contracts t's axis ``mode`` with m's columns."""
    return np.moveaxis(np.tensordot(m, t, axes=(1, mode)), 0, mode)


def tucker_dense(x: ArrayLike, rank: int | Sequence[int] | None = None, threshold: float = 0.5) -> np.ndarray:
    """Truncated-HOSVD approximation of x (per mode: the leading left singular vectors of the unfolding), then
    the 0/1 indicator approx > threshold in x's float dtype (float64 for integer input).

    rank None picks max(1, min(dim, ceil(sqrt(dim)))) per mode, an int is min(dim, rank) per mode, a sequence is per mode.
    """
    xf = _as_float(x)
    if not np.isfinite(xf).all():
        raise ValueError(TUCKER_NOT_FINITE)
    if xf.ndim == 0:
        return np.greater(xf, threshold).astype(xf.dtype)
    ranks = tucker_ranks(xf.shape, rank)
    if xf.size == 0:
        return np.zeros(xf.shape, dtype=xf.dtype)
    us: list[np.ndarray | None] = []
    for mode, (n, r) in enumerate(zip(xf.shape, ranks)):
        if r >= n:
            us.append(None)  # full rank: U U^T is the identity, skip it exactly
            continue
        unfolded = np.moveaxis(xf, mode, 0).reshape(n, -1)
        u, _, _ = np.linalg.svd(unfolded, full_matrices=False)
        us.append(u[:, :r])
    core = xf
    for mode, u in enumerate(us):
        if u is not None:
            core = _mode_dot(core, u.T, mode)
    approx = core
    for mode, u in enumerate(us):
        if u is not None:
            approx = _mode_dot(approx, u, mode)
    return np.greater(approx - threshold, 0).astype(xf.dtype)


def topk(x: ArrayLike, k: int, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """(indices as int64, values) of the k largest entries along ``axis``, sorted descending, ties by lower index.

    NaN counts as larger than every number (as in torch.topk); k > the axis extent raises ValueError.
    """
    a = np.asarray(x)
    ax = _axis(axis, a.ndim) if a.ndim else None
    if ax is None:
        raise ValueError("topk: needs an array of rank >= 1")
    n = a.shape[ax]
    if k < 0 or k > n:
        raise ValueError(f"topk: k = {k} is out of range for an axis of extent {n}")
    # A stable ascending sort of the reversed axis, read backwards, is descending with ties by lower index.
    rev = np.flip(a, axis=ax)
    order = np.argsort(rev, axis=ax, kind="stable")
    top = np.flip(order, axis=ax)
    top = np.take(top, np.arange(k), axis=ax)
    idx = (n - 1 - top).astype(np.int64, copy=False)
    return idx, np.take_along_axis(a, idx, axis=ax)
