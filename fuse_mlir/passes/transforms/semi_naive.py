"""Semi-naive evaluation: rewrite a boolean ``te.fixpoint`` so that each run joins only the new facts.

Naive iteration recomputes every rule from all facts each run (``R ← T(R)``).
For a monotone group of boolean tensors the same sequence of fact sets comes
from delta rules that join only what the previous run added:

    R  ← R ∨ Δ                        (merge the pending new facts)
    Δ  ← T_Δ(R, Δ) ∧ ¬R               (facts derived with at least one new fact, not known yet)

with ``Δ`` starting at ``T(0)`` (one run of the original body, peeled before
the loop) and ``R`` at zeros. ``T_Δ`` differentiates the body op by op: a
product with recursive factors x₁…xₙ becomes Σⱼ x₁…Δxⱼ…xₙ (the other factors
current), a sum or OR keeps the terms that have a delta, and linear ops
(index access, broadcast, reductions by sum/max/any, integer casts) apply to
the delta. The fixpoint then compares only ``R`` (``Δ`` is unchecked), so it
stops exactly when no new fact appears, after the same number of runs as
naive iteration and with the same results.

The rewrite applies only when it is exact: every carried tensor is defined
by a boolean group, the iteration counter is unused, every op between the
carried values and the groups is one of the monotone ops above (``add``,
``or``, ``max`` maps; ``mul``/``and`` products) and every other factor of a
product is known to be non-negative (boolean tensors, ``.csv``/``.tsv``
facts, unsigned data, non-negative literals, and ops of those). Other
fixpoints are left naive.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass

from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.interp import dtypes as dt
from fuse_mlir.io.sources import FACT_SUFFIXES
from fuse_mlir.passes.registry import register_pass

_UNION_MAPS = ("add", "or", "maximum")
_PRODUCT_MAPS = {"mul": "add", "and": "or"}  # product op -> how its per-factor delta terms combine
_BOOLEAN_MAPS = ("and", "or", "not", "lt", "le", "gt", "ge", "eq", "ne")
_LINEAR_REDUCE = ("sum", "max", "any")


class NotMonotone(Exception):
    """The body is not a monotone boolean group: leave the fixpoint naive."""


def nonnegative(v: SSAValue, carried: set[SSAValue]) -> bool:
    """Whether every element of ``v`` is provably ``>= 0`` (the factors a delta may be joined with)."""
    if v in carried:
        return True
    t = v.type
    if isinstance(t, TensorType) and te.np_dtype(t.element_type).kind in "ub":
        return True
    op = v.owner
    if isinstance(op, te.GroupOp):
        return op.boolean.value.data or all(nonnegative(x, carried) for x in op.inputs)
    if isinstance(op, te.SourceOp):
        return Path(op.path.data).suffix.lower() in FACT_SUFFIXES
    if isinstance(op, te.ConstantOp):
        return bool(np.all(te.dense_value(op.value) >= 0))
    if isinstance(op, te.MapOp):
        fn = op.fn.data
        if fn in _BOOLEAN_MAPS or fn in ("relu", "abs", "exp", "sig", "step"):
            return True
        if fn == "maximum":
            return any(nonnegative(x, carried) for x in op.inputs)
        return fn in ("add", "mul", "minimum") and all(nonnegative(x, carried) for x in op.inputs)
    if isinstance(op, te.ContractOp):
        return all(nonnegative(x, carried) for x in op.inputs)  # every projection keeps a nonnegative product so
    if isinstance(op, te.FixpointOp) and isinstance(v, OpResult) and v.index < len(op.inits):
        body = op.body.block
        term = body.last_op
        assert isinstance(term, te.YieldOp)
        return nonnegative(op.inits[v.index], carried) and nonnegative(term.values[v.index], set(body.args[1:]))
    if isinstance(op, te.AccessOp | te.BroadcastOp | te.CastOp | te.ReduceOp):
        return nonnegative(op.operands[0], carried)
    return False


class _Rewriter:
    """Builds the delta body of one fixpoint (see the module docstring)."""

    def __init__(self, fp: te.FixpointOp):
        self.fp = fp
        self.ops: list[Operation] = []
        self.full: dict[SSAValue, SSAValue] = {}
        self.delta: dict[SSAValue, SSAValue] = {}

    def emit(self, op: Operation) -> SSAValue:
        self.ops.append(op)
        return op.results[0]

    def map(self, fn: str, a: SSAValue, b: SSAValue, names_a, names_b, out) -> SSAValue:
        dtype = dt.map_dtype(fn, [te.dtype_of(a), te.dtype_of(b)], {})
        shape = _shape_of(out, [(a, names_a), (b, names_b)])
        return self.emit(te.MapOp(fn, [a, b], [names_a, names_b], out, te.tensor_type(dtype, shape)))

    def zero_like(self, v: SSAValue, names) -> SSAValue:
        """``v * 0``: zeros with ``v``'s indices and dtype (stands for a missing delta in a union)."""
        z = self.emit(te.ConstantOp(np.zeros((), dtype=te.dtype_of(v)), []))
        return self.emit(te.MapOp("mul", [v, z], [names, ()], names, v.type))

    def clone(self, op: Operation) -> Operation:
        new = op.clone(value_mapper=dict(self.full))
        self.ops.append(new)
        for a, b in zip(op.results, new.results):
            self.full[a] = b
        return new

    def derive(self, op: Operation, carried: set[SSAValue]) -> None:
        """Clone ``op`` over the current values and, if it depends on a delta, build its delta."""
        new = self.clone(op)
        has = [o in self.delta for o in op.operands]
        if not any(has):
            return
        if isinstance(op, te.AccessOp):
            if any(g in self.delta for g in op.gathers) or any(e in self.delta for e in op.extents):
                raise NotMonotone
            d = op.clone(value_mapper={**self.full, op.source: self.delta[op.source]})
        elif isinstance(op, te.BroadcastOp):
            d = op.clone(value_mapper={**self.full, op.input: self.delta[op.input]})
        elif isinstance(op, te.CastOp):
            if te.dtype_of(op.result).kind not in "iub":
                raise NotMonotone
            d = op.clone(value_mapper={**self.full, op.input: self.delta[op.input]})
        elif isinstance(op, te.ReduceOp):
            if op.kind.data not in _LINEAR_REDUCE:
                raise NotMonotone
            d = op.clone(value_mapper={**self.full, op.input: self.delta[op.input]})
        elif isinstance(op, te.ContractOp):
            self.delta[op.result] = self.product_delta(op, carried)
            return
        elif isinstance(op, te.MapOp):
            self.delta[op.result] = self.map_delta(op, carried)
            return
        elif isinstance(op, te.GroupOp):
            if not op.boolean.value.data:
                raise NotMonotone
            parts = [self.delta[x] for x in op.inputs if x in self.delta]
            d = te.GroupOp(op.tensor_name.data, parts, te.names_of(op.indices), True, op.result.type)
        else:
            raise NotMonotone
        self.delta[op.results[0]] = self.emit(d)
        del new

    def product_delta(self, op: te.ContractOp, carried: set[SSAValue]) -> SSAValue:
        if op.projection.data not in ("sum", "max"):
            raise NotMonotone
        if not all(nonnegative(x, carried) for x in op.inputs):
            raise NotMonotone
        terms = []
        for j, x in enumerate(op.inputs):
            if x not in self.delta:
                continue
            operands = [self.delta[y] if k == j else self.full.get(y, y) for k, y in enumerate(op.inputs)]
            terms.append(
                self.emit(
                    te.ContractOp(
                        operands,
                        te.names_of_each(op.operand_indices),
                        te.names_of(op.indices),
                        op.projection.data,
                        op.result.type,
                    )
                )
            )
        return self._sum(terms, te.names_of(op.indices), op.result.type)

    def _sum(self, terms: list[SSAValue], names, t: TensorType) -> SSAValue:
        acc = terms[0]
        for x in terms[1:]:
            acc = self.emit(te.MapOp("add", [acc, x], [names, names], names, t))
        return acc

    def map_delta(self, op: te.MapOp, carried: set[SSAValue]) -> SSAValue:
        fn = op.fn.data
        names = te.names_of_each(op.operand_indices)
        out = te.names_of(op.indices)
        if len(op.inputs) != 2:
            raise NotMonotone
        (a, b), (na, nb) = op.inputs, names
        if fn in _UNION_MAPS:
            if not all(nonnegative(x, carried) for x in op.inputs):
                raise NotMonotone
            for x, y, nx in ((a, b, na), (b, a, nb)):
                if (
                    x in self.delta
                    and y not in self.delta
                    and tuple(nx) == out
                    and self.delta[x].type == op.result.type
                ):
                    return self.delta[x]  # the other side brings no new fact
            da = self.delta[a] if a in self.delta else self.zero_like(self.full.get(a, a), na)
            db = self.delta[b] if b in self.delta else self.zero_like(self.full.get(b, b), nb)
            return self.emit(te.MapOp(fn, [da, db], [na, nb], out, op.result.type))
        if fn in _PRODUCT_MAPS:
            if not all(nonnegative(x, carried) for x in op.inputs):
                raise NotMonotone
            terms = []
            if a in self.delta:
                terms.append(self.emit(op.clone(value_mapper={**self.full, a: self.delta[a]})))
            if b in self.delta:
                terms.append(self.emit(op.clone(value_mapper={**self.full, b: self.delta[b]})))
            if len(terms) == 1:
                return terms[0]
            return self.emit(te.MapOp(_PRODUCT_MAPS[fn], terms, [out, out], out, op.result.type))
        raise NotMonotone

    def run(self) -> te.FixpointOp:
        """The rewritten fixpoint (peeled first run inserted before the original); raises NotMonotone."""
        fp = self.fp
        body = fp.body.block
        counter, *args = body.args
        if counter.uses:
            raise NotMonotone
        term = body.last_op
        assert isinstance(term, te.YieldOp)
        for v in term.values:
            if not (isinstance(v.owner, te.GroupOp) and v.owner.boolean.value.data):
                raise NotMonotone
        # The peeled first run: T(inits), cloned before the loop.
        peel: list[Operation] = []
        pmap: dict[SSAValue, SSAValue] = dict(zip(args, fp.inits))
        for op in list(body.ops)[:-1]:
            new = op.clone(value_mapper=pmap)
            peel.append(new)
        first = [pmap[v] for v in term.values]
        # The delta body: R' = R ∨ Δ, then the derivatives, then Δ' = T_Δ ∧ ¬R'.
        inits = list(fp.inits) + first
        region, block = te.FixpointOp.make_body(inits)
        k = len(args)
        r_in, d_in = block.args[1 : 1 + k], block.args[1 + k :]
        names = te.names_of(fp.names)
        merged = []
        for n, arg, r, d in zip(names, args, r_in, d_in):
            idx = te.names_of(term.values[list(args).index(arg)].owner.indices)  # type: ignore[union-attr]
            merged.append(self.emit(te.GroupOp(n, [r, d], idx, True, r.type)))
        for arg, m, d in zip(args, merged, d_in):
            self.full[arg] = m
            self.delta[arg] = d
        carried = set(args)
        for op in list(body.ops)[:-1]:
            self.derive(op, carried)
        nexts = []
        for n, v, m in zip(names, term.values, merged):
            if v not in self.delta:
                raise NotMonotone
            idx = te.names_of(v.owner.indices)  # type: ignore[union-attr]
            fresh = self.map("gt", self.delta[v], m, idx, idx, idx)
            nexts.append(self.emit(te.GroupOp(n, [fresh], idx, True, m.type)))
        for op in self.ops:
            block.add_op(op)
        block.add_op(te.YieldOp([*merged, *nexts]))
        _dce(block)
        parent = fp.parent_block()
        assert parent is not None
        for op in peel:
            parent.insert_op_before(op, fp)
        new_fp = te.FixpointOp(
            fp.label.data,
            inits,
            [*names, *(f"{n}.delta" for n in names)],
            region,
            fp.max_iters.value.data,
            fp.atol.value.data,
            fp.rtol.value.data,
            [True] * k + [False] * k,
        )
        parent.insert_op_before(new_fp, fp)
        outs = new_fp.outputs
        for old, new in zip([*fp.carried, fp.iterations, fp.converged], [*outs[:k], outs[2 * k], outs[2 * k + 1]]):
            old.replace_all_uses_with(new)
        fp.detach()
        fp.erase()
        return new_fp


