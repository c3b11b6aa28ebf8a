"""The ``loop`` dialect: explicit loop nests over buffers, in destination-passing style.

A module at this level holds one ``func.func @fuse_main`` (no arguments, no
results: the native entry point's ABI is added when lowering to the llvm
dialect, see docs/native-abi.md) whose body uses:

- ``loop.arg`` / ``loop.result``: the program's input and output buffers by
  slot; ``loop.alloc``: a runtime-owned buffer; ``loop.dim``: an extent.
  Buffers are contiguous, row-major ``memref<?x...xT>`` values.
- ``loop.for``: a counted loop with loop-carried values (``iter_args``, e.g.
  reduction accumulators kept in registers) and a ``parallel`` flag meaning
  iterations are independent; ``loop.yield`` ends its body.
- ``loop.while``: a do-while loop with carried scalars whose body yields the
  condition to go on first (fixpoint iteration).
- ``loop.load`` / ``loop.store``: element access at multi-dimensional positions;
  a store marked ``nontemporal`` (``streaming-stores``) may bypass the caches.
- ``loop.check``: a run-time assertion; when ``cond`` is false the entry point
  returns ``code`` with the two detail values (which index, which extent).
- ``loop.gemm``: a (batched) matrix product handed to BLAS.
- ``loop.host_call``: a builtin run by the runtime on NumPy.

Scalar arithmetic uses the upstream ``arith`` and ``math`` dialects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    EqAttrConstraint,
    IRDLOperation,
    attr_def,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_attr_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from fuse_mlir.dialects.elemwise import signless

T = TypeVar("T")


def _rank(t: Attribute) -> int:
    assert isinstance(t, MemRefType)
    return len(t.get_shape())


@irdl_op_definition
class ArgOp(IRDLOperation):
    """Input buffer number ``slot`` (named ``name``), as passed by the caller."""

    name = "loop.arg"
    slot = attr_def(IntegerAttr)
    tensor_name = attr_def(StringAttr, attr_name="name")
    result = result_def(MemRefType)
    traits = traits_def(Pure())
    assembly_format = "$slot $name attr-dict `:` type($result)"

    def __init__(self, slot: int, name: str, type: MemRefType):
        super().__init__(attributes={"slot": IntegerAttr(slot, i64), "name": StringAttr(name)}, result_types=[type])


@irdl_op_definition
class ResultOp(IRDLOperation):
    """Hand ``buffer`` to the caller as output number ``slot`` (named ``name``)."""

    name = "loop.result"
    buffer = operand_def(MemRefType)
    slot = attr_def(IntegerAttr)
    tensor_name = attr_def(StringAttr, attr_name="name")
    assembly_format = "$buffer `,` $slot $name attr-dict `:` type($buffer)"

    def __init__(self, buffer: SSAValue, slot: int, name: str):
        super().__init__(operands=[buffer], attributes={"slot": IntegerAttr(slot, i64), "name": StringAttr(name)})


@irdl_op_definition
class AllocOp(IRDLOperation):
    """A new contiguous buffer of the given extents, owned by the runtime (uninitialised)."""

    name = "loop.alloc"
    extents = var_operand_def(IndexType)
    result = result_def(MemRefType)
    assembly_format = "`(` $extents `)` attr-dict `:` type($result)"

    def __init__(self, extents: Sequence[SSAValue], type: MemRefType):
        super().__init__(operands=[list(extents)], result_types=[type])

    def verify_(self) -> None:
        if len(self.extents) != _rank(self.result.type):
            raise VerifyException("loop.alloc: one extent per dimension expected")


@irdl_op_definition
class DimOp(IRDLOperation):
    """The extent of dimension ``axis`` of a buffer."""

    name = "loop.dim"
    buffer = operand_def(MemRefType)
    axis = attr_def(IntegerAttr)
    result = result_def(IndexType)
    traits = traits_def(Pure())
    assembly_format = "$buffer `,` $axis attr-dict `:` type($buffer)"

    def __init__(self, buffer: SSAValue, axis: int):
        super().__init__(operands=[buffer], attributes={"axis": IntegerAttr(axis, i64)}, result_types=[IndexType()])


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Read one element."""

    name = "loop.load"
    buffer = operand_def(MemRefType)
    positions = var_operand_def(IndexType)
    result = result_def()
    assembly_format = "$buffer `[` $positions `]` attr-dict `:` type($buffer) `->` type($result)"

    def __init__(self, buffer: SSAValue, positions: Sequence[SSAValue]):
        t = buffer.type
        assert isinstance(t, MemRefType)
        super().__init__(operands=[buffer, list(positions)], result_types=[signless(t.element_type)])

    def verify_(self) -> None:
        if len(self.positions) != _rank(self.buffer.type):
            raise VerifyException("loop.load: one position per dimension expected")


