"""Outlined loop nests and parallel regions: each top-level ``loop.for`` as its own llvm function.

Each top-level ``loop.for`` becomes a ``noinline internal`` function
``@fuse_nestK`` (:class:`Nest`), so LLVM optimises nests one at a time and
compile time grows linearly with the program. With ``threads`` > 1, a nest
whose outer loop is ``parallel`` with no carried values, or that folds every
carried value with one associative op (:func:`fold_kind`), also gets a chunk
function, and ``fuse_main`` runs it through ``fuse_parallel_for`` in fixed
blocks of at least ``CHUNK_WORK_MIN`` iterations (1 to ``CHUNKS_PER_THREAD``
per thread), which the threads claim as they go, when its work reaches
``parallel_min`` (one block below that), folding the blocks' partial results
in block order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, llvm
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FloatAttr, IntegerAttr, IntegerType, MemRefType, UnitAttr
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.ir import Attribute, Block, Operation, SSAValue

from fuse_mlir.dialects import loop
from fuse_mlir.dialects.llvmx import LOOP_DEPTH, mangle
from fuse_mlir.dialects.types import I32, I64, PTR
from fuse_mlir.passes.conversions.loop_to_llvm.builder import (
    Buf,
    FunctionBuilder,
    is_const,
    llvm_type,
)
from fuse_mlir.passes.conversions.loop_to_llvm.scalar import (
    FLOAT_BINOPS,
    FLOAT_INTRINSICS,
    INT_BINOPS,
    INT_MINMAX,
    by_name,
)
from fuse_mlir.passes.conversions.loop_to_llvm.streaming import streamed_stores
from fuse_mlir.targets import CHUNK_WORK_MIN, CHUNKS_PER_THREAD

ALIGN_STEP = 16
"""Chunks of a nest whose outer loop streams its stores start at multiples of this many iterations (a cache line
of 4-byte elements, two of 8-byte ones)."""

_FLOAT_BINOPS_BY_NAME = by_name(FLOAT_BINOPS)
_FLOAT_INTRINSICS_BY_NAME = by_name(FLOAT_INTRINSICS)
_INT_MINMAX_BY_NAME = by_name(INT_MINMAX)
_INT_BINOPS_BY_NAME = by_name(INT_BINOPS)

FLOAT_FOLDS = ("arith.addf", "arith.mulf")
_FOLDS: tuple[str, ...] = (
    *FLOAT_FOLDS,
    "arith.maximumf",
    "arith.minimumf",
    "arith.addi",
    "arith.muli",
    "arith.ori",
    "arith.andi",
)
_FOLDS += ("arith.xori", "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui")


def fold_identity(kind: str, t: Attribute) -> int | float:
    """The exact identity of the associative fold ``kind`` on type ``t`` (what a partial accumulator starts from)."""
    if kind == "arith.addf":
        return -0.0
    if kind == "arith.mulf":
        return 1.0
    if kind in ("arith.maximumf", "arith.minimumf"):
        return float("-inf") if kind == "arith.maximumf" else float("inf")
    assert isinstance(t, IntegerType)
    w = t.width.data
    if kind in ("arith.muli",):
        return 1
    if kind in ("arith.andi", "arith.minui"):
        return -1
    if kind == "arith.maxsi":
        return -(2 ** (w - 1))
    if kind == "arith.minsi":
        return 2 ** (w - 1) - 1
    return 0


def fold_kind(op: loop.ForOp, k: int) -> str | None:
    """The op that folds carried value ``k`` of ``op``, if the loop only ever combines it with that one
    associative op and values independent of it (through nested loops too); else None.

    Such a loop may run its iterations in chunks, each from the fold's identity, and combine the chunks'
    results in order afterwards (a reassociation of the same fold).
    """
    block = op.body.block
    acc = block.args[1 + k]
    term = block.last_op
    if not acc.has_one_use() or not isinstance(term, loop.YieldOp):
        return None
    return _fold_chain(term.values[k], acc, block, "") or None


def _fold_chain(cur: SSAValue, acc: SSAValue, block: Block, kind: str) -> str | None:
    if cur is acc:
        return kind
    owner = cur.owner
    if not cur.has_one_use() or not isinstance(owner, Operation) or owner.parent_block() is not block:
        return None
    if isinstance(owner, loop.ForOp):
        idx = next(k for k, r in enumerate(owner.results) if r is cur)
        inner = fold_kind(owner, idx)
        if inner is None or (kind and inner != kind):
            return None
        return _fold_chain(owner.inits[idx], acc, block, inner)
    if owner.name not in _FOLDS or (kind and owner.name != kind):
        return None
    for x in owner.operands:
        found = _fold_chain(x, acc, block, owner.name)
        if found is not None:
            return found
    return None


def _free_values(op: Operation) -> list[SSAValue]:
    """Values used inside ``op``'s region but defined outside it, in first-use order."""
    inside = {id(x) for x in op.walk()}
    seen: set[SSAValue] = set()
    out: list[SSAValue] = []
    for inner in op.walk():
        if inner is op:
            continue
        for x in inner.operands:
            owner = x.owner
            definer = owner.parent_op() if isinstance(owner, Block) else owner
            if definer is not None and id(definer) in inside:
                continue
            if x not in seen:
                seen.add(x)
                out.append(x)
    return out


