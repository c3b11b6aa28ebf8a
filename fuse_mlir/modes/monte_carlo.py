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
import weakref
from dataclasses import dataclass, field

import numpy as np

from fuse_mlir.diagnostics import FuseError, FuseRuntimeError
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.interp.shapes import infer_shapes, op_index_extents
from fuse_mlir.lowered import Lowered
from fuse_mlir.passes.transforms.monte_carlo import candidates, count_name, kind_of, projected, sample_ops, table_name


def sample_module(lowered: Lowered, sampled: list[int], samples: int) -> Lowered:
    """A copy of ``lowered`` whose candidate ops numbered in ``sampled`` project ``samples`` samples instead."""
    module = lowered.module.clone()
    specs = sample_ops(module, sampled, samples)
    return Lowered(module, [*lowered.inputs, *specs], lowered.exports, lowered.group_order, lowered.sources)


@dataclass
class MonteCarlo:
    """The runner's rewrite for ``projection="monte_carlo"``: sampled module and sample tables per call."""

    samples: int
    seed: int
    # The sampled module per lowering (held weakly, never by id(): ids of freed lowerings are reused) and op set.
    modules: weakref.WeakKeyDictionary[Lowered, dict[tuple[int, ...], Lowered]] = field(
        default_factory=weakref.WeakKeyDictionary
    )
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
        shapes = infer_shapes(lowered.module, {k: v.shape for k, v in arrays.items()}, lowered.sources, checks=True)
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
        per_lowering = self.modules.setdefault(lowered, {})
        key = tuple(k for k, _, _ in plan)
        sampled = per_lowering.get(key)
        if sampled is None:
            sampled = per_lowering[key] = sample_module(lowered, [k for k, _, _ in plan], self.samples)
        out = dict(arrays)
        for k, proj, count in plan:
            rng = np.random.default_rng([self.seed, k])
            for p, n in proj:
                out[table_name(k, p)] = rng.integers(0, n, self.samples, dtype=np.int64)
            if kind_of(ops[k]) == "sum":
                out[count_name(k)] = np.array(count, dtype=te.dtype_of(ops[k].results[0]))
        return sampled, out
