"""Write a pass, register it, build a pipeline around it, and run a program through it.

    python examples/custom_pass.py            # prints the transformed module and checks the results

The pass, ``fold-add-neg``, rewrites ``te.map "add"(a, te.map "neg"(b))``
into ``te.map "sub"(a, b)``: the tensor_eq form of ``a - b`` that the
frontend gives as an addition of a negation (``LogP = Logits - LogZ`` in
``mlp.fuse``). It is pattern-based (a ``PatternPass`` with one rewrite
pattern) and has one option. The script lowers ``mlp.fuse`` to tensor_eq,
runs ``canonicalize,fold-add-neg{single-use-only=true},cse`` on it with a hook
that reports what each pass changed, prints the result, and runs the
original and the transformed module on the reference interpreter to show
that every export is unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from fuse_mlir.dialects.tensor_eq import MapOp, names_of, names_of_each
from fuse_mlir.interp.reference import run_module
from fuse_mlir.ir import print_module
from fuse_mlir.passes import PatternPass, Pipeline, option, register_pass
from fuse_mlir.program import Program

HERE = Path(__file__).resolve().parent


class AddNegToSub(RewritePattern):
    """``add(a, neg(b))`` or ``add(neg(b), a)`` -> ``sub(a, b)``."""

    def __init__(self, single_use_only: bool) -> None:
        self.single_use_only = single_use_only

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MapOp, rewriter: PatternRewriter) -> None:
        if op.fn.data != "add" or len(op.inputs) != 2 or op.params is not None:
            return
        for k in (1, 0):  # prefer a + (-b) over (-b) + a
            neg = op.inputs[k].owner
            if not (isinstance(neg, MapOp) and neg.fn.data == "neg" and len(neg.inputs) == 1):
                continue
            if names_of_each(neg.operand_indices)[0] != names_of(neg.indices):
                continue  # the negation also permutes axes: leave it alone
            if self.single_use_only and neg.result.has_more_than_one_use():
                continue
            each = names_of_each(op.operand_indices)
            a, b = op.inputs[1 - k], neg.inputs[0]
            sub = MapOp("sub", [a, b], [each[1 - k], each[k]], names_of(op.indices), op.result.type)
            rewriter.replace(op, sub)
            if not neg.result.uses:
                rewriter.erase(neg)
            return


@register_pass
@dataclass(frozen=True)
class FoldAddNeg(PatternPass):
    """Rewrite an addition of a negation, ``add(a, neg(b))``, into a subtraction ``sub(a, b)``.

    Saves one elementwise op (and, before fusion, one temporary tensor).
    """

    name = "fold-add-neg"
    level: ClassVar[str] = "tensor_eq"

    single_use_only: bool = option(
        True, help="rewrite only when the negation has no other user (else it is computed anyway)"
    )

    def patterns(self) -> Sequence[RewritePattern]:
        return [AddNegToSub(self.single_use_only)]


def count_maps(module: ModuleOp) -> dict[str, int]:
    """How many ``te.map`` ops of each function the module holds."""
    counts: dict[str, int] = {}
    for op in module.walk():
        if isinstance(op, MapOp):
            counts[op.fn.data] = counts.get(op.fn.data, 0) + 1
    return dict(sorted(counts.items()))


def main(argv: Sequence[str] | None = None) -> int:
    program = Program.from_file(HERE / "mlp.fuse")
    lowered = program.lower()
    module = lowered.module.clone()  # keep the program's own module for the comparison

    pipeline = Pipeline.parse("canonicalize,fold-add-neg{single-use-only=true},cse")

    @pipeline.after
    def report(pass_: object, mod: ModuleOp) -> None:
        print(f"// after {pass_}: te.map ops {count_maps(mod)}")

    print(f"// pipeline: {pipeline}")
    print(f"// before: te.map ops {count_maps(module)}")
    pipeline.run(module)
    module.verify()
    print(print_module(module), end="")

    before = run_module(lowered.module, {}, lowered.sources).exports
    after = run_module(module, {}, lowered.sources).exports
    same = before.keys() == after.keys() and all(np.allclose(before[k], after[k]) for k in before)
    print(f"// exports unchanged: {same} ({', '.join(before)})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
