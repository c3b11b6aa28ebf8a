"""te → ew for data access and movement: ``te.access``, ``te.generate``, ``te.flatten``, ``te.concat``, ``te.place``,
``te.scatter_add``.

Reads through index expressions become generics that read their source as a
table (offsets clamp and select 0 outside the axis; numeric positions and
gathered values are checked, located). ``concat`` has no arithmetic to compile:
its parts are aligned by kernels and joined by an ``ew.host_call`` the runtime
runs on NumPy.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.ir import SSAValue

from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.locations import loc_text
from fuse_mlir.passes.conversions.te_to_ew.lowering import In, TeLowering, TeOpPattern
from fuse_mlir.passes.scalar import Body


def slice_start(lo: TeLowering, n: SSAValue, start: int | None, step: int) -> SSAValue:
    """``range(n)[start::step].start`` as index arithmetic (Python's clamping rules)."""
    c = lo.index
    if step > 0:
        if start is None:
            return c(0)
        if start >= 0:
            return lo.emit(arith.MinSIOp(c(start), n)).results[0]
        shifted = lo.emit(arith.AddiOp(n, c(start))).results[0]
        return lo.emit(arith.MaxSIOp(shifted, c(0))).results[0]
    last = lo.emit(arith.SubiOp(n, c(1))).results[0]
    if start is None:
        return last
    if start >= 0:
        return lo.emit(arith.MinSIOp(c(start), last)).results[0]
    shifted = lo.emit(arith.AddiOp(n, c(start))).results[0]
    return lo.emit(arith.MaxSIOp(shifted, c(-1))).results[0]


class LowerAccess(TeOpPattern):
    """A read through index expressions: a generic over the output names reading the source as a table.

    Offsets read a clamped position and select 0 outside the axis; numeric
    positions and gathered values are checked (a located run-time error).
    The body uses the source's extents from outside the kernel.
    """

    op_type = te.AccessOp

    def lower(self, op: te.AccessOp) -> SSAValue:
        lo = self.lo
        src = op.source
        axes = op.axis_list()
        out = te.names_of(op.indices)
        loc = loc_text(op)
        gathers = [In(g, n) for g, n in zip(op.gathers, te.names_of_each(op.gather_indices))]
        src_ext = lo.ext(src)
        ext: dict[str, SSAValue] = {}
        starts: dict[int, tuple[SSAValue, int]] = {}
        for k, a in enumerate(axes):
            if a.axis_kind == te.AxisKind.SLICE:
                parts = a.slice_bounds()
                ext.setdefault(a.index_name, lo.emit(te.SliceLenOp(src_ext[k], *parts)).results[0])
                step = parts[2] if parts[2] is not None else 1
                starts[k] = (slice_start(lo, src_ext[k], parts[0], step), step)
            elif a.axis_kind in (te.AxisKind.NAME, te.AxisKind.OFFSET):
                ext.setdefault(a.index_name, src_ext[k])
        ext = lo.name_extents(gathers, ext)
        dtype = te.dtype_of(op.result)
        for k, a in enumerate(axes):
            if a.axis_kind == te.AxisKind.POSITION:
                # Checked before the kernel, once: an error whether or not the kernel's loop space is empty.
                position = lo.index(a.value)
                message = f"position {{0}} is out of range for axis {k} (extent {{1}})"
                lo.emit(te.CheckDimOp(position, src_ext[k], message, loc, "lt"))
        checked = any(a.axis_kind == te.AxisKind.GATHER for a in axes)

        def body(b: Body, args, tables, idx):
            positions: list[SSAValue] = []
            valid: SSAValue | None = None
            for k, a in enumerate(axes):
                if a.axis_kind == te.AxisKind.POSITION:
                    positions.append(b.index(a.value))
                elif a.axis_kind == te.AxisKind.GATHER:
                    g = a.value
                    positions.append(b.to_index(args[g], gathers[g].dtype))
                elif a.axis_kind == te.AxisKind.SLICE:
                    s0, step = starts[k]
                    i = idx(a.index_name)
                    positions.append(b.add(arith.AddiOp(s0, b.add(arith.MuliOp(i, b.index(step))))))
                else:
                    base, off = a.index_name, a.value
                    i = idx(base)
                    if not off:
                        positions.append(i)
                        continue
                    shifted = b.add(arith.AddiOp(i, b.index(off)))
                    lo_ok = b.add(arith.CmpiOp(shifted, b.index(0), "sge"))
                    hi_ok = b.add(arith.CmpiOp(shifted, src_ext[k], "slt"))
                    ok = b.add(arith.AndIOp(lo_ok, hi_ok))
                    valid = ok if valid is None else b.add(arith.AndIOp(valid, ok))
                    top = b.add(arith.SubiOp(src_ext[k], b.index(1)))
                    clamped = b.add(arith.MinSIOp(b.add(arith.MaxSIOp(shifted, b.index(0))), top))
                    positions.append(clamped)
            if checked:
                # A uint64 index travels as a signed detail value: `{0:u}` prints it unsigned (format_details).
                unsigned = all(g.dtype.kind == "u" for g in gathers)
                value_text = f"{{0{':u' if unsigned else ''}}}"
                # Only a gathered position can be out of range (the others follow the source's extents): with
                # one gathered axis the error names it, as the reference's does.
                gathered = [k for k, a in enumerate(axes) if a.axis_kind == te.AxisKind.GATHER]
                where = f"axis {gathered[0]} (extent {{1}})" if len(gathered) == 1 else "an axis of extent {1}"
                message = f"gathered index {value_text} is out of range for {where}"
                value = b.add(ew.ExtractOp(tables[0], positions, check=message, loc=loc))
            else:
                value = b.add(ew.ExtractOp(tables[0], positions))
            if valid is not None:
                value = b.select(valid, value, b.const(0, dtype))
            return value

        return lo.generic(gathers, [src], out, [], "none", ext, dtype, body, loc)


class LowerGenerate(TeOpPattern):
    """An index-only constructor (``causal_mask``, ``even``, ``odd``, ``iota``): a generic with no inputs;
    ``nonempty`` compares its extents outside it."""

    op_type = te.GenerateOp

    def lower(self, op: te.GenerateOp) -> SSAValue:
        names = te.names_of(op.indices)
        ext = dict(zip(names, op.extents))
        dtype = te.dtype_of(op.result)
        if op.fn.data == "nonempty":
            lo = self.lo
            cond = None
            for e in op.extents:
                positive = lo.emit(arith.CmpiOp(e, lo.index(0), "sgt")).results[0]
                cond = positive if cond is None else lo.emit(arith.AndIOp(cond, positive)).results[0]
            assert cond is not None
            return lo.generic([], [], [], [], "none", {}, dtype, lambda b, a, t, idx: b.bool_to_i8(cond))
        if op.fn.data == "causal_mask":
            p, q = names

            def mask(b: Body, a, t, idx):
                below = b.add(arith.CmpiOp(idx(q), idx(p), "ule"))
                return b.select(below, b.const(1, dtype), b.const(0, dtype))

            return self.lo.generic([], [], names, [], "none", ext, dtype, mask)
        if op.fn.data == "iota":

            def position(b: Body, a, t, idx):
                return b.index_to(idx(names[0]), dtype)

            return self.lo.generic([], [], names, [], "none", ext, dtype, position)
        want = 0 if op.fn.data == "even" else 1

        def parity(b: Body, a, t, idx):
            r = b.add(arith.RemUIOp(idx(names[0]), b.index(2)))
            return b.bool_to_i8(b.add(arith.CmpiOp(r, b.index(want), "eq")))

        return self.lo.generic([], [], names, [], "none", ext, dtype, parity)


class LowerFlatten(TeOpPattern):
    """The last two axes joined into one: a generic reading the source as a table at (k / inner, k % inner)."""

    op_type = te.FlattenOp

    def lower(self, op: te.FlattenOp) -> SSAValue:
        lo = self.lo
        src = op.input
        out = te.names_of(op.indices)
        src_ext = lo.ext(src)
        inner = src_ext[-1]
        ext = dict(zip(out[:-1], src_ext[:-2]))
        ext[out[-1]] = lo.emit(arith.MuliOp(src_ext[-2], inner)).results[0]
        dtype = te.dtype_of(op.result)

        def body(b: Body, a, tables, idx):
            k = idx(out[-1])
            hi = b.add(arith.DivUIOp(k, inner))
            rem = b.add(arith.RemUIOp(k, inner))
            return b.add(ew.ExtractOp(tables[0], [*(idx(n) for n in out[:-1]), hi, rem]))

        return lo.generic([], [src], out, [], "none", ext, dtype, body)


class LowerConcat(TeOpPattern):
    """Each part is brought to the result's index order (broadcasting), then joined by the runtime."""

    op_type = te.ConcatOp

    def lower(self, op: te.ConcatOp) -> SSAValue:
        lo = self.lo
        out = te.names_of(op.indices)
        axis = op.axis.data
        parts = te.names_of(op.operand_axes)
        dtype = te.dtype_of(op.result)
        ins = [
            In(v, tuple(axis if n == part else n for n in ns))
            for v, ns, part in zip(op.inputs, te.names_of_each(op.operand_indices), parts)
        ]
        # Every index but the joined axis has one extent across the parts (the frontend checks it); a part
        # that lacks an index is broadcast over it.
        shared = {n: e for n, e in lo.name_extents(ins).items() if n != axis}
        aligned = []
        for i in ins:
            ext = dict(shared)
            ext[axis] = lo.ext(i.value)[i.names.index(axis)]
            aligned.append(lo.cast_kernel(i, out, dtype, ext))
        call = lo.emit(
            ew.HostCallOp(
                "concat", aligned, [te.tensor_type(dtype, [te.DYNAMIC] * len(out))], {"axis": out.index(axis)}
            )
        )
        return call.results[0]


class LowerPlace(TeOpPattern):
    """A write at numeric positions: the value where the fixed indices equal their positions, else 0."""

    op_type = te.PlaceOp

    def lower(self, op: te.PlaceOp) -> SSAValue:
        lo = self.lo
        x = In(op.input, te.names_of_each(op.operand_indices)[0])
        out = te.names_of(op.indices)
        pos = op.position_list()
        fixed = [n for n, p in zip(out, pos) if p >= 0]
        ext = lo.name_extents([x], dict(zip(fixed, op.extents)))
        dtype = te.dtype_of(op.result)

        def body(b: Body, a, t, idx):
            cond = None
            for n, p in zip(out, pos):
                if p >= 0:
                    eq = b.add(arith.CmpiOp(idx(n), b.index(p), "eq"))
                    cond = eq if cond is None else b.add(arith.AndIOp(cond, eq))
            assert cond is not None
            return b.select(cond, a[0], b.const(0, dtype))

        return lo.generic([x], [], out, [], "none", ext, dtype, body)


class LowerScatterAdd(TeOpPattern):
    """An add at gathered positions: an ``ew.scatter_add`` over the update's axes (the loop level orders and
    parallelises it), after checking that each index tensor spans the update's axes it names."""

    op_type = te.ScatterAddOp

    def lower(self, op: te.ScatterAddOp) -> SSAValue:
        lo = self.lo
        names = op.update_names()
        loc = loc_text(op)
        upd_ext = lo.ext(op.update)
        gnames = te.names_of_each(op.gather_indices)
        for g, gn in zip(op.gathers, gnames):
            for n, e in zip(gn, lo.ext(g)):
                message = f"index {n} is {{0}} in the update but {{1}} in an index tensor"
                lo.emit(te.CheckDimOp(upd_ext[names.index(n)], e, message, loc))
        axes = op.axis_list()
        places = [names.index(a.index_name) if a.axis_kind == te.AxisKind.NAME else -1 - a.value for a in axes]
        unsigned = all(te.dtype_of(g).kind == "u" for g in op.gathers)
        check = f"scattered index {{0{':u' if unsigned else ''}}} is out of range for an axis of extent {{1}}"
        scatter = ew.ScatterAddOp(
            op.update,
            list(op.gathers),
            list(op.extents),
            [[names.index(n) for n in gn] for gn in gnames],
            places,
            check,
            te.tensor_type(te.dtype_of(op.result), [te.DYNAMIC] * len(axes)),
            loc,
        )
        res = lo.emit(scatter).results[0]
        sizes = iter(op.extents)
        lo.extents[res] = [next(sizes) if p < 0 else upd_ext[p] for p in places]
        return res


PATTERNS = (LowerAccess, LowerGenerate, LowerFlatten, LowerConcat, LowerPlace, LowerScatterAdd)
