"""Lower elemwise to loop: tensor kernels become loop nests over buffers (docs/native-abi.md is the contract).

The module's flat list of ``te``/``ew`` ops becomes one ``func.func @fuse_main()``
built op by op in a single walk (generic bodies are cloned through a value
map, never rewritten in place), plus the module attributes the runtime reads:
``fuse.args``, ``fuse.results``, ``fuse.errors`` and ``fuse.host_calls``.

- ``te.input`` / ``te.source`` / ``te.constant`` → ``loop.arg`` slots in order
  of appearance (constants are slots too: their value rides in ``fuse.args``).
- ``te.dim`` → ``loop.dim``; ``te.slice_len`` → index arithmetic (Python's
  slice-length rule with negative indices and clamping, via ``arith.select``);
  ``te.check_dim`` → ``arith.cmpi eq`` + ``loop.check``.
- ``ew.generic`` → ``loop.alloc`` + a loop nest; see :meth:`EwToLoop.nest` for
  the loop order and where accumulators live.
- ``ew.contract`` → ``loop.gemm`` when it is a (batched) matrix product after
  transposing operands and merging adjacent dims, else a generic-like nest.
- ``ew.scatter_add`` → a zero-filled ``loop.alloc`` and a nest of checked
  read-add-writes (see :meth:`EwToLoop.lower_scatter_add` for its parallel loop).
- ``ew.host_call`` → ``loop.host_call`` with an ``id`` into ``fuse.host_calls``.
- ``te.export`` / ``te.sink`` → ``loop.result``: every exported value first (in
  order), then every sink value. ``fuse.results`` entries are ``[name,
  "export"]`` and ``[path, "sink", value_name, loc, sink_number]`` (the values
  of one ``te.sink`` share its number; several make an ``.npz`` dict).

Buffers keep the tensors' element types (the ABI's dtypes, unsigned included)
except booleans: an ``i1`` tensor becomes an ``i8`` memref (0/1), converted
with ``cmpi ne 0`` on load and ``extui`` on store. Scalars are signless (as in
ew bodies): a load from a ``ui8`` buffer yields ``i8``, and unsigned max/min
reductions use ``maxui``/``minui``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, NamedTuple

from xdsl.context import Context
from xdsl.dialects import arith, func, math
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DictionaryAttr,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import loop
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.abi import ArgEntry, ErrorEntry, HostCallEntry, LoopAbi, ResultEntry
from fuse_mlir.dialects.elemwise import is_float, is_unsigned, signless
from fuse_mlir.dialects.locations import loc_text, set_location, source_loc
from fuse_mlir.dialects.types import I1, I8, I64, INDEX
from fuse_mlir.gemm import gemm_plan
from fuse_mlir.passes.registry import register_pass

Body = Callable[[dict[int, SSAValue]], list[SSAValue]]  # one scalar per result
"""Emits one iteration's scalar at the current insertion point, given the induction variable of each dim."""


# --------------------------------------------------------------------------
# Types and constants shared with the runtime
# --------------------------------------------------------------------------


def storage_type(elem: Attribute) -> Attribute:
    """The element type a buffer holds: booleans (``i1``) are stored as ``i8`` 0/1 (the ABI)."""
    return I8 if elem == I1 else elem


def memref_of(t: Attribute) -> MemRefType:
    """The buffer type of a tensor type (same shape, static extents kept)."""
    assert isinstance(t, TensorType)
    return MemRefType(storage_type(t.element_type), [n if n >= 0 else DYNAMIC_INDEX for n in t.get_shape()])


SCATTER_CHUNK = 128
"""Bytes of a result row one thread of a parallel ``ew.scatter_add`` owns (two cache lines)."""