def _trip_bound(parent: FunctionBuilder, o: loop.ForOp, free: Sequence[SSAValue]) -> SSAValue | None:
    """A value defined outside the nest that bounds inner loop ``o``'s trip count, for the nest's work
    estimate: ``n`` for a loop over [0, n), ``k`` for a tile over [s, min(s + k, e)) (``pipeline-rows``'
    blocks of rows, any strip-mined loop) or over [s, s + min(k, e - s)) (a transposing nest's tiles);
    None when no shape fits."""
    if o.lower in free and o.upper in free and is_const(parent.v(o.lower), 0):
        return o.upper
    up = o.upper.owner
    if isinstance(up, arith.MinSIOp):
        for side in up.operands:
            add = side.owner
            if isinstance(add, arith.AddiOp) and o.lower in add.operands:
                k = add.rhs if add.lhs is o.lower else add.lhs
                if k in free:
                    return k
    if isinstance(up, arith.AddiOp) and o.lower in up.operands:  # [s, s + min(k, n - s))
        low = up.rhs if up.lhs is o.lower else up.lhs
        if isinstance(low.owner, arith.MinSIOp):
            for k in low.owner.operands:
                if k in free:
                    return k
    return None


def _path_bounds(parent: FunctionBuilder, op: Operation, free: Sequence[SSAValue]) -> Counter[SSAValue]:
    """The trip bounds (:func:`_trip_bound`) of the loops inside ``op``, each as often as it occurs on one
    path from ``op`` to an innermost loop, at most: a tile's two loops of 8 count 8 twice, while sibling
    loops over the same columns (a row kernel's phases) count it once. The nest's work estimate is the
    outer trip count times their product."""
    best: Counter[SSAValue] = Counter()
    for x in (x for region in op.regions for block in region.blocks for x in block.ops):
        path: Counter[SSAValue] = Counter()
        bound = _trip_bound(parent, x, free) if isinstance(x, loop.ForOp) else None
        if bound is not None:
            path[parent.v(bound)] = 1
        path.update(_path_bounds(parent, x, free))  # outer loops' bounds first: a stable product order
        best |= path
    return best


def _const_op(v: SSAValue) -> llvm.ConstantOp | None:
    return v.owner if isinstance(v.owner, llvm.ConstantOp) else None


