"""``inplace``: decide which kernels write a result into a dead input's buffer (destroy analysis).

For each elementwise ``ew.generic`` (no reduction dims: a reduction's result
is smaller than its input and is never computed in place), in schedule
order, a result may take the buffer of a mapped input ``v`` when:

- ``v`` is read through the identity map, once, and not also as a table, so
  each point is read before it is overwritten and nothing else reads it;
- ``v`` has the result's element type (hence the same storage size and shape);
- the buffer is the program's own: a kernel's, a contraction's (the BLAS
  output reused by the epilogue of ``relu(W@x + b)``) — or
  a caller's input named in ``donate`` — never a constant or a source file's
  array (its views included: buffers are followed through earlier in-place
  decisions to the op that allocated them);
- no op after the kernel reads ``v`` (read-after-write). A later reader
  that does not depend on the kernel and whose operands are ready is moved
  before it (the schedule is fixed accordingly); exports and sinks read at
  the end, so an exported ``v`` is never overwritten.

The decision is the ``inplace`` attribute (an input index per result, -1 for
a fresh buffer); ``lower-ew-to-loop`` realises it by storing into the
input's buffer instead of allocating. The ``allocations-saved`` statistic
counts the decisions. Targets without in-place support (torch, jax, numba)
leave the module unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, TensorType
from xdsl.ir import Block, Operation, OpResult, SSAValue

from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.elemwise import INPLACE_ATTR
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass, option
from fuse_mlir.passes.registry import register_pass
from fuse_mlir.passes.statistics import count
from fuse_mlir.passes.transforms.schedule import Schedule, kernel_blocks, reads, top_level
from fuse_mlir.targets import get_target

OWNED_PRODUCERS = (ew.GenericOp, ew.ContractOp)
"""Ops whose results are buffers the program allocated itself (and so may overwrite). Host calls are
not among them: a NumPy kernel may return a view of its input."""


def buffer_root(v: SSAValue) -> SSAValue:
    """The value whose op allocated ``v``'s buffer (following earlier in-place decisions)."""
    while isinstance(v, OpResult) and isinstance(v.op, ew.GenericOp):
        k = v.op.inplace_list()[v.index]
        if k < 0:
            break
        v = v.op.inputs[k]
    return v


class _Planner(Schedule):
    def __init__(self, block: Block, donate: frozenset[str]):
        super().__init__(block)
        self.donate = donate
        self.destroyed: set[SSAValue] = set()  # values whose buffer a kernel already overwrites
        self.roots: dict[SSAValue, SSAValue] = {}  # buffer_root, remembered along each chain

    def root(self, v: SSAValue) -> SSAValue:
        """:func:`buffer_root`, remembered: a residual stream updated in place by every layer is one chain, and
        following it from the start for each kernel was quadratic. Exact: a value is asked about only once the
        kernels up its chain are planned (they come first in the block), so their decisions are final."""
        seen: list[SSAValue] = []
        while v not in self.roots and isinstance(v, OpResult) and isinstance(v.op, ew.GenericOp):
            k = v.op.inplace_list()[v.index]
            if k < 0:
                break
            seen.append(v)
            v = v.op.inputs[k]
        root = self.roots.get(v, v)
        for w in seen:
            self.roots[w] = root
        return root

    def owned(self, v: SSAValue) -> bool:
        if not isinstance(v, OpResult) or v.op.parent_block() is not self.block:
            return False  # a value from an enclosing block (a loop body's) may be read again on the next trip
        root = self.root(v)
        if not isinstance(root, OpResult):
            return False
        op = root.op
        if isinstance(op, OWNED_PRODUCERS):
            return True
        return isinstance(op, te.InputOp) and op.tensor_name.data in self.donate

    def later_readers(self, v: SSAValue, kernel: Operation) -> list[Operation] | None:
        """Ops after ``kernel`` that read ``v``; None if one can never be moved (an export or a sink)."""
        out: list[Operation] = []
        for use in v.uses:
            top = top_level(use.operation, self.block)
            if top is None or top is kernel or self.pos[top] < self.pos[kernel]:
                continue
            if isinstance(top, te.ExportOp | te.SinkOp) or not top.results:
                return None
            out.append(top)
        return out

    def hoist(self, readers: list[Operation], kernel: Operation) -> bool:
        """Move each reader just before ``kernel`` if it can go there (it does not need the kernel's
        results and its operands are ready); False, changing nothing, if one cannot."""
        k = self.pos[kernel]
        for r in readers:
            if INPLACE_ATTR in r.attributes or self.depends(r, kernel):
                return False  # a destroyer stays after its buffer's other readers
            if any(self.owner_position(v) >= k for v in reads(r)):
                return False
        for r in sorted(readers, key=self.pos.__getitem__):
            r.detach()
            self.block.insert_op_before(r, kernel)
        self.index()
        count("inplace", "readers-moved", len(readers))
        return True

    def plan(self, kernel: ew.GenericOp) -> bool:
        if "reduction" in kernel.iterator_list() or INPLACE_ATTR in kernel.attributes:
            return False
        n = len(kernel.extents)
        identity = tuple(range(n))
        maps = kernel.map_list()
        choice = [-1] * len(kernel.outputs)
        for r, out in enumerate(kernel.outputs):
            for k, (v, m) in enumerate(zip(kernel.inputs, maps)):
                if k in choice or m != identity or v in kernel.tables or v in self.destroyed:
                    continue
                if any(w == v for j, w in enumerate(kernel.inputs) if j != k):
                    continue  # read twice (another map, or merged later): a write could precede a read
                vt, ot = v.type, out.type
                assert isinstance(vt, TensorType) and isinstance(ot, TensorType)
                if vt.element_type != ot.element_type or vt.get_num_dims() != n or not self.owned(v):
                    continue
                readers = self.later_readers(v, kernel)
                if readers is None or (readers and not self.hoist(readers, kernel)):
                    continue
                choice[r] = k
                self.destroyed.add(v)
                break
        if all(c < 0 for c in choice):
            return False
        kernel.attributes[INPLACE_ATTR] = ArrayAttr([IntegerAttr(c, 64) for c in choice])
        count("inplace", "allocations-saved", sum(c >= 0 for c in choice))
        return True

    def run(self) -> bool:
        changed = False
        for op in list(self.block.ops):
            if isinstance(op, ew.GenericOp):
                changed |= self.plan(op)
        return changed


@register_pass
@dataclass(frozen=True)
class Inplace(FusePass):
    """Let elementwise kernels write into a dead input's buffer; no read-after-write, no caller arrays unless donated."""

    name = "inplace"
    level: ClassVar[str] = "elemwise"

    target: str = option("llvm", help="the target whose capabilities decide whether buffers may be reused")
    donate: tuple[str, ...] = option((), help="inputs the caller lets the program overwrite (compile(donate=...))")

    example: ClassVar[str | None] = """\
builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %n = te.dim %x, 0 : i64 : tensor<?xf64>
  %e = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
  ^bb0(%a: f64):
    %y = math.exp %a : f64
    ew.yield %y : f64
  }
  %s = ew.generic ins(%e : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
  ^bb0(%b: f64):
    %z = arith.addf %b, %b : f64
    ew.yield %z : f64
  }
  te.export %s {names = ["S"]} : tensor<?xf64>
}
"""

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        if not get_target(self.target).inplace:
            return False
        changed = False
        for block in kernel_blocks(module):
            changed |= _Planner(block, frozenset(self.donate)).run()
        return changed
