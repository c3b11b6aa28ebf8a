"""Adjoint rules, one per tensor_eq op family: given the adjoint of an op's result, the adjoints of its operands.

A rule gets the :class:`~fuse_mlir.passes.grad.emit.Emitter`, the forward op,
the adjoint ``g`` of its (first) result named by the op's result indices, and
which operands need an adjoint; it returns one named tensor per operand (None
where the operand gets nothing), named as the op names that operand, so the
caller can line it up with the operand positionally. Every rule emits only
tensor_eq ops, so the backward pass fuses and runs natively like any program.

Conventions (documented in docs/autodiff.md):

- ``max=``/``min=`` projections and ``max``/``min`` reductions send the
  adjoint to the arg-max (arg-min); ties split it evenly among them;
  ``maximum(a, b)``/``minimum(a, b)`` split it evenly when ``a == b``.
- relu'(0) = 0, |x|'(0) = 0; step, comparisons, logical operators and boolean
  groups are piecewise constant: they pass no gradient (zero).
- A gather (every other axis a plain name) sends its adjoint back through
  ``te.scatter_add``, which every level runs natively (duplicate indices
  accumulate; the llvm nest is race-free, see ``lower_scatter_add``). Numeric
  positions are a ``te.place``; offsets through distinct names read the
  adjoint at the opposite offset. Slices and diagonals (and mixes of these
  with gathers, positions or offsets) are one ``te.scatter_add`` too, each
  such axis through an index tensor of the positions it reads (a slice reads
  ``te.generate "iota"`` through the same slice; a diagonal gathers both axes
  by the same iota): linear in the elements read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.ir import Operation, SSAValue

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.passes.grad.emit import Emitter, Extents, T, rename, union

Rule = Callable[[Emitter, Operation, T, Sequence[bool]], list[T | None]]

NOT_DIFFERENTIABLE_MAPS = frozenset({"not", "and", "or", "lt", "le", "gt", "ge", "eq", "ne", "step"})
"""Piecewise-constant elementwise functions: their gradient is zero wherever it exists."""


def operands(op: Operation) -> list[T]:
    """The op's tensor operands named as the op names them."""
    each = te.names_of_each(op.operand_indices)  # type: ignore[attr-defined]
    return [T(v, tuple(ns)) for v, ns in zip(op.operands, each)]


def result(op: Operation) -> T:
    return T(op.results[0], te.names_of(op.indices))  # type: ignore[attr-defined]


def _unbroadcast(em: Emitter, d: T, x: T) -> T:
    """The adjoint ``d`` (over a superset of ``x``'s names) summed down to ``x``'s names, in ``x``'s order."""
    return em.to_names(d, x.names, Extents(em, x, d))


# -- contractions -----------------------------------------------------------------


def _spread(em: Emitter, seed: T, xs: list[T], want: Sequence[bool]) -> list[T | None]:
    """Adjoints of the factors of a product whose adjoint per product element is ``seed``: for factor k, the
    contraction of ``seed`` with the other factors, over k's names (broadcast along names nothing else has)."""
    out: list[T | None] = []
    for k, x in enumerate(xs):
        if not want[k]:
            out.append(None)
            continue
        others = [seed, *(y for j, y in enumerate(xs) if j != k)]
        avail = union(*(o.names for o in others))
        kept = [n for n in x.names if n in avail]
        c = em.contract(others, kept)
        out.append(em.broadcast(c, x.names, Extents(em, x)))
    return out