@dataclass
class Nest:
    """A top-level loop nest outlined as ``i32 @fuse_nestK(lo, hi, err, out, inits..., [rt], values...)``.

    The function runs the outermost loop over ``[lo, hi)`` with its carried
    values starting at ``inits``, stores their final values in the 8-byte slots
    of ``out``, and returns 0, or an error code after filling ``err``. Buffers
    come in as ``noalias`` pointers and the extents and scalars the nest reads
    as values; constants are rematerialised inside. ``folds`` is None for a
    nest that runs serially, else the fold of each carried value (empty for a
    parallel loop without any): such a nest may be split into chunks.
    """

    parent: FunctionBuilder
    op: loop.ForOp
    name: str
    passed: list[SSAValue]
    carried: list[Attribute]
    needs_rt: bool
    folds: list[str] | None
    work: list[SSAValue]

    @staticmethod
    def build(parent: FunctionBuilder, op: loop.ForOp) -> Nest:
        shared = parent.shared
        name = f"fuse_nest{sum(1 for f in shared.funcs if not f.sym_name.data.endswith('_chunk'))}"
        if any(isinstance(i.type, MemRefType) for i in op.inits):
            raise ValueError("lower-loop-to-llvm: loop.for cannot carry buffers")
        carried = [llvm_type(i.type) for i in op.inits]
        inner_ops = list(op.walk())
        needs_rt = any(isinstance(x, loop.AllocOp | loop.HostCallOp | loop.GemmOp) for x in inner_ops)
        free = _free_values(op)
        passed: list[SSAValue] = []
        known: set[SSAValue] = set()

        def need(v: SSAValue) -> None:
            if _const_op(v) is None and v not in known:
                known.add(v)
                passed.append(v)

        for x in free:
            if isinstance(x.type, MemRefType):
                b = parent.buf(x)
                need(b.ptr)
                for e in b.extents:
                    need(e)
            else:
                need(parent.v(x))
        step = parent.v(op.step)
        need(step)
        head: list[Attribute] = [I64, I64, PTR, PTR, *carried] + ([PTR] if needs_rt else [])
        types = head + [v.type for v in passed]
        child = type(parent)(shared, types, main=False)
        args = child.entry.args
        lo, hi, child.p_err, out = args[:4]
        inits = list(args[4 : 4 + len(carried)])
        if needs_rt:
            child.p_rt = args[4 + len(carried)]
        local_of = dict(zip(passed, args[len(head) :]))

        def local(v: SSAValue) -> SSAValue:
            c = _const_op(v)
            if c is None:
                return local_of[v]
            value = c.value
            assert isinstance(value, IntegerAttr | FloatAttr)
            return child.const(value.value.data, c.result.type)

        for x in free:
            if isinstance(x.type, MemRefType):
                b = parent.buf(x)
                child.buffers[x] = Buf(local(b.ptr), [local(e) for e in b.extents], b.elem)
            else:
                child.values[x] = local(parent.v(x))
        child.values[op.step] = local(step)
        results = child.counted_for(op, lo, hi, inits)
        for k, r in enumerate(results):
            child.store(r, child.slot(out, k))
        child.emit(llvm.ReturnOp(child.const(0, I32)))
        noalias = DictionaryAttr({"llvm.noalias": UnitAttr()})
        plain = DictionaryAttr({})
        buffer_ptrs = {parent.buf(x).ptr for x in free if isinstance(x.type, MemRefType)}
        attrs = [plain, plain, noalias, noalias] + [plain] * (len(head) - 4)
        attrs += [noalias if v in buffer_ptrs else plain for v in passed]
        func = child.finish(name, llvm.LLVMFunctionType(types, I32), "internal", ArrayAttr(attrs), inline=False)
        func.attributes[LOOP_DEPTH] = IntegerAttr(loop.nest_depth(op), 64)
        shared.funcs.append(func)

        folds: list[str] | None = None
        if shared.threads > 1 and not needs_rt and is_const(step, 1):
            kinds = [fold_kind(op, k) for k in range(len(carried))]
            stores = any(isinstance(x, loop.StoreOp) for x in inner_ops)
            if all(kind is not None for kind in kinds) and (op.parallel is not None or (kinds and not stores)):
                if not (shared.strict and any(kind in FLOAT_FOLDS for kind in kinds)):
                    folds = [kind for kind in kinds if kind is not None]
        work = list(_path_bounds(parent, op, free).elements()) if folds is not None else []
        return Nest(parent, op, name, passed, carried, needs_rt, folds, work)

    def call_serial(self, lower: SSAValue, upper: SSAValue, inits: Sequence[SSAValue]) -> list[SSAValue]:
        """Run the whole nest on this thread."""
        p = self.parent
        out = p.entry_alloca(I64, len(self.carried))
        args = [lower, upper, p.p_err, out, *inits] + ([p.p_rt] if self.needs_rt else []) + self.passed
        rc = p.call(self.name, args, I32)
        assert rc is not None
        p.check_rc(rc)
        return [p.load(p.slot(out, k), t) for k, t in enumerate(self.carried)]

    def call_parallel(self, lower: SSAValue, upper: SSAValue, inits: Sequence[SSAValue]) -> list[SSAValue]:
        """Split the nest into chunks of at least ``CHUNK_WORK_MIN`` iterations (one to ``CHUNKS_PER_THREAD``
        per thread) when there is enough work, else into one chunk.

        The threads claim the chunks as they go (a thread slowed by others on its core leaves its share to
        the rest). Chunk ``c`` of ``n`` runs iterations ``[lo + trip*c/n, lo + trip*(c+1)/n)``
        from the folds' identities; ``fuse_parallel_for`` reports the first
        failing chunk's error (in chunk order), and the partial results are
        folded in chunk order. With one chunk ``fuse_parallel_for`` just calls
        it: a small call costs a few stores and an indirect call, no thread.
        """
        p, shared = self.parent, self.parent.shared
        threads = shared.threads
        assert self.folds is not None
        trip = p.val(llvm.SubOp(upper, lower))
        work = trip
        for w in self.work:
            work = p.mul(work, w, nsw=False)
        enough = p.val(llvm.AndOp(p.icmp("sge", work, p.const(shared.parallel_min)), p.icmp("sgt", trip, p.const(1))))
        nacc = len(self.carried)
        part_off = 3 + len(self.passed)
        most = threads * CHUNKS_PER_THREAD
        env = p.entry_alloca(I64, part_off + most * nacc)
        # as many chunks as the work fills with CHUNK_WORK_MIN iterations each, from one per thread up to `most`
        by_work = p.val(llvm.SDivOp(work, p.const(CHUNK_WORK_MIN)))
        wanted = p.intrinsic("llvm.smax.i64", [by_work, p.const(threads)], I64, frozenset())
        capped = p.intrinsic("llvm.smin.i64", [wanted, p.const(most)], I64, frozenset())
        split = p.intrinsic("llvm.smin.i64", [trip, capped], I64, frozenset())
        chunks = p.val(llvm.SelectOp(enough, split, p.const(1)))
        for k, v in enumerate([lower, upper, chunks, *self.passed]):
            p.store(v, p.slot(env, k))
        chunk_fn = self.chunk_function(part_off)
        p.declare("fuse_parallel_for", [PTR, PTR, I64, I64, PTR], I32)
        fn = p.val(llvm.AddressOfOp(chunk_fn, PTR))
        rc = p.call("fuse_parallel_for", [fn, env, chunks, p.const(threads), p.p_err], I32)
        assert rc is not None
        p.check_rc(rc)

        def fold(c: SSAValue, accs: Sequence[SSAValue]) -> Sequence[SSAValue]:
            at = p.add(p.mul(c, p.const(nacc)), p.const(part_off))
            out = []
            for k, (kind, acc, t) in enumerate(zip(self.folds or [], accs, self.carried)):
                part = p.load(p.slot(env, p.add(at, p.const(k)) if k else at), t)
                out.append(_fold(p, kind, acc, part))
            return out

        return list(p.counted_loop(p.const(0), chunks, p.const(1), list(inits), fold)) if nacc else []

    def chunk_function(self, part_off: int) -> str:
        """``i32 @fuse_nestK_chunk(env, c, err)``: run chunk ``c`` with the values stored in ``env``."""
        shared = self.parent.shared
        t = FunctionBuilder(shared, [PTR, I64, PTR], main=False)
        env, c, err = t.entry.args
        lo0, hi0, n = (t.load(t.slot(env, k), I64) for k in range(3))
        trip = t.val(llvm.SubOp(hi0, lo0))
        # When the outer loop writes rows of streaming stores itself, chunks start at multiples of ALIGN_STEP
        # iterations, so each starts on a cache line when the row does (the last chunk ends at hi0).
        aligned = shared.streaming_min_bytes > 0 and bool(streamed_stores(self.op))
        mask = t.const(-ALIGN_STEP) if aligned else None
        lo_off = t.val(llvm.SDivOp(t.mul(trip, c), n))
        if mask is not None:
            lo_off = t.val(llvm.AndOp(lo_off, mask))
        lo = t.add(lo0, lo_off)
        hi_off = t.val(llvm.SDivOp(t.mul(trip, t.add(c, t.const(1))), n))
        if mask is not None:
            last = t.icmp("eq", t.add(c, t.const(1)), n)
            hi_off = t.val(llvm.SelectOp(last, trip, t.val(llvm.AndOp(hi_off, mask))))
        hi = t.add(lo0, hi_off)
        nacc = len(self.carried)
        out = t.slot(env, t.add(t.mul(c, t.const(nacc)), t.const(part_off))) if nacc else env
        assert self.folds is not None
        inits = [t.const(fold_identity(kind, ty), ty) for kind, ty in zip(self.folds, self.carried)]
        values = [t.load(t.slot(env, 3 + k), v.type) for k, v in enumerate(self.passed)]
        rc = t.call(self.name, [lo, hi, err, out, *inits, *values], I32)
        assert rc is not None
        t.emit(llvm.ReturnOp(rc))
        name = f"{self.name}_chunk"
        attrs = ArrayAttr([DictionaryAttr({"llvm.noalias": UnitAttr()}), DictionaryAttr({}), DictionaryAttr({})])
        shared.funcs.append(t.finish(name, llvm.LLVMFunctionType([PTR, I64, PTR], I32), "internal", attrs))
        return name


def _fold(p: FunctionBuilder, kind: str, a: SSAValue, b: SSAValue) -> SSAValue:
    """``a`` folded with ``b`` by the arith op ``kind`` (as lowered in a loop body)."""
    if kind in _FLOAT_BINOPS_BY_NAME:
        flags = frozenset() if p.strict else frozenset({FastMathFlag.REASSOC})
        return p.val(_FLOAT_BINOPS_BY_NAME[kind](a, b, llvm.FastMathAttr(flags)))
    if kind in _FLOAT_INTRINSICS_BY_NAME:
        return p.intrinsic(f"{_FLOAT_INTRINSICS_BY_NAME[kind]}.{mangle(a.type)}", [a, b], a.type, frozenset())
    if kind in _INT_MINMAX_BY_NAME:
        return p.intrinsic(f"{_INT_MINMAX_BY_NAME[kind]}.{mangle(a.type)}", [a, b], a.type, frozenset())
    return p.val(_INT_BINOPS_BY_NAME[kind](a, b))