def _shape_of(out, pairs) -> list[int]:
    extents: dict[str, int] = {}
    for v, names in pairs:
        for n, s in zip(names, v.type.get_shape()):
            if s >= 0:
                extents.setdefault(n, s)
    return [extents.get(n, te.DYNAMIC) for n in out]


def _dce(block: Block) -> None:
    """Erase unused pure ops of a block, last first."""
    for op in reversed(list(block.ops)):
        if op is block.last_op:
            continue
        if all(not r.uses for r in op.results) and op.results:
            op.detach()
            op.erase()


def semi_naive(module: ModuleOp, on_skip: Callable[[te.FixpointOp], None] | None = None) -> int:
    """Rewrite every eligible fixpoint of ``module`` into delta rules; returns how many were rewritten."""
    count = 0
    for op in list(module.walk()):
        if not isinstance(op, te.FixpointOp):
            continue
        try:
            _Rewriter(op).run()
            count += 1
        except NotMonotone:
            if on_skip is not None:
                on_skip(op)
    return count


@register_pass
@dataclass(frozen=True)
class SemiNaive(ModulePass):
    """Turn boolean recursive groups (te.fixpoint) into semi-naive delta rules: each run joins only new facts.

    Applies when the group is monotone over booleans (products with
    non-negative factors, unions, linear index ops); other fixpoints stay
    naive. Results and iteration counts equal naive iteration's.
    """

    name = "semi-naive"
    level: ClassVar[str] = "tensor_eq"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        semi_naive(op)