def contract_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """sum: the adjoint of a contraction is a contraction; mean: the same over the count; max/min: to the
    arg-max (ties split); prod: ``g * y / x`` (undefined where a factor is 0, as the quotient rule is)."""
    assert isinstance(op, te.ContractOp)
    xs = operands(op)
    y = result(op)
    proj = op.projection.data
    every = union(*(x.names for x in xs))
    projected = [n for n in every if n not in y.names]
    ext = Extents(em, *xs)
    if proj == "mean":
        g = em.map("div", g, em.count(g, projected, ext))
    if proj in ("sum", "mean") or not projected:  # with nothing projected every projection is the identity
        return _spread(em, g, xs, want)
    full = xs[0] if len(xs) == 1 else em.contract(xs, every)
    if proj == "prod":
        seed = em.map("div", em.map("mul", g, y), full)
    else:
        # The extreme is taken again from this very product, so the mask matches it bit for bit (the
        # forward may have multiplied the factors in another order).
        best = em.reduce(proj, full, y.names) if len(xs) > 1 else y
        mask = em.map("eq", full, best)
        ties = em.contract([mask], y.names)
        seed = em.map("mul", em.map("div", g, ties), mask)
    if len(xs) == 1:
        return [_unbroadcast(em, seed, xs[0]) if want[0] else None]
    return _spread(em, seed, xs, want)


def reduce_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """Reductions along named axes: sum/mean broadcast back, max/min to the arg-max (ties split), prod
    ``g y / x``, logsumexp ``g exp(x - y)`` (never overflows: x - y <= 0); ``any`` is piecewise constant."""
    assert isinstance(op, te.ReduceOp)
    (x,) = operands(op)
    y = result(op)
    kind = op.kind.data
    ext = Extents(em, x)
    if kind == "any" or not want[0]:
        return [None]
    if kind in ("sum", "mean"):
        if kind == "mean":
            g = em.map("div", g, em.count(g, [n for n in x.names if n not in y.names], ext))
        return [em.broadcast(g, x.names, ext)]
    if kind in ("max", "min"):
        mask = em.map("eq", x, y)
        ties = em.contract([mask], y.names)
        d = em.map("mul", em.map("div", g, ties), mask)
    elif kind == "prod":
        d = em.map("div", em.map("mul", g, y), x)
    else:  # logsumexp
        d = em.map("mul", g, em.map("exp", em.map("sub", x, y)))
    return [_unbroadcast(em, d, x)]


def broadcast_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """Repetition along new names: sum the adjoint over them (and undo the permutation)."""
    (x,) = operands(op)
    return [em.contract([g], x.names) if want[0] else None]


# -- elementwise -----------------------------------------------------------------


