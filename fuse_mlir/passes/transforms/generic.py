"""xDSL's level-independent passes, registered under their xDSL names with descriptions and examples.

Each is a subclass of the xDSL pass (so ``isinstance`` checks and options are
unchanged) that adds the docstring, ``level`` and ``example`` the registry and
the docs read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.transforms.canonicalize import CanonicalizePass
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

from fuse_mlir.passes.registry import register_pass

_CONTRACT = (
    'te.contract %x, %x {operand_indices = [["i"], ["i"]], indices = [], projection = #te.projection<sum>}'
    " : (tensor<?xf64>, tensor<?xf64>) -> tensor<f64>"
)


@register_pass
@dataclass(frozen=True)
class Canonicalize(CanonicalizePass):
    """Apply every op's canonicalization patterns and fold constants, until nothing changes.

    Folds arithmetic on constants (extent computations on ``index`` values)
    and erases ops whose results are unused and that have no side effects.
    """

    level: ClassVar[str] = "any"
    example: ClassVar[str | None] = """\
builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %n = arith.addi %c2, %c3 : index
  %b = te.broadcast %x(%n) {operand_indices = [["i"]], indices = ["i", "j"]} : tensor<?xf64> -> tensor<?x5xf64>
  te.export %b {names = ["B"]} : tensor<?x5xf64>
}
"""


@register_pass
@dataclass(frozen=True)
class CSE(CommonSubexpressionElimination):
    """Common subexpression elimination: replace an op by an identical earlier one (same operands and attributes).

    Only side-effect-free ops merge; two identical contractions become one.
    Like MLIR's cse, it also erases side-effect-free ops that nothing uses.
    """

    level: ClassVar[str] = "any"
    example: ClassVar[str | None] = f"""\
builtin.module {{
  %x = te.input "X" {{indices = ["i"]}} : tensor<?xf64>
  %a = {_CONTRACT}
  %b = {_CONTRACT}
  te.export %a, %b {{names = ["A", "B"]}} : tensor<f64>, tensor<f64>
}}
"""


@register_pass
@dataclass(frozen=True)
class DCE(DeadCodeElimination):
    """Dead code elimination: erase ops whose results are never used and that have no side effects.

    Exports, sinks and checks have effects and stay, so everything they need stays too.
    """

    level: ClassVar[str] = "any"
    example: ClassVar[str | None] = f"""\
builtin.module {{
  %x = te.input "X" {{indices = ["i"]}} : tensor<?xf64>
  %unused = {_CONTRACT}
  te.export %x {{names = ["X"]}} : tensor<?xf64>
}}
"""
