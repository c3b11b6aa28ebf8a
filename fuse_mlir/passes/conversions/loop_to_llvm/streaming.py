"""Streaming (non-temporal) stores: which marked ``loop.store`` ops may stream, and the loop versioning that does.

``streaming-stores`` marks a store ``nontemporal`` when its nest never reads
the stored lines back. Lowered with ``streaming-min-bytes`` > 0, an innermost
loop holding such stores runs one of two versions, chosen each time the loop
starts. If every streamed buffer holds at least ``streaming-min-bytes`` bytes
and the first element each stream writes is 64-byte aligned, the loop runs in
tiles of :data:`TILE_BYTES`: each tile's iterations run as written, except that
a streamed store writes into a 64-byte aligned stack tile (in L1) instead of
its buffer; then the tile is copied out with whole-line vector stores marked
``!nontemporal`` (``vmovntpd``/``vmovntps``: no read-for-ownership), and a
``fence seq_cst`` follows the last tile (streaming stores are weakly ordered;
the fence publishes them before the loop's results are used or another thread
reads the buffer). One ordinary loop then runs the iterations after the last
whole tile, or all of them when the test fails, so the body is emitted twice.
The value written is the same either way.

Why a stack tile and not LLVM's own vectoriser: LLVM widens a non-temporal
scalar store only if the scalar claims the vector's alignment (64 bytes), and
that claim is false for every element but one in eight; LLVM acts on it (the
SLP vectoriser merged elements 1..4 of an unrolled row into one ``vmovntpd``
at offset 8, a fault). Every alignment this lowering states is true: scalar
stores into the tile claim their element size, the tile's vector loads and the
streaming stores 64 bytes at 64-byte aligned addresses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import llvm
from xdsl.dialects.builtin import MemRefType, VectorType
from xdsl.ir import SSAValue

from fuse_mlir.dialects import loop
from fuse_mlir.dialects.llvmx import FenceOp
from fuse_mlir.dialects.types import I64
from fuse_mlir.ir import defined_outside
from fuse_mlir.mathlib.ops import is_scalar_op
from fuse_mlir.passes.conversions.loop_to_llvm.builder import FunctionBuilder, byte_size
from fuse_mlir.passes.scalar import constant_of

NONTEMPORAL = "nontemporal"
"""The unit attribute of a marked ``loop.store``."""

LINE = 64
"""Bytes per cache line: a streamed row starts on a line, and a streaming vector store writes whole lines."""

TILE_BYTES = 1024
"""Bytes of one streamed store's stack tile: 16 lines, so the copy-out loop is short and the tile stays in L1."""


def element_bytes(t: MemRefType) -> int | None:
    """Bytes per element of a float or integer buffer (None for element types the lowering does not stream)."""
    try:
        return byte_size(t.element_type)
    except ValueError:
        return None


def versionable(inner: loop.ForOp) -> bool:
    """Whether the llvm lowering may emit ``inner`` twice (streaming and ordinary stores): a loop of step 1
    whose body only computes, loads, stores and checks (nothing it would allocate, call or number twice)."""
    if constant_of(inner.step) != 1:
        return False
    return all(
        is_scalar_op(op) or isinstance(op, loop.LoadOp | loop.StoreOp | loop.CheckOp | loop.DimOp | loop.YieldOp)
        for op in inner.body.block.ops
    )


def streamable(store: loop.StoreOp) -> bool:
    """Whether a streaming store may write ``store``: it sits directly in a :func:`versionable` loop, its last
    position is that loop's induction variable and the others are defined outside the loop (consecutive
    iterations write consecutive elements of one row, whose start is known before the loop), and its element
    is 4 or 8 bytes wide (whole vectors of it fill whole lines)."""
    inner = store.parent_op()
    t = store.buffer.type
    if not isinstance(inner, loop.ForOp) or not isinstance(t, MemRefType) or not store.positions:
        return False
    if element_bytes(t) not in (4, 8):
        return False
    *outer, last = store.positions
    if last is not inner.body.block.args[0] or not versionable(inner):
        return False
    return all(defined_outside(p, inner) for p in outer)


def streamed_stores(op: loop.ForOp) -> list[loop.StoreOp]:
    """The marked stores directly in ``op``'s body that a streaming store may write."""
    return [s for s in op.body.block.ops if isinstance(s, loop.StoreOp) and s.nontemporal is not None and streamable(s)]