def _partials(em: Emitter, fn: str, xs: list[T], y: T, g: T, params: dict[str, object], want: Sequence[bool]):
    """The adjoint contributions ``g * d fn / d x_k`` over the result's names (None where there is none)."""
    one = em.const(1, g.dtype)
    half = em.const(0.5, g.dtype)
    m = em.map

    def mul(*ts: T) -> T:
        out = ts[0]
        for t in ts[1:]:
            out = m("mul", out, t)
        return out

    if fn == "add":
        return [g, g]
    if fn == "sub":
        return [g, m("neg", g)]
    if fn == "neg":
        return [m("neg", g)]
    if fn == "mul":
        return [mul(g, xs[1]) if want[0] else None, mul(g, xs[0]) if want[1] else None]
    if fn == "div":
        a, b = xs
        ga = m("div", g, b)
        return [ga, m("neg", mul(ga, y)) if want[1] else None]
    if fn == "pow":
        a, b = xs
        da = mul(g, b, m("pow", a, m("sub", b, one))) if want[0] else None
        db = None
        if want[1]:  # d a**b / d b = a**b log a, taken as 0 where a**b is 0 (0**b for b > 0)
            zero = em.const(0, g.dtype)
            db = mul(g, m("select", m("ne", y, zero), mul(y, m("log", a)), zero))
        return [da, db]
    if fn == "relu":  # the mask from the output (y > 0 exactly where x > 0): x need not be kept
        return [mul(g, m("gt", y, em.const(0, y.dtype)))]
    if fn == "exp":
        return [mul(g, y)]
    if fn == "log":
        return [m("div", g, xs[0])]
    if fn == "sqrt":
        return [m("div", mul(g, half), y)]
    if fn == "abs":
        zero = em.const(0, xs[0].dtype)
        sign = m("sub", m("gt", xs[0], zero), m("lt", xs[0], zero))
        return [mul(g, sign)]
    if fn == "tanh":
        return [mul(g, m("sub", one, mul(y, y)))]
    if fn == "sin":
        return [mul(g, m("cos", xs[0]))]
    if fn == "cos":
        return [m("neg", mul(g, m("sin", xs[0])))]
    if fn == "gelu":
        return [mul(g, m("gelu_grad", xs[0]))]
    if fn == "gelu_grad":
        return [mul(g, _gelu_second(em, xs[0], g.dtype))]
    if fn == "sig":
        if len(xs) == 1 and "T" not in params:  # the hard step: piecewise constant
            return [None]
        slope = mul(y, m("sub", one, y))  # d sig(z) / dz at z = x / T
        if len(xs) == 1:
            t_value = float(params["T"])  # type: ignore[arg-type]
            temp = em.const(t_value, g.dtype)
            if t_value == 0:
                return [None]
            return [m("div", mul(g, slope), temp)]
        x, temp = xs
        zero = em.const(0, temp.dtype)
        soft = m("ne", temp, zero)  # where T == 0 sig is the hard step: no gradient there
        safe = m("select", soft, temp, em.const(1, temp.dtype))
        dz = m("select", soft, mul(g, slope), em.const(0, g.dtype))
        dx = m("div", dz, safe) if want[0] else None
        dt = m("neg", m("div", mul(dz, x), mul(safe, safe))) if want[1] else None
        return [dx, dt]
    if fn == "select":
        zero = em.const(0, g.dtype)
        c = xs[0]
        return [None, m("select", c, g, zero) if want[1] else None, m("select", c, zero, g) if want[2] else None]
    if fn in ("maximum", "minimum"):
        a, b = xs
        first = "gt" if fn == "maximum" else "lt"
        tie = mul(g, half, m("eq", a, b))  # ties split evenly
        da = m("add", mul(g, m(first, a, b)), tie) if want[0] else None
        db = m("add", mul(g, m(first, b, a)), tie) if want[1] else None
        return [da, db]
    raise FuseError(f"grad: no gradient rule for the elementwise function {fn!r}")


def _gelu_second(em: Emitter, x: T, dtype: np.dtype) -> T:
    """gelu'' of the tanh-approximated GELU: with u = c (x + a x^3) and t = tanh(u),
    ``(1 - t^2) (u' + x (u'' / 2 - t u'^2))``, u' = c (1 + 3 a x^2), u'' = 6 a c x. x is clipped to +-10 as
    gelu_grad clips it (beyond, t = +-1 exactly, so the result is 0 and nothing overflows)."""
    m = em.map
    c, a = np.sqrt(2.0 / np.pi), 0.044715
    clip = em.const(10.0, dtype)
    xc = m("maximum", m("minimum", em.cast(x, dtype), clip), m("neg", clip))
    x2 = m("mul", xc, xc)
    t = m("tanh", m("mul", em.const(c, dtype), m("add", xc, m("mul", em.const(a, dtype), m("mul", x2, xc)))))
    du = m("mul", em.const(c, dtype), m("add", em.const(1, dtype), m("mul", em.const(3 * a, dtype), x2)))
    half_ddu = m("mul", em.const(3 * a * c, dtype), xc)
    inner = m("add", du, m("mul", xc, m("sub", half_ddu, m("mul", t, m("mul", du, du)))))
    return m("mul", m("sub", em.const(1, dtype), m("mul", t, t)), inner)


def map_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """Elementwise functions: the local derivative times the adjoint, summed over the names the operand was
    broadcast along."""
    assert isinstance(op, te.MapOp)
    fn = op.fn.data
    xs = operands(op)
    if fn in NOT_DIFFERENTIABLE_MAPS:
        return [None] * len(xs)
    parts = _partials(em, fn, xs, result(op), g, te.params_of(op.params), want)
    return [_unbroadcast(em, d, x) if d is not None and w else None for d, x, w in zip(parts, xs, want)]


