"""Result-dtype rules, taken from the reference NumPy implementations themselves.

Each rule evaluates the reference function on one-element arrays of the
operand dtypes, so the types the lowering writes into the IR are exactly the
types the interpreter produces. Literals are weak (NEP 50): ``2 * X`` keeps
X's dtype.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from fuse_mlir.interp import numpy_builtins as nb


def _map_fns() -> dict[str, Callable[..., Any]]:
    def b(x):
        return x != 0

    return {
        "add": np.add,
        "sub": np.subtract,
        "mul": np.multiply,
        "div": np.true_divide,
        "pow": nb.pow,
        "neg": np.negative,
        "not": lambda x: (~b(x)).astype(np.int8),
        "and": lambda x, y: (b(x) & b(y)).astype(np.int8),
        "or": lambda x, y: (b(x) | b(y)).astype(np.int8),
        "lt": lambda x, y: np.less(x, y).astype(np.int8),
        "le": lambda x, y: np.less_equal(x, y).astype(np.int8),
        "gt": lambda x, y: np.greater(x, y).astype(np.int8),
        "ge": lambda x, y: np.greater_equal(x, y).astype(np.int8),
        "eq": lambda x, y: np.equal(x, y).astype(np.int8),
        "ne": lambda x, y: np.not_equal(x, y).astype(np.int8),
        "select": nb.select,
        "relu": nb.relu,
        "step": nb.step,
        "sig": nb.sig,
        "gelu": nb.gelu,
        "gelu_grad": nb.gelu_grad,
        "exp": nb.exp,
        "log": nb.log,
        "sqrt": nb.sqrt,
        "abs": nb.abs,
        "tanh": nb.tanh,
        "sin": nb.sin,
        "cos": nb.cos,
        "maximum": nb.maximum,
        "minimum": nb.minimum,
    }


MAP_FNS = _map_fns()


def weak_dtype(value: int | float, others: list[np.dtype]) -> np.dtype:
    """The dtype a literal takes next to tensors of ``others`` (float64/int64 when alone)."""
    if not others:
        return np.dtype(np.int64 if isinstance(value, int) and not isinstance(value, bool) else np.float64)
    base = np.result_type(*others)
    try:
        return np.result_type(base, value)
    except (OverflowError, TypeError):
        return np.result_type(base, np.float64 if isinstance(value, float) else np.int64)


@cache
def _map_dtype(fn: str, dtypes: tuple[str, ...], params: tuple) -> np.dtype:
    args = [np.ones(1, dtype=d) for d in dtypes]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        out = MAP_FNS[fn](*args, **dict(params))
    return np.asarray(out).dtype


def map_dtype(fn: str, dtypes: list[np.dtype], params: dict[str, object]) -> np.dtype:
    """Result dtype of an elementwise op."""
    return _map_dtype(fn, tuple(np.dtype(d).name for d in dtypes), tuple(sorted(params.items())))


def contract_dtype(dtypes: list[np.dtype], projection: str, projected: bool = True) -> np.dtype:
    """Result dtype of a product projected with ``projection`` over some indices (``projected``) or none.

    A product alone promotes as NumPy's ``*`` does (``int8 * int8`` is int8;
    literals were already given their weak dtype); when indices are
    projected, the reduction's rule applies on top of it (NumPy's ``sum``
    widens small integers to int64, a mean is float). With nothing projected
    the projection is the identity, whatever its operator, so the product's
    dtype stands: ``I8[j] I8[j]`` and ``3 I32[j]`` keep their dtypes, as
    ``I32[j] + 1`` does (LANGUAGE.md §8).
    """
    base = np.result_type(*dtypes)
    return reduce_dtype(base, projection) if projected else base


def accumulate_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a sum contraction accumulates in: float32 for float16 (a half-precision running sum loses
    every addend below its spacing), the result's own dtype otherwise; the result is rounded back once."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


@cache
def reduce_dtype(dtype: np.dtype, kind: str) -> np.dtype:
    """Result dtype of a reduction: sums/products widen small integers as ``np.sum`` does; mean is float."""
    if kind == "any":
        return np.dtype(np.int8)
    x = np.ones((1, 1), dtype=dtype)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if kind == "logsumexp":
            return nb.logsumexp(x, 1).dtype
        return nb.reduce(x, (1,), kind).dtype


@cache
def _axis_dtype(fn: str, dtypes: tuple[str, ...]) -> np.dtype:
    args = [np.ones((1, 1), dtype=d) for d in dtypes]
    f = {"softmax": nb.softmax, "masked_softmax": nb.masked_softmax, "softmax_grad": nb.softmax_grad, "lnorm": nb.lnorm}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return f[fn](*args, axis=1).dtype


def axis_dtype(fn: str, dtypes: list[np.dtype]) -> np.dtype:
    """Result dtype of a builtin along an axis."""
    return _axis_dtype(fn, tuple(np.dtype(d).name for d in dtypes))


def fold(fn: str, values: list[int | float], params: dict[str, object]) -> int | float:
    """Constant-fold an elementwise op on literals (Python semantics matching the literal's weak type)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        out = MAP_FNS[fn](*[np.asarray(v) for v in values], **params)
    return np.asarray(out).item()
