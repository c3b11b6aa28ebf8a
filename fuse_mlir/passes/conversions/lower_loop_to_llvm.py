"""Lower the loop level to xDSL's llvm dialect, implementing the native ABI (docs/native-abi.md).

``func.func @fuse_main()`` becomes ``llvm.func @fuse_main(args, arg_shapes,
results, result_shapes, err, rt) -> i32``. A buffer becomes a data pointer and
one ``i64`` per extent (static extents are constants); loads and stores
linearise their positions row-major and index with ``getelementptr inbounds``.
``loop.for`` becomes a header block whose arguments (phis) are the induction
variable and the carried values, a body, and an exit block receiving the
results. ``loop.check`` branches (``llvm.expect``-weighted) to a cold block that
fills ``err`` and returns the code. ``loop.alloc`` calls ``fuse_alloc(rt, nbytes, id)``,
``loop.gemm`` calls ``fuse_dgemm``/``fuse_sgemm`` (Fortran ABI, column-major:
row-major ``C = A·B`` is ``Cᵀ = Bᵀ·Aᵀ``) once per batch entry, and
``loop.host_call`` calls ``fuse_host_call`` with pointer/extent arrays on the
stack. ``arith``/``math`` become llvm arithmetic, casts and type-mangled
intrinsic calls (``llvm.exp.f64``, ``llvm.maximum.f32``, ...) through the op
table of ``loop_to_llvm/scalar.py``; the block, loop and guard building is
``loop_to_llvm/builder.py``.

Each top-level ``loop.for`` becomes its own ``noinline internal`` function
``@fuse_nestK`` (``loop_to_llvm/parallel.py``: :class:`Nest`), so LLVM
optimises nests one at a time and compile time grows linearly with the
program. With ``threads`` > 1, a nest whose outer loop is ``parallel`` with no
carried values, or that folds every carried value with one associative op,
also gets a chunk function, and ``fuse_main`` runs it through
``fuse_parallel_for`` in fixed blocks (1 to ``CHUNKS_PER_THREAD`` per
thread, claimed by the threads as they go) when its work reaches
``parallel_min`` (one block below that), folding the blocks' partial results
in block order.

Fast-math: float adds/subs/muls on the path from a loop-carried accumulator to
its ``loop.yield`` get ``reassoc`` (what lets LLVM vectorise the reduction);
where such an add or sub takes a product computed only for it (``acc + d*d``,
``acc + a*b``), both also get ``contract``, so LLVM may fuse them into one fma
(:func:`contracted_ops`: one rounding instead of two, and one instruction on
the accumulator's chain instead of two: row variance of 4096 x 4096 float32 on
one core, 2.46-2.59 -> 2.08-2.21 ms per call, level with Numba's fastmath
kernel, which already used fma). The fused form differs from the
two-rounding one by at most half an ulp of the product, inside the
reassociation the reduction already allows. Fast-math flags already on
``arith``/``math`` ops are kept. With ``strict=true`` no fast-math flag is
emitted at all.

Beyond the documented ABI: a failing ``fuse_alloc`` (NULL) returns
:data:`ERR_ALLOC` with ``err = [ERR_ALLOC, nbytes, alloc_id]``, a buffer whose byte size would pass
2^63 - 1 returns :data:`ERR_SIZE` with ``err = [ERR_SIZE, alloc_id, 0]`` before anything is allocated
(:meth:`_Lowering.checked_size`), and a failing
``fuse_host_call`` (non-zero status) returns :data:`ERR_HOST_CALL` with
``err = [ERR_HOST_CALL, call_id, status]``; host calls are numbered in walk
order of the ``loop.host_call`` ops (the index into ``fuse.host_calls``). An
argument slot that no ``loop.arg`` reads contributes no extents to
``arg_shapes`` (see :func:`abi_layout`, shared with the runtime).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    Float32Type,
    Float64Type,
    MemRefType,
    ModuleOp,
    UnitAttr,
)
from xdsl.dialects.func import FuncOp as FuncFuncOp
from xdsl.ir import Attribute, Block, Operation, SSAValue

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.dialects import loop
from fuse_mlir.dialects.abi import (
    ENTRY,
    ERR_ALLOC,
    ERR_HOST_CALL,
    ERR_SIZE,
    abi_layout,
    alloc_id,
    host_call_id,
    reuse_table,
)
from fuse_mlir.dialects.types import I8, I32, I64, PTR
from fuse_mlir.mathlib.emitter import Emitter
from fuse_mlir.mathlib.ops import LdexpOp, is_scalar_op
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass, option
from fuse_mlir.passes.conversions.loop_to_llvm.builder import (
    EXTREMAL,
    Buf,
    FunctionBuilder,
    Shared,
    byte_size,
    llvm_type,
)
from fuse_mlir.passes.conversions.loop_to_llvm.parallel import Nest
from fuse_mlir.passes.conversions.loop_to_llvm.scalar import lower_scalar_op
from fuse_mlir.passes.conversions.loop_to_llvm.streaming import stream_loop, streamed_stores
from fuse_mlir.passes.registry import register_pass
from fuse_mlir.targets import PARALLEL_MIN

__all__ = [
    "LowerLoopToLLVM",
    "lower_module",
]

# --------------------------------------------------------------------------- reduction analysis

_ADDITIVE = ("arith.addf", "arith.subf")
_MULTIPLICATIVE = ("arith.mulf",)
# A chain's kind: the ops it may use. Max and min chains each use their one op.
_KINDS = {name: kind for kind in (_ADDITIVE, _MULTIPLICATIVE) for name in kind} | {name: (name,) for name in EXTREMAL}


def reduction_ops(root: Operation) -> set[Operation]:
    """Float adds/subs, muls, maxima or minima on a path from a ``loop.for`` carried value to its ``loop.yield``
    (same kind all along)."""
    found: set[Operation] = set()
    for op in root.walk():
        if not isinstance(op, loop.ForOp) or not op.inits:
            continue
        block = op.body.block
        term = block.last_op
        assert isinstance(term, loop.YieldOp)
        for acc, v in zip(block.args[1:], term.values):
            owner = v.owner
            if isinstance(owner, Operation) and owner.name in _KINDS:
                _chain(v, acc, block, _KINDS[owner.name], found)
    return found


def contracted_ops(reductions: set[Operation]) -> set[Operation]:
    """The additive reduction ops among ``reductions`` with a float product operand that nothing else uses,
    and those products: each pair may become one fma (``contract``), where reassociation is already allowed."""
    found: set[Operation] = set()
    for op in reductions:
        if op.name not in _ADDITIVE:
            continue
        for x in op.operands:
            product = x.owner
            if (
                isinstance(product, Operation)
                and product.name == "arith.mulf"
                and product not in reductions
                and x.has_one_use()
                and product.parent_block() is op.parent_block()
            ):
                found.update((product, op))
    return found


def _chain(v: SSAValue, acc: SSAValue, block: Block, kind: tuple[str, ...], found: set[Operation]) -> bool:
    """Whether ``v`` is computed from ``acc`` through ``kind`` ops (and selects) of ``block``; marks those ops.

    Iterative, each value visited once: a chain is as long as the sum it accumulates (``X + X + ...``, up to
    the parser's MAX_OPERATORS terms), and its terms may share operands, so a recursive walk ran out of
    Python frames and could revisit shared values exponentially often."""
    hits: dict[SSAValue, bool] = {}
    stack: list[tuple[SSAValue, bool]] = [(v, False)]
    while stack:
        w, expanded = stack.pop()
        if w in hits:
            continue
        if w is acc:
            hits[w] = True
            continue
        owner = w.owner
        if not isinstance(owner, Operation) or owner.parent_block() is not block:
            hits[w] = False
            continue
        if owner.name in kind:
            operands = owner.operands[:1] if owner.name == "arith.subf" else owner.operands
        elif owner.name == "arith.select":
            operands = owner.operands[1:]
        else:
            hits[w] = False
            continue
        if not expanded:
            stack.append((w, True))
            stack.extend((o, False) for o in operands if o not in hits)
            continue
        hit = any(hits[o] for o in operands)
        if hit and owner.name in kind:
            found.add(owner)
        hits[w] = hit
    return hits[v]


# --------------------------------------------------------------------------- lowering


class _Lowering(FunctionBuilder):
    """Builds one llvm function: ``@fuse_main`` from the loop-level ``func.func @fuse_main``, or an outlined nest."""

    def __init__(self, shared: Shared, arg_types: Sequence[Attribute] = (PTR,) * 6, main: bool = True):
        super().__init__(shared, arg_types, main)
        self.top: Block | None = None  # the loop-level function body, whose loop nests are outlined

    def extents(self, t: MemRefType, dynamic: Callable[[int], SSAValue]) -> list[SSAValue]:
        """One i64 per dimension: a constant for a static extent, else ``dynamic(axis)``."""
        return [self.const(d) if d >= 0 else dynamic(k) for k, d in enumerate(t.get_shape())]

    # ---- driver

    def run(self, func: FuncFuncOp) -> list[Operation]:
        self.top = func.body.block
        self.lower_block(func.body.block)
        arg_attrs = ArrayAttr([DictionaryAttr({"llvm.noalias": UnitAttr()})] * 5 + [DictionaryAttr({})])
        main = self.finish(ENTRY, llvm.LLVMFunctionType([PTR] * 6, I32), "external", arg_attrs)
        return [*(self.decls[k] for k in sorted(self.decls)), *self.shared.funcs, main]

    def lower_block(self, block: Block) -> None:
        for op in block.ops:
            self.lower_op(op)

    def lower_op(self, op: Operation) -> None:
        name = op.name
        if isinstance(op, loop.ArgOp):
            self.lower_arg(op)
        elif isinstance(op, loop.ResultOp):
            self.lower_result(op)
        elif isinstance(op, loop.AllocOp):
            self.lower_alloc(op)
        elif isinstance(op, loop.DimOp):
            self.values[op.result] = self.buf(op.buffer).extents[op.axis.value.data]
        elif isinstance(op, loop.LoadOp):
            b = self.buf(op.buffer)
            ptr = self.element_ptr(b, [self.v(p) for p in op.positions])
            self.values[op.result] = self.load(ptr, b.elem)
        elif isinstance(op, loop.StoreOp):
            b = self.buf(op.buffer)
            tile = self.streaming.get(op)
            if tile is None:
                ptr = self.element_ptr(b, [self.v(p) for p in op.positions])
            else:  # into the stack tile of a streamed loop (loop_to_llvm/streaming.py)
                ptr = self.gep(tile[0], self.val(llvm.SubOp(self.v(op.positions[-1]), tile[1])), b.elem)
            self.store(self.v(op.value), ptr)
        elif isinstance(op, loop.ForOp):
            if op.parent_block() is self.top:
                self.outline(op)
            else:
                self.lower_for(op)
        elif isinstance(op, loop.WhileOp):
            self.lower_while(op)
        elif isinstance(op, loop.CheckOp):
            self.guard(self.v(op.cond), op.code.value.data, self.v(op.a), self.v(op.b))
        elif isinstance(op, loop.GemmOp):
            self.lower_gemm(op)
        elif isinstance(op, loop.HostCallOp):
            self.lower_host_call(op)
        elif name == "func.return":
            self.emit(llvm.ReturnOp(self.const(0, I32)))
        elif is_scalar_op(op):
            self.lower_scalar(op)
        else:
            raise ValueError(f"lower-loop-to-llvm: cannot lower {name}")

    # ---- loop ops

    def lower_arg(self, op: loop.ArgOp) -> None:
        slot = op.slot.value.data
        t = op.result.type
        assert isinstance(t, MemRefType)
        ptr = self.load(self.gep(self.p_args, slot, PTR) if slot else self.p_args, PTR)
        off = self.layout.arg_offsets[slot]

        def extent(k: int) -> SSAValue:
            at = off + k
            return self.load(self.gep(self.p_arg_shapes, at, I64) if at else self.p_arg_shapes, I64)

        self.buffers[op.result] = Buf(ptr, self.extents(t, extent), llvm_type(t.element_type))

    def lower_result(self, op: loop.ResultOp) -> None:
        slot = op.slot.value.data
        b = self.buf(op.buffer)
        self.store(b.ptr, self.gep(self.p_results, slot, PTR) if slot else self.p_results)
        off = self.layout.result_offsets[slot]
        for k, e in enumerate(b.extents):
            at = off + k
            self.store(e, self.gep(self.p_result_shapes, at, I64) if at else self.p_result_shapes)

    def lower_alloc(self, op: loop.AllocOp) -> None:
        t = op.result.type
        assert isinstance(t, MemRefType)
        dyn = [self.v(e) for e in op.extents]
        extents = [self.const(d) if d >= 0 else dyn[k] for k, d in enumerate(t.get_shape())]
        aid = alloc_id(op, self.shared.allocs)
        self.shared.allocs += 1
        nbytes = self.checked_size(extents, byte_size(t.element_type), aid)
        # An alloc that may be bound to a donated input (fuse.reuse) can alias it: no noalias on that call.
        fn = "fuse_alloc_shared" if aid in self.shared.shared_allocs else "fuse_alloc"
        self.declare(fn, [PTR, I64, I64], PTR, noalias_result=fn == "fuse_alloc")
        ptr = self.call(fn, [self.p_rt, nbytes, self.const(aid)], PTR)
        assert ptr is not None
        as_int = self.val(llvm.PtrToIntOp(ptr, I64))
        self.guard(self.icmp("ne", as_int, self.const(0)), ERR_ALLOC, nbytes, self.const(aid))
        self.buffers[op.result] = Buf(ptr, extents, llvm_type(t.element_type))

    def checked_size(self, extents: Sequence[SSAValue], elem_bytes: int, aid: int) -> SSAValue:
        """``elem_bytes`` times the extents' product, failing with :data:`ERR_SIZE` where it would pass 2^63 - 1.

        Each factor is tested before it is multiplied in (``n <= MAX / e``, one
        unsigned division per dynamic extent, folded for static ones), so the
        product never wraps: a wrapped size would allocate a short buffer that
        the kernel then writes past. Extents are never negative.
        """
        n = self.const(elem_bytes)
        limit = self.const((1 << 63) - 1)
        one = self.const(1)
        for e in extents:
            nonzero = self.val(llvm.SelectOp(self.icmp("eq", e, self.const(0)), one, e))
            room = self.val(llvm.UDivOp(limit, nonzero))
            self.guard(self.icmp("ule", n, room), ERR_SIZE, self.const(aid), self.const(0))
            n = self.mul(n, e, nsw=False)
        return n

    def lower_for(self, op: loop.ForOp) -> None:
        for old, new in zip(op.results, self.counted_for(op, self.v(op.lower), self.v(op.upper), None)):
            self.values[old] = new

    def counted_for(
        self, op: loop.ForOp, lower: SSAValue, upper: SSAValue, inits: Sequence[SSAValue] | None
    ) -> Sequence[SSAValue]:
        """``op`` from ``lower`` to ``upper`` (its carried values start at ``inits``, else its own); its results."""
        if inits is None:
            inits = [self.v(i) for i in op.inits]
        if any(isinstance(i.type, MemRefType) for i in op.inits):
            raise ValueError("lower-loop-to-llvm: loop.for cannot carry buffers")
        block = op.body.block

        def body(iv: SSAValue, carried: Sequence[SSAValue]) -> Sequence[SSAValue]:
            self.values[block.args[0]] = iv
            for old, new in zip(block.args[1:], carried):
                self.values[old] = new
            for inner in block.ops:
                if isinstance(inner, loop.YieldOp):
                    return [self.v(x) for x in inner.values]
                self.lower_op(inner)
            raise ValueError("lower-loop-to-llvm: loop.for body without loop.yield")

        step = self.v(op.step)
        stores = streamed_stores(op) if self.shared.streaming_min_bytes > 0 else []
        if not stores:
            return self.counted_loop(lower, upper, step, inits, body)
        return stream_loop(
            self, stores, lower, upper, inits, lambda lo, hi, i: self.counted_loop(lo, hi, step, i, body)
        )

    # ---- outlined loop nests

    def outline(self, op: loop.ForOp) -> None:
        """Lower a top-level loop nest as its own function (and, when it may be split, as a parallel region)."""
        nest = Nest.build(self, op)
        inits = [self.v(i) for i in op.inits]
        lower, upper = self.v(op.lower), self.v(op.upper)
        if nest.folds is None:
            results = nest.call_serial(lower, upper, inits)
        else:
            results = nest.call_parallel(lower, upper, inits)
        for old, new in zip(op.results, results):
            self.values[old] = new

    def lower_while(self, op: loop.WhileOp) -> None:
        """``loop.while`` → a body block whose arguments (phis) are the carried values, branching back or out."""
        inits = [self.v(i) for i in op.inits]
        types = [v.type for v in inits]
        block = op.body.block
        head = self.new_block(types)
        exit_ = self.new_block(types)
        self.emit(llvm.BrOp(head, *inits))
        self.start(head)
        for arg, phi in zip(block.args, head.args):
            self.values[arg] = phi
        for inner in block.ops:
            if isinstance(inner, loop.YieldOp):
                cond, *nexts = (self.v(x) for x in inner.values)
                self.emit(llvm.CondBrOp(cond, head, nexts, exit_, nexts))
                break
            self.lower_op(inner)
        else:
            raise ValueError("lower-loop-to-llvm: loop.while body without loop.yield")
        self.start(exit_)
        for old, new in zip(op.results, exit_.args):
            self.values[old] = new

    def lower_gemm(self, op: loop.GemmOp) -> None:
        a, b, c = self.buf(op.a), self.buf(op.bm), self.buf(op.c)
        elem = c.elem
        if isinstance(elem, Float64Type):
            fn = "fuse_dgemm"
        elif isinstance(elem, Float32Type):
            fn = "fuse_sgemm"
        else:
            raise ValueError(f"lower-loop-to-llvm: loop.gemm needs f64 or f32 buffers, got {elem}")
        self.declare(fn, [PTR] * 13, None)
        batch, m, n, k = (self.v(x) for x in (op.batch, op.m, op.n, op.k))
        trans_a, trans_b = op.trans_a.value.data, op.trans_b.value.data
        one = self.const(1)

        def at_least_1(x: SSAValue) -> SSAValue:
            return self.intrinsic("llvm.smax.i64", [x, one], I64, frozenset())

        def int_slot(x: SSAValue) -> SSAValue:
            p = self.entry_alloca(I32, 1)
            self.store(self.val(llvm.TruncOp(x, I32)), p)
            return p

        def char_slot(ch: str) -> SSAValue:
            p = self.entry_alloca(I8, 1)
            self.store(self.const(ord(ch), I8), p)
            return p

        def scalar_slot(x: float) -> SSAValue:
            p = self.entry_alloca(elem, 1)
            self.store(self.const(x, elem), p)
            return p

        # Column-major Cᵀ (n×m) = op(B)ᵀ (n×k) · op(A)ᵀ (k×m); BLAS's "A" is our B and vice versa.
        p_ta, p_tb = char_slot("T" if trans_b else "N"), char_slot("T" if trans_a else "N")
        p_m, p_n, p_k = int_slot(n), int_slot(m), int_slot(k)
        zero = self.const(0)
        strides = [self.v(x) for x in op.strides] or op.contiguous_strides(m, n, k, self.mul, zero)
        stride_a, row_a, stride_b, row_b, stride_c, row_c = strides
        p_lda, p_ldb, p_ldc = int_slot(at_least_1(row_b)), int_slot(at_least_1(row_a)), int_slot(at_least_1(row_c))
        p_alpha, p_beta = scalar_slot(1.0), scalar_slot(0.0)

        def body(i: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
            pa = self.gep(a.ptr, self.mul(i, stride_a), elem)
            pb = self.gep(b.ptr, self.mul(i, stride_b), elem)
            pc = self.gep(c.ptr, self.mul(i, stride_c), elem)
            self.call(fn, [p_ta, p_tb, p_m, p_n, p_k, p_alpha, pb, p_lda, pa, p_ldb, p_beta, pc, p_ldc], None)
            return []

        self.counted_loop(zero, batch, one, [], body)

    def lower_host_call(self, op: loop.HostCallOp) -> None:
        call_id = host_call_id(op, self.shared.host_calls)
        self.shared.host_calls += 1
        ins = [self.buf(x) for x in op.inputs]
        out_types = [r.type for r in op.outputs]
        assert all(isinstance(t, MemRefType) for t in out_types)
        n_in_ext = sum(len(b.extents) for b in ins)
        n_out_ext = sum(len(t.get_shape()) for t in out_types)
        in_ptrs = self.entry_alloca(PTR, len(ins))
        in_shapes = self.entry_alloca(I64, n_in_ext)
        out_ptrs = self.entry_alloca(PTR, len(out_types))
        out_shapes = self.entry_alloca(I64, n_out_ext)
        at = 0
        for k, b in enumerate(ins):
            self.store(b.ptr, self.gep(in_ptrs, k, PTR) if k else in_ptrs)
            for e in b.extents:
                self.store(e, self.gep(in_shapes, at, I64) if at else in_shapes)
                at += 1
        self.declare("fuse_host_call", [PTR, I64, PTR, PTR, PTR, PTR], I32)
        status = self.call(
            "fuse_host_call", [self.p_rt, self.const(call_id), in_ptrs, in_shapes, out_ptrs, out_shapes], I32
        )
        assert status is not None
        wide = self.val(llvm.SExtOp(status, I64))
        self.guard(self.icmp("eq", wide, self.const(0)), ERR_HOST_CALL, self.const(call_id), wide)
        at = 0
        for k, (res, t) in enumerate(zip(op.outputs, out_types)):
            assert isinstance(t, MemRefType)
            ptr = self.load(self.gep(out_ptrs, k, PTR) if k else out_ptrs, PTR)
            extents = []
            for d in t.get_shape():
                extents.append(
                    self.const(d) if d >= 0 else self.load(self.gep(out_shapes, at, I64) if at else out_shapes, I64)
                )
                at += 1
            self.buffers[res] = Buf(ptr, extents, llvm_type(t.element_type))

    # ---- scalar ops

    def lower_scalar(self, op: Operation) -> None:
        """An arith/math op, through the op table (:data:`~.loop_to_llvm.scalar.LOWERINGS`)."""
        args = [self.v(x) for x in op.operands]
        rt = llvm_type(op.results[0].type) if op.results else None
        self.values[op.results[0]] = lower_scalar_op(self, op, args, rt)


def _entry_func(module: ModuleOp) -> FuncFuncOp:
    for op in module.body.block.ops:
        if isinstance(op, FuncFuncOp) and op.sym_name.data == ENTRY:
            return op
    raise FuseError(f"lower-loop-to-llvm: the module has no func.func @{ENTRY} (expected the loop level)")


def lower_module(
    module: ModuleOp,
    strict: bool = False,
    threads: int = 1,
    parallel_min: int = PARALLEL_MIN,
    native_ldexp: bool = False,
    streaming_min_bytes: int = 0,
) -> None:
    """Replace the loop-level ``fuse_main`` of ``module`` (in place) by its llvm-dialect form and declarations.

    Each top-level loop nest becomes its own internal function; with
    ``threads`` > 1 the parallel ones (and full reductions by one associative
    op) become regions split over that many threads when their work reaches
    ``parallel_min`` iterations. Without ``native_ldexp`` each ``mathx.ldexp``
    is first rewritten into its portable arith form (the host has no vector ldexp). With
    ``streaming_min_bytes`` > 0, a ``nontemporal`` store into a buffer of at least that many bytes streams
    past the caches where its row starts on a cache line (``loop_to_llvm/streaming.py``).
    """
    func = _entry_func(module)
    if func.function_type.inputs.data or func.function_type.outputs.data:
        raise ValueError(f"lower-loop-to-llvm: func.func @{ENTRY} must take and return nothing")
    if not native_ldexp:
        for ldexp in [o for o in func.walk() if isinstance(o, LdexpOp)]:
            em = Emitter(single=isinstance(ldexp.result.type, Float32Type))
            em.replace(ldexp, em.ldexp_halves(ldexp.x, ldexp.n))
    reductions = reduction_ops(func)
    shared = Shared(
        abi_layout(module),
        strict,
        reductions,
        threads,
        parallel_min,
        shared_allocs=frozenset(k for k, _ in reuse_table(module)),
        streaming_min_bytes=streaming_min_bytes,
        contracted=contracted_ops(reductions),
    )
    new_ops = _Lowering(shared).run(func)
    block = module.body.block
    for old in list(block.ops):
        old.detach()
        old.erase(safe_erase=False)
    for op in new_ops:
        block.add_op(op)


@register_pass
@dataclass(frozen=True)
class LowerLoopToLLVM(FusePass):
    """Lower the loop level to the llvm dialect: ``llvm.func @fuse_main`` implementing the native ABI.

    Buffers become pointers plus extents, loops become blocks with phis,
    checks become branches to error returns, ``loop.gemm`` calls BLAS and
    ``loop.host_call`` calls back into the runtime; float adds and muls that
    update a loop-carried accumulator get ``reassoc`` so LLVM can vectorise
    the reduction, an accumulating add with the product it alone uses
    gets ``contract`` so they may become one fma, and a max/min accumulator
    gets ``nsz`` too (as NumPy's max, it need not order -0 below +0; NaN
    still propagates; half the x86 instructions) (none with ``strict``).
    Each top-level loop nest becomes its
    own function; with ``threads`` > 1, parallel nests and full reductions by
    one associative op run through ``fuse_parallel_for`` when their work
    reaches ``parallel-min`` (docs/threads.md).
    """

    name = "lower-loop-to-llvm"
    level: ClassVar[str] = "loop"
    example: ClassVar[str | None] = """\
builtin.module attributes {fuse.args = [#fuse.arg<"x", input>], fuse.results = [#fuse.result<"s", export>]} {
  func.func @fuse_main() {
    %x = loop.arg 0 : i64 "x" : memref<?xf64>
    %n = loop.dim %x, 0 : i64 : memref<?xf64>
    %s = loop.alloc() : memref<f64>
    %zero = arith.constant 0.000000e+00 : f64
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %sum = loop.for %c0 to %n step %c1 iter_args(%zero : f64) -> f64 {
    ^bb0(%i: index, %acc: f64):
      %v = loop.load %x[%i] : memref<?xf64> -> f64
      %next = arith.addf %acc, %v : f64
      loop.yield %next : f64
    }
    loop.store %sum, %s[] : f64, memref<f64>
    loop.result %s, 0 : i64 "s" : memref<f64>
    func.return
  }
}
"""
    strict: bool = option(False, help="emit no fast-math flags at all (not even reassoc or contract on reductions)")
    threads: int = option(1, help="split parallel loop nests over this many threads (1: none)")
    parallel_min: int = option(PARALLEL_MIN, help="least work (loop iterations) for which a nest is split")
    native_ldexp: bool = option(
        False,
        help="lower mathx.ldexp to llvm.ldexp (one vscalefpd on AVX-512; the JIT sets it on such hosts) instead of "
        "two multiplies by exponent-built powers of two",
    )
    streaming_min_bytes: int = option(
        0,
        help="least buffer size (bytes) for which a store marked nontemporal (streaming-stores) streams past the "
        "caches, checked at run time with the row's 64-byte alignment (0: never; the JIT sets the host's "
        "last-level cache size on x86-64)",
    )

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        lower_module(
            module,
            strict=self.strict,
            threads=self.threads,
            parallel_min=self.parallel_min,
            native_ldexp=self.native_ldexp,
            streaming_min_bytes=self.streaming_min_bytes,
        )
        return True