def axis_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """softmax / masked_softmax: ``y (g - sum(y g))`` (the ``softmax_grad`` builtin: no exp, cannot overflow);
    lnorm: ``(g - mean(g) - y mean(g y)) / sqrt(var + eps)``; softmax_grad(y, h) (linear in h) with adjoint
    ``a``: ``softmax_grad(y, a)`` to h and ``a (h - sum(y h)) - h sum(a y)`` to y."""
    assert isinstance(op, te.AxisOp)
    fn = op.fn.data
    axis = op.axis.data
    xs = operands(op)
    y = result(op)
    if fn in ("softmax", "masked_softmax"):
        d = em.axis_fn("softmax_grad", axis, y, g)
        return [_unbroadcast(em, d, xs[0]) if want[0] else None] + [None] * (len(xs) - 1)
    if fn == "lnorm":
        if not want[0]:
            return [None]
        x = xs[0]
        eps = float(te.params_of(op.params).get("eps", 1e-5))  # type: ignore[arg-type]
        rest = [n for n in y.names if n != axis]
        m = em.map
        xf = em.cast(x, g.dtype)
        xc = m("sub", xf, em.reduce("mean", xf, [n for n in xf.names if n != axis]))
        var = em.reduce("mean", m("mul", xc, xc), [n for n in xc.names if n != axis])
        s = m("sqrt", m("add", var, em.const(eps, g.dtype)))
        mg = em.reduce("mean", g, rest)
        mgy = em.reduce("mean", m("mul", g, y), rest)
        d = m("div", m("sub", m("sub", g, mg), m("mul", y, mgy)), s)
        return [_unbroadcast(em, d, x)]
    if fn == "softmax_grad":
        yv, h = (em.cast(x, g.dtype) for x in xs)
        dy: T | None = None
        if want[0]:
            yh, gy = em.map("mul", yv, h), em.map("mul", g, yv)
            s = em.reduce("sum", yh, [n for n in yh.names if n != axis])
            t = em.reduce("sum", gy, [n for n in gy.names if n != axis])
            dy = em.map("sub", em.map("mul", g, em.map("sub", h, s)), em.map("mul", h, t))
        dh = em.axis_fn("softmax_grad", axis, yv, g) if want[1] else None
        return [_unbroadcast(em, d, x) if d is not None else None for d, x in zip((dy, dh), xs)]
    raise FuseError(f"grad: no gradient rule for {fn}()")


# -- data movement ---------------------------------------------------------------


def group_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """A tensor defined by several equations is their sum: each gets the whole adjoint (boolean groups, OR of
    0/1 values, are piecewise constant)."""
    assert isinstance(op, te.GroupOp)
    if op.boolean.value.data:
        return [None] * len(op.inputs)
    return [rename(g, g.names) if w else None for w in want]


def cast_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """A float-to-float conversion passes the adjoint back in the operand's dtype."""
    assert isinstance(op, te.CastOp)
    return [em.cast(g, te.dtype_of(op.input)) if want[0] else None]


def place_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """A value written at fixed positions reads its adjoint back from those positions."""
    assert isinstance(op, te.PlaceOp)
    (x,) = operands(op)
    axes = [te.AccessAxisAttr.position(p) if p >= 0 else n for n, p in zip(g.names, op.position_list())]
    return [em.access(g, axes, x.names) if want[0] else None]


def concat_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """Each operand gathers its rows of the adjoint back: positions ``offset + iota`` along the joined axis."""
    assert isinstance(op, te.ConcatOp)
    xs = operands(op)
    axis = op.axis.data
    parts = te.names_of(op.operand_axes)
    out: list[T | None] = []
    offset = None
    for x, part, w in zip(xs, parts, want):
        n = em.dim(x, part)
        if w:
            fresh = em.fresh()
            pos = em.iota(n, fresh)
            if offset is not None:
                pos = em.map("add", pos, offset)
            kept = [m for m in g.names if m != axis]
            d = em.access(g, [te.AccessAxisAttr.gather(0) if m == axis else m for m in g.names], [*kept, fresh], [pos])
            target = [fresh if m == part else m for m in x.names]
            out.append(rename(_unbroadcast(em, d, T(x.value, tuple(target))), x.names))
        else:
            out.append(None)
        size = em.extent_scalar(n)
        offset = size if offset is None else em.map("add", offset, size)
    return out