@irdl_op_definition
class StoreOp(IRDLOperation):
    """Write one element.

    ``nontemporal`` (set by ``streaming-stores``) says no later op of its loop
    nest reads the stored line, so the llvm lowering may write it with a
    streaming store that bypasses the caches (no read-for-ownership); it never
    changes the value written.
    """

    name = "loop.store"
    value = operand_def()
    buffer = operand_def(MemRefType)
    positions = var_operand_def(IndexType)
    nontemporal = opt_attr_def(UnitAttr)
    assembly_format = "$value `,` $buffer `[` $positions `]` attr-dict `:` type($value) `,` type($buffer)"

    def __init__(self, value: SSAValue, buffer: SSAValue, positions: Sequence[SSAValue]):
        super().__init__(operands=[value, buffer, list(positions)])

    def verify_(self) -> None:
        t = self.buffer.type
        assert isinstance(t, MemRefType)
        if len(self.positions) != len(t.get_shape()):
            raise VerifyException("loop.store: one position per dimension expected")
        if self.value.type != signless(t.element_type):
            raise VerifyException(f"loop.store: storing {self.value.type} into a buffer of {t.element_type}")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a loop body with the next values of its carried variables."""

    name = "loop.yield"
    values = var_operand_def()
    traits = lazy_traits_def(lambda: (IsTerminator(),))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, values: Sequence[SSAValue] = ()):
        super().__init__(operands=[list(values)])


@irdl_op_definition
class ForOp(IRDLOperation):
    """``for iv in [lower, upper)`` by ``step`` with carried values; ``parallel`` marks independent iterations.

    The body block's arguments are the induction variable, then one per
    carried value; it ends with ``loop.yield`` of the next carried values. The
    results are the carried values after the last iteration (the inits when
    the loop runs zero times).
    """

    name = "loop.for"
    lower = operand_def(IndexType)
    upper = operand_def(IndexType)
    step = operand_def(IndexType)
    inits = var_operand_def()
    parallel = opt_attr_def(UnitAttr)
    body = region_def("single_block")
    results_ = var_result_def()
    assembly_format = (
        "$lower `to` $upper `step` $step (`iter_args` `(` $inits^ `:` type($inits) `)`)? "
        "attr-dict-with-keyword (`->` type($results_)^)? $body"
    )

    def __init__(
        self,
        lower: SSAValue,
        upper: SSAValue,
        step: SSAValue,
        inits: Sequence[SSAValue],
        body: Region,
        parallel: bool = False,
    ):
        attrs: dict[str, Attribute] = {"parallel": UnitAttr()} if parallel else {}
        super().__init__(
            operands=[lower, upper, step, list(inits)],
            result_types=[[v.type for v in inits]],
            regions=[body],
            attributes=attrs,
        )

    @staticmethod
    def make_body(inits: Sequence[SSAValue]) -> tuple[Region, Block]:
        block = Block(arg_types=[IndexType(), *[v.type for v in inits]])
        return Region(block), block

    def verify_(self) -> None:
        block = self.body.block
        want = [IndexType(), *[v.type for v in self.inits]]
        if [a.type for a in block.args] != want:
            raise VerifyException(f"loop.for: body arguments must be {want}")
        term = block.last_op
        if not isinstance(term, YieldOp) or [v.type for v in term.values] != [v.type for v in self.inits]:
            raise VerifyException("loop.for: the body must end with loop.yield of the carried values")


@irdl_op_definition
class CheckOp(IRDLOperation):
    """If ``cond`` (i1) is false, stop and report error ``code`` with details ``a`` and ``b``."""

    name = "loop.check"
    cond = operand_def(EqAttrConstraint(IntegerType(1)))
    a = operand_def(IndexType)
    b = operand_def(IndexType)
    code = attr_def(IntegerAttr)
    assembly_format = "$cond `,` $a `,` $b `code` $code attr-dict"

    def __init__(self, cond: SSAValue, a: SSAValue, b: SSAValue, code: int):
        super().__init__(operands=[cond, a, b], attributes={"code": IntegerAttr(code, i64)})


@irdl_op_definition
class GemmOp(IRDLOperation):
    """``c[b] = op(a[b]) @ op(bm[b])`` for each of ``batch`` matrices, by BLAS.

    Without ``strides`` the buffers are contiguous: ``a`` is batch×m×k (or
    batch×k×m with ``trans_a``), ``bm`` is batch×k×n (or batch×n×k with
    ``trans_b``), ``c`` is batch×m×n; a batch stride of 0
    (``broadcast_a``/``broadcast_b``) reuses one matrix for every batch entry.
    With ``strides`` (six index values: the batch stride and the row stride,
    BLAS's leading dimension, of ``a``, ``bm`` and ``c`` in turn, in
    elements) each matrix's element (r, s) of batch entry i sits at
    ``i·batch_stride + r·row_stride + s`` of its buffer: a batch index between
    a buffer's rows and columns (``A[i, b, j]``) needs no copy. The lowering
    guarantees what BLAS requires: each row stride at least its row's length.
    """

    name = "loop.gemm"
    a = operand_def(MemRefType)
    bm = operand_def(MemRefType)
    c = operand_def(MemRefType)
    batch = operand_def(IndexType)
    m = operand_def(IndexType)
    n = operand_def(IndexType)
    k = operand_def(IndexType)
    trans_a = attr_def(BoolAttr)
    trans_b = attr_def(BoolAttr)
    broadcast_a = attr_def(BoolAttr)
    broadcast_b = attr_def(BoolAttr)
    strides = var_operand_def(IndexType)
    assembly_format = (
        "$a `,` $bm `,` $c `batch` $batch `m` $m `n` $n `k` $k (`strides` `(` $strides^ `)`)? attr-dict `:` "
        "type($a) `,` type($bm) `,` type($c)"
    )

    def __init__(
        self,
        a: SSAValue,
        bm: SSAValue,
        c: SSAValue,
        batch: SSAValue,
        m: SSAValue,
        n: SSAValue,
        k: SSAValue,
        trans_a: bool = False,
        trans_b: bool = False,
        broadcast_a: bool = False,
        broadcast_b: bool = False,
        strides: Sequence[SSAValue] = (),
    ):
        super().__init__(
            operands=[a, bm, c, batch, m, n, k, list(strides)],
            attributes={
                "trans_a": BoolAttr.from_bool(trans_a),
                "trans_b": BoolAttr.from_bool(trans_b),
                "broadcast_a": BoolAttr.from_bool(broadcast_a),
                "broadcast_b": BoolAttr.from_bool(broadcast_b),
            },
        )

    def shapes(self, m: T, n: T, k: T) -> tuple[tuple[T, T], tuple[T, T], tuple[T, T]]:
        """(rows, columns) of the matrices of ``a``, ``bm`` and ``c`` as stored, from m, n and k in any form
        (SSA values, Python ints, source text)."""
        a = (k, m) if self.trans_a.value.data else (m, k)
        b = (n, k) if self.trans_b.value.data else (k, n)
        return a, b, (m, n)

    def contiguous_strides(self, m: T, n: T, k: T, mul: Callable[[T, T], T], zero: T) -> tuple[T, ...]:
        """The six strides the op means when it states none, in the caller's arithmetic (``mul``, ``zero``): each
        operand's batch stride rows·columns (0 for a broadcast one) and row stride its columns."""
        out: list[T] = []
        broadcast = (self.broadcast_a.value.data, self.broadcast_b.value.data, False)
        for (rows, cols), shared in zip(self.shapes(m, n, k), broadcast, strict=True):
            out += [zero if shared else mul(rows, cols), cols]
        return tuple(out)

    def verify_(self) -> None:
        if len(self.strides) not in (0, 6):
            raise VerifyException(
                f"loop.gemm takes no strides or six (batch and row stride of a, bm and c), got {len(self.strides)}"
            )


