"""The schedule of one block as the kernel-level passes see it: positions, readers and dependences.

``fuse`` and ``inplace`` both reorder or merge ops of a block and must keep
it a valid schedule (every value defined before it is read); they share
these queries. A region op *reads* its operands and whatever its body reads
from outside, so a kernel body that asks for ``te.dim`` of a tensor
depends on that tensor.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from fuse_mlir.dialects import elemwise as ew


def reads(op: Operation) -> list[SSAValue]:
    """Every value ``op`` reads: its operands and what its regions read from outside."""
    out = list(op.operands)
    if op.regions:
        inside: set[SSAValue] = set()
        for inner in op.walk():
            if inner is not op:
                inside.update(inner.results)
            for region in inner.regions:
                for block in region.blocks:
                    inside.update(block.args)
        out += [v for inner in op.walk() if inner is not op for v in inner.operands if v not in inside]
    return out


def kernel_blocks(module: ModuleOp) -> list[Block]:
    """The blocks that hold ``ew.generic`` kernels (the module's, and bodies such as a fixpoint's), in walk order."""
    blocks: list[Block] = []
    for op in module.walk():
        block = op.parent_block()
        if isinstance(op, ew.GenericOp) and block is not None and block not in blocks:
            blocks.append(block)
    return blocks


def top_level(op: Operation | None, block: Block) -> Operation | None:
    """The ancestor of ``op`` (or ``op``) that sits directly in ``block``; None if outside it."""
    while op is not None and op.parent_block() is not block:
        op = op.parent_op()
    return op


class Schedule:
    """Positions of a block's ops (call :meth:`index` after moving ops) and dependence queries."""

    def __init__(self, block: Block):
        self.block = block
        self.pos: dict[Operation, int] = {}
        self.index()

    def index(self) -> None:
        self.pos = {op: i for i, op in enumerate(self.block.ops)}

    def owner_position(self, v: SSAValue) -> int:
        """The position of the op of this block that defines ``v`` (-1 for block arguments and outer values)."""
        owner = v.owner
        top = top_level(owner, self.block) if isinstance(owner, Operation) else None
        return -1 if top is None else self.pos[top]

    def user_positions(self, v: SSAValue, besides: Operation | None = None) -> list[int]:
        """Positions of the ops of this block using ``v`` (other than ``besides``)."""
        out = []
        for use in v.uses:
            top = top_level(use.operation, self.block)
            if top is not None and top is not besides:
                out.append(self.pos[top])
        return out

    def reads_of(self, op: Operation) -> list[SSAValue]:
        """:func:`reads` of an op of this block (a subclass may cache it)."""
        return reads(op)

    def depends(self, later: Operation, earlier: Operation) -> bool:
        """Whether ``later`` reads a result of ``earlier``, directly or through ops of this block."""
        lo = self.pos[earlier]
        stack, seen = [later], {later}
        while stack:
            for v in self.reads_of(stack.pop()):
                owner = v.owner
                top = top_level(owner, self.block) if isinstance(owner, Operation) else None
                if top is None or self.pos[top] < lo or top in seen:
                    continue
                if top is earlier:
                    return True
                seen.add(top)
                stack.append(top)
        return False
