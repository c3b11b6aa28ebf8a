"""``streaming-stores``: mark the stores whose lines their loop nest never reads back (``loop.store {nontemporal}``).

A kernel that writes a buffer larger than the caches pays for each output line
twice: the store first reads the line from memory (read-for-ownership), then
writes it back. A streaming (non-temporal) store writes a whole line without
reading it, so ``exp(x)*y+z`` moves four arrays instead of five and a copy two
instead of three. It also evicts the line from the caches, so it only pays
where nothing reads the value soon: this pass marks a store when its nest
neither loads the buffer nor hands it to a ``loop.gemm`` or ``loop.host_call``,
and the buffer is not one a donated input may back (``fuse.reuse``: it aliases
an input the nest reads).

The mark is a permission, not a decision: ``lower-loop-to-llvm`` writes a
marked store as a streaming store only when its ``streaming-min-bytes`` option
is set (the JIT sets it to the host's last-level cache size on x86-64), the
buffer holds at least that many bytes, and the row's first element is 64-byte
aligned, each checked at run time; otherwise the same loop runs with ordinary
stores. So the pass marks only stores the lowering can version that way:

- the store is directly in an innermost ``loop.for`` with step 1 whose body
  only computes, loads, stores and checks (the lowering emits it twice);
- its last position is that loop's induction variable and its other positions
  are defined outside the loop (consecutive iterations write consecutive
  elements of one row, whose start the lowering computes before the loop);
- its element is 4 or 8 bytes wide (whole vectors of it fill whole lines).

Marking never changes a value: the loop interpreter and Numba ignore it.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import MemRefType, ModuleOp, UnitAttr
from xdsl.ir import SSAValue

from fuse_mlir.dialects import loop
from fuse_mlir.dialects.abi import alloc_id, entry_block, reuse_table
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass
from fuse_mlir.passes.conversions.loop_to_llvm.streaming import NONTEMPORAL, streamable
from fuse_mlir.passes.registry import register_pass
from fuse_mlir.passes.statistics import count


def _read_in(nest: loop.ForOp) -> set[SSAValue]:
    """The buffers ``nest`` reads: loaded, or handed to BLAS or a host call."""
    read: set[SSAValue] = set()
    for op in nest.walk():
        if isinstance(op, loop.LoadOp):
            read.add(op.buffer)
        elif isinstance(op, loop.GemmOp | loop.HostCallOp):
            read.update(v for v in op.operands if isinstance(v.type, MemRefType))
    return read


def _shared_buffers(module: ModuleOp) -> set[SSAValue]:
    """The ``loop.alloc`` buffers a donated input may back at run time (``fuse.reuse``): they alias an input."""
    shared = {aid for aid, _ in reuse_table(module)}
    allocs = [op for op in module.walk() if isinstance(op, loop.AllocOp)]
    return {op.result for k, op in enumerate(allocs) if alloc_id(op, k) in shared}


def mark_nest(nest: loop.ForOp, excluded: AbstractSet[SSAValue] = frozenset()) -> int:
    """Mark the streamable stores of one top-level nest (not into ``excluded`` buffers); how many are newly marked."""
    read = _read_in(nest) | excluded
    marked = 0
    for op in nest.walk():
        if isinstance(op, loop.StoreOp) and op.nontemporal is None and op.buffer not in read and streamable(op):
            op.attributes[NONTEMPORAL] = UnitAttr()
            marked += 1
    return marked


@register_pass
@dataclass(frozen=True)
class StreamingStores(FusePass):
    """Mark stores no later op of their nest reads back as ``nontemporal`` (the lowering may stream them)."""

    name = "streaming-stores"
    level: ClassVar[str] = "loop"
    example: ClassVar[str | None] = """\
builtin.module {
  func.func @fuse_main() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %x = loop.arg 0 : i64 "X" : memref<?xf64>
    %n = loop.dim %x, 0 : i64 : memref<?xf64>
    %y = loop.alloc(%n) : memref<?xf64>
    loop.for %c0 to %n step %c1 attributes {parallel} {
    ^bb0(%i: index):
      %v = loop.load %x[%i] : memref<?xf64> -> f64
      %w = arith.mulf %v, %v : f64
      loop.store %w, %y[%i] : f64, memref<?xf64>
      loop.yield
    }
    loop.result %y, 0 : i64 "Y" : memref<?xf64>
    func.return
  }
}
"""

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        block = entry_block(module)
        if block is None:
            return False
        shared = _shared_buffers(module)
        marked = sum(mark_nest(op, shared) for op in block.ops if isinstance(op, loop.ForOp))
        count(self.name, "stores-marked", marked)
        return marked > 0