def flatten_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """Merged axes split back: the adjoint is gathered at ``i * nj + j`` along the merged axis."""
    assert isinstance(op, te.FlattenOp)
    (x,) = operands(op)
    if not want[0]:
        return [None]
    i, j = em.fresh(), em.fresh()
    ni, nj = em.dim(x, x.names[-2]), em.dim(x, x.names[-1])
    pos = em.map("add", em.map("mul", em.iota(ni, i), em.extent_scalar(nj)), em.iota(nj, j))
    rest = list(g.names[:-1])
    d = em.access(g, [*rest, te.AccessAxisAttr.gather(0)], [*rest, i, j], [pos])
    return [rename(d, x.names)]


_SCATTERED = (te.AxisKind.NAME, te.AxisKind.GATHER)
"""The access axes a ``te.scatter_add`` writes through: the adjoint of a read through only these is one."""


def access_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """The adjoint of a read is a scatter-add. A permutation is a permutation back; names with fixed positions
    are a ``te.place``; gathers through otherwise plain names are a ``te.scatter_add`` through the same axes;
    offsets through distinct names are the opposite offsets read from the adjoint; anything else (diagonals,
    slices, mixes of these with gathers, positions or offsets) is one ``te.scatter_add`` through index tensors
    of the positions read (:func:`_scatter_back`): linear in the elements read, duplicates accumulating."""
    assert isinstance(op, te.AccessOp)
    src = op.source
    if not want[0]:
        return [None] * len(op.operands)
    axes = op.axis_list()
    out_names = g.names
    plain = [a.index_name for a in axes if a.axis_kind == te.AxisKind.NAME]
    none = [None] * len(op.gathers)
    if len(plain) == len(set(plain)) and set(plain) == set(out_names) and not op.gathers:
        if len(plain) == len(axes):
            return [em.contract([g], plain), *none]
        if all(a.axis_kind in (te.AxisKind.NAME, te.AxisKind.POSITION) for a in axes):
            fresh = [a.index_name if a.axis_kind == te.AxisKind.NAME else em.fresh() for a in axes]
            fixed = [em.dim(T(src, tuple(fresh)), f) for a, f in zip(axes, fresh) if a.axis_kind != te.AxisKind.NAME]
            positions = [-1 if a.axis_kind == te.AxisKind.NAME else a.value for a in axes]
            return [em.place(g, positions, fresh, fixed), *none]
    gathers = [T(v, ns) for v, ns in zip(op.gathers, te.names_of_each(op.gather_indices))]
    if gathers and len(plain) == len(set(plain)) and all(a.axis_kind in _SCATTERED for a in axes):
        # A gather (an embedding lookup E[idx[b], d]): a native scatter-add, O(updates) instead of an
        # O(extent x updates) one-hot contraction.
        names = [a.index_name if a.axis_kind == te.AxisKind.NAME else em.fresh() for a in axes]
        sizes = [em.op(te.DimOp(src, k)).results[0] for k, a in enumerate(axes) if a.axis_kind == te.AxisKind.GATHER]
        return [em.scatter_add(g, axes, names, gathers, sizes), *none]
    shifted = [a.index_name for a in axes if a.axis_kind in (te.AxisKind.NAME, te.AxisKind.OFFSET)]
    if not gathers and len(shifted) == len(axes) == len(set(shifted)):
        # Offsets through distinct names (X[t+1, j]): the adjoint is the read shifted back, dX[s] = g[s - 1] (0
        # outside), an O(n) access; the offset axis has the source's extent, so the shapes match.
        back = {a.index_name: te.AccessAxisAttr.offset(a.index_name, -a.value) for a in axes if a.value}
        return [em.access(g, [back.get(n, n) for n in out_names], shifted), *none]
    # Everything else (slices, diagonals, positions or offsets mixed with gathers): each source axis's read
    # positions as an index tensor, then one te.scatter_add, O(elements read).
    return [_scatter_back(em, op, g, gathers), *none]


