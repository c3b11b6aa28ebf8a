"""The ``monte-carlo`` pass: project sampled indices instead of all of them (sum/mean/max estimates).

This is the rewrite behind ``compile(projection="monte_carlo")``
(docs/modes.md), exposed to ``fuse-opt`` to inspect. Each float sum/mean/max
contraction or reduction k whose projected count is not statically known to
be at most ``samples`` reads its operands through gathers by the run-time
int64 sample tables ``mc{k}:{index}`` and projects the sample index
``mc{k}`` with mean (sum: times the run-time count ``mc{k}:count``) or max.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation, SSAValue

from fuse_mlir.diagnostics import FuseError, Loc
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.interp.shapes import extents_by_name
from fuse_mlir.lowered import InputSpec
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass, option
from fuse_mlir.passes.registry import register_pass

SAMPLED = ("sum", "mean", "max")
SAMPLES_ATTR = "monte_carlo"
_NOWHERE = Loc("<monte-carlo>", 1, 1)


def candidates(module: ModuleOp) -> list[Operation]:
    """The ops Monte Carlo projection may sample, in module order (their position is their op number k)."""
    out: list[Operation] = []
    for op in module.body.block.ops:
        if isinstance(op, te.ContractOp | te.ReduceOp) and kind_of(op) in SAMPLED:
            if te.dtype_of(op.results[0]).kind == "f" and projected(op):
                out.append(op)
    return out


def projected(op: Operation) -> list[str]:
    """The indices an op projects (operand indices absent from its result), in first-use order."""
    out = set(te.names_of(op.attributes["indices"]))
    names = [n for ns in te.names_of_each(op.attributes["operand_indices"]) for n in ns]
    return [n for n in dict.fromkeys(names) if n not in out]


def kind_of(op: Operation) -> str:
    """The projection of a candidate op (a contraction's projection or a reduction's kind)."""
    return op.projection.data if isinstance(op, te.ContractOp) else op.kind.data  # type: ignore[attr-defined]


def table_name(k: int, index: str) -> str:
    return f"mc{k}:{index}"


def count_name(k: int) -> str:
    return f"mc{k}:count"


def sample_ops(module: ModuleOp, sampled: list[int], samples: int) -> list[InputSpec]:
    """Rewrite ``module`` in place so its candidate ops numbered in ``sampled`` project ``samples`` samples instead.

    Returns the run-time inputs the rewrite added (the sample tables and counts), in the order it added them.
    """
    block = module.body.block
    ops = candidates(module)
    first = block.first_op
    specs: list[InputSpec] = []
    for k in sampled:
        op = ops[k]
        proj = projected(op)
        s = f"mc{k}"
        tables: dict[str, SSAValue] = {}
        for p in proj:
            inp = te.InputOp(table_name(k, p), [s], te.tensor_type(np.int64, [te.DYNAMIC]))
            block.insert_op_before(inp, first)
            tables[p] = inp.result
            specs.append(InputSpec(table_name(k, p), 1, np.dtype(np.int64), _NOWHERE))
        operands = []
        each = []
        for v, ns in zip(op.operands, te.names_of_each(op.attributes["operand_indices"])):
            hit = [n for n in ns if n in tables]
            if not hit:
                operands.append(v)
                each.append(list(ns))
                continue
            axes = [te.AccessAxisAttr.gather(hit.index(n)) if n in tables else te.AccessAxisAttr.named(n) for n in ns]
            out = [n for n in ns if n not in tables] + [s]
            acc = te.AccessOp(
                v,
                axes,
                out,
                te.tensor_type(te.dtype_of(v), [te.DYNAMIC] * len(out)),
                gathers=[tables[n] for n in hit],
                gather_indices=[[s]] * len(hit),
            )
            block.insert_op_before(acc, op)
            operands.append(acc.result)
            each.append(out)
        result = op.results[0]
        indices = list(te.names_of(op.attributes["indices"]))
        kind = kind_of(op)
        new: Operation
        if isinstance(op, te.ContractOp):
            new = te.ContractOp(operands, each, indices, "max" if kind == "max" else "mean", result.type)
        else:
            new = te.ReduceOp("max" if kind == "max" else "mean", operands[0], each[0], indices, result.type)
        new.attributes[SAMPLES_ATTR] = IntegerAttr(samples, i64)  # the run trace shows it per group
        block.insert_op_before(new, op)
        value = new.results[0]
        if kind == "sum":
            dtype = te.dtype_of(result)
            count = te.InputOp(count_name(k), [], te.tensor_type(dtype, []))
            block.insert_op_before(count, first)
            specs.append(InputSpec(count_name(k), 0, dtype, _NOWHERE))
            scaled = te.MapOp("mul", [value, count.result], [indices, []], indices, result.type)
            block.insert_op_before(scaled, op)
            value = scaled.result
        result.replace_all_uses_with(value)
        op.detach()
        op.erase()
    module.verify()
    return specs


@register_pass
@dataclass(frozen=True)
class MonteCarlo(FusePass):
    """Estimate sum/mean/max projections from ``samples`` uniform samples drawn at run time (tables as inputs).

    Ops whose projected extents are static with a count <= ``samples`` stay
    exact; the runner (``projection="monte_carlo"``) decides that per run
    from the actual extents and fills the tables from its seed.
    """

    name = "monte-carlo"
    level: ClassVar[str] = "tensor_eq"
    example: ClassVar[str | None] = """\
builtin.module {
  %a = te.input "A" {indices = ["i", "j"]} : tensor<?x?xf64>
  %b = te.input "B" {indices = ["j"]} : tensor<?xf64>
  %s = te.contract %a, %b {operand_indices = [["i", "j"], ["j"]], indices = ["i"], projection = #te.projection<sum>} : (tensor<?x?xf64>, tensor<?xf64>) -> tensor<?xf64>
  te.export %s {names = ["S"]} : tensor<?xf64>
}
"""

    samples: int = option(64, help="the sample count S (ops with a static projected count <= S stay exact)")

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        if self.samples < 1:
            raise FuseError(f"monte-carlo: samples must be positive (got {self.samples})")
        picked = []
        for k, op in enumerate(candidates(module)):
            each = te.names_of_each(op.attributes["operand_indices"])
            static = extents_by_name([(ns, tuple(v.type.get_shape())) for v, ns in zip(op.operands, each)])  # type: ignore[attr-defined]
            extents = [static.get(p, -1) for p in projected(op)]
            if any(n < 0 for n in extents) or math.prod(extents) > self.samples:
                picked.append(k)
        if not picked:
            return False
        sample_ops(module, picked, self.samples)
        return True