def stream_loop(
    fb: FunctionBuilder,
    stores: Sequence[loop.StoreOp],
    lower: SSAValue,
    upper: SSAValue,
    inits: Sequence[SSAValue],
    emit_loop: Callable[[SSAValue, SSAValue, Sequence[SSAValue]], Sequence[SSAValue]],
) -> Sequence[SSAValue]:
    """Emit the loop in its streaming and its ordinary version behind the run-time test; the joined results.

    ``emit_loop(lo, hi, inits)`` emits the loop over ``[lo, hi)`` at the current insertion point and returns its
    results; while ``fb.streaming`` maps a store to its (stack tile, tile's first iteration), the lowering
    writes that store into the tile.
    """
    widths = [byte_size(_memref(s).element_type) for s in stores]  # 4 or 8: streamable() checked
    tile = TILE_BYTES // max(widths)  # iterations per tile: every stream's tile is a whole number of lines
    ok: SSAValue | None = None
    rows: list[SSAValue] = []
    for s, width in zip(stores, widths):
        b = fb.buf(s.buffer)
        size = fb.mul(fb.numel(b.extents), fb.const(width), nsw=False)
        big = fb.icmp("uge", size, fb.const(fb.shared.streaming_min_bytes))
        first = fb.element_ptr(b, [*(fb.v(p) for p in s.positions[:-1]), lower])
        rows.append(first)
        addr = fb.val(llvm.PtrToIntOp(first, I64))
        aligned = fb.icmp("eq", fb.val(llvm.AndOp(addr, fb.const(LINE - 1))), fb.const(0))
        both = fb.val(llvm.AndOp(big, aligned))
        ok = both if ok is None else fb.val(llvm.AndOp(ok, both))
    assert ok is not None
    streaming, plain = fb.new_block(), fb.new_block()
    fb.emit(llvm.CondBrOp(ok, streaming, [], plain, []))

    fb.start(streaming)
    trip = fb.intrinsic("llvm.smax.i64", [fb.val(llvm.SubOp(upper, lower)), fb.const(0)], I64, frozenset())
    whole = fb.val(llvm.AndOp(trip, fb.const(-tile)))  # tile is a power of two; an empty range has no tile
    tiles_end = fb.add(lower, whole)
    scratch = [fb.entry_alloca(fb.buf(s.buffer).elem, tile, align=LINE) for s in stores]

    def one_tile(base: SSAValue, carried: Sequence[SSAValue]) -> Sequence[SSAValue]:
        fb.streaming = {s: (t, base) for s, t in zip(stores, scratch)}
        try:
            nexts = emit_loop(base, fb.add(base, fb.const(tile)), carried)
        finally:
            fb.streaming = {}
        offset = fb.val(llvm.SubOp(base, lower))
        for s, t, row, width in zip(stores, scratch, rows, widths):
            elem = fb.buf(s.buffer).elem
            lanes = LINE // width
            vec = VectorType(elem, [lanes])
            dst = fb.gep(row, offset, elem)
            for k in range(tile // lanes):
                at = k * lanes
                src_k = fb.gep(t, at, elem) if at else t
                dst_k = fb.gep(dst, at, elem) if at else dst
                v = fb.val(llvm.LoadOp(src_k, vec, alignment=LINE))
                fb.emit(llvm.StoreOp(v, dst_k, alignment=LINE, nontemporal=True))
        return nexts

    tiled = fb.counted_loop(lower, tiles_end, fb.const(tile), list(inits), one_tile)
    fb.emit(FenceOp("seq_cst"))
    # One ordinary loop serves both versions (the iterations after the last tile, or all of them): the body
    # is emitted twice, not three times, which keeps LLVM's work per kernel down.
    rest = fb.new_block([I64, *(v.type for v in inits)])
    fb.emit(llvm.BrOp(rest, tiles_end, *tiled))
    fb.start(plain)
    fb.emit(llvm.BrOp(rest, lower, *inits))
    fb.start(rest)
    start, *carried = rest.args
    return list(emit_loop(start, upper, carried))


def _memref(s: loop.StoreOp) -> MemRefType:
    t = s.buffer.type
    assert isinstance(t, MemRefType)
    return t