def _scatter_back(em: Emitter, op: te.AccessOp, g: T, gathers: list[T]) -> T:
    """The adjoint of any read as one ``te.scatter_add``: the first plain use of a name scatters through that
    name; every other source axis through an int64 index tensor of the positions it reads (a slice reads
    ``iota`` through the same slice, a repeated name (a diagonal) reads ``iota``, a position is a 0-d constant,
    a gather its own index tensor). Duplicate positions accumulate, so diagonals and overlapping reads are
    right. An offset whose name appears nowhere else is first read back at the opposite offset (as in the
    offsets-only case) and is then a plain name; any other offset scatters ``i + c`` and sends nothing from
    the reads past the ends (they read 0): the update is 0 there and the position clamped into range."""
    axes = op.axis_list()
    uses = Counter(a.index_name for a in axes if a.axis_kind in (te.AxisKind.NAME, te.AxisKind.OFFSET))
    uses.update(n for t in gathers for n in t.names)
    back = {
        a.index_name: te.AccessAxisAttr.offset(a.index_name, -a.value)
        for a in axes
        if a.axis_kind == te.AxisKind.OFFSET and uses[a.index_name] == 1
    }
    if back:
        g = em.access(g, [back.get(n, n) for n in g.names], g.names)
    int64 = np.dtype(np.int64)
    scatter: list[te.AccessAxisAttr | str] = []
    names: list[str] = []
    index: list[T] = []
    sizes: list[SSAValue] = []
    seen: set[str] = set()
    for k, a in enumerate(axes):
        kind, name = a.axis_kind, a.index_name
        if (kind == te.AxisKind.NAME and name not in seen) or name in back:
            seen.add(name)
            scatter.append(name)
            names.append(name)
            continue
        n = em.op(te.DimOp(op.source, k)).results[0]
        if kind == te.AxisKind.NAME:  # a repeated name: a diagonal
            pos = em.iota(em.dim(g, name), name)
        elif kind == te.AxisKind.POSITION:
            pos = em.const(a.value, int64)
        elif kind == te.AxisKind.GATHER:
            pos = gathers[a.value]
        elif kind == te.AxisKind.SLICE:
            pos = em.access(T(em.iota(n, "_p").value, ("_p",)), [a], [name])
        else:  # an offset on a name used elsewhere too (A[i, i+1]): positions i + c, those past the ends dropped
            at = em.map("add", em.iota(em.dim(g, name), name), em.const(a.value, int64))
            inside = em.map("and", em.map("ge", at, em.const(0, int64)), em.map("lt", at, em.extent_scalar(n)))
            g = em.map("select", inside, g, em.const(0, g.dtype))
            pos = em.map("select", inside, at, em.const(0, int64))
        scatter.append(te.AccessAxisAttr.gather(len(index)))
        names.append(em.fresh())
        index.append(pos)
        sizes.append(n)
    return em.scatter_add(g, scatter, names, index, sizes)


RULES: dict[type[Operation], Rule] = {
    te.ContractOp: contract_rule,
    te.ReduceOp: reduce_rule,
    te.BroadcastOp: broadcast_rule,
    te.MapOp: map_rule,
    te.AxisOp: axis_rule,
    te.GroupOp: group_rule,
    te.CastOp: cast_rule,
    te.PlaceOp: place_rule,
    te.ConcatOp: concat_rule,
    te.FlattenOp: flatten_rule,
    te.AccessOp: access_rule,
}
"""The adjoint rule of each differentiable op; blocks are in :mod:`fuse_mlir.passes.grad.blocks`."""
