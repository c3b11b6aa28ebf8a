"""Split products of three or more tensors into a chain of pairwise contractions, in the cheapest order.

A sum-projected ``te.contract`` of n ≥ 3 operands (``A[i,j] B[j,k] C[k,l]``)
is one n-way loop nest if left alone: O(∏ extents) work. Contracting pairs
in a good order is O(sum of pairwise costs) and each pair can go to BLAS.
An op carrying a ``path`` attribute follows it: the order the runtime chose
for the call's real extents (:mod:`fuse_mlir.passes.transforms.contract_plan`, which
plans per shape). Otherwise the order is the cheapest by the same FLOPs +
bytes cost model (exhaustive up to ``max-optimal`` operands, else greedy) on
the extents known at compile time, where extents known only at run time
count as ``assumed-extent``. Each intermediate keeps exactly the indices
still needed later (by another operand or the result). Only ``sum`` splits:
max/min/mean of a product do not distribute over the factors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.interp.dtypes import accumulate_dtype, contract_dtype
from fuse_mlir.passes.registry import register_pass
from fuse_mlir.passes.transforms.contract_plan import (
    NONEMPTY_ATTR,
    Plan,
    optimal_path,
    orders_of,
    path_of,
    step_orders,
)


@register_pass
@dataclass(frozen=True)
class ContractOrder(ModulePass):
    """Split n-way sum contractions (n ≥ 3) into pairwise ones in the cheapest order (or the planned ``path``).

    First, a float factor is summed over the indices only it has (and the
    result lacks), so no product builds what the sum throws away. The order
    is the one the runtime planned for the call's shapes when the op carries
    a ``path``, else the cheapest by FLOPs + bytes on the static extents
    (unknown ones count as ``assumed-extent``; exhaustive up to
    ``max-optimal`` factors, greedy beyond). Intermediates take the axis
    order a GEMM writes without copies.

    A sum over an empty index is 0 whatever the factors hold. A product
    factored either way would instead multiply an empty partial sum (0) by
    the other factors, and NaN or an infinity among them makes that NaN, so
    the factored result is guarded: ``te.generate "nonempty"`` of the
    projected extents not known positive selects it or 0 (``te.map
    "select"``, fused into the last step's loop or run over a GEMM's result).
    A per-shape plan that saw every projected extent positive marks the op
    ``nonempty`` and it runs unguarded.
    """

    name = "contract-order"
    level: ClassVar[str] = "tensor_eq"

    assumed_extent: int = 64
    max_optimal: int = 6

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for inner in list(op.walk()):
            if isinstance(inner, te.ContractOp) and inner.projection.data == "sum" and len(inner.inputs) >= 2:
                # A per-shape plan that saw every projected extent positive marks the op: no guard needed.
                empty = [] if NONEMPTY_ATTR in inner.attributes else projected_extents(inner)
                value: SSAValue = inner.result
                before = list(inner.inputs)
                presum(inner)
                if len(inner.inputs) >= 3:
                    value = self.split(inner)
                if empty and (value is not inner.result or list(inner.inputs) != before):
                    guard_empty(value, empty)

    def split(self, op: te.ContractOp) -> SSAValue:
        """Replace ``op`` by its pairwise steps; the value that now stands for its result (its own when it stays)."""
        names = te.names_of_each(op.operand_indices)
        out = te.names_of(op.indices)
        if any(len(set(ns)) != len(ns) for ns in names):
            return op.result  # repeated names (diagonals) stay whole
        extents: dict[str, int] = {}
        for v, ns in zip(op.inputs, names):
            for n, s in zip(ns, v.type.get_shape()):  # type: ignore[attr-defined]
                if s >= 0:
                    extents.setdefault(n, s)
        path = path_of(op)
        if path is None or not _fits(path, len(names)):
            assumed = {n: extents.get(n, self.assumed_extent) for ns in names for n in ns}
            itemsize = te.dtype_of(op.result).itemsize
            path, _ = optimal_path(names, out, assumed, itemsize, self.max_optimal)
        orders = orders_of(op, names, out, path) or step_orders(names, out, path, extents)
        operands: list[tuple[SSAValue, tuple[str, ...]]] = list(zip(op.inputs, names))
        block = op.parent_block()
        assert block is not None
        for step, keep in zip(path, orders):
            picked = [operands[k] for k in step]
            for k in sorted(step, reverse=True):
                operands.pop(k)
            dtype = accumulate_dtype(contract_dtype([te.dtype_of(v) for v, _ in picked], "sum"))  # f16: f32 between
            shape = [extents.get(n, te.DYNAMIC) for n in keep]
            new = te.ContractOp(
                [v for v, _ in picked], [ns for _, ns in picked], keep, "sum", te.tensor_type(dtype, shape)
            )
            block.insert_op_before(new, op)
            operands.append((new.result, tuple(keep)))
        assert len(operands) == 1
        final, final_names = operands[0]
        if tuple(final_names) != tuple(out) or final.type != op.result.type:
            # A last permutation (and cast to the original type) as a one-operand contraction.
            fix = te.ContractOp([final], [final_names], out, "sum", op.result.type)
            block.insert_op_before(fix, op)
            final = fix.result
        op.result.replace_all_uses_with(final)
        op.detach()
        op.erase()
        return final


def projected_extents(op: te.ContractOp) -> list[tuple[SSAValue, int]]:
    """An (operand, axis) for each index ``op`` projects whose extent is not known to be positive.

    A sum over an empty index is 0 whatever the factors. Summed in one product, term by term, it is; once
    factored (a factor summed first, or pairs contracted in turn), an empty partial sum is 0 that the other
    factors then multiply, and NaN or an infinity among them makes the result NaN (0 * inf). These are the
    extents :func:`guard_empty` tests.
    """
    out = set(te.names_of(op.indices))
    found: dict[str, tuple[SSAValue, int]] = {}
    static: set[str] = set()
    for v, ns in zip(op.inputs, te.names_of_each(op.operand_indices)):
        for axis, (n, size) in enumerate(zip(ns, v.type.get_shape())):  # type: ignore[attr-defined]
            if n in out:
                continue
            if size > 0:
                static.add(n)
            found.setdefault(n, (v, axis))
    return [where for n, where in found.items() if n not in static]


def guard_empty(value: SSAValue, extents: list[tuple[SSAValue, int]]) -> None:
    """Make every use of ``value`` (a factored product's result) read 0 when any of ``extents`` is 0.

    ``te.generate "nonempty"`` of the extents selects between the value and 0 (``te.map "select"``): the
    per-term sum the program means, at the cost of one select per element, which fusion folds into the last
    step's loop (after a GEMM it is a pass over the result, hence the plan's ``nonempty`` mark).
    """
    owner = value.owner
    assert isinstance(owner, Operation)
    block = owner.parent_block()
    assert block is not None
    names = te.names_of(owner.indices)  # type: ignore[attr-defined]
    uses = list(value.uses)  # the product's readers, before the select becomes one
    dims = [te.DimOp(v, axis) for v, axis in extents]
    cond = te.GenerateOp("nonempty", [d.result for d in dims], [], te.tensor_type(np.dtype("int8"), []))
    zero = te.ConstantOp(np.zeros((), dtype=te.dtype_of(value)), [])
    assert isinstance(value.type, TensorType)
    pick = te.MapOp("select", [cond.result, value, zero.result], [[], names, []], names, value.type)
    block.insert_ops_after([*dims, cond, zero, pick], owner)
    for use in uses:
        use.operation.operands[use.index] = pick.result


def presum(op: te.ContractOp) -> None:
    """Sum each float operand over its indices that no other operand and not the result has, before the product.

    ``s = A[i,k] B[k,j]`` then costs O(ik + kj) instead of O(ijk), and the
    product never builds what the sum would throw away. Integer and boolean
    contractions (joins) are left as they are.
    """
    names = te.names_of_each(op.operand_indices)
    out = set(te.names_of(op.indices))
    if te.dtype_of(op.result).kind != "f" or any(len(set(ns)) != len(ns) for ns in names):
        return
    block = op.parent_block()
    assert block is not None
    inputs, new_names = list(op.inputs), list(names)
    for k, (v, ns) in enumerate(zip(op.inputs, names)):
        others = out.union(*(set(o) for j, o in enumerate(names) if j != k))
        keep = [n for n in ns if n in others]
        if len(keep) == len(ns) or te.dtype_of(v).kind != "f":
            continue
        shape = [s for n, s in zip(ns, v.type.get_shape()) if n in others]  # type: ignore[attr-defined]
        dtype = contract_dtype([te.dtype_of(v)], "sum")
        pre = te.ContractOp([v], [ns], keep, "sum", te.tensor_type(dtype, shape))
        block.insert_op_before(pre, op)
        inputs[k], new_names[k] = pre.result, tuple(keep)
    if inputs != list(op.inputs):
        op.operands = inputs
        op.attributes["operand_indices"] = te.str_array_array(new_names)


def _fits(path: tuple[tuple[int, int], ...], n: int) -> bool:
    """Whether ``path`` is a valid order for ``n`` operands (a planned attribute could be edited by hand)."""
    live = n
    for i, j in path:
        if not 0 <= i < j < live:
            return False
        live -= 1
    return live == 1


def explain_contractions(
    module: ModuleOp, input_shapes: Mapping[str, tuple[int, ...]], sources: Mapping[str, np.ndarray], plan: Plan | None
) -> list[dict[str, Any]]:
    """What a loop-level backend did with the contractions of one call, for ``runner.explain()``.

    One ``order`` row per n-way product (its factors, extents and the pairs
    contracted in turn), then one row per pairwise float product: the BLAS
    call it became (routine, batch, m, n, k, transpose flags, copies made
    first) or ``loop`` when it stays a fused loop nest. Built on demand from
    the module the call ran (split as ``contract-order`` splits it) and the
    call's input shapes.
    """
    from fuse_mlir.gemm import blas_product, describe_gemm
    from fuse_mlir.interp.shapes import infer_shapes, op_index_extents
    from fuse_mlir.passes.conversions.te_to_ew.contract import result_order_of

    rows: list[dict[str, Any]] = []
    for site in plan.sites if plan is not None else []:
        rows.append({"kind": "order", **site})
    split = module.clone()
    ContractOrder().apply(None, split)  # type: ignore[arg-type]
    shapes = infer_shapes(split, input_shapes, sources)
    for op in split.body.block.ops:
        if not (isinstance(op, te.ContractOp) and op.projection.data == "sum" and len(op.inputs) == 2):
            continue
        names = te.names_of_each(op.operand_indices)
        out = te.names_of(op.indices)
        dtype = te.dtype_of(op.result)
        static = {n: e for v, ns in zip(op.inputs, names) for n, e in zip(ns, v.type.get_shape()) if e >= 0}  # type: ignore[attr-defined]
        try:
            ext = op_index_extents(op, shapes)
        except (KeyError, TypeError):
            continue
        row: dict[str, Any] = {"kind": "pair", "factors": [list(ns) for ns in names], "result": list(out)}
        call = None
        if blas_product(names, out, [te.dtype_of(v) for v in op.inputs], dtype, static) and all(
            n in ext for ns in names for n in ns
        ):
            call = describe_gemm(names[0], names[1], out, ext, dtype, result_order_of(op))
        row.update(call if call is not None else {"call": "loop"})
        rows.append(row)
    return rows
