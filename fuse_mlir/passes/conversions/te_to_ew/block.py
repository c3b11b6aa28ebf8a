"""te → ew for model blocks: attention, rope, and the blocks the runtime runs on NumPy (``tucker_dense``, ``topk``).

Attention is two contractions around a masked softmax over the key axis; rope
one generic reading each feature's partner from the input as a table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from xdsl.dialects import arith
from xdsl.ir import SSAValue

from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.locations import loc_text, set_location, source_loc
from fuse_mlir.passes.conversions.te_to_ew.contract import contract
from fuse_mlir.passes.conversions.te_to_ew.lowering import In, TeLowering, TeOpPattern
from fuse_mlir.passes.conversions.te_to_ew.reduce import softmax
from fuse_mlir.passes.scalar import Body

Params = Mapping[str, object]


def attention(
    lo: TeLowering, ins: list[In], roles: Mapping[str, str], params: Params, out: Sequence[str], dtype: np.dtype
) -> SSAValue:
    """softmax(Q·Kᵀ·scale, masked) · V, as two contractions around a masked softmax over the key axis."""
    qs, ks, d = roles["query"], roles["key"], roles["feature"]
    q, k, v = (lo.cast_to(i, dtype) for i in ins[:3])
    batch = [n for n in q.names[:-2]]
    score_names = (*batch, qs, ks)
    scores = contract(lo, [q, k], score_names, "sum", dtype)
    ext = lo.name_extents([q, k, v])
    scale = params.get("scale")
    d_ext = ext[d]

    def scaled(b: Body, a: list[SSAValue]) -> SSAValue:
        if scale is not None:
            factor = b.const(float(scale), dtype)  # type: ignore[arg-type]
        else:
            factor = b.binary("div", b.const(1.0, dtype), b.unary_math("sqrt", b.index_to(d_ext, dtype)), dtype)
        return b.binary("mul", a[0], factor, dtype)

    s = lo.elementwise([In(scores, score_names)], score_names, dtype, scaled, ext)
    causal = bool(params.get("causal", False))
    mask_in = ins[3] if len(ins) > 3 else None
    if causal or mask_in is not None:
        mins = [In(s, score_names)] + ([mask_in] if mask_in is not None else [])
        lq, lk = ext[qs], ext[ks]
        fill = float(np.finfo(dtype).min)

        def keep(b: Body, a, t, idx):
            ok = None
            if causal:  # key j is visible to query i when j <= i + (Lk - Lq)
                shift = b.add(arith.SubiOp(lk, lq))
                lim = b.add(arith.AddiOp(idx(qs), shift))
                ok = b.add(arith.CmpiOp(idx(ks), lim, "sle"))
            if mask_in is not None:
                nz = b.nonzero(a[1], mask_in.dtype)
                ok = nz if ok is None else b.add(arith.AndIOp(ok, nz))
            assert ok is not None
            return b.bool_to_i8(ok)

        mask = lo.generic(mins, [], score_names, [], "none", ext, np.dtype(np.int8), keep)
        xm = lo.elementwise(
            [In(s, score_names), In(mask, score_names)],
            score_names,
            dtype,
            lambda b, a: b.select(b.nonzero(a[1], np.dtype(np.int8)), a[0], b.const(fill, dtype)),
        )
        w = softmax(lo, In(xm, score_names), ks, dtype)
        w = lo.elementwise(
            [In(w, score_names), In(mask, score_names)],
            score_names,
            dtype,
            lambda b, a: b.select(b.nonzero(a[1], np.dtype(np.int8)), a[0], b.const(0.0, dtype)),
        )
    else:
        w = softmax(lo, In(s, score_names), ks, dtype)
    return contract(lo, [In(w, score_names), v], out, "sum", dtype)


def rope(lo: TeLowering, x: In, roles: Mapping[str, str], params: Params, dtype: np.dtype, loc: str = "") -> SSAValue:
    """Rotate interleaved feature pairs (2m, 2m+1) by position · base^(-2m/d) (the reference's convention).

    An odd feature extent would read a partner past the axis: checked here too (the front end checks it at the
    call; this guards tensor_eq written by hand)."""
    f, seq = roles["feature"], roles["sequence"]
    base = float(params.get("base", 10000.0))  # type: ignore[arg-type]
    ext = lo.name_extents([x])
    d = ext[f]
    lo.emit(te.CheckDimOp(d, lo.index(2), f"rope needs an even feature extent: {f} is {{0}}", loc, "dvd"))
    f64 = np.dtype(np.float64)
    x = lo.cast_to(x, dtype)
    names = x.names

    def body(b: Body, a, tables, idx):
        i = idx(f)
        partner_pos = b.add(arith.XOrIOp(i, b.index(1)))
        positions = [partner_pos if n == f else idx(n) for n in names]
        partner = b.add(ew.ExtractOp(tables[0], positions))
        m2 = b.add(arith.SubiOp(i, b.add(arith.RemUIOp(i, b.index(2)))))  # 2m
        expo = b.binary("div", b.index_to(m2, f64), b.index_to(d, f64), f64)
        inv = b.unary_math("exp", b.binary("mul", b.neg(expo, f64), b.const(float(np.log(base)), f64), f64))
        theta = b.binary("mul", b.index_to(idx(seq), f64), inv, f64)
        c = b.cast(b.unary_math("cos", theta), f64, dtype)
        s = b.cast(b.unary_math("sin", theta), f64, dtype)
        even = b.add(arith.CmpiOp(b.add(arith.RemUIOp(i, b.index(2))), b.index(0), "eq"))
        first = b.binary("sub", b.binary("mul", a[0], c, dtype), b.binary("mul", partner, s, dtype), dtype)
        second = b.binary("add", b.binary("mul", partner, s, dtype), b.binary("mul", a[0], c, dtype), dtype)
        return b.select(even, first, second)

    return lo.generic([x], [x.value], names, [], "none", ext, dtype, body)


class LowerBlock(TeOpPattern):
    """A model block: attention and rope as kernels; ``tucker_dense`` (an SVD) and ``topk`` (a sort) as host calls."""

    op_type = te.BlockOp

    def lower(self, op: te.BlockOp) -> list[SSAValue]:
        lo = self.lo
        fn = op.fn.data
        ins = lo.ins_of(op.inputs, te.names_of_each(op.operand_indices))
        roles = {k: str(v) for k, v in te.params_of(op.roles).items()}  # axis names
        params = te.params_of(op.params)
        out = te.names_of(op.indices)
        if fn == "attention":
            return [attention(lo, ins, roles, params, out, te.dtype_of(op.outputs[0]))]
        if fn == "rope":
            return [rope(lo, ins[0], roles, params, te.dtype_of(op.outputs[0]), loc_text(op))]
        # tucker_dense (an SVD) and topk (a sort) run in the runtime on NumPy.
        host_params = dict(params)
        if fn == "topk":
            host_params["axis"] = ins[0].names.index(roles["axis"])
        x = ins[0]
        if fn == "tucker_dense":
            x = lo.cast_to(x, te.dtype_of(op.outputs[0]))
        call = lo.emit(ew.HostCallOp(fn, [x.value], [r.type for r in op.outputs], host_params))
        set_location(call, source_loc(op))  # the host's run-time errors name the call
        return list(call.results)


PATTERNS = (LowerBlock,)
