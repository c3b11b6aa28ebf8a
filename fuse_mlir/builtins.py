"""The catalogue of builtin functions: names, aliases, kinds, arities and keyword arguments.

One table owned here is read by the resolver (what is a call), the lowering
(how a call maps onto tensor_eq ops) and every backend (what it must
implement). Lookup is case-insensitive, as LANGUAGE.md §1 says.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    """How a builtin relates to indices."""

    ELEMENTWISE = "elementwise"  # pointwise over the union of its arguments' indices
    AXIS = "axis"  # works along one named axis, keeps the indices (softmax, lnorm)
    REDUCE_AXIS = "reduce_axis"  # reduces one named axis away (logsumexp, sum(x, axis=))
    CONCAT = "concat"  # joins along an axis (extents add)
    CONSTRUCTOR = "constructor"  # builds a tensor over the left-hand side's indices
    INDEX_FN = "index_fn"  # a 0/1 mask over one index (even/odd)
    BLOCK = "block"  # model blocks with their own index rules (attention, rope, topk, ...)


@dataclass(frozen=True, slots=True)
class Builtin:
    """One builtin: canonical name, kind, positional arity range and accepted keywords."""

    name: str
    kind: Kind
    min_args: int
    max_args: int  # -1: any number
    kwargs: tuple[str, ...] = ()
    doc: str = ""


def _b(name: str, kind: Kind, lo: int, hi: int, kwargs: tuple[str, ...] = (), doc: str = "") -> Builtin:
    return Builtin(name, kind, lo, hi, kwargs, doc)


E, A, R = Kind.ELEMENTWISE, Kind.AXIS, Kind.REDUCE_AXIS

BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in [
        _b("relu", E, 1, 1, doc="max(x, 0)"),
        _b("step", E, 1, 1, doc="x > 0 as int8 0/1"),
        _b("sig", E, 1, 2, ("T",), doc="logistic(x / T); T = 0 or absent is a hard step"),
        _b("gelu", E, 1, 1, doc="tanh-approximated GELU"),
        _b("gelu_grad", E, 1, 1, doc="derivative of the tanh-approximated GELU"),
        _b("exp", E, 1, 1),
        _b("log", E, 1, 1),
        _b("sqrt", E, 1, 1),
        _b("abs", E, 1, 1),
        _b("tanh", E, 1, 1),
        _b("sin", E, 1, 1),
        _b("cos", E, 1, 1),
        _b("pow", E, 2, 2),
        _b("select", E, 3, 3, doc="select(c, a, b): a where c != 0 else b"),
        # min/max: two arguments are elementwise, one argument (with axis=) reduces.
        _b("max", E, 1, 2, ("axis",), doc="max(a, b) elementwise, or max(x, axis=) along an axis"),
        _b("min", E, 1, 2, ("axis",), doc="min(a, b) elementwise, or min(x, axis=) along an axis"),
        _b("softmax", A, 1, 1, ("axis",)),
        _b("masked_softmax", A, 2, 2, ("axis", "fill")),
        _b("softmax_grad", A, 2, 2, ("axis",), doc="softmax_grad(y, g) = y * (g - sum(y*g))"),
        _b("lnorm", A, 1, 1, ("axis", "eps")),
        _b("logsumexp", R, 1, 1, ("axis",)),
        _b("avg", R, 1, 1, ("axis",)),
        _b("sum", R, 1, 1, ("axis",)),
        _b("concat", Kind.CONCAT, 1, -1, ("axis",)),
        _b("const", Kind.CONSTRUCTOR, 1, 1),
        _b("causal_mask", Kind.CONSTRUCTOR, 0, 1),
        _b("case", Kind.CONSTRUCTOR, 1, -1, doc="case(c1, v1, ..., default)"),
        _b("even", Kind.INDEX_FN, 0, 1, ("axis",)),
        _b("odd", Kind.INDEX_FN, 0, 1, ("axis",)),
        _b("iota", Kind.INDEX_FN, 0, 1, ("axis",), doc="the position along an index (int64 0, 1, ..., n-1)"),
        _b("attention", Kind.BLOCK, 3, 4, ("scale", "causal", "mask")),
        _b("rope", Kind.BLOCK, 1, 1, ("axis", "base")),
        _b("tucker_dense", Kind.BLOCK, 1, 1, ("rank", "threshold")),
        _b("topk", Kind.BLOCK, 1, 1, ("k", "axis")),
    ]
}

ALIASES: dict[str, str] = {
    "layernorm": "lnorm",
    "layer_norm": "lnorm",
    "mean": "avg",
    "reduce_max": "max",
    "reduce_mean": "avg",
}


def lookup(name: str) -> Builtin | None:
    """The builtin called ``name`` (case-insensitive, aliases resolved), or None."""
    key = name.lower()
    key = ALIASES.get(key, key)
    return BUILTINS.get(key)


def is_builtin(name: str) -> bool:
    return lookup(name) is not None
