"""Shape inference for tensor_eq modules: every value's concrete shape from the input shapes, without computing.

The module's extents are symbolic (``?``); at run time the caller knows the
input shapes, and every other extent follows from them by the same rules the
reference interpreter applies (index extents by name, slices, gathers,
broadcast extents from ``index`` SSA values). Modes that must size something
before a run (Monte Carlo sample tables, demand selections, static FLOP and
byte estimates for the run trace) ask this module instead of running the
program. Shapes that disagree (an extent check the run would fail) make
what depends on them unknown; a caller that sizes something from the shapes
of an actual call asks for ``checks=True`` and gets the run's own located
error for a failed ``te.check_dim`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Operation, SSAValue

from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.interp.contraction import broadcast_shape

Shape = tuple[int, ...]


def extents_by_name(pairs: Sequence[tuple[Sequence[str], Shape]]) -> dict[str, int]:
    """Extents by index name from (names, shape) pairs; size-1 (broadcast) and unknown (-1) extents yield."""
    ext: dict[str, int] = {}
    for names, shape in pairs:
        for n, s in zip(names, shape):
            if n not in ext or ext[n] in (1, -1):
                ext[n] = s
    return ext


def access_extents(op: te.AccessOp, src: Shape, gathers: Sequence[Shape]) -> dict[str, int]:
    """The extent of every index an access produces, given its source and gather operand shapes."""
    ext: dict[str, int] = {}
    axes = op.axis_list()
    for k, a in enumerate(axes):
        if a.axis_kind == te.AxisKind.SLICE:
            ext.setdefault(a.index_name, len(range(src[k])[slice(*a.slice_bounds())]))
        elif a.axis_kind == te.AxisKind.NAME:
            ext.setdefault(a.index_name, src[k])
    for names, shape in zip(te.names_of_each(op.gather_indices), gathers):
        for n, s in zip(names, shape):
            ext.setdefault(n, s)
    for k, a in enumerate(axes):
        if a.axis_kind == te.AxisKind.OFFSET:
            ext.setdefault(a.index_name, src[k])
    return ext


def op_index_extents(op: Operation, shapes: Mapping[SSAValue, object]) -> dict[str, int]:
    """The extent of every index name an op iterates over (operands' and result's), from known shapes."""
    if isinstance(op, te.AccessOp):
        return access_extents(op, shapes[op.source], [shapes[g] for g in op.gathers])  # type: ignore[arg-type]
    attr = op.attributes.get("operand_indices")
    pairs: list[tuple[Sequence[str], Shape]] = []
    if attr is not None:
        pairs = [(ns, shapes[v]) for v, ns in zip(op.operands, te.names_of_each(attr))]
    out = op.attributes.get("indices")
    if out is not None and op.results and op.results[0] in shapes:
        pairs.append((te.names_of(out), shapes[op.results[0]]))  # type: ignore[arg-type]
    return extents_by_name(pairs)


def infer_shapes(
    module: ModuleOp,
    inputs: Mapping[str, Shape],
    sources: Mapping[str, np.ndarray] | None = None,
    *,
    checks: bool = False,
) -> dict[SSAValue, object]:
    """Every SSA value's shape (tensors) or value (``index`` extents), from the input shapes by name.

    Ops this module does not know (and what depends on them) get None, as do the results of ops whose operand
    shapes do not broadcast (the run's extent checks report those). ``checks``: evaluate each ``te.check_dim``
    whose two extents are known, and raise its located FuseRuntimeError when it fails, as the run would.
    """
    env: dict[SSAValue, object] = {}
    for op in module.body.block.ops:
        if checks and isinstance(op, te.CheckDimOp):
            a, b = env.get(op.lhs), env.get(op.rhs)
            if isinstance(a, int) and isinstance(b, int):  # both extents known: the run's own check
                op.enforce(a, b)
            continue
        try:
            found = _infer(op, env, inputs, sources or {})
        except (KeyError, TypeError, IndexError, ValueError):  # an operand of unknown or disagreeing shape
            found = [None] * len(op.results)
        for r, v in zip(op.results, found):
            env[r] = v
    return env


def _infer(
    op: Operation, env: dict[SSAValue, object], inputs: Mapping[str, Shape], sources: Mapping[str, np.ndarray]
) -> list[object]:
    def shape(v: SSAValue) -> Shape:
        return env[v]  # type: ignore[return-value]

    def out_from(names_each: Sequence[Sequence[str]], values: Sequence[SSAValue], out: Sequence[str]) -> Shape:
        ext = extents_by_name([(ns, shape(v)) for v, ns in zip(values, names_each)])
        return tuple(ext[n] for n in out)

    match op:
        case te.InputOp():
            return [tuple(inputs[op.tensor_name.data])]
        case te.SourceOp():
            return [tuple(sources[op.tensor_name.data].shape)]
        case te.ConstantOp():
            return [tuple(op.value.type.get_shape())]
        case arith.ConstantOp():
            return [int(op.value.value.data)]
        case arith.AddiOp():
            return [env[op.lhs] + env[op.rhs]]  # type: ignore[operator]
        case arith.MuliOp():
            return [env[op.lhs] * env[op.rhs]]  # type: ignore[operator]
        case te.DimOp():
            return [shape(op.source)[op.axis.value.data]]
        case te.SliceLenOp():
            return [len(range(env[op.extent])[slice(*op.bounds())])]  # type: ignore[call-overload]
        case te.AccessOp():
            ext = access_extents(op, shape(op.source), [shape(g) for g in op.gathers])
            return [tuple(ext[n] for n in te.names_of(op.indices))]
        case te.ContractOp() | te.MapOp() | te.AxisOp() | te.ReduceOp():
            each = te.names_of_each(op.operand_indices)
            return [out_from(each, list(op.operands), te.names_of(op.indices))]
        case te.BroadcastOp():
            src = te.names_of_each(op.operand_indices)[0]
            extents = iter(env[e] for e in op.extents)
            s = shape(op.input)
            return [tuple(s[src.index(n)] if n in src else next(extents) for n in te.names_of(op.indices))]
        case te.ConcatOp():
            out = te.names_of(op.indices)
            axis = op.axis.data
            total = 0
            pairs = []
            for v, ns, part in zip(op.inputs, te.names_of_each(op.operand_indices), te.names_of(op.operand_axes)):
                total += shape(v)[list(ns).index(part)]
                pairs.append(([n for n in ns if n != part], tuple(s for n, s in zip(ns, shape(v)) if n != part)))
            ext = extents_by_name(pairs)
            return [tuple(total if n == axis else ext[n] for n in out)]
        case te.FlattenOp():
            s = shape(op.input)
            return [(*s[:-2], s[-2] * s[-1])]
        case te.GenerateOp():
            return [tuple(env[e] for e in op.shape_extents())]
        case te.PlaceOp():
            names = te.names_of_each(op.operand_indices)[0]
            extents = iter(env[e] for e in op.extents)
            s = shape(op.input)
            return [
                tuple(
                    next(extents) if p >= 0 else s[names.index(n)]
                    for n, p in zip(te.names_of(op.indices), op.position_list())
                )
            ]
        case te.ScatterAddOp():
            names = op.update_names()
            extents = iter(env[e] for e in op.extents)
            s = shape(op.update)
            return [
                tuple(
                    next(extents) if a.axis_kind == te.AxisKind.GATHER else s[names.index(a.index_name)]
                    for a in op.axis_list()
                )
            ]
        case te.BlockOp():
            return _block_shapes(op, shape)
        case te.GroupOp():
            return [broadcast_shape(*[shape(v) for v in op.inputs])]
        case te.CastOp():
            return [shape(op.input)]
        case te.FixpointOp():  # each run yields the carried types, and the interpreters keep the init's shape
            return [*(shape(v) for v in op.inits), (), ()]
    return [None] * len(op.results)


def _block_shapes(op: te.BlockOp, shape) -> list[object]:
    names = te.names_of_each(op.operand_indices)
    roles = te.params_of(op.roles)
    params = te.params_of(op.params)
    x = shape(op.inputs[0])
    if op.fn.data == "attention":
        q, k, v = (shape(a) for a in op.inputs[:3])
        qn, kn, vn = names[:3]
        batch = list(qn[:-2])
        ext = extents_by_name([(qn, q), (kn, k), (vn, v)])
        out = tuple(ext[n] for n in batch) + (ext[roles["query"]], ext[roles["value"]])  # type: ignore[index]
        return [out]
    if op.fn.data == "topk":
        ax = list(names[0]).index(roles["axis"])  # type: ignore[arg-type]
        s = list(x)
        s[ax] = min(int(params["k"]), s[ax])  # type: ignore[call-overload]
        return [tuple(s), tuple(s)]
    return [x]


#: An extent in :func:`tied_extents`: ``("axis", input, k)``, an input's axis of unknown size, or ``("int", n)``.
Extent = tuple


def tied_extents(
    module: ModuleOp, known: Mapping[str, Shape], sources: Mapping[str, np.ndarray] | None = None
) -> dict[Extent, Extent]:
    """Each axis of an input that ``known`` does not give, mapped to the root of the extents the module's
    ``te.check_dim`` equalities tie it to (a union-find in one walk): ``("int", n)`` where the class holds a
    known extent (a given input's, a source file's, a constant), else one ``("axis", ...)`` member standing for
    the class. Streaming mode sizes its state inputs from it; the fuzzer draws one extent per class.
    Equalities with derived extents (a slice's length, a concat's sum) are not followed."""
    parent: dict[Extent, Extent] = {}

    def find(x: Extent) -> Extent:
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])  # path halving: x now points at its grandparent
            x = parent[x]
        return x

    env: dict[SSAValue, object] = {}
    unknown: list[Extent] = []
    for op in module.walk():  # nested ops too: a fixpoint body's checks tie extents as well
        if isinstance(op, te.InputOp):
            n = op.tensor_name.data
            env[op.result] = ("state", n) if n not in known else tuple(known[n])
        elif isinstance(op, te.SourceOp) and sources is not None and op.tensor_name.data in sources:
            env[op.result] = tuple(sources[op.tensor_name.data].shape)
        elif isinstance(op, te.DimOp):
            s = env.get(op.source)
            k = op.axis.value.data
            if isinstance(s, tuple) and s and s[0] == "state":
                env[op.result] = ("axis", s[1], k)
                unknown.append(("axis", s[1], k))
            elif isinstance(s, tuple) and k < len(s):  # (a given input of the wrong rank: the run's checks say so)
                env[op.result] = ("int", s[k])
        elif isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
            env[op.result] = ("int", int(op.value.value.data))
        elif isinstance(op, te.CheckDimOp) and op.predicate_name() == "eq":
            a, b = env.get(op.lhs), env.get(op.rhs)
            if isinstance(a, tuple) and isinstance(b, tuple):
                ra, rb = find(a), find(b)
                if ra != rb:
                    parent[ra if ra[0] == "axis" else rb] = rb if ra[0] == "axis" else ra  # an int stays the root
    return {x: find(x) for x in unknown}
