"""AST → tensor_eq lowering, with dependency ordering, extent inference and dtype inference.

The lowering follows LANGUAGE.md §4 literally: a right-hand side is a sum of
terms, each term a product of factors joined by index name and projected
with the equation's operator over the indices the left-hand side lacks; a
call's argument keeps the indices it shares with the rest of the equation
(plus the axis a normalising builtin works along) and projects the others;
each contribution is broadcast to the left-hand side and the contributions of
one left-hand side are summed (or OR-ed, for boolean tensors).

Dtypes are inferred by asking the reference NumPy implementations what they
return for tiny arrays of the operand dtypes, so the IR's types and the
interpreter's results can never disagree. Literals are weak (NEP 50).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from fuse_mlir import builtins as bi
from fuse_mlir.diagnostics import FuseError, Loc, option_hint
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.locations import set_location
from fuse_mlir.frontend import ast as A
from fuse_mlir.frontend.resolve import (
    FLATTEN_INNER,
    FLATTEN_OUTER,
    Resolved,
    call_arg_keep,
    call_axis_name,
    flatten_axes,
    free_indices,
    literal_array,
    other_arg_indices,
    reduce_body_shares,
    rename_indices,
    split_factors,
    split_terms,
)
from fuse_mlir.frontend.shapes import DimDef, Dims, Key, Where
from fuse_mlir.interp import dtypes as dt
from fuse_mlir.interp.numpy_builtins import tucker_ranks
from fuse_mlir.io.sources import FACT_SUFFIXES
from fuse_mlir.lowered import MODES, STATUS_SEP, FixpointGroup, InputSpec, Lowered, LowerOptions


@dataclass(frozen=True)
class Weak:
    """A literal not yet given a dtype: it takes the dtype of what it combines with (NEP 50)."""

    value: int | float


@dataclass(frozen=True)
class TV:
    """A lowered tensor value and the index names of its axes."""

    value: SSAValue
    names: tuple[str, ...]

    @property
    def dtype(self) -> np.dtype:
        return te.dtype_of(self.value)


Val = TV | Weak


MAP_OPS = {
    "+": "add",
    "-": "sub",
    "*": "mul",
    "/": "div",
    "**": "pow",
    "<": "lt",
    "<=": "le",
    ">": "gt",
    ">=": "ge",
    "==": "eq",
    "!=": "ne",
    "&&": "and",
    "||": "or",
}


def ref_text(ref: A.TensorRef) -> str:
    """A tensor reference as written (for messages)."""
    if ref.indices is None:
        return ref.name
    return f"{ref.name}[{', '.join(item_text(i) for i in ref.indices)}]"


def display_name(name: str) -> str:
    """An index name as the program wrote it (a concat argument's joined axis is renamed apart as ``i#c1.0``)."""
    return name.split("#")[0]


def item_text(item: A.IndexItem) -> str:
    match item:
        case A.IndexName(name=n, dotted=d, time=t):
            return ("*" if t else "") + display_name(n) + ("." if d else "")
        case A.IndexOffset(name=n, offset=o, time=t):
            return ("*" if t else "") + display_name(n) + (f"+{o}" if o >= 0 else str(o))
        case A.IndexNumber(value=v):
            return str(v)
        case A.IndexSlice(text=t):
            return t
        case A.IndexTensor():
            return "<expr>"
    return "?"


def _unknown_rank_error(name: str, ref: A.TensorRef, expr: A.Expr, lhs: Sequence[str]) -> FuseError:
    """The error for a bare name used nowhere with indices: what it most likely is, and the fix.

    A name that is also an index of the equation (``i != j``, ``X[i+a]``) is an
    index used as a value, which the language has no meaning for; anything
    else is an input whose rank nothing fixes (a scalar input is ``s[]``).
    """
    indices = set(lhs) | {i.name for r in tensor_refs(expr) for i in r.indices or () if isinstance(i, A.IndexName)}
    in_gather = any(
        ref is inner
        for r in tensor_refs(expr)
        for item in r.indices or ()
        if isinstance(item, A.IndexTensor)
        for inner in tensor_refs(item.expr)
    )
    if name in indices and in_gather:
        return FuseError(
            f"index {name} is used as a value inside an index position: there an index is written {name}, "
            f"{name}+1 or {name}-1 (a number offset), or an integer tensor gathers positions (X[P[{name}]]); "
            "arithmetic with another name is not an index",
            ref.loc,
        )
    if name in indices:
        return FuseError(
            f"index {name} is used as a value: an index names an axis and has no value of its own; compare or "
            f"compute with tensors indexed by it (e.g. a tensor Eye[i,j] for i == j), or use even({name})/odd({name})",
            ref.loc,
        )
    return FuseError(
        f"input {name} is used without indices, so its rank is unknown: write {name}[] for a scalar input, or give "
        f"its indices ({name}[i]) in at least one place",
        ref.loc,
    )


def tensor_refs(e: A.Expr) -> list[A.TensorRef]:
    """Every tensor reference inside an expression, gathers included, in order."""
    out: list[A.TensorRef] = []

    def walk(x: object) -> None:
        if isinstance(x, A.TensorRef):
            out.append(x)
            for item in x.indices or ():
                if isinstance(item, A.IndexTensor):
                    walk(item.expr)
            return
        if isinstance(x, A.Call):
            b = bi.lookup(x.name)
            for a in x.args:
                if b is not None and b.kind is bi.Kind.INDEX_FN:
                    continue
                walk(a)
            for k, v in x.kwargs:
                if k != "axis":
                    walk(v)
            return
        if isinstance(x, A.Case):
            for c, v in x.branches:
                walk(c)
                walk(v)
            walk(x.default)
            return
        if isinstance(x, tuple):
            for y in x:
                walk(y)
            return
        for attr in ("expr", "operand", "lhs", "rhs", "cond", "then", "orelse", "body", "items"):
            if hasattr(x, attr):
                walk(getattr(x, attr))

    walk(e)
    return out


class Lowerer:
    """Builds one tensor_eq module for one input dtype signature."""

    def __init__(
        self,
        prog: Resolved,
        input_dtypes: dict[str, np.dtype],
        source_arrays: dict[str, np.ndarray],
        options: LowerOptions | None = None,
    ):
        self.options = options or LowerOptions()
        if self.options.mode not in MODES:
            raise FuseError(f"unknown mode '{self.options.mode}' (available: {', '.join(MODES)})")
        self.temperature = dict(self.options.temperature)
        self.counter: SSAValue | None = None  # the iteration counter inside a te.fixpoint body
        self.current: str | None = None  # the tensor whose group is being lowered
        self.fixpoints: list[FixpointGroup] = []
        self._fixpoint_ops: list[tuple[te.FixpointOp, FixpointGroup]] = []
        self._tables: dict[tuple[str, str], SSAValue] = {}
        self.prog = prog
        self.input_dtypes = input_dtypes
        self.source_arrays = source_arrays
        self.ops: list[Operation] = []
        self.dims = Dims()
        self.values: dict[str, TV] = {}
        self.extent_cache: dict[Key, SSAValue] = {}
        self.eq_id = -1
        self.dotted: str | None = None
        self.layout: tuple[str, ...] = ()  # the current equation's left-hand indices: intermediates use their order
        self.rhs: dict[int, A.Expr] = {}
        self._concat_ids = 0

    # -- helpers -------------------------------------------------------------

    def emit(self, op: Operation) -> Operation:
        self.ops.append(op)
        return op

    def index(self, value: int) -> SSAValue:
        """An ``index`` constant (an extent, a position)."""
        return self.emit(arith.ConstantOp(IntegerAttr(value, IndexType()))).results[0]

    def L(self, name: str, eq: int | None = None) -> Key:
        return ("L", self.eq_id if eq is None else eq, name)

    def shape(self, names: Sequence[str]) -> list[int]:
        out = []
        for n in names:
            s = self.dims.static_extent(self.L(n))
            out.append(te.DYNAMIC if s is None else s)
        return out

    def ttype(self, dtype: np.dtype, names: Sequence[str]):
        return te.tensor_type(dtype, self.shape(names))

    # -- program structure ---------------------------------------------------

    def run(self) -> Lowered:
        prog = self.prog
        groups: dict[str, list[tuple[int, A.Equation]]] = {}
        for k, eq in enumerate(prog.equations):
            groups.setdefault(eq.lhs.name, []).append((k, eq))
        sources = {s.lhs.name: s for s in prog.sources}
        for name, s in sources.items():
            if name in groups:
                raise FuseError(
                    f"'{name}' is loaded from a file and also defined by an equation",
                    groups[name][0][1].loc,
                    [("loaded here", s.loc)],
                )
        self._reject_time_indices()
        self.groups = groups
        self.sources = sources
        self.ranks = self._ranks(groups)
        if self.options.mode == "fixpoint":
            components = self._components(groups)
            order = [n for c in components for n in c]
        else:
            order = self._order(groups)
            components = [[n] for n in order]
        inputs = self._inputs(groups, sources)
        self._collect_dims(groups, sources, inputs)

        for spec in inputs:
            op = self.emit(
                te.InputOp(
                    spec.name,
                    self._canon_names(spec.name, spec.rank),
                    te.tensor_type(spec.dtype, [te.DYNAMIC] * spec.rank),
                )
            )
            self.values[spec.name] = TV(op.results[0], self._canon_names(spec.name, spec.rank))
        for name, s in sources.items():
            arr = self._pad_facts(name, self.source_arrays[name])
            self.source_arrays[name] = arr
            names = self._canon_names(name, arr.ndim)
            op = self.emit(te.SourceOp(name, s.path, names, te.tensor_type(arr.dtype, arr.shape), s.loc.encode()))
            self.values[name] = TV(op.results[0], names)
        self._emit_checks()

        deps = self._deps(groups)
        for comp in components:
            if len(comp) > 1 or comp[0] in deps[comp[0]]:
                self._lower_fixpoint(comp)
            else:
                self._lower_group(comp[0], groups[comp[0]])
        for sink in prog.sinks:
            self._lower_sink(sink)
        exports = self._exports(groups)
        values = [self.values[n].value for n in exports]
        names = list(exports)
        for fp_op, info in self._fixpoint_ops:
            for status, v in zip(te.FIXPOINT_STATUS, (fp_op.iterations, fp_op.converged)):
                values.append(v)
                names.append(f"{info.label}{STATUS_SEP}{status}")
        self.emit(te.ExportOp(values, names))
        module = ModuleOp(self.ops)
        return Lowered(module, inputs, exports, order, self.source_arrays, self.fixpoints)

    def _pad_facts(self, name: str, arr: np.ndarray) -> np.ndarray:
        """Zero-pad a facts tensor to the extents its axes settled on (the relation's domain)."""
        target = [self.dims.static_extent(("T", name, k)) or n for k, n in enumerate(arr.shape)]
        if list(arr.shape) == target:
            return arr
        out = np.zeros(target, dtype=arr.dtype)
        out[tuple(slice(0, n) for n in arr.shape)] = arr
        return out

    def _reject_time_indices(self) -> None:
        """Virtual time (``*t``) belongs to streaming mode, which single-pass lowering does not run."""
        for eq in self.prog.equations:
            for ref in [eq.lhs, *tensor_refs(eq.rhs)]:
                for item in ref.indices or ():
                    if isinstance(item, A.IndexName | A.IndexOffset) and item.time:
                        raise FuseError(
                            f"virtual-time index *{item.name} needs streaming mode: {option_hint('mode', 'streaming')} "
                            "(single-pass programs use ordinary indices)",
                            item.loc,
                        )

    def _canon_names(self, name: str, rank: int) -> list[str]:
        """Canonical axis names of a tensor: its first equation's plain left-hand names where possible."""
        eqs = self.groups.get(name)
        read_as = self.input_names.get(name)
        if not eqs and read_as is not None and len(read_as) == rank:
            return read_as
        if eqs:
            items = eqs[0][1].lhs.indices or ()
            names = [i.name if isinstance(i, A.IndexName) else f"d{k}" for k, i in enumerate(items)]
            if len(set(names)) == len(names):
                return names
        return [f"d{k}" for k in range(rank)]

    def _ranks(self, groups) -> dict[str, tuple[int, Loc]]:
        ranks: dict[str, tuple[int, Loc]] = {}

        def note(name: str, rank: int, loc: Loc, what: str) -> None:
            if name in ranks and ranks[name][0] != rank:
                raise FuseError(
                    f"{name} {what} {rank} ind{'ex' if rank == 1 else 'ices'} here but {ranks[name][0]} elsewhere",
                    loc,
                    [(f"{name} has {ranks[name][0]} here", ranks[name][1])],
                )
            ranks.setdefault(name, (rank, loc))

        for name, eqs in groups.items():
            for _, eq in eqs:
                note(name, len(eq.lhs.indices or ()), eq.lhs.loc, "is defined with")
        for s in self.prog.sources:
            note(s.lhs.name, len(s.lhs.indices or ()), s.lhs.loc, "is loaded with")
        for expr in [eq.rhs for eqs in groups.values() for _, eq in eqs] + [s.rhs for s in self.prog.sinks]:
            for ref in tensor_refs(expr):
                if ref.indices is not None:
                    note(ref.name, len(ref.indices), ref.loc, "is used with")
        return ranks

    def _deps(self, groups) -> dict[str, list[str]]:
        """The groups each group's equations read, in order of first use."""
        deps: dict[str, list[str]] = {}
        for name, eqs in groups.items():
            seen: dict[str, None] = {}
            for _, eq in eqs:
                for ref in tensor_refs(eq.rhs):
                    if ref.name in groups:
                        seen.setdefault(ref.name, None)
            deps[name] = list(seen)
        return deps

    def _components(self, groups) -> list[list[str]]:
        """Strongly connected components of the group graph, dependencies first (Tarjan; stable order).

        Each component's names are in order of first definition.
        """
        deps = self._deps(groups)
        rank = {n: k for k, n in enumerate(groups)}
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        on_stack: set[str] = set()
        stack: list[str] = []
        out: list[list[str]] = []
        for root in groups:
            if root in index:
                continue
            work: list[tuple[str, int]] = [(root, 0)]
            while work:
                node, i = work.pop()
                if i == 0:
                    index[node] = low[node] = len(index)
                    stack.append(node)
                    on_stack.add(node)
                if i < len(deps[node]):
                    work.append((node, i + 1))
                    nxt = deps[node][i]
                    if nxt not in index:
                        work.append((nxt, 0))
                    elif nxt in on_stack:
                        low[node] = min(low[node], index[nxt])
                    continue
                if work and work[-1][0] != node:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    comp: list[str] = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    out.append(sorted(comp, key=rank.__getitem__))
        return out

    def _order(self, groups) -> list[str]:
        """Groups in dependency order (stable by first definition); a cycle is an error naming it."""
        deps = self._deps(groups)
        order: list[str] = []
        state: dict[str, int] = {}
        for root in groups:
            if state.get(root):
                continue
            stack: list[tuple[str, int]] = [(root, 0)]
            path: list[str] = []
            while stack:
                node, i = stack.pop()
                if i == 0:
                    if state.get(node) == 2:
                        continue
                    state[node] = 1
                    path.append(node)
                if i < len(deps[node]):
                    stack.append((node, i + 1))
                    nxt = deps[node][i]
                    if state.get(nxt) == 1:
                        cyc = path[path.index(nxt) :] + [nxt]
                        eq = groups[nxt][0][1]
                        raise FuseError(
                            f"dependency cycle: {' -> '.join(cyc)} (recursive programs need {option_hint('mode', 'fixpoint')})",
                            eq.loc,
                        )
                    if not state.get(nxt):
                        stack.append((nxt, 0))
                else:
                    state[node] = 2
                    path.pop()
                    order.append(node)
        return order

    def _inputs(self, groups, sources) -> list[InputSpec]:
        specs: dict[str, InputSpec] = {}
        exprs = [eq.rhs for eqs in groups.values() for _, eq in eqs] + [s.rhs for s in self.prog.sinks]
        index_inputs = {
            r.name
            for expr in exprs
            for ref in tensor_refs(expr)
            for item in ref.indices or ()
            if isinstance(item, A.IndexTensor)
            for r in tensor_refs(item.expr)
        }
        self.input_names: dict[str, list[str]] = {}
        lhs_names = [
            [i.name for i in eq.lhs.indices or () if isinstance(i, A.IndexName)]
            for eqs in groups.values()
            for _, eq in eqs
        ] + [[] for _ in self.prog.sinks]
        for expr, lhs in zip(exprs, lhs_names):
            for ref in tensor_refs(expr):
                names = [i.name for i in ref.indices or () if isinstance(i, A.IndexName)]
                if len(names) == len(ref.indices or ()) and len(set(names)) == len(names):
                    self.input_names.setdefault(ref.name, names)
                n = ref.name
                if n in groups or n in sources or n in specs:
                    continue
                if n not in self.ranks:
                    raise _unknown_rank_error(n, ref, expr, lhs)
                default = np.int64 if n in index_inputs else np.float64
                dtype = np.dtype(self.input_dtypes.get(n, default))
                specs[n] = InputSpec(n, self.ranks[n][0], dtype, ref.loc)
        for name, loc in self.prog.exports:
            if name not in groups and name not in sources and name not in specs:
                raise FuseError(f"cannot export '{name}': it is not defined or used by the program", loc)
        return list(specs.values())

    def _exports(self, groups) -> list[str]:
        if self.prog.exports:
            out: dict[str, None] = {}
            for name, _ in self.prog.exports:
                out.setdefault(name, None)
            return list(out)
        return list(groups)

    # -- extents -------------------------------------------------------------

    def _collect_dims(self, groups, sources, inputs: list[InputSpec]) -> None:
        dims = self.dims
        input_names = {s.name for s in inputs}
        self.locals_by_name: dict[str, list[Key]] = {}
        self.where: dict[Key, Where] = {}
        for name, s in sources.items():
            arr = self.source_arrays[name]
            kind = "bound" if Path(s.path).suffix.lower() in FACT_SUFFIXES else "const"
            for k, n in enumerate(arr.shape):
                iname = item_text(s.lhs.indices[k]) if s.lhs.indices else f"axis {k}"
                dims.add_def(("T", name, k), DimDef(kind, int(n), Where(iname, ref_text(s.lhs), s.lhs.loc)))
        numeric_axes: dict[tuple[str, int], list[int]] = {}

        def local(eq: int, name: str, where: Where) -> Key:
            key = ("L", eq, name)
            dims.find(key)
            if key not in self.where:
                self.where[key] = where
                self.locals_by_name.setdefault(name.split("#")[0], []).append(key)
                if name in self.prog.axes:
                    size, aloc = self.prog.axes[name]
                    dims.add_def(key, DimDef("const", size, Where(name, f"axis {name} = {size}", aloc)))
            return key

        def visit_ref(eq: int, ref: A.TensorRef) -> None:
            if ref.indices is None:
                return
            text = ref_text(ref)
            for k, item in enumerate(ref.indices):
                tkey = ("T", ref.name, k)
                dims.find(tkey)
                if isinstance(item, A.IndexName | A.IndexOffset):
                    w = Where(display_name(item.name), text, item.loc)
                    key = local(eq, item.name, w)
                    if ref.name in input_names:
                        dims.add_def(tkey, DimDef("input", (ref.name, k), w))
                    dims.union(key, tkey, w)
                elif isinstance(item, A.IndexSlice):
                    key = local(eq, item.text, Where(item.text, text, item.loc))
                    dims.add_def(
                        key,
                        DimDef(
                            "derived",
                            ("slice", tkey, item.start, item.stop, item.step),
                            Where(item.text, text, item.loc),
                        ),
                    )
                    if ref.name in input_names:
                        dims.add_def(tkey, DimDef("input", (ref.name, k), Where(f"axis {k}", text, item.loc)))
                elif ref.name in input_names:
                    dims.add_def(tkey, DimDef("input", (ref.name, k), Where(f"axis {k}", text, item.loc)))

        for name, eqs in groups.items():
            for eid, eq in eqs:
                self.eq_id = eid
                lhs = eq.lhs
                self.dotted = next((i.name for i in lhs.indices or () if isinstance(i, A.IndexName) and i.dotted), None)
                lhs_names = [i.name for i in lhs.indices or () if isinstance(i, A.IndexName)]
                rhs = self._prepare_rhs(eq, eid, lhs_names, local)
                self.rhs[eid] = rhs
                for ref in tensor_refs(rhs):
                    visit_ref(eid, ref)
                for k, item in enumerate(lhs.indices or ()):
                    tkey = ("T", name, k)
                    dims.find(tkey)
                    if isinstance(item, A.IndexName):
                        w = Where(item.name, ref_text(lhs), item.loc)
                        key = local(eid, item.name, w)
                        dims.union(tkey, key, w)
                    elif isinstance(item, A.IndexNumber):
                        if item.value < 0:
                            raise FuseError("a position written on the left must be non-negative", item.loc)
                        numeric_axes.setdefault((name, k), []).append(item.value)
                    else:
                        raise FuseError("the left-hand side takes index names and numeric positions only", item.loc)
                seen = [i.name for i in lhs.indices or () if isinstance(i, A.IndexName)]
                if len(set(seen)) != len(seen):
                    raise FuseError("an index name may appear only once on the left-hand side", lhs.loc)
        for sid, sink in enumerate(self.prog.sinks):
            self.eq_id = -1 - sid
            self.dotted = None
            rhs = self._prepare_rhs(sink, self.eq_id, free_indices(sink.rhs), local)
            self.rhs[self.eq_id] = rhs
            for ref in tensor_refs(rhs):
                visit_ref(self.eq_id, ref)
        # Axes written only at numeric positions are one past the largest position.
        for (name, k), positions in numeric_axes.items():
            tkey = ("T", name, k)
            if not dims.definitions(tkey):
                eq = groups[name][0][1]
                dims.add_def(
                    tkey,
                    DimDef("const", max(positions) + 1, Where(f"axis {k}", ref_text(eq.lhs), eq.lhs.loc)),
                )
        dims.check_constants()
        dims.resolve_by_name(self.locals_by_name, self.where)
        dims.settle_bounds()
        dims.check_constants()
        dims.require_all(list(self.where), self.where)
        for name, eqs in groups.items():
            for k in range(self.ranks[name][0]):
                if not dims.definitions(("T", name, k)):
                    raise FuseError(f"cannot infer the extent of axis {k} of {name}", eqs[0][1].loc)

    def _prepare_rhs(self, eq: A.Equation | A.Sink, eid: int, lhs_names: list[str], local) -> A.Expr:
        """Rename each concat argument's joined axis apart and record the derived extents (sum, product)."""
        dims = self.dims

        def rewrite(x: A.Expr) -> A.Expr:
            if isinstance(x, A.Call):
                b = bi.lookup(x.name)
                if b is not None and b.kind is bi.Kind.CONCAT:
                    args = [rewrite(a) for a in x.args]
                    if len(args) == 1:
                        names = free_indices(args[0])
                        fresh = [n for n in lhs_names if n not in names]
                        if len(fresh) != 1:
                            raise FuseError(
                                "a flattening concat needs exactly one left-hand index that its argument lacks, "
                                "to name the flattened axis",
                                x.loc,
                            )
                        outer, inner = flatten_axes(names, lhs_names, x.loc)
                        w = Where(fresh[0], "concat(...)", x.loc)
                        ka, kc = local(eid, outer, w), local(eid, inner, w)
                        dims.add_def(local(eid, fresh[0], w), DimDef("derived", ("mul", (ka, kc)), w))
                        kw = (("axis", fresh[0]), (FLATTEN_OUTER, outer), (FLATTEN_INNER, inner))
                        return A.Call(
                            "__flatten__", (args[0],), tuple((k, A.TensorRef(n, None, x.loc)) for k, n in kw), x.loc
                        )
                    axis = call_axis_name(x, free_indices(args[0]), self.dotted)
                    if axis is None:
                        raise FuseError("concat needs an axis", x.loc)
                    self._concat_ids += 1
                    parts = []
                    keys = []
                    for k, a in enumerate(args):
                        if axis not in free_indices(a):
                            raise FuseError(f"concat argument {k + 1} has no axis {axis}", a.loc)
                        new = f"{axis}#c{self._concat_ids}.{k}"
                        parts.append(rename_indices(a, {axis: new}))
                        keys.append(local(eid, new, Where(axis, f"concat argument {k + 1}", a.loc)))
                    w = Where(axis, "concat(...)", x.loc)
                    dims.add_def(local(eid, axis, w), DimDef("derived", ("sum", tuple(keys)), w))
                    names = tuple(f"{axis}#c{self._concat_ids}.{k}" for k in range(len(args)))
                    return A.Call(
                        "__concat__",
                        tuple(parts),
                        (("axis", A.TensorRef(axis, None, x.loc)),)
                        + tuple((f"__part{k}", A.TensorRef(n, None, x.loc)) for k, n in enumerate(names)),
                        x.loc,
                    )
                if b is not None and b.name == "causal_mask":
                    if len(lhs_names) != 2:
                        raise FuseError("causal_mask builds a matrix: its left-hand side needs two indices", x.loc)
                    w = Where(lhs_names[0], "causal_mask(...)", x.loc)
                    p, q = local(eid, lhs_names[0], w), local(eid, lhs_names[1], w)
                    dims.union(p, q, w)
                    if x.args:
                        size = x.args[0]
                        if not (isinstance(size, A.Number) and size.is_int and size.value >= 0):
                            raise FuseError("causal_mask(L) takes a non-negative integer size", size.loc)
                        dims.add_def(p, DimDef("const", int(size.value), w))
                    return x
                if b is not None and b.name == "const":
                    arr = literal_array(x.args[0])
                    if arr.ndim == 0:
                        # No axes to name: a literal, usable anywhere one is (and weak, as literals are).
                        return A.Number(arr.item(), arr.dtype.kind != "f", x.loc)
                    if arr.ndim != len(lhs_names):
                        raise FuseError(
                            f"const(...) has rank {arr.ndim} but the left-hand side has {len(lhs_names)} indices",
                            x.loc,
                        )
                    for n, size in zip(lhs_names, arr.shape):
                        w = Where(n, "const(...)", x.loc)
                        dims.add_def(local(eid, n, w), DimDef("const", int(size), w))
                    return x
                if b is not None and b.kind is bi.Kind.INDEX_FN:
                    for n in free_indices(x):
                        local(eid, n, Where(n, f"{x.name}({n})", x.loc))
                    return x
                return replace(
                    x, args=tuple(rewrite(a) for a in x.args), kwargs=tuple((k, rewrite(v)) for k, v in x.kwargs)
                )
            from fuse_mlir.frontend.resolve import _map_children

            return _map_children(x, rewrite)

        rhs = rewrite(eq.rhs)
        for n in free_indices(rhs):
            local(eid, n, Where(n, "the right-hand side", eq.rhs.loc))
        for item in eq.lhs.indices or () if isinstance(eq, A.Equation) else ():
            if isinstance(item, A.IndexName):
                local(eid, item.name, Where(item.name, ref_text(eq.lhs), item.loc))
        return rhs

    def extent(self, key: Key) -> SSAValue:
        """The SSA value of a class's canonical extent (emitted once)."""
        root = self.dims.find(key)
        if root in self.extent_cache:
            return self.extent_cache[root]
        d = self.dims.canonical(key)
        if d is None:
            raise FuseError(f"internal: no extent for {key}")
        v = self._def_value(d)
        self.extent_cache[root] = v
        return v

    def _def_value(self, d: DimDef) -> SSAValue:
        if d.kind == "const":
            return self.index(int(d.value))
        if d.kind == "input":
            name, axis = d.value
            return self.emit(te.DimOp(self.values[name].value, axis)).results[0]
        op, *args = d.value
        if op == "slice":
            key, start, stop, step = args
            return self.emit(te.SliceLenOp(self.extent(key), start, stop, step)).results[0]
        vals = [self.extent(k) for k in args[0]]
        acc = vals[0]
        for v in vals[1:]:
            cls = arith.AddiOp if op == "sum" else arith.MuliOp
            acc = self.emit(cls(acc, v)).results[0]
        return acc

    def _emit_checks(self) -> None:
        """Materialise every class's extent and check each further definition against it, up front."""
        roots: dict[Key, None] = {}
        for k in list(self.dims.parent):
            roots.setdefault(self.dims.find(k), None)
        for root in roots:
            defs = self.dims.definitions(root)
            canon = self.dims.canonical(root)
            if canon is None:
                continue
            for d in defs:
                if d is canon or (d.kind == "const" and canon.kind == "const"):
                    continue
                a = self.extent(root)
                b = self._def_value(d)
                name, canon_text, d_text, loc = self.dims.conflict(canon, d)
                msg = f"{name} is {{1}} in {d_text} but {{0}} in {canon_text}"
                self.emit(te.CheckDimOp(a, b, msg, loc.encode()))

    # -- equations -----------------------------------------------------------

    def _lower_fixpoint(self, comp: list[str]) -> None:
        """Lower a recursive group (one strongly connected component) to a ``te.fixpoint``.

        Every tensor of the component starts at zeros; each body run evaluates
        all of their groups from the previous run's values (Jacobi order). The
        carried dtypes are found by iterating dtype inference from the
        promoted dtype of what the equations read (booleans stay int8).
        """
        if self.options.max_iters < 1:
            raise FuseError(f"max_iters must be at least 1 (got {self.options.max_iters})")
        first = self.groups[comp[0]][0][1]
        outside = [
            self.values[r.name].dtype
            for n in comp
            for _, eq in self.groups[n]
            for r in tensor_refs(eq.rhs)
            if r.name not in comp and r.name in self.values
        ]
        base = np.result_type(*outside) if outside else np.dtype(np.float64)
        boolean = {n: any(eq.lhs.boolean for _, eq in self.groups[n]) for n in comp}
        dtypes = {n: np.dtype(np.int8) if boolean[n] else base for n in comp}
        for _ in range(8):
            trial, _, got = self._fixpoint_body(comp, dtypes)
            for op in trial:
                op.drop_all_references()
            new = {n: dtypes[n] if boolean[n] else np.result_type(dtypes[n], got[n]) for n in comp}
            if new == dtypes:
                break
            dtypes = new
        else:
            raise FuseError(f"cannot settle the dtypes of the recursive group {', '.join(comp)}", first.loc)
        inits = []
        for n in comp:
            zero = self.emit(te.ConstantOp(np.zeros((), dtype=dtypes[n]), [])).results[0]
            canon = self._canon_names(n, self.ranks[n][0])
            extents = [self.extent(("T", n, k)) for k in range(len(canon))]
            t = te.tensor_type(dtypes[n], [self._static_axis(n, k) for k in range(len(canon))])
            inits.append(self.emit(te.BroadcastOp(zero, extents, [], canon, t)).results[0] if canon else zero)
        region, block = te.FixpointOp.make_body(inits)
        body_ops, yielded, _ = self._fixpoint_body(comp, dtypes, block)
        for op in body_ops:
            block.add_op(op)
        block.add_op(te.YieldOp(yielded))
        label = "+".join(comp)
        opts = self.options
        fp = self.emit(te.FixpointOp(label, inits, comp, region, opts.max_iters, opts.atol, opts.rtol))
        assert isinstance(fp, te.FixpointOp)
        for n, r in zip(comp, fp.carried):
            self.values[n] = TV(r, tuple(self._canon_names(n, self.ranks[n][0])))
        info = FixpointGroup(label, tuple(comp), opts.max_iters)
        self.fixpoints.append(info)
        self._fixpoint_ops.append((fp, info))

    def _fixpoint_body(
        self, comp: list[str], dtypes: dict[str, np.dtype], block: Block | None = None
    ) -> tuple[list[Operation], list[SSAValue], dict[str, np.dtype]]:
        """The ops of one body run (into a scratch list), the next values cast to ``dtypes``, and their own dtypes.

        Without ``block`` this is a trial run for dtype inference over fresh block arguments.
        """
        if block is None:
            canon_types = [
                te.tensor_type(dtypes[n], [self._static_axis(n, k) for k in range(self.ranks[n][0])]) for n in comp
            ]
            block = Block(arg_types=[te.counter_type(), *canon_types])
        saved = (self.ops, dict(self.extent_cache), dict(self.values), self._concat_ids, dict(self._tables))
        self.ops = []
        self.counter = block.args[0]
        args = {n: TV(a, tuple(self._canon_names(n, self.ranks[n][0]))) for n, a in zip(comp, block.args[1:])}
        got: dict[str, np.dtype] = {}
        yielded: list[SSAValue] = []
        try:
            for n in comp:
                self.values.update(args)  # Jacobi: every group reads the previous run's values
                self._lower_group(n, self.groups[n])
                tv = self.values[n]
                got[n] = tv.dtype
                if tv.dtype != dtypes[n]:
                    t = te.tensor_type(dtypes[n], tv.value.type.get_shape())
                    tv = TV(self.emit(te.CastOp(tv.value, tv.names, t)).results[0], tv.names)
                yielded.append(tv.value)
            ops = self.ops
        finally:
            self.ops, self.extent_cache, self.values, self._concat_ids, self._tables = saved
            self.counter = None
        return ops, yielded, got

    def _temperature(self, like: np.dtype) -> Val | None:
        """The scheduled T for a ``sig(x)`` without one in the current tensor's equations, if any.

        Outside a fixpoint body it is the schedule's first entry (a constant);
        inside, the entry of the current iteration, read from a table.
        """
        if self.current is None or self.current not in self.temperature:
            return None
        table = self.temperature[self.current]
        if self.counter is None:
            return Weak(float(table[0]))
        dtype = like if like.kind == "f" else np.dtype(np.float64)
        key = (self.current, dtype.name)
        tab = self._tables.get(key)
        if tab is None:
            tab = self.emit(te.ConstantOp(np.asarray(table, dtype=dtype), ["it"])).results[0]
            self._tables[key] = tab
        at = te.AccessOp(tab, [te.AccessAxisAttr.gather(0)], [], te.tensor_type(dtype, []), [self.counter], [[]])
        return TV(self.emit(at).results[0], ())

    def _lower_group(self, name: str, eqs: list[tuple[int, A.Equation]]) -> None:
        self.current = name
        rank = self.ranks[name][0]
        canon = self._canon_names(name, rank)
        boolean = any(eq.lhs.boolean for _, eq in eqs)
        contributions: list[SSAValue] = []
        for eid, eq in eqs:
            self.eq_id = eid
            lhs = eq.lhs
            self.dotted = next((i.name for i in lhs.indices or () if isinstance(i, A.IndexName) and i.dotted), None)
            items = list(lhs.indices or ())
            names = [i.name for i in items if isinstance(i, A.IndexName)]
            self.layout = tuple(names)
            val = self.lower_sum(self.rhs[eid], names, eq.projection, set(names))
            tv = self.to_names(val, names)
            if any(isinstance(i, A.IndexNumber) for i in items):
                positions = [i.value if isinstance(i, A.IndexNumber) else -1 for i in items]
                out_names = [i.name if isinstance(i, A.IndexName) else f"#{k}" for k, i in enumerate(items)]
                extents = [self.extent(("T", name, k)) for k, i in enumerate(items) if isinstance(i, A.IndexNumber)]
                for k, i in enumerate(items):
                    static = self.dims.static_extent(("T", name, k))
                    if isinstance(i, A.IndexNumber) and static is not None and i.value >= static:
                        raise FuseError(
                            f"position {i.value} is outside axis {k} of {name}, whose extent is {static}", i.loc
                        )
                    if isinstance(i, A.IndexNumber) and static is None:
                        pos = self.index(i.value)
                        msg = f"position {{0}} is outside axis {k} of {name}, whose extent is {{1}}"
                        self.emit(te.CheckDimOp(pos, self.extent(("T", name, k)), msg, i.loc.encode(), "lt"))
                shape = [self._static_axis(name, k) for k in range(len(items))]
                op = self.emit(
                    te.PlaceOp(
                        tv.value,
                        extents,
                        positions,
                        tv.names,
                        out_names,
                        te.tensor_type(tv.dtype, shape),
                        lhs.loc.encode(),
                    )
                )
                tv = TV(op.results[0], tuple(out_names))
            contributions.append(tv.value)
        dtypes = [te.dtype_of(v) for v in contributions]
        dtype = np.dtype(np.int8) if boolean else np.result_type(*dtypes)
        shape = [self._static_axis(name, k) for k in range(rank)]
        if te.DYNAMIC not in shape and math.prod(shape) * dtype.itemsize >= 2**63:
            # Known at compile time: no backend could hold it (native sizes are 64-bit; see ERR_SIZE at run time).
            raise FuseError(
                f"{name} has {math.prod(shape)} elements of {dtype.itemsize} bytes (extents {shape}): "
                "2^63 bytes or more, more than any array can hold",
                eqs[0][1].lhs.loc,
            )
        op = self.emit(te.GroupOp(name, contributions, canon, boolean, te.tensor_type(dtype, shape)))
        self.values[name] = TV(op.results[0], tuple(canon))

    def _static_axis(self, name: str, k: int) -> int:
        s = self.dims.static_extent(("T", name, k))
        return te.DYNAMIC if s is None else s

    def _lower_sink(self, sink: A.Sink) -> None:
        self.current = None
        self.eq_id = -1 - self.prog.sinks.index(sink)
        self.dotted = None
        rhs = self.rhs[self.eq_id]
        if isinstance(rhs, A.Call) and (b := bi.lookup(rhs.name)) is not None and b.name == "topk":
            values = self.lower_block(rhs, set(free_indices(rhs.args[0])), "sum")
            self.emit(te.SinkOp(sink.path, values, ["indices", "values"], sink.loc.encode()))
            return
        names = free_indices(rhs)
        self.layout = tuple(names)
        val = self.lower_sum(rhs, names, "sum", set(names))
        tv = self.to_names(val, names)
        label = rhs.name if isinstance(rhs, A.TensorRef) else "value"
        self.emit(te.SinkOp(sink.path, [tv.value], [label], sink.loc.encode()))

    # -- expressions ---------------------------------------------------------

    def materialize(self, v: Val, dtype: np.dtype | None = None) -> TV:
        if isinstance(v, TV):
            return v
        dtype = dt.weak_dtype(v.value, [] if dtype is None else [dtype])
        op = self.emit(te.ConstantOp(np.asarray(v.value, dtype=dtype), []))
        return TV(op.results[0], ())

    def to_names(self, v: Val, names: Sequence[str]) -> TV:
        """Broadcast/permute a value to exactly ``names`` (extents of new names from their classes)."""
        tv = self.materialize(v)
        names = tuple(names)
        if tv.names == names:
            return tv
        extra = [n for n in tv.names if n not in names]
        if extra:
            raise FuseError(f"internal: indices {extra} left unprojected")
        new = [n for n in names if n not in tv.names]
        op = self.emit(
            te.BroadcastOp(
                tv.value, [self.extent(self.L(n)) for n in new], tv.names, names, self.ttype(tv.dtype, names)
            )
        )
        return TV(op.results[0], names)

    def lower_sum(self, expr: A.Expr, keep: Sequence[str], proj: str, needed: set[str]) -> Val:
        """A sum of terms, each projected with ``proj`` onto the indices of ``keep`` it has."""
        result: Val | None = None
        for sign, term in split_terms(expr):
            v = self.lower_term(term, keep, proj, needed)
            if sign < 0:
                v = Weak(-v.value) if isinstance(v, Weak) else self.map("neg", [v])
            result = v if result is None else self.map("add", [result, v])
        assert result is not None
        return result

    def lower_term(self, term: A.Expr, keep: Sequence[str], proj: str, needed: set[str]) -> Val:
        factors = split_factors(term)
        frees = [free_indices(f) for f in factors]
        vals: list[Val] = []
        for k, f in enumerate(factors):
            others = {n for j, fr in enumerate(frees) if j != k for n in fr}
            vals.append(self.lower_factor(f, proj, needed | set(keep) | others))
        return self.contract(vals, keep, proj)

    def contract(self, vals: list[Val], keep: Sequence[str], proj: str) -> Val:
        tensors = [v for v in vals if isinstance(v, TV)]
        weak = [v.value for v in vals if isinstance(v, Weak)]
        if not tensors:
            out: int | float = 1
            for w in weak:
                out = out * w
            return Weak(out)
        have: dict[str, None] = {}
        for t in tensors:
            for n in t.names:
                have.setdefault(n, None)
        out_names = self.in_layout([n for n in keep if n in have])
        projected = [n for n in have if n not in out_names]
        base_dtype = np.result_type(*[t.dtype for t in tensors])
        # A literal 1 is dropped unless it promotes (`1.0 X[i]` with int32 X is float64, NEP 50).
        lits = [
            self.materialize(Weak(w), base_dtype)
            for w in weak
            if w != 1 or dt.weak_dtype(w, [base_dtype]) != base_dtype
        ]
        operands = tensors + lits
        if len(operands) == 1 and not projected:
            return operands[0]
        dtype = dt.contract_dtype([t.dtype for t in operands], proj, bool(projected))
        op = self.emit(
            te.ContractOp(
                [t.value for t in operands],
                [t.names for t in operands],
                out_names,
                proj,
                self.ttype(dtype, out_names),
            )
        )
        return TV(op.results[0], tuple(out_names))

    def in_layout(self, names: list[str]) -> list[str]:
        """``names`` with the equation's left-hand indices first, in its order (the rest keep theirs).

        Intermediates laid out like the result need no final transpose, and an
        elementwise epilogue reads a contraction's output through the identity
        map (so it can run in place, in the BLAS output).
        """
        rank = {n: k for k, n in enumerate(self.layout)}
        return sorted(names, key=lambda n: (0, rank[n]) if n in rank else (1, 0))

    def map(self, fn: str, vals: list[Val], params: dict[str, object] | None = None, loc: Loc | None = None) -> Val:
        """``fn`` over ``vals`` (folded when all are literals); ``loc`` is kept on a ``pow``, whose error it locates."""
        tensors = [v for v in vals if isinstance(v, TV)]
        if not tensors:
            try:
                return Weak(dt.fold(fn, [v.value for v in vals], params or {}))
            except ValueError as e:  # pow(2, -1): the error an integer tensor's run raises, at compile time
                raise FuseError(str(e), loc) from None
        others = [t.dtype for t in tensors]
        if fn == "select":
            # np.where: a literal branch takes its type from the other branch, never from the condition
            # (select(S > 0, X32[i], 1.5) is float32 however the condition is typed); alone, its own default
            branch = [v.dtype for v in vals[1:] if isinstance(v, TV)]
            ops = [
                self.materialize(v, np.result_type(*branch) if k and branch else None) if isinstance(v, Weak) else v
                for k, v in enumerate(vals)
            ]
        else:
            ops = [self.materialize(v, np.result_type(*others)) if isinstance(v, Weak) else v for v in vals]
        names: dict[str, None] = {}
        for t in ops:
            for n in t.names:
                names.setdefault(n, None)
        out = self.in_layout(list(names))
        dtype = dt.map_dtype(fn, [t.dtype for t in ops], params or {})
        op = self.emit(
            te.MapOp(fn, [t.value for t in ops], [t.names for t in ops], out, self.ttype(dtype, out), params)
        )
        if fn == "pow" and loc is not None and dtype.kind in "iu":
            set_location(op, loc)
        return TV(op.results[0], tuple(out))

    def lower_factor(self, f: A.Expr, proj: str, needed: set[str]) -> Val:
        return self.lower_elem(f, proj, needed)

    def lower_elem(self, e: A.Expr, proj: str, needed: set[str]) -> Val:
        """An expression evaluated pointwise over its free indices (calls and reduces project inside)."""
        match e:
            case A.Number(value=v):
                return Weak(v)
            case A.Bool(value=v):
                return Weak(int(v))
            case A.TensorRef():
                return self.access(e, proj, needed)
            case A.Paren(expr=x):
                return self.lower_elem(x, proj, needed)
            case A.BinOp(op=op, lhs=lhs, rhs=rhs):
                a = self.lower_elem(lhs, proj, needed | set(free_indices(rhs)))
                b = self.lower_elem(rhs, proj, needed | set(free_indices(lhs)))
                return self.map(MAP_OPS[op], [a, b], loc=e.loc)
            case A.UnaryOp(op=op, operand=x):
                v = self.lower_elem(x, proj, needed)
                if op == "+":
                    return v
                return self.map("neg" if op == "-" else "not", [v])
            case A.Ternary(cond=c, then=t, orelse=o):
                return self.lower_select([(c, t)], o, proj, needed)
            case A.Case(branches=br, default=d):
                return self.lower_select(list(br), d, proj, needed)
            case A.Reduce(op=op, indices=idx, body=body, implicit=implicit):
                gone = {i.name for i in idx}
                names = free_indices(body)
                for i in idx:
                    if i.name not in names:
                        raise FuseError(f"reduce over {i.name}, which the expression does not have", i.loc)
                keep = [n for n in names if n not in gone]
                if isinstance(body, A.BinOp) and body.op == "*" or not isinstance(body, A.BinOp):
                    return self.lower_term(body, keep, op, reduce_body_shares(needed, gone, keep, implicit))
                v = self.lower_elem(body, proj, needed | set(names))
                return self.reduce(op, v, keep)
            case A.Call():
                return self.lower_call(e, proj, needed)
            case A.ListLit():
                raise FuseError("a list literal needs const(...) to become a tensor", e.loc)
            case A.String():
                raise FuseError("a string is not a tensor value here", e.loc)
        raise FuseError("unsupported expression", getattr(e, "loc", None))

    def lower_select(self, branches, default, proj: str, needed: set[str]) -> Val:
        """``c ? a : b`` / ``case``: each part is evaluated over what it shares with the rest of the equation
        and with the other parts (as an operand of any operator), never over its own indices alone, so a call
        inside one branch projects the indices only it has (LANGUAGE.md §4 "Function calls")."""
        every = [x for b in branches for x in b] + ([default] if default is not None else [])
        frees = [set(free_indices(x)) for x in every]

        def inner(k: int) -> set[str]:
            return needed.union(*(f for j, f in enumerate(frees) if j != k))

        result: Val = Weak(0) if default is None else self.lower_elem(default, proj, inner(len(every) - 1))
        for b in range(len(branches) - 1, -1, -1):
            cond, value = branches[b]
            c = self.lower_elem(cond, proj, inner(2 * b))
            v = self.lower_elem(value, proj, inner(2 * b + 1))
            result = self.map("select", [c, v, result])
        return result

    def reduce(self, kind: str, v: Val, keep: Sequence[str]) -> Val:
        tv = self.materialize(v)
        keep = [n for n in tv.names if n in keep]
        if list(keep) == list(tv.names):
            return tv
        dtype = dt.reduce_dtype(tv.dtype, kind)
        op = self.emit(te.ReduceOp(kind, tv.value, tv.names, keep, self.ttype(dtype, keep)))
        return TV(op.results[0], tuple(keep))

    # -- tensor references ---------------------------------------------------

    def access(self, ref: A.TensorRef, proj: str, needed: set[str]) -> TV:
        if ref.name not in self.values:
            raise FuseError(f"internal: {ref.name} used before it is defined", ref.loc)
        base = self.values[ref.name]
        if ref.indices is None:
            if base.names and ref.name not in self.groups and ref.name not in self.sources:
                raise FuseError(f"input {ref.name} has rank {len(base.names)}: write its indices", ref.loc)
            return base
        items = ref.indices
        if all(isinstance(i, A.IndexName) for i in items):
            names = [i.name for i in items]
            if len(set(names)) == len(names):
                return TV(base.value, tuple(names))
        axes: list[te.AccessAxisAttr] = []
        out: dict[str, None] = {}
        gathers: list[TV] = []
        for item in items:
            match item:
                case A.IndexName(name=n):
                    axes.append(te.AccessAxisAttr.named(n))
                    out.setdefault(n, None)
                case A.IndexOffset(name=n, offset=o):
                    axes.append(te.AccessAxisAttr.offset(n, o))
                    out.setdefault(n, None)
                case A.IndexNumber(value=v):
                    axes.append(te.AccessAxisAttr.position(v))
                case A.IndexSlice(start=s, stop=t, step=p, text=text):
                    axes.append(te.AccessAxisAttr.slice(s, t, p, text))
                    out.setdefault(text, None)
                case A.IndexTensor(expr=x):
                    names = free_indices(x)
                    g = self.to_names(self.lower_sum(x, names, proj, set(names)), names)
                    if g.dtype.kind not in "iu":
                        raise FuseError(f"an index tensor must hold integers, but this one is {g.dtype}", item.loc)
                    axes.append(te.AccessAxisAttr.gather(len(gathers)))
                    gathers.append(g)
                    for n in g.names:
                        out.setdefault(n, None)
        # Slice-named axes: the output name is the slice text.
        out_names = list(out)
        op = self.emit(
            te.AccessOp(
                base.value,
                axes,
                out_names,
                self.ttype(base.dtype, out_names),
                [g.value for g in gathers],
                [g.names for g in gathers],
                [],
                ref.loc.encode(),
            )
        )
        return TV(op.results[0], tuple(out_names))

    # -- calls ---------------------------------------------------------------

    def kwarg(self, call: A.Call, key: str) -> A.Expr | None:
        for k, v in call.kwargs:
            if k == key:
                return v
        return None

    def static_param(self, call: A.Call, key: str, default: object = None) -> object:
        v = self.kwarg(call, key)
        if v is None:
            return default
        match v:
            case A.Number(value=x):
                return x
            case A.Bool(value=x):
                return x
            case A.UnaryOp(op="-", operand=A.Number(value=x)):
                return -x
            case A.String(value=x):
                return x
            case A.ListLit():
                return literal_array(v).tolist()
        raise FuseError(f"{call.name}(): {key}= must be a literal or a declared constant", v.loc)

    def lower_arg(
        self, arg: A.Expr, proj: str, needed: set[str], axis: str | None = None, others: AbstractSet[str] = frozenset()
    ) -> Val:
        """A call argument over the indices :func:`call_arg_keep` names; its other indices are projected inside.

        ``needed`` are the indices the rest of the equation uses, ``others``
        those of the call's other arguments, ``axis`` the one the builtin
        works along.
        """
        axes = {axis} if axis else set()
        keep = call_arg_keep(free_indices(arg), others, needed, axes)
        return self.lower_sum(arg, keep, proj, set(keep))

    def lower_call(self, call: A.Call, proj: str, needed: set[str]) -> Val:
        if call.name == "__concat__":
            return self.lower_concat(call, proj, needed)
        if call.name == "__flatten__":
            return self.lower_flatten(call, proj, needed)
        b = bi.lookup(call.name)
        assert b is not None, call.name
        args = call.args
        argnames = [free_indices(a) for a in args]
        if b.kind is bi.Kind.ELEMENTWISE and not (b.name in ("max", "min") and len(args) == 1):
            vals = [self.lower_arg(a, proj, needed, None, other_arg_indices(argnames, k)) for k, a in enumerate(args)]
            params: dict[str, object] = {}
            if b.name == "sig":
                t = self.kwarg(call, "T")
                if t is not None:
                    vals.append(self.lower_arg(t, proj, needed, None, other_arg_indices(argnames, -1)))
                elif len(vals) == 1:
                    x = vals[0]
                    sched = self._temperature(x.dtype if isinstance(x, TV) else np.dtype(np.float64))
                    if sched is not None:
                        vals.append(sched)
                if len(vals) == 2 and isinstance(vals[1], Weak):
                    params["T"] = float(vals.pop().value)
            fn = {"max": "maximum", "min": "minimum"}.get(b.name, b.name)
            return self.map(fn, vals, params or None, loc=call.loc)
        if b.kind is bi.Kind.REDUCE_AXIS or b.name in ("max", "min"):
            axis = call_axis_name(call, argnames[0], self.dotted)
            v = self.lower_arg(args[0], proj, needed, axis)
            kind = {"avg": "mean", "logsumexp": "logsumexp", "sum": "sum", "max": "max", "min": "min"}[b.name]
            tv = self.materialize(v)
            if axis not in tv.names:
                raise FuseError(f"{call.name}() has no axis {axis} to reduce", call.loc)
            return self.reduce(kind, tv, [n for n in tv.names if n != axis])
        if b.kind is bi.Kind.AXIS:
            axis = call_axis_name(call, argnames[0], self.dotted)
            vals = [
                self.materialize(self.lower_arg(a, proj, needed, axis, other_arg_indices(argnames, k)))
                for k, a in enumerate(args)
            ]
            if axis is None or all(axis not in v.names for v in vals):
                raise FuseError(f"{b.name}() needs an axis that its argument has", call.loc)
            params = {}
            if b.name == "lnorm":
                params["eps"] = float(self.static_param(call, "eps", 1e-5))
            if b.name == "masked_softmax":
                fill = self.static_param(call, "fill")
                if fill is not None:
                    params["fill"] = float(fill)
            names: dict[str, None] = {}
            for v in vals:
                for n in v.names:
                    names.setdefault(n, None)
            out = list(names)
            dtype = dt.axis_dtype(b.name, [v.dtype for v in vals])
            op = self.emit(
                te.AxisOp(
                    b.name, axis, [v.value for v in vals], [v.names for v in vals], out, self.ttype(dtype, out), params
                )
            )
            return TV(op.results[0], tuple(out))
        if b.kind is bi.Kind.INDEX_FN:
            index = free_indices(call)
            if len(index) != 1:
                raise FuseError(f"{b.name}() takes one index name", call.loc)
            dtype = np.dtype(np.int64 if b.name == "iota" else np.int8)
            op = self.emit(te.GenerateOp(b.name, [self.extent(self.L(index[0]))], index, self.ttype(dtype, index)))
            return TV(op.results[0], tuple(index))
        if b.kind is bi.Kind.CONSTRUCTOR:
            return self.lower_constructor(call, b, proj, needed)
        if b.kind is bi.Kind.BLOCK:
            if b.name == "topk":
                raise FuseError("topk(...) is only allowed as the value of a sink", call.loc)
            return TV(*self._single(self.lower_block(call, needed, proj), call))
        raise FuseError(f"unsupported builtin {b.name}", call.loc)

    def _single(self, values: list[SSAValue], call: A.Call) -> tuple[SSAValue, tuple[str, ...]]:
        op = values[0].owner
        return values[0], te.names_of(op.indices)

    def lower_constructor(self, call: A.Call, b: bi.Builtin, proj: str, needed: set[str]) -> Val:
        eq = self.prog.equations[self.eq_id] if self.eq_id >= 0 else None
        lhs_names = [i.name for i in (eq.lhs.indices or ()) if isinstance(i, A.IndexName)] if eq else []
        if b.name == "case":
            # case(c1, v1, ..., default) is a call: each argument projects what the others do not share (§4).
            argnames = [free_indices(a) for a in call.args]
            vals = [
                self.lower_arg(a, proj, needed, None, other_arg_indices(argnames, k)) for k, a in enumerate(call.args)
            ]
            result: Val = vals.pop() if len(vals) % 2 == 1 else Weak(0)
            for k in range(len(vals) - 2, -1, -2):
                result = self.map("select", [vals[k], vals[k + 1], result])
            return result
        if b.name == "const":
            arr = literal_array(call.args[0])
            op = self.emit(te.ConstantOp(arr, lhs_names[: arr.ndim]))
            return TV(op.results[0], tuple(lhs_names[: arr.ndim]))
        if b.name == "causal_mask":
            names = lhs_names[:2]
            ext = [self.extent(self.L(n)) for n in names]
            op = self.emit(te.GenerateOp("causal_mask", ext, names, self.ttype(np.dtype(np.float64), names)))
            return TV(op.results[0], tuple(names))
        raise FuseError(f"unsupported constructor {b.name}", call.loc)

    def lower_concat(self, call: A.Call, proj: str, needed: set[str]) -> Val:
        axis = self.kwarg(call, "axis").name
        parts = [v.name for k, v in call.kwargs if k.startswith("__part")]
        argnames = [free_indices(a) for a in call.args]
        vals = []
        for k, (a, part) in enumerate(zip(call.args, parts)):
            # Each argument's joined axis is renamed apart (``part``): it keeps that, not the result's axis.
            others = other_arg_indices(argnames, k) - set(parts)
            vals.append(self.materialize(self.lower_arg(a, proj, needed - {axis}, part, others)))
        names: dict[str, None] = {}
        for v in vals:
            for n in v.names:
                names.setdefault(axis if n in parts else n, None)
        out = list(names)
        dtype = np.result_type(*[v.dtype for v in vals])
        op = self.emit(
            te.ConcatOp([v.value for v in vals], axis, parts, [v.names for v in vals], out, self.ttype(dtype, out))
        )
        return TV(op.results[0], tuple(out))

    def lower_flatten(self, call: A.Call, proj: str, needed: set[str]) -> Val:
        """One-argument ``concat``: the argument over its kept indices, its two flattened axes moved last."""
        outer = self.kwarg(call, FLATTEN_OUTER).name
        inner = self.kwarg(call, FLATTEN_INNER).name
        target = self.kwarg(call, "axis").name
        arg = self.materialize(self.lower_arg(call.args[0], proj, needed - {target}, None, {outer, inner}))
        order = [n for n in arg.names if n not in (outer, inner)] + [outer, inner]
        arg = self.to_names(arg, order)
        names = order[:-2] + [target]
        op = self.emit(te.FlattenOp(arg.value, arg.names, names, self.ttype(arg.dtype, names)))
        return TV(op.results[0], tuple(names))

    def lower_block(self, call: A.Call, needed: set[str], proj: str) -> list[SSAValue]:
        b = bi.lookup(call.name)
        assert b is not None
        args = list(call.args)
        vals = [self.materialize(self.lower_arg(a, proj, needed | set(free_indices(a)))) for a in args]
        params: dict[str, object] = {}
        roles: dict[str, str] = {}
        if b.name == "attention":
            mask_kw = self.kwarg(call, "mask")
            if mask_kw is not None:
                vals.append(self.materialize(self.lower_arg(mask_kw, proj, needed | set(free_indices(mask_kw)))))
            q, k, v = vals[0], vals[1], vals[2]
            for t, what in ((q, "query"), (k, "key"), (v, "value")):
                if len(t.names) < 2:
                    raise FuseError(f"attention: the {what} needs a sequence and a feature index", call.loc)
            qs, d = q.names[-2], q.names[-1]
            ks, kd = k.names[-2], k.names[-1]
            vs, e = v.names[-2], v.names[-1]
            if kd != d:
                raise FuseError(f"attention: query feature {d} and key feature {kd} must be the same index", call.loc)
            if vs != ks:
                raise FuseError(
                    f"attention: key sequence {ks} and value sequence {vs} must be the same index", call.loc
                )
            if qs == ks:
                raise FuseError("attention: query and key sequence indices must differ (write p and p')", call.loc)
            batch = [n for n in q.names[:-2]]
            roles = {"query": qs, "key": ks, "feature": d, "value": e}
            out = batch + [qs, e]
            scale = self.static_param(call, "scale")
            if scale is not None:
                params["scale"] = float(scale)
            params["causal"] = bool(self.static_param(call, "causal", False))
            dtype = np.result_type(*[t.dtype for t in vals[:3]])
            if dtype.kind not in "f":
                dtype = np.dtype(np.float64)
            types = [self.ttype(dtype, out)]
        elif b.name == "rope":
            x = vals[0]
            axis = call_axis_name(call, list(x.names), self.dotted)
            if len(x.names) < 2:
                raise FuseError("rope needs a sequence and a feature index", call.loc)
            pos = x.names.index(axis)
            if pos == 0:
                raise FuseError("rope: the feature axis needs a sequence axis before it", call.loc)
            roles = {"feature": axis, "sequence": x.names[pos - 1]}  # type: ignore[dict-item]
            self.check_call_extents(call, axis, 2, f"rope needs an even feature extent: {axis} is {{0}}", "dvd")
            params["base"] = float(self.static_param(call, "base", 10000.0))
            out = list(x.names)
            dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
            types = [self.ttype(dtype, out)]
        elif b.name == "tucker_dense":
            x = vals[0]
            rank = self.static_param(call, "rank")
            if rank is not None:
                try:  # the run's own rule, at the call: a positive int, or one per axis
                    tucker_ranks((1,) * len(x.names), rank)  # type: ignore[arg-type]
                except ValueError as e:
                    raise FuseError(str(e), call.loc) from None
                params["rank"] = rank
            params["threshold"] = float(self.static_param(call, "threshold", 0.5))
            out = list(x.names)
            dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
            types = [self.ttype(dtype, out)]
        else:  # topk
            x = vals[0]
            axis = call_axis_name(call, list(x.names), self.dotted)
            k = self.static_param(call, "k")
            if not isinstance(k, int) or k < 0:
                raise FuseError("topk needs k= a non-negative integer", call.loc)
            params["k"] = k
            roles = {"axis": axis}  # type: ignore[dict-item]
            message = f"topk: k = {{0}} is more than the extent of its axis {axis}, {{1}}"
            self.check_call_extents(call, k, axis, message, "le")
            out = [n if n != axis else f"{axis}@top" for n in x.names]
            shape = [k if n == f"{axis}@top" else s for n, s in zip(out, self.shape(x.names))]
            types = [te.tensor_type(np.int64, shape), te.tensor_type(x.dtype, shape)]
        op = self.emit(te.BlockOp(b.name, [t.value for t in vals], [t.names for t in vals], out, roles, types, params))
        set_location(op, call.loc)  # a block's run-time error (tucker_dense's SVD) names the call
        return list(op.results)

    def check_call_extents(self, call: A.Call, lhs: str | int, rhs: str | int, message: str, predicate: str) -> None:
        """A located ``te.check_dim`` (``predicate`` of :data:`te.CHECK_PREDICATES`) between extents of the
        call's index names and constants (``str``: a name, ``int``: a constant), ahead of the block, so every
        backend refuses the call's shapes with one message (``{0}``/``{1}``: the two values)."""

        def value(v: str | int) -> SSAValue:
            return self.extent(self.L(v)) if isinstance(v, str) else self.index(v)

        self.emit(te.CheckDimOp(value(lhs), value(rhs), message, call.loc.encode(), predicate))


def lower_program(
    prog: Resolved,
    input_dtypes: dict[str, np.dtype] | None = None,
    source_arrays: dict[str, np.ndarray] | None = None,
    options: LowerOptions | None = None,
) -> Lowered:
    """Lower a resolved program to a verified tensor_eq module for one input dtype signature (and mode)."""
    low = Lowerer(prog, dict(input_dtypes or {}), dict(source_arrays or {}), options)
    result = low.run()
    result.module.verify()
    return result