def elem_bytes(t: Attribute) -> int:
    """The size in bytes of a scalar type's elements (``i1`` counts as one byte)."""
    width = getattr(t, "width", None)
    bits = width.data if width is not None else getattr(t, "bitwidth", 64)
    return max(1, int(bits) // 8)


# --------------------------------------------------------------------------
# Loop orders
# --------------------------------------------------------------------------


def outer_reduction_order(maps: Sequence[Sequence[int]], res_dims: Sequence[int], red_dims: Sequence[int]) -> bool:
    """Whether to run the reduction loops outside the result's contiguous dim (see :meth:`EwToLoop.nest`).

    True when there is a reduction and a parallel dim, no mapped input of
    the highest rank is contiguous along a reduction dim, and one is
    contiguous along the result's last dim: the column-sum shape, where the
    register-accumulator order would read the big inputs with a stride in its
    innermost loop (a vector beside the matrix, as in ``W[i,j] x[i]``, does not
    decide the order: it is read once either way).
    """
    if not red_dims or not res_dims:
        return False
    top = max((len(m) for m in maps), default=0)
    lasts = [m[-1] for m in maps if len(m) == top and top]
    if any(d in red_dims for d in lasts):
        return False
    return res_dims[-1] in lasts


Bounds = Callable[[], tuple[SSAValue | None, SSAValue]]
"""A loop's bounds: (lower, None for 0; upper), emitted when called, where the loop begins."""


class Loop(NamedTuple):
    """One loop of :meth:`EwToLoop.parallel_loops`: ``ivs[key]`` holds ``value(iv)`` of its index ``iv``
    (``iv`` itself when ``value`` is None), emitted at the top of the loop's body."""

    key: int
    bounds: Bounds
    value: Callable[[SSAValue], SSAValue] | None = None


def whole(key: int, upper: SSAValue, value: Callable[[SSAValue], SSAValue] | None = None) -> Loop:
    """The loop over ``[0, upper)`` that puts ``value(iv)`` (or ``iv``) in ``ivs[key]``."""
    return Loop(key, lambda: (None, upper), value)


TRANSPOSE_TILE = 8
"""Elements per side of the tiles a transposing nest runs in (:func:`transpose_tile_dim`). An 8 x 8 tile reads
8 rows of the source and writes 8 of the result, a cache line each for float64, and LLVM unrolls its loops
completely. Measured on the 2-core AVX-512 VM (``Y[j, i] = X[i, j]`` and copies before batched GEMMs,
float64 / float32, against the untiled nest): 4096 x 4096 65 -> 30 / 64 -> 20 ms, 1000 x 1000 0.62 -> 0.63 /
0.49 -> 0.34 ms, [128, 128, 32] -> [32, 128, 128] 0.31 -> 0.15 / 0.27 -> 0.16 ms. 16 and 32 were slower
on the 1000 x 1000 case (1.2-1.5 ms: the loops were no longer unrolled and ran scalar), 32 faster only on
4096 x 4096 float64 (20 ms)."""


def transpose_tile_dim(maps: Sequence[Sequence[int]], res_dims: Sequence[int]) -> int | None:
    """The result dim to tile together with the result's last dim in a nest without reductions, or None.

    A nest whose result is contiguous along one dim and whose largest input
    is contiguous along another (``Y[j, i] = X[i, j]``, a permuting copy
    before a BLAS call) reads that input with a stride in its innermost loop:
    each element on its own cache line, each of a large input's rows on its
    own page. Run in square tiles of both dims (:meth:`EwToLoop.tiled`), the
    lines a tile reads are reused from L1 by the next iterations instead.
    The input must read the result's last dim too, else it is a broadcast and
    read once anyway.
    """
    if len(res_dims) < 2:
        return None
    last = res_dims[-1]
    top = max((len(m) for m in maps), default=0)
    for m in maps:
        if len(m) == top and top >= 2 and m[-1] != last and m[-1] in res_dims and last in m:
            return m[-1]
    return None


# --------------------------------------------------------------------------
# The lowering
# --------------------------------------------------------------------------


class EwToLoop:
    """Builds ``@fuse_main`` and the module attributes from one ew-level module; one instance per run."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.top = Block()  # the function body
        self.cur = self.top  # where emit() appends
        self.const_ops: list[Operation] = []  # prepended to the function body: they dominate every use
        self.consts: dict[tuple[Attribute, str], SSAValue] = {}
        self.dims: dict[tuple[SSAValue, int], SSAValue] = {}
        self.vmap: dict[SSAValue, SSAValue] = {}
        self.args: list[ArgEntry] = []
        self.exports: list[ResultEntry] = []
        self.sinks: list[ResultEntry] = []
        self.errors: list[ErrorEntry] = []
        self.host_calls: list[HostCallEntry] = []
        self.n_exports = sum(len(o.values) for o in module.body.block.ops if isinstance(o, te.ExportOp))
        self.n_sinks = 0
        self.n_consts = 0
        self.in_while = False  # inside a loop.while body: allocations and invariant index math go to the top

    # -- plumbing ----------------------------------------------------------------

    def emit(self, op: Operation) -> Operation:
        self.cur.add_op(op)
        return op

    def val(self, op: Operation) -> SSAValue:
        """Emit a one-result op and return its result."""
        return self.emit(op).results[0]

    def const(self, value: int | float, t: Attribute) -> SSAValue:
        """A constant of type ``t``, created once at the top of the function."""
        key = (t, float(value).hex() if is_float(t) else str(int(value)))
        v = self.consts.get(key)
        if v is None:
            if is_float(t):
                op: Operation = arith.ConstantOp(FloatAttr(float(value), t))
            else:
                op = arith.ConstantOp(IntegerAttr(int(value), t))
            self.const_ops.append(op)
            v = self.consts[key] = op.results[0]
        return v

    def index(self, value: int) -> SSAValue:
        return self.const(value, INDEX)

    def at_top(self, v: SSAValue) -> bool:
        """Whether ``v`` is defined in the function body itself (so it dominates a ``loop.while``)."""
        owner = v.owner
        return isinstance(owner, Operation) and (owner.parent is self.top or owner in self.const_ops)

    def emit_hoisted(self, op: Operation) -> Operation:
        """Emit ``op`` in the function body when inside a ``loop.while`` and its operands allow, else here.

        Allocations hoisted this way are reused by every iteration instead of
        growing the run's memory; index arithmetic is hoisted so that they can be.
        """
        if self.in_while and all(self.at_top(o) for o in op.operands):
            self.top.add_op(op)
            return op
        return self.emit(op)

    def alloc(self, extents: Sequence[SSAValue], t: MemRefType) -> SSAValue:
        """A new buffer (hoisted out of a ``loop.while`` when its extents are known there)."""
        return self.emit_hoisted(loop.AllocOp(extents, t)).results[0]

    def error(self, message: str, loc: str) -> int:
        """A new error code for ``fuse.errors``."""
        self.errors.append(ErrorEntry(message, loc))
        return len(self.errors)

    def mapped(self, v: SSAValue) -> SSAValue:
        try:
            return self.vmap[v]
        except KeyError:
            raise FuseError(f"lower-ew-to-loop: a value of type {v.type} is used before it is lowered") from None

    def buffer_dim(self, buf: SSAValue, axis: int) -> SSAValue:
        """``loop.dim`` of a buffer, emitted once, at the end of the block that defines the buffer.

        That is the function body for every buffer but those a ``loop.while``
        body computes (a host call's result in a fixpoint group: its extents are
        known only once the call has run), whose extents are read in that body.
        Appending to the defining block is right even while a loop nest is being
        built: the nest's outermost loop is appended only once its body is done.
        """
        key = (buf, axis)
        v = self.dims.get(key)
        if v is None:
            op = loop.DimOp(buf, axis)
            owner = buf.owner
            block = owner if isinstance(owner, Block) else owner.parent_block()
            (block if block is not None else self.top).add_op(op)
            v = self.dims[key] = op.results[0]
        return v

    def load(self, buf: SSAValue, pos: Sequence[SSAValue], want: Attribute) -> SSAValue:
        """Read an element as the scalar type ``want``: signless from an unsigned buffer, ``i1`` from ``i8``."""
        t = buf.type
        assert isinstance(t, MemRefType)
        if is_unsigned(t.element_type):
            v = self.val(loop.LoadOp.create(operands=[buf, *pos], result_types=[signless(t.element_type)]))
        else:
            v = self.val(loop.LoadOp(buf, pos))
        if want == I1 and v.type == I8:
            v = self.val(arith.CmpiOp(v, self.const(0, I8), "ne"))
        return v

    def store(self, v: SSAValue, buf: SSAValue, pos: Sequence[SSAValue]) -> None:
        t = buf.type
        assert isinstance(t, MemRefType)
        if v.type == I1 and t.element_type == I8:
            v = self.val(arith.ExtUIOp(v, I8))
        self.emit(loop.StoreOp(v, buf, pos))

    def loop_for(
        self,
        upper: SSAValue,
        inits: Sequence[SSAValue],
        parallel: bool,
        body: Callable[[SSAValue, list[SSAValue]], Sequence[SSAValue]],
        lower: SSAValue | None = None,
    ) -> loop.ForOp:
        """``for iv in [lower, upper)`` (``lower`` 0 by default) with carried ``inits``; ``body(iv, carried)``
        returns the next carried values."""
        region, block = loop.ForOp.make_body(inits)
        saved, self.cur = self.cur, block
        try:
            nxt = list(body(block.args[0], list(block.args[1:])))
            block.add_op(loop.YieldOp(nxt))
        finally:
            self.cur = saved
        op = loop.ForOp(self.index(0) if lower is None else lower, upper, self.index(1), inits, region, parallel)
        self.emit(op)
        return op

    def product(self, values: Sequence[SSAValue]) -> SSAValue:
        acc: SSAValue | None = None
        for v in values:
            acc = v if acc is None else self.val(arith.MuliOp(acc, v))
        return acc if acc is not None else self.index(1)

    # -- scalar helpers ------------------------------------------------------------

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.val(arith.SelectOp(cond, a, b))

    def smin(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.select(self.val(arith.CmpiOp(a, b, "slt")), a, b)

    def smax(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.select(self.val(arith.CmpiOp(a, b, "sgt")), a, b)

    def identity(self, kind: str, t: Attribute, unsigned: bool) -> SSAValue:
        """The start value of a reduction accumulator of (signless) type ``t``."""
        if kind in ("sum", "any"):
            return self.const(0, t)
        if kind == "prod":
            return self.const(1, t)
        if kind not in ("max", "min"):
            raise FuseError(f"lower-ew-to-loop: unknown reduction kind {kind!r}")
        if is_float(t):
            return self.const(float("-inf") if kind == "max" else float("inf"), t)
        assert isinstance(t, IntegerType)
        w = t.width.data
        if unsigned:
            return self.const(0 if kind == "max" else -1, t)  # -1 is all ones: the largest unsigned value
        if w == 1:
            return self.const(0 if kind == "max" else 1, t)
        return self.const(-(2 ** (w - 1)) if kind == "max" else 2 ** (w - 1) - 1, t)

    def combine(self, kind: str, acc: SSAValue, v: SSAValue, unsigned: bool) -> SSAValue:
        """``acc`` combined with one more value (max/min of floats propagate NaN; ``unsigned`` picks maxui/minui)."""
        t = acc.type
        f = is_float(t)
        if v.type == I1 and t == I8:
            v = self.val(arith.ExtUIOp(v, I8))
        if kind == "sum":
            return self.val(arith.AddfOp(acc, v) if f else arith.AddiOp(acc, v))
        if kind == "prod":
            return self.val(arith.MulfOp(acc, v) if f else arith.MuliOp(acc, v))
        if kind == "max":
            if f:
                return self.val(arith.MaximumfOp(acc, v))
            return self.val(arith.MaxUIOp(acc, v) if unsigned else arith.MaxSIOp(acc, v))
        if kind == "min":
            if f:
                return self.val(arith.MinimumfOp(acc, v))
            return self.val(arith.MinUIOp(acc, v) if unsigned else arith.MinSIOp(acc, v))
        if kind == "any":
            if t == I1:
                return self.val(arith.OrIOp(acc, v))
            zero = self.const(0, v.type)
            nz = self.val(arith.CmpfOp(v, zero, "une") if is_float(v.type) else arith.CmpiOp(v, zero, "ne"))
            if f:
                return self.select(nz, self.const(1, t), acc)
            return self.val(arith.OrIOp(acc, self.val(arith.ExtUIOp(nz, t))))
        raise FuseError(f"lower-ew-to-loop: unknown reduction kind {kind!r}")

    # -- loop nests ----------------------------------------------------------------

    def nest(
        self,
        extents: Sequence[SSAValue],
        res_dims: Sequence[int],
        red_dims: Sequence[int],
        kinds: Sequence[str],
        result_types: Sequence[MemRefType],
        maps: Sequence[Sequence[int]],
        body: Body,
        may_reorder: bool = True,
        reuse: Sequence[SSAValue | None] = (),
    ) -> list[SSAValue]:
        """Allocate the result and emit the loop nest computing it; ``body`` is emitted exactly once.

        Loop order (outermost first): the result dims in order, all ``parallel``,
        then the reduction dims in order, innermost, with the accumulator
        (type ``elem``) carried through them in ``iter_args`` and stored once per
        result element. Exception (:func:`outer_reduction_order`): when no input
        is contiguous along a reduction dim but one is along the result's last
        dim, that dim moves inside the reductions:

            for p[:-1] (parallel): for q (parallel): out[p, q] = init
                                  for r...: for q (parallel): out[p, q] = combine(out[p, q], body)

        so the innermost loop walks contiguous memory and vectorises without
        reassociation (DESIGN §4); the accumulator row then lives in the
        result buffer. A result with a ``reuse`` buffer (the inplace pass's
        decision; only for nests without reductions) is stored there instead
        of in a fresh allocation. Each result element still combines its values in the
        same order, so both orders give identical results. Bodies with checked
        reads keep the plain order (``may_reorder=False``) so the first failing
        position reported is the first in row-major order of the iteration
        space, as in the ew interpreter.
        """
        ext = list(extents)
        reuse = list(reuse) or [None] * len(result_types)
        results = [
            r if r is not None else self.alloc([ext[d] for d in res_dims], t) for t, r in zip(result_types, reuse)
        ]
        unsigned = [is_unsigned(t.element_type) for t in result_types]
        elems = [signless(t.element_type) for t in result_types]  # the accumulators' types: i8 for booleans
        ivs: dict[int, SSAValue] = {}

        def store_all(values: Sequence[SSAValue]) -> None:
            for v, r in zip(values, results):
                self.store(v, r, pos())

        def pos() -> list[SSAValue]:
            return [ivs[d] for d in res_dims]

        def parallel(dims: Sequence[int], inner: Callable[[], None]) -> None:
            self.parallel_loops([whole(d, ext[d]) for d in dims], ivs, inner)

        def reduce(dims: Sequence[int], accs: list[SSAValue]) -> list[SSAValue]:
            if not dims:
                values = body(ivs)
                return [self.combine(k, a, v, u) for k, a, v, u in zip(kinds, accs, values, unsigned)]

            def step(iv: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
                ivs[dims[0]] = iv
                return reduce(dims[1:], carried)

            return list(self.loop_for(ext[dims[0]], accs, False, step).results)

        if not red_dims:
            across = transpose_tile_dim(maps, res_dims) if may_reorder else None
            if across is None:
                parallel(res_dims, lambda: store_all(body(ivs)))
            else:
                self.tiled(ext, res_dims, across, ivs, lambda: store_all(body(ivs)))
            return results
        inits = [self.identity(k, e, u) for k, e, u in zip(kinds, elems, unsigned)]
        if not (may_reorder and outer_reduction_order(maps, res_dims, red_dims)):
            parallel(res_dims, lambda: store_all(reduce(red_dims, inits)))
            return results
        inner = res_dims[-1]

        def fill(iv: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            ivs[inner] = iv
            store_all(inits)
            return []

        def update(iv: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            ivs[inner] = iv
            olds = [self.load(r, pos(), e) for r, e in zip(results, elems)]
            values = body(ivs)
            store_all([self.combine(k, o, v, u) for k, o, v, u in zip(kinds, olds, values, unsigned)])
            return []

        def outer_reductions(dims: Sequence[int]) -> None:
            if not dims:
                self.loop_for(ext[inner], [], True, update)
                return

            def step(iv: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                ivs[dims[0]] = iv
                outer_reductions(dims[1:])
                return []

            self.loop_for(ext[dims[0]], [], False, step)

        def row() -> None:
            self.loop_for(ext[inner], [], True, fill)
            outer_reductions(red_dims)

        parallel(res_dims[:-1], row)
        return results

    def parallel_loops(self, loops: Sequence[Loop], ivs: dict[int, SSAValue], inner: Callable[[], None]) -> None:
        """Parallel ``loop.for`` ops nested in the order of ``loops`` (:class:`Loop`), the innermost running
        ``inner()``."""
        if not loops:
            inner()
            return
        key, bounds, value = loops[0]
        lower, upper = bounds()

        def step(iv: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            ivs[key] = iv if value is None else value(iv)
            self.parallel_loops(loops[1:], ivs, inner)
            return []

        self.loop_for(upper, [], True, step, lower=lower)

    def tiled(
        self,
        ext: Sequence[SSAValue],
        res_dims: Sequence[int],
        across: int,
        ivs: dict[int, SSAValue],
        inner: Callable[[], None],
    ) -> None:
        """The parallel nest over ``res_dims`` with ``across`` and the last dim in tiles of
        :data:`TRANSPOSE_TILE` (a cache-blocked transpose, see :func:`transpose_tile_dim`).

        The other dims' loops come first, in ``res_dims`` order (the outermost,
        which the threads split, is then not a loop over a few tiles), then a
        loop over the tiles of ``across`` and one over the tiles of the last
        dim (their first elements go to ``ivs[~d]``); inside them, a loop over
        ``across`` within its tile, then one over the last dim within its tile,
        both over ``[s, s + min(TRANSPOSE_TILE, n - s))``: LLVM then knows the
        trip count is at most the tile and unrolls it (with ``min(s + T, n)``
        it unrolled for 128 iterations, so every tile ran scalar), and the
        thread split's work estimate and ``streaming-stores`` recognise the
        form. Every element is computed once, by the same body, so only the
        order changes.
        """
        last = res_dims[-1]
        pair = (across, last)
        tile = self.index(TRANSPOSE_TILE)
        counts = {
            d: self.val(arith.DivUIOp(self.val(arith.AddiOp(ext[d], self.index(TRANSPOSE_TILE - 1))), tile))
            for d in pair
        }

        def within(d: int) -> Bounds:
            def bounds() -> tuple[SSAValue, SSAValue]:
                start = ivs[~d]
                room = self.val(arith.MinSIOp(tile, self.val(arith.SubiOp(ext[d], start))))
                return start, self.val(arith.AddiOp(start, room))

            return bounds

        def tile_start(iv: SSAValue) -> SSAValue:
            return self.val(arith.MuliOp(iv, tile))

        loops = [whole(d, ext[d]) for d in res_dims if d not in counts]
        loops += [whole(~d, counts[d], tile_start) for d in pair]
        loops += [Loop(d, within(d)) for d in pair]
        self.parallel_loops(loops, ivs, inner)

    # -- op lowerings ----------------------------------------------------------------

    def arg(self, op: Operation, name: str, kind: str, entry: ArgEntry | None = None) -> None:
        slot = len(self.args)
        self.args.append(entry if entry is not None else ArgEntry(name, kind))
        self.vmap[op.results[0]] = self.emit_hoisted(loop.ArgOp(slot, name, memref_of(op.results[0].type))).results[0]

    def lower_constant(self, op: te.ConstantOp) -> None:
        name = f"const{self.n_consts}"
        self.n_consts += 1
        self.arg(op, name, "constant", ArgEntry.constant(name, op.value))

    def lower_slice_len(self, op: te.SliceLenOp) -> SSAValue:
        """``len(range(n)[start:stop:step])`` with the static start/stop/step of the op."""
        n = self.mapped(op.extent)
        start, stop, step = op.bounds()
        step = 1 if step is None else step
        c = self.index
        if step > 0:
            hi, lo = n, c(0)  # clamp range for start and stop: [0, n]
            first, last = c(0), n  # defaults
        else:
            hi, lo = self.val(arith.SubiOp(n, c(1))), c(-1)  # clamp range: [-1, n - 1]
            first, last = hi, c(-1)

        def norm(v: int | None, default: SSAValue) -> SSAValue:
            if v is None:
                return default
            if v >= 0:
                return self.smin(c(v), hi)
            return self.smax(self.val(arith.AddiOp(n, c(v))), lo)

        b, e = norm(start, first), norm(stop, last)
        diff = self.val(arith.SubiOp(e, b) if step > 0 else arith.SubiOp(b, e))
        d = self.smax(diff, c(0))
        s = abs(step)
        if s == 1:
            return d
        return self.val(arith.DivSIOp(self.val(arith.AddiOp(d, c(s - 1))), c(s)))

    def lower_check_dim(self, op: te.CheckDimOp) -> None:
        a, b = self.mapped(op.lhs), self.mapped(op.rhs)
        pred = op.predicate_name()
        code = self.error(op.message.data, loc_text(op))
        if pred == "dvd":  # b divides a: b != 0 and a % b == 0 (the remainder taken by 1 where b is 0: no UB)
            zero, one = self.index(0), self.index(1)
            nonzero = self.val(arith.CmpiOp(b, zero, "ne"))
            rem = self.val(arith.RemUIOp(a, self.val(arith.SelectOp(nonzero, b, one))))
            ok = self.val(arith.AndIOp(nonzero, self.val(arith.CmpiOp(rem, zero, "eq"))))
        elif pred in ("eq", "lt", "le"):
            ok = self.val(arith.CmpiOp(a, b, {"eq": "eq", "lt": "slt", "le": "sle"}[pred]))
        else:
            raise FuseError(f"lower-ew-to-loop: unknown te.check_dim predicate {pred!r}")
        self.emit(loop.CheckOp(ok, a, b, code))

    def lower_generic(self, op: ew.GenericOp) -> list[SSAValue]:
        its = op.iterator_list()
        res_dims = [d for d, it in enumerate(its) if it == "parallel"]
        red_dims = [d for d, it in enumerate(its) if it == "reduction"]
        maps = op.map_list()
        bufs = [self.mapped(v) for v in op.inputs]
        tables = [self.mapped(v) for v in op.tables]
        block = op.body.block
        codes: dict[Operation, int] = {}

        def body(ivs: dict[int, SSAValue]) -> list[SSAValue]:
            for k, a in enumerate(block.args):
                if k >= len(bufs):
                    self.vmap[a] = tables[k - len(bufs)]
                elif a.uses:
                    self.vmap[a] = self.load(bufs[k], [ivs[d] for d in maps[k]], a.type)
            for bop in block.ops:
                if isinstance(bop, ew.YieldOp):
                    return [self.mapped(v) for v in bop.values]
                if isinstance(bop, ew.IndexOp):
                    self.vmap[bop.result] = ivs[bop.dim.value.data]
                elif isinstance(bop, ew.ExtractOp):
                    self.vmap[bop.result] = self.extract(bop, codes)
                elif isinstance(bop, ew.AssertOp):
                    self.assertion(bop, codes)
                elif isinstance(bop, te.DimOp):
                    self.vmap[bop.result] = self.buffer_dim(self.mapped(bop.source), bop.axis.value.data)
                else:
                    self.clone(bop)
            raise FuseError("lower-ew-to-loop: an ew.generic body without ew.yield")

        may_reorder = not any(
            (isinstance(o, ew.ExtractOp) and o.check is not None) or isinstance(o, ew.AssertOp) for o in block.ops
        )
        skip = zero_skip_operand(op) if may_reorder else None
        if skip is not None:
            return [self.zero_skip_nest(op, skip, bufs[skip], body)]
        return self.nest(
            [self.mapped(e) for e in op.extents],
            res_dims,
            red_dims,
            op.kind_list(),
            [memref_of(r.type) for r in op.outputs],
            maps,
            body,
            may_reorder=may_reorder,
            reuse=[bufs[k] if k >= 0 else None for k in op.inplace_list()],
        )

    def zero_skip_nest(self, op: ew.GenericOp, k: int, buf: SSAValue, body: Body) -> SSAValue:
        """An integer sum of products that skips the work of zero factors of input ``k`` (sparse facts).

        Loops over input k's dims outside (result dims first: parallel), loads
        its element once, and runs the remaining dims only when it is non-zero
        (the first inner loop's bound is ``select(a != 0, extent, 0)``),
        accumulating into the zero-filled result. Integer addition is exact
        in any order, so the result equals the plain nest's; the work of a
        semi-naive delta join becomes proportional to the number of new facts.
        """
        its = op.iterator_list()
        ext = [self.mapped(e) for e in op.extents]
        res_dims = [d for d, it in enumerate(its) if it == "parallel"]
        mine = op.map_list()[k]
        outer = [d for d in res_dims if d in mine] + [d for d, it in enumerate(its) if it == "reduction" and d in mine]
        inner = [d for d in range(len(its)) if d not in outer]
        t = memref_of(op.outputs[0].type)
        elem = signless(t.element_type)
        out = self.alloc([ext[d] for d in res_dims], t)
        self.walk([ext[d] for d in res_dims], [], lambda pos, _: self.store(self.const(0, elem), out, pos) or [])
        ivs: dict[int, SSAValue] = {}

        def level(dims: list[int], bound0: SSAValue | None, then: Callable[[], None]) -> None:
            if not dims:
                then()
                return
            d = dims[0]

            def step(iv: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                ivs[d] = iv
                level(dims[1:], None, then)
                return []

            self.loop_for(bound0 if bound0 is not None else ext[d], [], its[d] == "parallel", step)

        def accumulate() -> None:
            pos = [ivs[d] for d in res_dims]
            (v,) = body(ivs)
            self.store(self.val(arith.AddiOp(self.load(out, pos, None), v)), out, pos)

        def guarded() -> None:
            a = self.load(buf, [ivs[d] for d in mine], None)
            nz = self.val(arith.CmpiOp(a, self.const(0, a.type), "ne"))
            level(inner, self.select(nz, ext[inner[0]], self.index(0)), accumulate)

        level(outer, None, guarded)
        return out

    def assertion(self, op: ew.AssertOp, codes: dict[Operation, int]) -> None:
        """``loop.check`` of the condition, reporting the value (as an index) and 0."""
        if op not in codes:
            codes[op] = self.error(op.message.data, loc_text(op))
        value = self.mapped(op.value)
        as_index = self.val(arith.IndexCastOp(value, INDEX))
        self.emit(loop.CheckOp(self.mapped(op.cond), as_index, self.index(0), codes[op]))

    def extract(self, op: ew.ExtractOp, codes: dict[Operation, int]) -> SSAValue:
        """Read a table; with ``check``, each position is tested ``0 <= p < extent`` (one unsigned compare)."""
        buf = self.mapped(op.table)
        pos = [self.mapped(p) for p in op.positions]
        if op.check is not None:
            if op not in codes:
                codes[op] = self.error(op.check.data, loc_text(op))
            for axis, p in enumerate(pos):
                n = self.buffer_dim(buf, axis)
                self.emit(loop.CheckOp(self.val(arith.CmpiOp(p, n, "ult")), p, n, codes[op]))
        return self.load(buf, pos, op.result.type)

    def clone(self, op: Operation) -> None:
        """Copy a scalar op (arith, math, ...) with its operands mapped."""
        if op.regions:
            raise FuseError(f"lower-ew-to-loop: cannot lower '{op.name}' with regions")
        for o in op.operands:
            self.mapped(o)
        self.emit(op.clone(value_mapper=self.vmap))

    def lower_contract(self, op: ew.ContractOp) -> SSAValue:
        """``loop.gemm`` for matrix products (see :func:`gemm_plan`), else a multiply-sum nest."""
        a, b = self.mapped(op.lhs), self.mapped(op.rhs)
        ext = [self.mapped(e) for e in op.extents]
        ma, mb = (ew.ints_of(m) for m in op.maps.data)
        out = list(ew.ints_of(op.out))
        rt = op.result.type
        assert isinstance(rt, TensorType)
        elem = rt.element_type
        plan = gemm_plan(ma, mb, out) if isinstance(elem, Float32Type | Float64Type) else None
        if plan is None:
            red = [d for d in range(len(ext)) if d not in out]

            def body(ivs: dict[int, SSAValue]) -> list[SSAValue]:
                x = self.load(a, [ivs[d] for d in ma], elem)
                y = self.load(b, [ivs[d] for d in mb], elem)
                return [self.val(arith.MulfOp(x, y))]

            return self.nest(ext, out, red, ["sum"], [memref_of(rt)], [ma, mb], body)[0]
        c = self.alloc([ext[d] for d in out], memref_of(rt))
        batch, m, n, k = (self.product([ext[d] for d in g]) for g in (plan.batch, plan.m, plan.n, plan.k))
        if not all(_static_positive(op.extents[d]) for d in plan.k):
            self.zero_fill(c, [ext[d] for d in out], k)
        first, second = (b, a) if plan.swap else (a, b)
        strides: list[SSAValue] = []
        if plan.strided:  # a buffer holds its batch dims between its rows and columns: pass every stride

            def layout(rows: SSAValue, cols: SSAValue, inner: bool, broadcast: bool) -> list[SSAValue]:
                if inner:  # [rows, batch, cols]: the next matrix is one row on, the next row a batch of rows on
                    return [cols, self.product([batch, cols])]
                return [self.index(0) if broadcast else self.product([rows, cols]), cols]

            strides = [
                *layout(*((k, m) if plan.trans_a else (m, k)), plan.inner_a, plan.broadcast_a),
                *layout(*((n, k) if plan.trans_b else (k, n)), plan.inner_b, plan.broadcast_b),
                *layout(m, n, plan.inner_c, False),
            ]
        self.emit(
            loop.GemmOp(
                first,
                second,
                c,
                batch,
                m,
                n,
                k,
                plan.trans_a,
                plan.trans_b,
                plan.broadcast_a,
                plan.broadcast_b,
                strides,
            )
        )
        return c

    def zero_fill(self, c: SSAValue, extents: Sequence[SSAValue], k: SSAValue) -> None:
        """Zero ``c`` when ``k == 0`` (a GEMM over an empty sum writes nothing): the outer bound is 0 otherwise."""
        t = c.type
        assert isinstance(t, MemRefType)
        zero = self.const(0.0, t.element_type)
        if not extents:
            self.store(zero, c, [])
            return
        k_is_0 = self.val(arith.CmpiOp(k, self.index(0), "eq"))
        bounds = [self.select(k_is_0, extents[0], self.index(0)), *extents[1:]]
        ivs: list[SSAValue] = []

        def step(iv: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            ivs.append(iv)
            if len(ivs) == len(bounds):
                self.store(zero, c, ivs)
            else:
                self.loop_for(bounds[len(ivs)], [], True, step)
            return []

        self.loop_for(bounds[0], [], True, step)

    def fill(self, buf: SSAValue, extents: Sequence[SSAValue], value: SSAValue) -> None:
        """Store ``value`` at every position of ``buf``: a nest whose outer loop is parallel."""
        if not extents:
            self.store(value, buf, [])
            return
        ivs: list[SSAValue] = []

        def step(iv: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            ivs.append(iv)
            if len(ivs) == len(extents):
                self.store(value, buf, ivs)
            else:
                self.loop_for(extents[len(ivs)], [], False, step)
            ivs.pop()
            return []

        self.loop_for(extents[0], [], True, step)

    def lower_scatter_add(self, op: ew.ScatterAddOp) -> SSAValue:
        """Zeros, then one read-add-write per update element at its checked position.

        Parallel safety: two update elements that differ along an axis the
        result takes directly (a *named* place, ``d`` of ``E[idx[b], d]``) never
        write the same element, while those that differ only along gathered
        axes may. So the outer parallel loop runs over chunks of the last named
        axis (``SCATTER_CHUNK`` bytes each, so threads do not share cache lines
        in a contiguous row), and every update of a chunk is visited serially
        inside it: race-free with duplicates accumulating in order, no private
        copies of the result. With no named axis the nest is serial.
        """
        upd = self.mapped(op.update)
        gathers = [self.mapped(g) for g in op.gathers]
        maps = op.map_list()
        places = op.place_list()
        rt = op.result.type
        assert isinstance(rt, TensorType)
        elem = rt.element_type
        rank = len(upd.type.get_shape())  # type: ignore[attr-defined]
        uext = [self.buffer_dim(upd, k) for k in range(rank)]
        sizes = iter(self.mapped(e) for e in op.extents)
        out_ext = [uext[p] if p >= 0 else next(sizes) for p in places]
        out = self.alloc(out_ext, memref_of(rt))
        self.fill(out, out_ext, self.const(0, elem))
        code = self.error(op.check.data, loc_text(op))
        named = sorted({p for p in places if p >= 0})
        chunked = named[-1] if named else None
        ivs: dict[int, SSAValue] = {}
        pos: dict[int, SSAValue] = {}  # result axis -> position, once its gather's axes are bound

        def positions(ready: Callable[[int], bool]) -> None:
            for k, p in enumerate(places):
                if p >= 0 or k in pos or not all(ready(d) for d in maps[-1 - p]):
                    continue
                n = -1 - p
                g = gathers[n]
                gt = op.gathers[n].type
                assert isinstance(gt, TensorType)
                v = self.load(g, [ivs[d] for d in maps[n]], signless(gt.element_type))
                elem_g = gt.element_type
                if is_unsigned(elem_g) and isinstance(elem_g, IntegerType) and elem_g.width.data < 64:
                    v = self.val(arith.ExtUIOp(v, I64))  # zero-extended: index_cast sign-extends
                i = self.val(arith.IndexCastOp(v, INDEX))
                self.emit(loop.CheckOp(self.val(arith.CmpiOp(i, out_ext[k], "ult")), i, out_ext[k], code))
                pos[k] = i

        def update() -> None:
            positions(lambda d: True)
            at = [ivs[p] if p >= 0 else pos[k] for k, p in enumerate(places)]
            x = self.load(upd, [ivs[k] for k in range(rank)], elem)
            old = self.load(out, at, elem)
            add = arith.AddfOp(old, x) if is_float(elem) else arith.AddiOp(old, x)
            self.store(self.val(add), out, at)
            for k in [k for k, p in enumerate(places) if p < 0 and any(d == chunked for d in maps[-1 - p])]:
                del pos[k]  # computed inside the chunk loop: recomputed at each of its iterations

        serial = [k for k in range(rank) if k != chunked]

        def level(j: int, inner: Callable[[], None]) -> None:
            if j == len(serial):
                inner()
                return

            def step(iv: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                ivs[serial[j]] = iv
                level(j + 1, inner)
                del ivs[serial[j]]
                return []

            self.loop_for(uext[serial[j]], [], False, step)

        if chunked is None:
            level(0, update)
            return out
        c = chunked
        width = self.index(max(1, SCATTER_CHUNK // max(1, elem_bytes(elem))))
        n = uext[c]
        chunks = self.val(arith.DivUIOp(self.val(arith.AddiOp(n, self.val(arith.SubiOp(width, self.index(1))))), width))

        def chunk(j: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            start = self.val(arith.MuliOp(j, width))
            stop = self.smin(self.val(arith.AddiOp(start, width)), n)

            def inner() -> None:
                positions(lambda d: d != c)  # hoisted out of the chunk loop when they do not read it

                def along(iv: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                    ivs[c] = self.val(arith.AddiOp(start, iv))
                    update()
                    del ivs[c]
                    return []

                self.loop_for(self.val(arith.SubiOp(stop, start)), [], False, along)
                pos.clear()

            level(0, inner)
            return []

        self.loop_for(chunks, [], True, chunk)
        return out

    def lower_host_call(self, op: ew.HostCallOp) -> None:
        cid = len(self.host_calls)
        params = op.params if op.params is not None else DictionaryAttr({})
        self.host_calls.append(HostCallEntry(op.fn.data, params))
        attrs: dict[str, Attribute] = {"fn": op.fn, "id": IntegerAttr(cid, i64)}
        if op.params is not None:
            attrs["params"] = op.params
        new = loop.HostCallOp(
            operands=[[self.mapped(v) for v in op.inputs]],
            result_types=[[memref_of(r.type) for r in op.outputs]],
            attributes=attrs,
        )
        set_location(new, source_loc(op))
        self.emit(new)
        for old, r in zip(op.outputs, new.results):
            self.vmap[old] = r

    def lower_export(self, op: te.ExportOp) -> None:
        for name, v in zip(te.names_of(op.names), op.values):
            slot = len(self.exports)
            self.exports.append(ResultEntry(name))
            self.emit(loop.ResultOp(self.mapped(v), slot, name))

    def lower_sink(self, op: te.SinkOp) -> None:
        loc = StringAttr(loc_text(op))
        for name, v in zip(te.names_of(op.names), op.values):
            slot = self.n_exports + len(self.sinks)
            self.sinks.append(ResultEntry(op.path.data, "sink", name, loc.data, self.n_sinks))
            self.emit(loop.ResultOp(self.mapped(v), slot, op.path.data))
        self.n_sinks += 1

    # -- fixpoint ----------------------------------------------------------------------

    def lower_fixpoint(self, op: te.FixpointOp) -> None:
        """``te.fixpoint`` → state buffers updated in place by a ``loop.while`` (see docs/modes.md).

        The carried tensors live in buffers allocated before the loop (filled
        from the inits); the body reads them, computes the next values into
        its own (hoisted) buffers, then one nest per carried tensor compares
        next with current (exactly, or within atol/rtol for floats) while
        copying next over current. The loop goes on while something changed
        and fewer than ``max_iters`` runs were made; the run count and the
        converged flag are stored into 0-d buffers after it.
        """
        if self.in_while:
            raise FuseError("lower-ew-to-loop: nested te.fixpoint ops are not supported")
        atol, rtol = op.atol.value.data, op.rtol.value.data
        states: list[SSAValue] = []
        for init in op.inits:
            src = self.mapped(init)
            ext = [self.buffer_dim(src, k) for k in range(len(memref_of(init.type).get_shape()))]
            st = self.val(loop.AllocOp(ext, memref_of(init.type)))
            self.copy(src, st)
            states.append(st)
        counter = self.val(loop.AllocOp([], MemRefType(I64, [])))
        true = self.const(1, I1)
        region, block = loop.WhileOp.make_body([self.index(0), self.const(0, I1)])
        it = block.args[0]
        saved, self.cur, self.in_while = self.cur, block, True
        try:
            self.store(self.val(arith.IndexCastOp(it, I64)), counter, [])
            body = op.body.block
            self.vmap[body.args[0]] = counter
            for arg, st in zip(body.args[1:], states):
                self.vmap[arg] = st
            ops = list(body.ops)
            for bop in ops[:-1]:
                self.lower(bop)
            term = ops[-1]
            assert isinstance(term, te.YieldOp)
            news = [self.mapped(v) for v in term.values]
            for k, new in enumerate(news):
                if new in states:  # a next value that is a current one: snapshot it before any copy-back
                    tmp = self.alloc([self.buffer_dim(new, a) for a in range(len(new.type.get_shape()))], new.type)  # type: ignore[attr-defined]
                    self.copy(new, tmp)
                    news[k] = tmp
            same = true
            for new, st, checked in zip(news, states, op.checked_list()):
                ok = self.compare_copy(new, st, atol, rtol)
                if checked:
                    same = self.val(arith.AndIOp(same, ok))
            nxt = self.val(arith.AddiOp(it, self.index(1)))
            more = self.val(arith.CmpiOp(nxt, self.index(op.max_iters.value.data), "slt"))
            changed = self.val(arith.XOrIOp(same, true))
            block.add_op(loop.YieldOp([self.val(arith.AndIOp(changed, more)), nxt, same]))
        finally:
            self.cur, self.in_while = saved, False
        w = self.emit(loop.WhileOp([self.index(0), self.const(0, I1)], region))
        iters = self.val(loop.AllocOp([], MemRefType(I64, [])))
        self.store(self.val(arith.IndexCastOp(w.results[0], I64)), iters, [])
        conv = self.val(loop.AllocOp([], MemRefType(I8, [])))
        self.store(w.results[1], conv, [])
        for r, v in zip(op.outputs, [*states, iters, conv]):
            self.vmap[r] = v

    def walk(
        self,
        extents: Sequence[SSAValue],
        inits: Sequence[SSAValue],
        body: Callable[[list[SSAValue], list[SSAValue]], Sequence[SSAValue]],
    ) -> list[SSAValue]:
        """A sequential nest over ``extents`` carrying ``inits``; ``body(positions, carried)`` gives the next ones."""
        ivs: list[SSAValue] = []

        def level(k: int, carried: list[SSAValue]) -> list[SSAValue]:
            if k == len(extents):
                return list(body(list(ivs), carried))

            def step(iv: SSAValue, c: list[SSAValue]) -> list[SSAValue]:
                ivs.append(iv)
                out = level(k + 1, c)
                ivs.pop()
                return out

            return list(self.loop_for(extents[k], carried, False, step).results)

        return level(0, list(inits))

    def copy(self, src: SSAValue, dst: SSAValue) -> None:
        """Copy a buffer into another of the same shape."""
        ext = [self.buffer_dim(src, a) for a in range(len(src.type.get_shape()))]  # type: ignore[attr-defined]
        self.walk(ext, [], lambda ivs, c: self.store(self.load(src, ivs, None), dst, ivs) or [])

    def compare_copy(self, new: SSAValue, state: SSAValue, atol: float, rtol: float) -> SSAValue:
        """Copy ``new`` over ``state``; an ``i1`` saying whether no element changed (floats within tolerance)."""
        t = new.type
        assert isinstance(t, MemRefType)
        elem = signless(t.element_type)
        ext = [self.buffer_dim(new, a) for a in range(len(t.get_shape()))]

        def body(ivs: list[SSAValue], carried: list[SSAValue]) -> list[SSAValue]:
            a = self.load(new, ivs, None)
            b = self.load(state, ivs, None)
            if is_float(elem):
                eq = self.val(arith.CmpfOp(a, b, "oeq"))
                diff = self.val(math.AbsFOp(self.val(arith.SubfOp(a, b))))
                tol = self.val(
                    arith.AddfOp(
                        self.const(atol, elem), self.val(arith.MulfOp(self.const(rtol, elem), self.val(math.AbsFOp(a))))
                    )
                )
                close = self.val(arith.CmpfOp(diff, tol, "ole"))
                nans = self.val(arith.AndIOp(self.val(arith.CmpfOp(a, a, "uno")), self.val(arith.CmpfOp(b, b, "uno"))))
                eq = self.val(arith.OrIOp(self.val(arith.OrIOp(eq, close)), nans))
            else:
                eq = self.val(arith.CmpiOp(a, b, "eq"))
            self.store(a, state, ivs)
            return [self.val(arith.AndIOp(carried[0], eq))]

        return self.walk(ext, [self.const(1, I1)], body)[0]

    # -- driver ----------------------------------------------------------------------

    def lower(self, op: Operation) -> None:
        if isinstance(op, te.InputOp):
            self.arg(op, op.tensor_name.data, "input")
        elif isinstance(op, te.SourceOp):
            self.arg(op, op.tensor_name.data, "source")
        elif isinstance(op, te.ConstantOp):
            self.lower_constant(op)
        elif isinstance(op, te.DimOp):
            self.vmap[op.result] = self.buffer_dim(self.mapped(op.source), op.axis.value.data)
        elif isinstance(op, te.SliceLenOp):
            self.vmap[op.result] = self.lower_slice_len(op)
        elif isinstance(op, te.CheckDimOp):
            self.lower_check_dim(op)
        elif isinstance(op, ew.GenericOp):
            for r, v in zip(op.outputs, self.lower_generic(op)):
                self.vmap[r] = v
        elif isinstance(op, ew.ContractOp):
            self.vmap[op.result] = self.lower_contract(op)
        elif isinstance(op, ew.ScatterAddOp):
            self.vmap[op.result] = self.lower_scatter_add(op)
        elif isinstance(op, ew.HostCallOp):
            self.lower_host_call(op)
        elif isinstance(op, te.ExportOp):
            self.lower_export(op)
        elif isinstance(op, te.SinkOp):
            self.lower_sink(op)
        elif isinstance(op, te.FixpointOp):
            self.lower_fixpoint(op)
        elif op.dialect_name() == "arith" and not op.regions:
            if self.in_while and all(self.at_top(self.mapped(o)) for o in op.operands):
                self.emit_hoisted(op.clone(value_mapper=self.vmap))
            else:
                self.clone(op)
        else:
            raise FuseError(f"lower-ew-to-loop: cannot lower '{op.name}' (expected the ew level)")

    def run(self) -> func.FuncOp:
        for op in self.module.body.block.ops:
            self.lower(op)
        self.top.add_op(func.ReturnOp())
        first = self.top.first_op
        for c in self.const_ops:
            self.top.insert_op_before(c, first)
        return func.FuncOp("fuse_main", ([], []), Region(self.top))

    def attributes(self) -> dict[str, Attribute]:
        return LoopAbi(self.args, self.exports + self.sinks, self.errors, self.host_calls).attributes()


def zero_skip_operand(op: ew.GenericOp) -> int | None:
    """The input whose zeros a sum-of-products generic may skip, if any (see ``EwToLoop.zero_skip_nest``).

    The generic must be one integer sum whose value is ``a * rest`` with ``a``
    an input element (possibly sign- or zero-extended) that lacks some dims.
    """
    if len(op.outputs) != 1 or op.kind_list() != ["sum"] or "reduction" not in op.iterator_list():
        return None
    t = op.outputs[0].type
    assert isinstance(t, TensorType)
    if is_float(t.element_type):
        return None
    block = op.body.block
    term = block.last_op
    if not isinstance(term, ew.YieldOp) or len(term.values) != 1:
        return None
    prod = term.values[0].owner
    if not isinstance(prod, arith.MuliOp):
        return None
    n_dims = len(op.iterator_list())
    for factor in (prod.lhs, prod.rhs):
        while isinstance(factor.owner, arith.ExtSIOp | arith.ExtUIOp):
            factor = factor.owner.input
        if factor in block.args:
            k = block.args.index(factor)
            if k < len(op.inputs) and len(set(op.map_list()[k])) < n_dims:
                return k
    return None


def _static_positive(extent: SSAValue) -> bool:
    """Whether an ew-level extent is an ``arith.constant`` above zero."""
    owner = extent.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data > 0
    return False


@register_pass
class LowerEwToLoop(ModulePass):
    """Lower elemwise kernels to loop nests over buffers in one ``func.func @fuse_main`` (the native ABI's shape).

    ew.generic becomes an allocation and a loop nest (parallel result dims
    outside, reduction dims inside with the accumulator in loop-carried
    values, or reductions outside a contiguous result dim for column-style
    reductions); ew.contract becomes loop.gemm when it is a (batched) matrix
    product; ew.scatter_add becomes a zero fill and a checked read-add-write
    nest, parallel over chunks of a named axis; boundary ops become loop.arg /
    loop.result slots recorded in the module attributes fuse.args,
    fuse.results, fuse.errors and fuse.host_calls.
    """

    name = "lower-ew-to-loop"
    level: ClassVar[str] = "elemwise"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        lowering = EwToLoop(op)
        fn = lowering.run()
        old = op.body.block
        op.body.detach_block(old)
        old.erase(safe_erase=False)
        op.body.add_block(Block([fn]))
        op.attributes.update(lowering.attributes())
