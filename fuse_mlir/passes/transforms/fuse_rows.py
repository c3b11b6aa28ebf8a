"""``fuse-rows``: fuse top-level parallel loop nests over the same rows into one nest with sequential phases.

Row kernels (softmax, logsumexp, layer norm, variance, log-softmax) lower to
one parallel loop nest per phase: the row max, then the exp-sum, then the
normalised output, each a pass over the whole matrix. When each phase of a
row needs only that row's results of the earlier phases, the nests become
one parallel loop over rows whose body runs the phases in order, so a row is
read from memory once and re-read from cache by the later phases.

Legality (per pair of nests, checked as a group grows): both outer loops are
``parallel`` over the same ``lower``/``upper``/``step`` values with no
carried values; neither allocates, calls BLAS or the host, or holds a
``loop.while``; every buffer that one nest writes and the other touches is
accessed only at rows ``[iv, ...]`` of the nest's own induction variable
(input buffers, which a donated output may alias, count as one buffer); at
most one nest of a group checks values at run time (so the first error
reported is the one the unfused order reports). Ops between the nests
(allocations, arguments, extents, scalar arithmetic) move before the first.

Cache choice: the fused nest pays off while a row's working set (the
row-sized buffers it touches) stays in cache. The pass emits the fused nest
over rows ``[lower, split)`` and keeps the original nests over
``[split, upper)`` (marked ``row_fallback``), where ``split`` is ``upper`` when the row's bytes are at
most ``row-cache-bytes`` and ``lower`` otherwise: one of the two runs empty.
``row-cache-bytes=-1`` emits only the fused nest; ``0`` turns the pass off.

Inside the fused body, a value stored to a one-dimensional per-row buffer at
``[iv]`` is forwarded to the later phases' loads of ``[iv]`` (the row max and
sum become registers); the store stays, so the buffer is still complete.

The phases stay two-pass (max, then exp-sum; mean, then squared deviations)
rather than one-pass (online softmax, Welford): the second pass reads the row
from cache, so a one-pass form would save no memory traffic, and the
two-pass forms give the reference interpreter's results with the same
rounding behaviour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp, UnitAttr
from xdsl.ir import Block, Operation, Region, SSAValue

from fuse_mlir.dialects import loop
from fuse_mlir.dialects.abi import entry_block, reuse_table
from fuse_mlir.dialects.elemwise import signless
from fuse_mlir.mathlib.ops import is_scalar_op
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass, option
from fuse_mlir.passes.conversions.loop_to_llvm.builder import byte_size
from fuse_mlir.passes.conversions.loop_to_llvm.parallel import fold_kind
from fuse_mlir.passes.registry import register_pass
from fuse_mlir.passes.statistics import count

ROW_CACHE_BYTES = 512 * 1024
"""Default largest per-row working set (bytes) for which the fused nest runs (about one core's L2)."""

FALLBACK = "row_fallback"
"""Attribute marking the unfused nests kept for rows over the cache threshold (they run no row otherwise)."""

_EXT = "inputs"
"""Alias class of the program's input buffers and of allocations a donated input may back."""

_BLOCKING = (loop.AllocOp, loop.HostCallOp, loop.GemmOp, loop.WhileOp, loop.ResultOp, loop.ArgOp)


@dataclass
class _Access:
    """How one nest uses one alias class of buffers."""

    written: bool = False
    row_local: bool = True


@dataclass
class _Nest:
    """A candidate top-level loop and its per-buffer-class accesses."""

    op: loop.ForOp
    access: dict[object, _Access]
    checks: bool
    inner: bool  # holds a nested loop (a per-row phase), not only scalar work
    wide: bool  # touches rows of buffers of rank >= 2 (a row's working set grows with the row)
    reduction: bool  # carries values, each folded by one associative op (a reduction over the rows)
    buffers: frozenset[SSAValue] = frozenset()  # every buffer the nest loads or stores


def _alias_key(buffer: SSAValue, shared: frozenset[int], alloc_pos: dict[SSAValue, int]) -> object:
    owner = buffer.owner
    if isinstance(owner, loop.ArgOp):
        return _EXT
    if isinstance(owner, loop.AllocOp) and alloc_pos.get(buffer, -1) in shared:
        return _EXT
    return buffer


def _summarise(op: Operation, shared: frozenset[int], alloc_pos: dict[SSAValue, int]) -> _Nest | None:
    """The nest's accesses, or None when it cannot join a row group."""
    if not isinstance(op, loop.ForOp):
        return None
    reduction = bool(op.inits)
    if reduction and not all(fold_kind(op, k) is not None for k in range(len(op.inits))):
        return None
    if not reduction and op.parallel is None:
        return None
    iv = op.body.block.args[0]
    access: dict[object, _Access] = {}
    checks = False
    inner = False
    wide = False
    buffers: set[SSAValue] = set()
    for x in op.walk():
        if x is op:
            continue
        if isinstance(x, _BLOCKING):
            return None
        if isinstance(x, loop.CheckOp):
            checks = True
        elif isinstance(x, loop.ForOp):
            inner = True
        elif isinstance(x, loop.LoadOp | loop.StoreOp):
            buffers.add(x.buffer)
            a = access.setdefault(_alias_key(x.buffer, shared, alloc_pos), _Access())
            if isinstance(x, loop.StoreOp):
                a.written = True
            if not x.positions or x.positions[0] is not iv:
                a.row_local = False
            elif len(x.positions) > 1:
                wide = True
    if reduction and any(a.written for a in access.values()):
        return None
    return _Nest(op, access, checks, inner, wide, reduction, frozenset(buffers))


def _compatible(group: Sequence[_Nest], new: _Nest) -> bool:
    """Whether ``new`` may run row by row after the group's nests (and shares a buffer with them)."""
    first = group[0].op
    if (new.op.lower, new.op.upper, new.op.step) != (first.lower, first.upper, first.step):
        return False
    if new.reduction and (new.wide or any(n.wide for n in group)):
        return False  # a reduction joins only one-dimensional streams: no row working set, no fallback needed
    if new.checks and any(n.checks for n in group):
        return False
    shares = False
    for key, a in new.access.items():
        for n in group:
            b = n.access.get(key)
            if b is None:
                continue
            shares = True
            if (a.written or b.written) and not (a.row_local and b.row_local):
                return False
    return shares


def _movable(op: Operation) -> bool:
    """Ops that may move before a group: allocations, arguments, extents and region-free pure scalar ops."""
    if isinstance(op, loop.AllocOp | loop.DimOp | loop.ArgOp):
        return True
    return op.name.startswith("arith.") and not op.regions


class _RowFuser:
    """One run over ``@fuse_main``'s body."""

    def __init__(self, block: Block, module: ModuleOp, row_cache_bytes: int, max_buffers: int):
        self.block = block
        self.row_cache_bytes = row_cache_bytes
        self.max_buffers = max_buffers
        self.shared = frozenset(k for k, _ in reuse_table(module))
        self.alloc_pos: dict[SSAValue, int] = {}
        for x in module.walk():
            if isinstance(x, loop.AllocOp):
                a = x.attributes.get("id")
                self.alloc_pos[x.result] = a.value.data if isinstance(a, IntegerAttr) else len(self.alloc_pos)
        self.fused = 0

    def joins(self, group: Sequence[_Nest], nest: _Nest) -> bool:
        """Whether ``nest`` may join ``group``: compatible, and the fused nest reads at most ``max_buffers``
        buffers (a nest of a thousand streams, a sum of a thousand inputs cut into kernels by ``fuse``'s own
        limit, compiled in time quadratic in its body, 13 s for 2,000 inputs, and gains nothing from rows)."""
        if not group or not _compatible(group, nest):
            return False
        return len(nest.buffers.union(*(n.buffers for n in group))) <= self.max_buffers

    def run(self) -> int:
        group: list[_Nest] = []
        between: list[Operation] = []
        for op in list(self.block.ops):
            nest = _summarise(op, self.shared, self.alloc_pos)
            if nest is not None and nest.reduction:
                # A reduction over the rows ends a group: later nests may need its whole result.
                if self.joins(group, nest):
                    self.move_before(between, group[0].op)
                    self.flush([*group, nest])
                else:
                    self.flush(group)
                group, between = [], []
            elif nest is not None:
                if self.joins(group, nest):
                    self.move_before(between, group[0].op)
                    between = []
                    group.append(nest)
                    continue
                self.flush(group)
                group, between = [nest], []
            elif group and _movable(op):
                between.append(op)
            else:
                self.flush(group)
                group, between = [], []
        self.flush(group)
        return self.fused

    def move_before(self, ops: Sequence[Operation], at: Operation) -> None:
        for m in ops:
            m.detach()
            self.block.insert_op_before(m, at)

    def flush(self, group: list[_Nest]) -> None:
        if len(group) < 2 or not any(n.inner or n.reduction for n in group):
            return
        first, last = group[0].op, group[-1].op
        reduction = group[-1].reduction
        split: SSAValue = first.upper
        if self.row_cache_bytes >= 0 and not reduction:
            split = self.split_point(group)
        inits = list(last.inits)
        body = Block(arg_types=[IndexType(), *(v.type for v in inits)])
        for n in group:
            src = n.op.body.block
            mapper: dict[SSAValue, SSAValue] = dict(zip(src.args, body.args))
            for x in src.ops:
                if not isinstance(x, loop.YieldOp) or (reduction and n.op is last):
                    body.add_op(x.clone(value_mapper=mapper))
        if not inits:
            body.add_op(loop.YieldOp())
        _forward_row_scalars(body)
        _reuse_phase_values(body)
        # Iterations stay independent: stores go to rows [iv], carried values only fold (lower-loop-to-llvm
        # splits such a nest into chunks and combines their partial results in order).
        fused = loop.ForOp(first.lower, split, first.step, inits, Region(body), parallel=True)
        self.block.insert_op_before(fused, first)
        if reduction:
            for old, new in zip(last.results, fused.results):
                old.replace_all_uses_with(new)
            count("fuse-rows", "reductions-joined")
        if self.row_cache_bytes < 0 or reduction:
            for n in group:
                n.op.detach()
                n.op.erase()
        else:
            for n in group:
                n.op.operands[0] = split
                n.op.attributes[FALLBACK] = UnitAttr()
        self.fused += len(group)
        count("fuse-rows", "nests-fused")

    def split_point(self, group: Sequence[_Nest]) -> SSAValue:
        """``upper`` when a row's working set fits ``row-cache-bytes``, else ``lower`` (ops inserted before the group)."""
        first = group[0].op
        at = first
        ops: list[Operation] = []

        def emit(op: Operation) -> SSAValue:
            ops.append(op)
            return op.results[0]

        def const(v: int) -> SSAValue:
            return emit(arith.ConstantOp(IntegerAttr(v, IndexType())))

        total = const(0)
        seen: set[SSAValue] = set()
        for n in group:
            iv = n.op.body.block.args[0]
            for x in n.op.walk():
                if not isinstance(x, loop.LoadOp | loop.StoreOp) or x.buffer in seen:
                    continue
                t = x.buffer.type
                assert isinstance(t, MemRefType)
                shape = t.get_shape()
                if len(shape) < 2 or x.positions[0] is not iv or not _defined_before(x.buffer, first):
                    continue
                seen.add(x.buffer)
                size = const(byte_size(t.element_type))
                for axis in range(1, len(shape)):
                    e = const(shape[axis]) if shape[axis] >= 0 else emit(loop.DimOp(x.buffer, axis))
                    size = emit(arith.MuliOp(size, e))
                total = emit(arith.AddiOp(total, size))
        fits = emit(arith.CmpiOp(total, const(self.row_cache_bytes), "ule"))
        split = emit(arith.SelectOp(fits, first.upper, first.lower))
        for op in ops:
            self.block.insert_op_before(op, at)
        return split


def _defined_before(v: SSAValue, op: Operation) -> bool:
    """Whether ``v`` is available before the top-level op ``op`` (defined outside its region)."""
    owner = v.owner
    return isinstance(owner, Operation) and owner.parent_block() is op.parent_block()


def _forward_row_scalars(body: Block) -> None:
    """Replace loads of ``W[iv]`` (one-dimensional W) by the value the body stored there earlier."""
    iv = body.args[0]
    known: dict[SSAValue, SSAValue] = {}
    for op in list(body.ops):
        if isinstance(op, loop.StoreOp):
            if len(op.positions) == 1 and op.positions[0] is iv and isinstance(op.buffer.owner, loop.AllocOp):
                known[op.buffer] = op.value
            else:
                known.pop(op.buffer, None)
            continue
        stored = {x.buffer for x in op.walk() if isinstance(x, loop.StoreOp)}
        for x in list(op.walk()):
            if (
                isinstance(x, loop.LoadOp)
                and x.buffer in known
                and x.buffer not in stored
                and len(x.positions) == 1
                and x.positions[0] is iv
            ):
                x.result.replace_all_uses_with(known[x.buffer])
                x.detach()
                x.erase()
                count("fuse-rows", "loads-forwarded")
        for b in stored:
            known.pop(b, None)


REUSE_MIN_OPS = 8
"""A later phase reloads a value an earlier phase computed (instead of recomputing it) from this many ops up."""


def _keys(loop_op: loop.ForOp, table: dict[tuple, int]) -> dict[SSAValue, int] | None:
    """Structural keys of the values computed in an innermost loop's body (its own iteration as ``iv``).

    Values that depend on the loop's carried values get no key. None when the body holds regions. Keys are
    interned in ``table`` (shared by the loops compared): a value's key is its op and its operands' key
    numbers, so equal structures get equal numbers and a key stays one flat tuple however deep the expression
    is. (Keys nesting their operands' keys were hashed as whole expression trees, which grow exponentially
    with shared subexpressions: ``log(exp(tanh(layernorm(X))))``'s expanded math took minutes.)
    """
    block = loop_op.body.block

    def intern(parts: tuple) -> int:
        return table.setdefault(parts, len(table))

    keys: dict[SSAValue, int] = {block.args[0]: intern(("iv",))}
    carried = set(block.args[1:])
    for op in block.ops:
        if op.regions:
            return None
        if isinstance(op, loop.YieldOp | loop.StoreOp | loop.CheckOp) or len(op.results) != 1:
            continue
        if not (is_scalar_op(op) or isinstance(op, loop.LoadOp)):
            continue
        parts: list[object] = [op.name, str(sorted((k, str(v)) for k, v in op.properties.items()))]
        ok = True
        for x in op.operands:
            if x in carried:
                ok = False
                break
            owner = x.owner
            inside = isinstance(owner, Operation) and owner.parent_block() is block
            k = keys.get(x) if inside or x is block.args[0] else intern(("ext", id(x)))
            if k is None:
                ok = False
                break
            parts.append(k)
        if ok:
            keys[op.results[0]] = intern(tuple(parts))
    return keys


def _size(v: SSAValue, block: Block) -> int:
    """How many ops of ``block`` compute ``v`` (its slice within the body)."""
    seen: set[Operation] = set()
    work = [v]
    while work:
        x = work.pop()
        owner = x.owner
        if isinstance(owner, Operation) and owner.parent_block() is block and owner not in seen:
            seen.add(owner)
            work.extend(owner.operands)
    return len(seen)


def _reuse_phase_values(body: Block) -> None:
    """A map phase that recomputes what an earlier reduction phase computed (softmax's ``exp(x - max)``) reloads it.

    The reduction phase also stores the value into the row of the map phase's output buffer at the same
    position; the map phase loads it there before overwriting that element (each element is read, then
    written, by the same iteration), so the expensive part runs once per element. Both phases must run over
    the same range, the buffer must be a fresh allocation touched nowhere else in the row's body, and the
    value must have the buffer's element type (``int + softmax(...)`` stores a float64 sum of a float32
    ``exp``: that buffer cannot hold the ``exp`` without rounding it, nor be stored into as float32).
    """
    iv = body.args[0]
    phases = [op for op in body.ops if isinstance(op, loop.ForOp)]
    touched: dict[SSAValue, int] = {}
    for x in body.walk():
        if isinstance(x, loop.LoadOp | loop.StoreOp):
            touched[x.buffer] = touched.get(x.buffer, 0) + 1
    for mi, m in enumerate(phases):
        if m.inits:
            continue
        stores = [x for x in m.body.block.ops if isinstance(x, loop.StoreOp)]
        if len(stores) != 1:
            continue
        st = stores[0]
        y = st.buffer
        jm = m.body.block.args[0]
        if (
            not isinstance(y.owner, loop.AllocOp)
            or touched.get(y) != 1
            or len(st.positions) != 2
            or st.positions[0] is not iv
            or st.positions[1] is not jm
        ):
            continue
        table: dict[tuple, int] = {}
        m_keys = _keys(m, table)
        if m_keys is None:
            continue
        y_type = y.type
        assert isinstance(y_type, MemRefType)
        element = signless(y_type.element_type)
        for r in reversed(phases[:mi]):
            if not r.inits or (r.lower, r.upper, r.step) != (m.lower, m.upper, m.step):
                continue
            r_keys = _keys(r, table)
            if r_keys is None:
                continue
            by_key = {k: v for v, k in r_keys.items() if v is not r.body.block.args[0]}
            best: tuple[int, SSAValue, SSAValue] | None = None
            mblock = m.body.block
            eligible = {v: by_key[k] for v, k in m_keys.items() if k in by_key and v is not jm and v.type == element}
            for v, src in eligible.items():
                # Only a match no other match uses can be the largest (a user's slice holds v's and itself).
                if any(u in eligible for use in v.uses for u in use.operation.results):
                    continue
                n = _size(v, mblock)
                if n >= REUSE_MIN_OPS and (best is None or n > best[0]):
                    best = (n, v, src)
            if best is None:
                continue
            _, mv, rv = best
            rblock = r.body.block
            term = rblock.last_op
            assert term is not None
            rblock.insert_op_before(loop.StoreOp(rv, y, [iv, rblock.args[0]]), term)
            load = loop.LoadOp(y, [iv, jm])
            first = mblock.first_op
            assert first is not None
            mblock.insert_op_before(load, first)
            mv.replace_all_uses_with(load.result)
            _erase_dead(mblock)
            touched[y] = 2
            count("fuse-rows", "values-reused")
            break


def _erase_dead(block: Block) -> None:
    """Erase the block's pure ops (scalar ops, loads) whose results nothing uses, last first."""
    for op in reversed(list(block.ops)):
        pure = is_scalar_op(op) or isinstance(op, loop.LoadOp)
        if pure and all(not r.uses for r in op.results):
            op.detach()
            op.erase()


@register_pass
@dataclass(frozen=True)
class FuseRows(FusePass):
    """Fuse parallel loop nests over the same rows into one nest with sequential per-row phases (cache-aware)."""

    name = "fuse-rows"
    level: ClassVar[str] = "loop"

    row_cache_bytes: int = option(
        ROW_CACHE_BYTES,
        help="largest per-row working set (bytes) run fused; larger rows run unfused (-1: always fused, 0: off)",
    )
    max_buffers: int = option(32, help="the most buffers one fused nest may load or store (fuse's max-operands)")

    example: ClassVar[str | None] = """\
builtin.module {
  func.func @fuse_main() {
    %0 = arith.constant 0 : index
    %1 = arith.constant 1 : index
    %2 = arith.constant 0.000000e+00 : f64
    %3 = loop.arg 0 : i64 "X" : memref<?x?xf64>
    %4 = loop.dim %3, 0 : i64 : memref<?x?xf64>
    %5 = loop.dim %3, 1 : i64 : memref<?x?xf64>
    %6 = loop.alloc(%4) : memref<?xf64>
    loop.for %0 to %4 step %1 attributes {parallel} {
    ^bb0(%7: index):
      %8 = loop.for %0 to %5 step %1 iter_args(%2 : f64) -> f64 {
      ^bb1(%9: index, %10: f64):
        %11 = loop.load %3[%7, %9] : memref<?x?xf64> -> f64
        %12 = arith.addf %10, %11 : f64
        loop.yield %12 : f64
      }
      loop.store %8, %6[%7] : f64, memref<?xf64>
      loop.yield
    }
    %13 = loop.alloc(%4, %5) : memref<?x?xf64>
    loop.for %0 to %4 step %1 attributes {parallel} {
    ^bb2(%14: index):
      loop.for %0 to %5 step %1 attributes {parallel} {
      ^bb3(%15: index):
        %16 = loop.load %3[%14, %15] : memref<?x?xf64> -> f64
        %17 = loop.load %6[%14] : memref<?xf64> -> f64
        %18 = arith.divf %16, %17 : f64
        loop.store %18, %13[%14, %15] : f64, memref<?x?xf64>
        loop.yield
      }
      loop.yield
    }
    loop.result %13, 0 : i64 "Y" : memref<?x?xf64>
    func.return
  }
}
"""

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        if self.row_cache_bytes == 0:
            return False
        block = entry_block(module)
        if block is None:
            return False
        return _RowFuser(block, module, self.row_cache_bytes, self.max_buffers).run() > 0
