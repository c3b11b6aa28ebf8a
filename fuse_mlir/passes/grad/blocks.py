"""Adjoint rules of the model blocks (``te.block``): scaled dot-product attention.

Attention's backward recomputes the probabilities from ``q`` and ``k`` (one
contraction and a softmax, as the forward) rather than keeping them, the way
fused attention kernels do: ``dV = P^T g``, ``dP = g V^T``,
``dS = softmax_grad(P, dP)`` (exp-free, so it never overflows),
``dQ = scale dS K`` and ``dK = scale dS^T Q``. Masked and causal scores have
P = 0 and so get no gradient; the mask itself is piecewise constant.

``rope`` is a rotation R(theta) of each feature pair, linear in x: its adjoint
is the inverse rotation R(-theta) = P R(theta) P, with P the swap of the two
features of each pair, so the backward is the same ``rope`` block between two
swaps. ``topk`` sends the adjoint of its values back to the selected entries
(a one-hot scatter-add: the top k are distinct positions); its indices are
integers. ``tucker_dense`` is a 0/1 threshold indicator: piecewise constant,
zero gradient.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import Operation

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.passes.grad.emit import Emitter, Extents, T, rename
from fuse_mlir.passes.grad.rules import operands


def attention_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """Gradients of ``attention(Q, K, V[, mask], scale=, causal=)`` with respect to Q, K and V."""
    assert isinstance(op, te.BlockOp)
    xs = operands(op)
    roles = te.params_of(op.roles)
    params = te.params_of(op.params)
    qs, ks, d, e = (str(roles[r]) for r in ("query", "key", "feature", "value"))
    dtype = te.dtype_of(op.outputs[0])
    q, k, v = (em.cast(x, dtype) for x in xs[:3])
    batch = list(q.names[:-2])
    g = rename(g, [*batch, qs, e])
    m = em.map
    if params.get("scale") is not None:
        scale = em.const(float(params["scale"]), dtype)  # type: ignore[arg-type]
    else:
        one = m("pow", em.contract([q], ()), em.const(0, dtype))
        scale = m("div", one, m("sqrt", em.count(one, [d], Extents(em, q))))
    s = m("mul", em.contract([q, k], [*batch, qs, ks]), scale)
    keep: T | None = None
    if params.get("causal"):
        lq, lk = em.dim(q, qs), em.dim(k, ks)
        shift = m("sub", em.extent_scalar(lk), em.extent_scalar(lq))
        keep = m("ge", m("add", em.iota(lq, qs), shift), em.iota(lk, ks))
    if len(xs) > 3:
        mk = m("ne", xs[3], em.const(0, xs[3].dtype))
        keep = mk if keep is None else m("and", keep, mk)
    p = em.axis_fn("softmax", ks, s) if keep is None else em.axis_fn("masked_softmax", ks, s, keep)
    out: list[T | None] = [None] * len(xs)
    if want[2]:
        out[2] = em.to_names(em.contract([p, g], v.names), xs[2].names, Extents(em, xs[2]))
    if want[0] or want[1]:
        dp = em.contract([g, v], p.names)
        ds = m("mul", em.axis_fn("softmax_grad", ks, p, dp), scale)
        if want[0]:
            out[0] = em.to_names(em.contract([ds, k], q.names), xs[0].names, Extents(em, xs[0]))
        if want[1]:
            out[1] = em.to_names(em.contract([ds, q], k.names), xs[1].names, Extents(em, xs[1]))
    return out


def _swap_pairs(em: Emitter, t: T, axis: str) -> T:
    """``t`` with the features 2m and 2m+1 of each pair along ``axis`` exchanged (an even extent)."""
    even = T(
        em.op(te.GenerateOp("even", [em.dim(t, axis)], [axis], em.ttype(np.dtype(np.int8), 1))).results[0], (axis,)
    )
    up = em.access(t, [te.AccessAxisAttr.offset(n, 1) if n == axis else n for n in t.names], t.names)
    down = em.access(t, [te.AccessAxisAttr.offset(n, -1) if n == axis else n for n in t.names], t.names)
    return em.to_names(em.map("select", even, up, down), t.names, {})


def rope_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """``rope``: the inverse rotation of the adjoint, ``swap(rope(swap(g)))`` (see the module docstring)."""
    assert isinstance(op, te.BlockOp)
    if not want[0]:
        return [None]
    (x,) = operands(op)
    feature = str(te.params_of(op.roles)["feature"])
    g = rename(g, x.names)
    swapped = _swap_pairs(em, g, feature)
    rot = em.op(
        te.BlockOp(
            "rope",
            [swapped.value],
            [x.names],
            x.names,
            {k: str(v) for k, v in te.params_of(op.roles).items()},
            [em.ttype(g.dtype, len(x.names))],
            dict(te.params_of(op.params)),
        )
    )
    return [_swap_pairs(em, T(rot.results[0], x.names), feature)]


def topk_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """``topk``: the adjoint of the values goes back to the entries they were read from (a one-hot scatter-add
    ``g[.., t, ..] * (idx[.., t, ..] == j)`` summed over the k slots); the indices carry no gradient."""
    assert isinstance(op, te.BlockOp)
    if not want[0]:
        return [None]
    (x,) = operands(op)
    axis = str(te.params_of(op.roles)["axis"])
    out = te.names_of(op.indices)
    idx = T(op.results[0], out)
    g = rename(g, out)
    hot = em.map("eq", em.iota(em.dim(x, axis), axis), idx)
    return [em.contract([g, hot], x.names)]


def block_rule(em: Emitter, op: Operation, g: T, want: Sequence[bool]) -> list[T | None]:
    """Dispatch on the block's name; ``tucker_dense`` (a 0/1 indicator) passes no gradient."""
    assert isinstance(op, te.BlockOp)
    fn = op.fn.data
    if fn == "attention":
        return attention_rule(em, op, g, want)
    if fn == "rope":
        return rope_rule(em, op, g, want)
    if fn == "topk":
        return topk_rule(em, op, g, want)
    if fn == "tucker_dense":
        return [None] * len(op.operands)
    raise FuseError(f"grad: no gradient rule for the {fn} block")
