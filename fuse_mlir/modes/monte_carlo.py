"""Monte Carlo projection: estimate sum/mean/max projections from S uniform samples (LANGUAGE.md §5).

``compile(projection="monte_carlo", samples=S, seed=k)`` rewrites every
float ``te.contract`` / ``te.reduce`` whose projection is sum, mean or max:
its projected indices P (count C = the product of their extents) are
replaced by one sample index s of extent S. S joint positions are drawn
uniformly with replacement (an int64 table per projected index, indexed by
s); each operand that carries indices of P is read through a gather
(``te.access`` with those tables), and the op projects s instead:

- ``sum``  -> C x (mean over the samples)  (unbiased),
- ``mean`` -> mean over the samples        (unbiased),
- ``max``  -> max over the samples         (a lower bound that converges).

An op with S >= C is left exact. The tables and C are run-time inputs of
the rewritten module, so one rewritten module (per dtype signature and set
of sampled ops) serves every call and every backend; the llvm backend
compiles it once. Which ops are sampled depends on the extents, known from
the input shapes before the run (:mod:`fuse_mlir.interp.shapes`).

Sampling is reproducible: op k's tables come from
``numpy.random.default_rng([seed, k])`` (PCG64, the same stream on every
platform and in every process), so equal seeds and inputs give identical
results, call after call. Integer and boolean projections and the other
operators (min, prod) stay exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation, SSAValue

from fuse_mlir.diagnostics import FuseError, FuseRuntimeError, Loc
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.frontend.lower import InputSpec, Lowered
from fuse_mlir.interp.shapes import infer_shapes, op_index_extents

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


def sample_module(lowered: Lowered, sampled: list[int], samples: int) -> Lowered:
    """A copy of ``lowered`` whose candidate ops numbered in ``sampled`` project ``samples`` samples instead."""
    module = lowered.module.clone()
    block = module.body.block
    ops = candidates(module)
    first = block.first_op
    specs = list(lowered.inputs)
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
    return Lowered(module, specs, lowered.exports, lowered.group_order, lowered.sources)


@dataclass
class MonteCarlo:
    """The runner's rewrite for ``projection="monte_carlo"``: sampled module and sample tables per call."""

    samples: int
    seed: int
    modules: dict[tuple[int, tuple[int, ...]], Lowered] = field(default_factory=dict)
    last_sampled: dict[int, int] = field(default_factory=dict)  # op number -> count it estimated, latest run

    @classmethod
    def from_options(cls, samples: int | None, seed: int | None) -> MonteCarlo:
        if samples is None or isinstance(samples, bool) or not isinstance(samples, int | np.integer) or samples < 1:
            raise FuseError(f"projection='monte_carlo' needs samples= a positive int (got {samples!r})")
        if seed is None:
            seed = 0
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise FuseError(f"seed= must be a non-negative int (got {seed!r})")
        return cls(int(samples), int(seed))

    def __call__(self, lowered: Lowered, arrays: dict[str, np.ndarray]) -> tuple[Lowered, dict[str, np.ndarray]]:
        ops = candidates(lowered.module)
        if not ops:
            return lowered, arrays
        shapes = infer_shapes(lowered.module, {k: v.shape for k, v in arrays.items()}, lowered.sources)
        plan: list[tuple[int, list[tuple[str, int]], int]] = []
        for k, op in enumerate(ops):
            try:
                ext = op_index_extents(op, shapes)
                proj = [(p, ext[p]) for p in projected(op)]
            except (KeyError, TypeError) as e:
                raise FuseRuntimeError(
                    f"monte carlo projection: the extents of {op.name} are not known before the run"
                ) from e
            count = math.prod(n for _, n in proj)
            if self.samples < count:
                plan.append((k, proj, count))
        self.last_sampled = {k: count for k, _, count in plan}
        if not plan:
            return lowered, arrays
        key = (id(lowered), tuple(k for k, _, _ in plan))
        sampled = self.modules.get(key)
        if sampled is None:
            sampled = self.modules[key] = sample_module(lowered, [k for k, _, _ in plan], self.samples)
        out = dict(arrays)
        for k, proj, count in plan:
            rng = np.random.default_rng([self.seed, k])
            for p, n in proj:
                out[table_name(k, p)] = rng.integers(0, n, self.samples, dtype=np.int64)
            if kind_of(ops[k]) == "sum":
                out[count_name(k)] = np.array(count, dtype=te.dtype_of(ops[k].results[0]))
        return sampled, out