@irdl_op_definition
class HostCallOp(IRDLOperation):
    """Run builtin ``fn`` on NumPy in the runtime: reads ``inputs``, fills ``outputs`` (allocated here)."""

    name = "loop.host_call"
    inputs = var_operand_def(MemRefType)
    fn = attr_def(StringAttr)
    params = opt_attr_def(DictionaryAttr)
    roles = opt_attr_def(ArrayAttr)
    outputs = var_result_def(MemRefType)
    assembly_format = "$fn `(` $inputs `)` attr-dict `:` functional-type($inputs, results)"


@irdl_op_definition
class WhileOp(IRDLOperation):
    """A do-while loop with carried scalars: run the body, then repeat while its first yielded value is true.

    The body block's arguments are the carried values (``inits`` on the
    first run); it ends with ``loop.yield`` of an ``i1`` condition followed
    by the next carried values. The results are the carried values yielded
    by the last run. Buffers are not carried: a loop updates buffers defined
    outside it (fixpoint iteration keeps its state that way).
    """

    name = "loop.while"
    inits = var_operand_def()
    body = region_def("single_block")
    results_ = var_result_def()
    assembly_format = (
        "(`iter_args` `(` $inits^ `:` type($inits) `)`)? attr-dict-with-keyword (`->` type($results_)^)? $body"
    )

    def __init__(self, inits: Sequence[SSAValue], body: Region):
        super().__init__(operands=[list(inits)], result_types=[[v.type for v in inits]], regions=[body])

    @staticmethod
    def make_body(inits: Sequence[SSAValue]) -> tuple[Region, Block]:
        block = Block(arg_types=[v.type for v in inits])
        return Region(block), block

    def verify_(self) -> None:
        want = [v.type for v in self.inits]
        if any(isinstance(t, MemRefType) for t in want):
            raise VerifyException("loop.while: buffers cannot be carried")
        block = self.body.block
        if [a.type for a in block.args] != want:
            raise VerifyException(f"loop.while: body arguments must be {want}")
        term = block.last_op
        if not isinstance(term, YieldOp) or [v.type for v in term.values] != [IntegerType(1), *want]:
            raise VerifyException(
                "loop.while: the body must end with loop.yield of an i1 condition and the carried values"
            )


def nest_depth(op: Operation, kinds: tuple[type[Operation], ...] = (ForOp, WhileOp)) -> int:
    """How many ops of ``kinds`` (by default every loop) nest at the deepest point of ``op``, itself included."""
    inner = max((nest_depth(x, kinds) for r in op.regions for b in r.blocks for x in b.ops), default=0)
    return inner + isinstance(op, kinds)


Loop = Dialect(
    "loop",
    [ArgOp, ResultOp, AllocOp, DimOp, LoadOp, StoreOp, YieldOp, ForOp, WhileOp, CheckOp, GemmOp, HostCallOp],
    [],
)
