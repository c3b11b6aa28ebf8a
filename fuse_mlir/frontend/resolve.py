"""Name resolution and desugaring: the structured (v2) syntax reduced to core equations.

After this pass a program is a flat list of equations, sources, sinks and
exports in which: blocks are flattened, ``let`` and ``when`` are gone,
``param``/``const`` names are replaced by their values (as numbers, or as
numeric positions inside brackets), ``import``ed and local ``fn`` calls are
inlined as expressions (``reduce`` nodes carry each body equation's
projection), and every remaining call is either a known builtin with a valid
argument count or a boolean tensor reference. Unknown functions are errors
here, at compile time, with their location.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from fuse_mlir import builtins as bi
from fuse_mlir.diagnostics import FuseError, Loc
from fuse_mlir.frontend import ast as A
from fuse_mlir.frontend.parser import MAX_INDEX
from fuse_mlir.paths import checked_path, read_text_file, shown


@dataclass
class Resolved:
    """A program after resolution: core statements only, plus declarations."""

    equations: list[A.Equation]
    sources: list[A.Source]
    sinks: list[A.Sink]
    exports: list[tuple[str, Loc]]
    axes: dict[str, tuple[int, Loc]]
    filename: str
    base_dir: Path
    fns: dict[str, A.FnDef] = field(default_factory=dict)


# --------------------------------------------------------------------------
# Index helpers shared with the lowering
# --------------------------------------------------------------------------


def split_terms(expr: A.Expr) -> list[tuple[int, A.Expr]]:
    """Split a right-hand side at top-level ``+``/``-`` into signed terms (iteratively, in order: a sum of
    thousands of terms is a tree as deep)."""
    out: list[tuple[int, A.Expr]] = []
    stack: list[tuple[int, A.Expr]] = [(1, expr)]
    while stack:
        sign, e = stack.pop()
        if isinstance(e, A.BinOp) and e.op in ("+", "-"):
            stack.append((-sign if e.op == "-" else sign, e.rhs))
            stack.append((sign, e.lhs))  # popped first: terms stay in source order
        else:
            out.append((sign, e))
    return out


def split_factors(expr: A.Expr) -> list[A.Expr]:
    """Split a term at top-level ``*`` (and juxtaposition) into factors (iteratively, in order)."""
    out: list[A.Expr] = []
    stack: list[A.Expr] = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, A.BinOp) and e.op == "*":
            stack.append(e.rhs)
            stack.append(e.lhs)
        else:
            out.append(e)
    return out


def index_item_names(item: A.IndexItem) -> list[str]:
    """The index names an index item binds (gathers contribute their own free indices)."""
    if isinstance(item, A.IndexName | A.IndexOffset):
        return [item.name]
    if isinstance(item, A.IndexSlice):
        return [item.text]
    if isinstance(item, A.IndexTensor):
        return free_indices(item.expr)
    return []


def _ordered_union(lists: list[list[str]]) -> list[str]:
    seen: dict[str, None] = {}
    for names in lists:
        for n in names:
            seen.setdefault(n, None)
    return list(seen)


def call_axis_name(call: A.Call, arg_indices: list[str], default_axis: str | None = None) -> str | None:
    """The axis a reducing/normalising call works along: ``axis=``, else the dotted axis, else the last index."""
    for key, value in call.kwargs:
        if key == "axis":
            if isinstance(value, A.TensorRef) and value.indices is None:
                return value.name
            if isinstance(value, A.String):
                return value.value
            if isinstance(value, A.Number) and value.is_int:
                pos = int(value.value)
                if not -len(arg_indices) <= pos < len(arg_indices):
                    raise FuseError(f"axis={pos} is out of range for an argument with indices {arg_indices}", value.loc)
                return arg_indices[pos]
            raise FuseError("axis= expects an index name or an integer position", value.loc)
    if default_axis is not None and default_axis in arg_indices:
        return default_axis
    return arg_indices[-1] if arg_indices else None


FLATTEN_OUTER = "__outer"
FLATTEN_INNER = "__inner"
"""Keywords of the lowering's ``__flatten__`` call naming the two axes it flattens (outer, then inner)."""


def flatten_axes(arg_indices: list[str], lhs_indices: list[str], loc: Loc) -> tuple[str, str]:
    """The two axes a one-argument ``concat`` flattens: the last two of its argument that the left side lacks.

    LANGUAGE.md §6: "one argument: flatten the last two axes". Read with §4
    (an index the left-hand side names is kept, never consumed), these are the
    argument's last two indices as written among those the left-hand side does
    not name: ``Y[b, k] = concat(Z[b, i, j])`` flattens i, j and
    ``Y[t, x] = concat(O[h, t, d])`` flattens h, d (heads side by side). Its
    other indices that the equation does not use are projected inside.
    """
    free = [n for n in arg_indices if n not in lhs_indices]
    if len(free) < 2:
        raise FuseError(
            "concat of one argument flattens the last two of its indices that the left-hand side does not name; "
            f"it has {len(free)} ({', '.join(free) or 'none'})",
            loc,
        )
    return free[-2], free[-1]


def call_arg_keep(
    arg_indices: list[str], others: AbstractSet[str], needed: AbstractSet[str], axes: AbstractSet[str]
) -> list[str]:
    """The indices a call argument is evaluated over (LANGUAGE.md §4 "Function calls"); the rest are projected inside.

    An argument keeps the indices it shares with the rest of the equation
    (``needed``: the left-hand side and the other factors of its term, plus
    what an enclosing call keeps), with the call's other arguments
    (``others``), and the axes the builtin works along (``axes``). Its own
    indices never count as "the rest of the equation": that is what makes
    ``softmax(W[o, h] H[b, h])`` sum h before normalising.
    """
    return [n for n in arg_indices if n in needed or n in others or n in axes]


def other_arg_indices(arg_indices: list[list[str]], k: int) -> set[str]:
    """The indices of every argument of a call but the ``k``-th."""
    return {n for j, names in enumerate(arg_indices) if j != k for n in names}


_FREE: dict[int, tuple[A.Expr, tuple[str, ...]]] = {}
"""Memo of :func:`free_indices` by node identity (the node is kept, so its id cannot be reused while cached):
the lowering asks for the free indices of every prefix of a long sum, which without it costs O(n^2)."""
_FREE_MAX = 1 << 18


def free_indices(expr: A.Expr) -> list[str]:
    """The index names an expression ranges over, in order of first appearance (before projection)."""
    hit = _FREE.get(id(expr))
    if hit is not None and hit[0] is expr:
        return list(hit[1])
    names = _free_indices(expr)
    if len(_FREE) >= _FREE_MAX:
        _FREE.clear()
    _FREE[id(expr)] = (expr, tuple(names))
    return names


def _free_indices(expr: A.Expr) -> list[str]:
    match expr:
        case A.TensorRef(indices=None):
            return []
        case A.TensorRef(indices=items):
            return _ordered_union([index_item_names(i) for i in items])
        case A.Number() | A.String() | A.Bool() | A.ListLit() | A.DictLit():
            return []
        case A.Paren(expr=e):
            return free_indices(e)
        case A.UnaryOp(operand=e):
            return free_indices(e)
        case A.BinOp(lhs=lhs, rhs=rhs):
            return _ordered_union([free_indices(lhs), free_indices(rhs)])
        case A.Ternary(cond=c, then=t, orelse=o):
            return _ordered_union([free_indices(c), free_indices(t), free_indices(o)])
        case A.Case(branches=branches, default=d):
            parts = [free_indices(x) for b in branches for x in b]
            if d is not None:
                parts.append(free_indices(d))
            return _ordered_union(parts)
        case A.Reduce(indices=idx, body=body):
            gone = {i.name for i in idx}
            return [n for n in free_indices(body) if n not in gone]
        case A.Call():
            return _call_free_indices(expr)
    return []


def _call_free_indices(call: A.Call) -> list[str]:
    args = [free_indices(a) for a in call.args]
    kw = {k: v for k, v in call.kwargs}
    if call.name == "__concat__":  # the lowering's concat, with each argument's axis renamed apart
        axis = kw["axis"].name
        parts = {v.name for k, v in call.kwargs if k.startswith("__part")}
        return _ordered_union([[axis if n in parts else n for n in a] for a in args])
    if call.name == "__flatten__":
        gone = {kw[FLATTEN_OUTER].name, kw[FLATTEN_INNER].name}
        return [n for n in args[0] if n not in gone] + [kw["axis"].name]
    b = bi.lookup(call.name)
    if b is None:
        return _ordered_union(args)
    if b.kind is bi.Kind.INDEX_FN:
        names = [a.name for a in call.args if isinstance(a, A.TensorRef)]
        names += [v.name for k, v in call.kwargs if k == "axis" and isinstance(v, A.TensorRef)]
        return names
    if b.kind is bi.Kind.CONSTRUCTOR:
        return _ordered_union(args) if b.name == "case" else []
    if b.kind is bi.Kind.REDUCE_AXIS or (b.name in ("max", "min") and len(call.args) == 1):
        axis = call_axis_name(call, args[0]) if args else None
        return [n for n in args[0] if n != axis] if args else []
    if b.name == "attention" and len(args) >= 3:
        q, k, v = args[0], args[1], args[2]
        key = [n for n in k if n not in q]
        return [n for n in _ordered_union([q, v]) if n not in key and not (n in q and n in k and n not in v)]
    return _ordered_union(args)


def explain_term(term: A.Expr, lhs: list[str], dotted: str | None) -> tuple[list[str], list[dict]]:
    """What a term projects itself, and what its calls project inside (for ``Program.explain``).

    Returns the indices the term's factors range over once each call has
    projected inside itself (the term projects those the left-hand side
    lacks), and one record per call that works along an axis or projects
    inside: ``call``, ``axis`` (or ``flattens`` and ``into``) and
    ``projected``. It follows the lowering's walk, with the same rules
    (:func:`call_arg_keep`, :func:`call_axis_name`, :func:`flatten_axes`).
    """
    calls: list[dict] = []
    names = _explain_term(term, set(lhs), lhs, dotted, calls)
    return names, calls


def _explain_sum(expr: A.Expr, keep: list[str], lhs: list[str], dotted: str | None, calls: list[dict]) -> None:
    for _, term in split_terms(expr):
        _explain_term(term, set(keep), lhs, dotted, calls)


def _explain_term(term: A.Expr, needed: set[str], lhs: list[str], dotted: str | None, calls: list[dict]) -> list[str]:
    factors = split_factors(term)
    frees = [free_indices(f) for f in factors]
    seen: list[list[str]] = []
    for k, f in enumerate(factors):
        others = {n for j, fr in enumerate(frees) if j != k for n in fr}
        seen.append(_explain_elem(f, needed | others, lhs, dotted, calls))
    return _ordered_union(seen)


def _explain_elem(e: A.Expr, needed: set[str], lhs: list[str], dotted: str | None, calls: list[dict]) -> list[str]:
    """The indices ``e`` ranges over after its calls project inside (records those calls in ``calls``)."""
    match e:
        case A.Paren(expr=x) | A.UnaryOp(operand=x):
            return _explain_elem(x, needed, lhs, dotted, calls)
        case A.BinOp(lhs=a, rhs=b):
            left = _explain_elem(a, needed | set(free_indices(b)), lhs, dotted, calls)
            return _ordered_union([left, _explain_elem(b, needed | set(free_indices(a)), lhs, dotted, calls)])
        case A.Ternary() | A.Case():
            parts = [e.cond, e.then, e.orelse] if isinstance(e, A.Ternary) else [x for b in e.branches for x in b]
            if isinstance(e, A.Case) and e.default is not None:
                parts.append(e.default)
            return _explain_parts(parts, needed, lhs, dotted, calls)
        case A.Reduce(indices=idx, body=body, implicit=implicit):
            gone = {i.name for i in idx}
            keep = [n for n in free_indices(body) if n not in gone]
            _explain_term(body, reduce_body_shares(needed, gone, keep, implicit), lhs, dotted, calls)
            return keep
        case A.Call():
            return _explain_call(e, needed, lhs, dotted, calls)
    return free_indices(e)


def _explain_parts(
    parts: list[A.Expr], needed: set[str], lhs: list[str], dotted: str | None, calls: list[dict]
) -> list[str]:
    """The parts of a ternary or case: each shares the indices of the others, not its own (as the lowering)."""
    frees = [set(free_indices(x)) for x in parts]
    out = []
    for k, x in enumerate(parts):
        inner = needed.union(*(f for j, f in enumerate(frees) if j != k))
        out.append(_explain_elem(x, inner, lhs, dotted, calls))
    return _ordered_union(out)


def _explain_call(call: A.Call, needed: set[str], lhs: list[str], dotted: str | None, calls: list[dict]) -> list[str]:
    b = bi.lookup(call.name)
    elementwise = b is not None and (
        b.name == "case" or b.kind is bi.Kind.ELEMENTWISE and not (b.name in ("max", "min") and len(call.args) == 1)
    )
    if b is None or not elementwise and b.kind in (bi.Kind.INDEX_FN, bi.Kind.CONSTRUCTOR, bi.Kind.BLOCK):
        return free_indices(call)
    argnames = [free_indices(a) for a in call.args]
    record: dict = {"call": b.name}
    axes: set[str] = set()
    out_of: Callable[[list[list[str]]], list[str]] = _ordered_union
    if b.kind is bi.Kind.CONCAT and len(call.args) == 1:
        outer, inner = flatten_axes(argnames[0], lhs, call.loc)
        target = [n for n in lhs if n not in argnames[0]]
        record |= {"flattens": [outer, inner], "into": target[0] if target else None}
        axes = {outer, inner}

        def out_of(kept: list[list[str]]) -> list[str]:
            return [n for n in kept[0] if n not in axes] + [record["into"]]

    elif elementwise:
        record["axis"] = None
    else:
        axis = call_axis_name(call, argnames[0], dotted)
        record["axis"] = axis
        axes = {axis} if axis else set()
        if b.kind is bi.Kind.REDUCE_AXIS or b.name in ("max", "min"):

            def out_of(kept: list[list[str]]) -> list[str]:
                return [n for n in kept[0] if n not in axes]

    kept: list[list[str]] = []
    projected: list[str] = []
    for k, (a, names) in enumerate(zip(call.args, argnames)):
        keep = call_arg_keep(names, other_arg_indices(argnames, k), needed, axes)
        projected += [n for n in names if n not in keep and n not in projected]
        _explain_sum(a, keep, lhs, dotted, calls)
        kept.append(keep)
    record["projected"] = projected
    if projected or axes:
        calls.append(record)
    return out_of(kept)


# --------------------------------------------------------------------------
# The resolver
# --------------------------------------------------------------------------


class Resolver:
    """Walks a parsed module (and its imports) and produces a :class:`Resolved` program."""

    def __init__(self, module: A.Module, base_dir: Path, parse_file=None):
        self.module = module
        self.base_dir = base_dir
        self.consts: dict[str, tuple[object, Loc]] = {}
        self.axes: dict[str, tuple[int, Loc]] = {}
        self.fns: dict[str, A.FnDef] = {}
        self._parse_file = parse_file
        self._import_stack: list[Path] = []
        self._fresh = itertools.count()  # per program, so fresh names are the same in every process

    # -- declarations -------------------------------------------------------

    def _flatten(self, stmts: list[A.Stmt] | tuple[A.Stmt, ...]) -> list[A.Stmt]:
        out: list[A.Stmt] = []
        for s in stmts:
            if isinstance(s, A.Block):
                out.extend(self._flatten(s.body))
            else:
                out.append(s)
        return out

    def _const_value(self, expr: A.Expr) -> object:
        """Evaluate a declaration's value at compile time (numbers, lists, arithmetic of other constants)."""
        match expr:
            case A.Number(value=v):
                return v
            case A.Bool(value=v):
                return v
            case A.String(value=v):
                return v
            case A.ListLit(items=items):
                return [self._const_value(i) for i in items]
            case A.Paren(expr=e):
                return self._const_value(e)
            case A.UnaryOp(op="-", operand=e):
                return -self._num(e)
            case A.UnaryOp(op="+", operand=e):
                return self._num(e)
            case A.TensorRef(name=n, indices=None) if n in self.consts:
                return self.consts[n][0]
            case A.BinOp(op=op, lhs=lhs, rhs=rhs) if op in ("+", "-", "*", "/", "**"):
                a, b = self._num(lhs), self._num(rhs)
                if op == "+":
                    return a + b
                if op == "-":
                    return a - b
                if op == "*":
                    return a * b
                if op == "**":
                    return a**b
                if b == 0:
                    raise FuseError("division by zero in a constant expression", expr.loc)
                return a / b if not (isinstance(a, int) and isinstance(b, int) and a % b == 0) else a // b
        raise FuseError("expected a compile-time constant (a number, a list, or arithmetic of constants)", expr.loc)

    def _num(self, expr: A.Expr) -> int | float:
        v = self._const_value(expr)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise FuseError("expected a numeric constant", expr.loc)
        return v

    def _collect(self, stmts: list[A.Stmt], prefix: str = "", base_dir: Path | None = None) -> None:
        for s in stmts:
            match s:
                case A.ParamDecl() | A.ConstDecl() as d:
                    n, v = d.name, d.value
                    t = getattr(d, "type", None)
                    val = self._const_value(v)
                    if t is not None:
                        if t == "int":
                            if not isinstance(val, int) or isinstance(val, bool):
                                raise FuseError(f"param {n} is declared int but its value is {val!r}", v.loc)
                        elif t == "float":
                            val = float(val)  # type: ignore[arg-type]
                        elif t == "bool":
                            val = bool(val)
                        elif t not in ("str", "string", "tensor", "list"):
                            raise FuseError(f"unknown parameter type '{t}' (expected int, float, bool or str)", d.loc)
                    if prefix == "":
                        self._declare_const(n, val, d.loc)
                case A.AxisDecl(name=n, value=v):
                    if prefix == "":
                        size = self._num(v)
                        if not isinstance(size, int) or size < 0:
                            raise FuseError(f"axis {n} needs a non-negative integer extent, got {size!r}", v.loc)
                        if size > MAX_INDEX:
                            raise FuseError(f"index out of range: axis {n} has extent {size}, above 2^63-1", v.loc)
                        if n in self.axes and self.axes[n][0] != size:
                            raise FuseError(
                                f"axis {n} declared again with extent {size}",
                                v.loc,
                                [(f"first declared with extent {self.axes[n][0]} here", self.axes[n][1])],
                            )
                        self.axes[n] = (size, s.loc)
                case A.FnDef(name=n):
                    key = prefix + n
                    if key in self.fns:
                        raise FuseError(
                            f"function '{key}' is defined twice", s.loc, [("first defined here", self.fns[key].loc)]
                        )
                    if bi.is_builtin(n) and prefix == "":
                        raise FuseError(f"'{n}' is a builtin function and cannot be redefined", s.loc)
                    self.fns[key] = s
                case A.Import(path=p, alias=alias):
                    self._import(p, prefix + alias + "::", s.loc, base_dir or self.base_dir)

    def _declare_const(self, name: str, value: object, loc: Loc) -> None:
        if name in self.consts:
            raise FuseError(f"'{name}' is declared twice", loc, [("first declared here", self.consts[name][1])])
        self.consts[name] = (value, loc)

    def _import(self, path: str, prefix: str, loc: Loc, base_dir: Path) -> None:
        target = checked_path(path, base_dir, "import", loc)
        if target in self._import_stack:
            chain = " -> ".join(p.name for p in [*self._import_stack, target])
            raise FuseError(f"import cycle: {chain}", loc)
        try:
            exists, is_file = target.exists(), target.is_file()
        except (OSError, ValueError):
            exists = is_file = False
        if not is_file:
            problem = "not a regular file" if exists else "no such file"
            raise FuseError(f"cannot import '{shown(path)}': {problem} (resolved to {shown(target)})", loc)
        if self._parse_file is None:
            from fuse_mlir.frontend.parser import parse

            module = parse(read_text_file(target, "import", loc), str(target))
        else:
            module = self._parse_file(target)
        self._import_stack.append(target)
        try:
            self._collect(self._flatten(module.statements), prefix, target.parent)
        finally:
            self._import_stack.pop()

    # -- main ---------------------------------------------------------------

    def run(self) -> Resolved:
        stmts = self._flatten(self.module.statements)
        self._collect(stmts)
        equations: list[A.Equation] = []
        sources: list[A.Source] = []
        sinks: list[A.Sink] = []
        exports: list[tuple[str, Loc]] = []
        for s in stmts:
            match s:
                case A.Equation():
                    if s.lhs.name in self.consts:
                        raise FuseError(f"'{s.lhs.name}' is a declared constant and cannot be defined", s.lhs.loc)
                    equations.append(self._equation(s))
                case A.Source():
                    sources.append(replace(s, lhs=self._lhs(s.lhs)))
                case A.Sink():
                    sinks.append(replace(s, rhs=self._expr(s.rhs)))
                case A.Export(names=names):
                    exports.extend(names)
        return Resolved(
            equations, sources, sinks, exports, self.axes, self.module.filename, self.base_dir, dict(self.fns)
        )

    def _lhs(self, ref: A.TensorRef) -> A.TensorRef:
        """Left-hand items: constants become positions; a slice names the sliced axis it receives."""
        if ref.indices is None:
            return ref
        items = [A.IndexName(i.text, i.loc) if isinstance(i, A.IndexSlice) else i for i in ref.indices]
        return replace(ref, indices=tuple(self._index_item(i) for i in items))

    def _equation(self, eq: A.Equation) -> A.Equation:
        rhs = self._expr(eq.rhs)
        if eq.guard is not None:
            guard = self._expr(eq.guard)
            terms = split_terms(rhs)
            parts = [A.BinOp("*", t, guard, t.loc) for _, t in terms]
            rhs = parts[0] if terms[0][0] > 0 else A.UnaryOp("-", parts[0], parts[0].loc)
            for (sign, _), p in zip(terms[1:], parts[1:]):
                rhs = A.BinOp("+" if sign > 0 else "-", rhs, p, p.loc)
        return A.Equation(self._lhs(eq.lhs), eq.op, rhs, eq.loc, None, False)

    def _index_item(self, item: A.IndexItem) -> A.IndexItem:
        match item:
            case A.IndexName(name=n, loc=loc) if n in self.consts:
                v = self.consts[n][0]
                if isinstance(v, int) and not isinstance(v, bool):
                    return A.IndexNumber(v, loc)
                raise FuseError(f"'{n}' is a constant {v!r}, not an integer position", loc)
            case A.IndexTensor(expr=e, loc=loc):
                inner = self._expr(e)
                if isinstance(inner, A.Number):
                    if not inner.is_int:
                        raise FuseError("an index position must be an integer", inner.loc)
                    return A.IndexNumber(int(inner.value), loc)
                return A.IndexTensor(inner, loc)
        return item

    def _expr(self, e: A.Expr) -> A.Expr:
        match e:
            case A.TensorRef(name=n, indices=None) if n in self.consts:
                return self._literal(self.consts[n][0], e.loc)
            case A.TensorRef(indices=idx) if idx is not None:
                return replace(e, indices=tuple(self._index_item(i) for i in idx))
            case A.TensorRef():
                return e
            case A.Paren(expr=x):
                return replace(e, expr=self._expr(x))
            case A.UnaryOp(operand=x):
                return replace(e, operand=self._expr(x))
            case A.BinOp(lhs=lhs, rhs=rhs):
                return replace(e, lhs=self._expr(lhs), rhs=self._expr(rhs))
            case A.Ternary(cond=c, then=t, orelse=o):
                return replace(e, cond=self._expr(c), then=self._expr(t), orelse=self._expr(o))
            case A.Case(branches=br, default=d):
                return replace(
                    e,
                    branches=tuple((self._expr(c), self._expr(v)) for c, v in br),
                    default=None if d is None else self._expr(d),
                )
            case A.Reduce(op=op, body=body):
                if op not in ("sum", "max", "min", "mean", "avg", "prod"):
                    raise FuseError(f"unknown reduction '{op}' (expected sum, max, min, mean or prod)", e.loc)
                return replace(e, op="mean" if op == "avg" else op, body=self._expr(body))
            case A.Call():
                return self._call(e)
        return e

    def _literal(self, value: object, loc: Loc) -> A.Expr:
        if isinstance(value, bool):
            return A.Number(int(value), True, loc)
        if isinstance(value, int | float):
            return A.Number(value, isinstance(value, int), loc)
        if isinstance(value, list):
            return A.ListLit(tuple(self._literal(v, loc) for v in value), loc)
        if isinstance(value, str):
            return A.String(value, loc)
        raise FuseError(f"constant {value!r} cannot be used in an expression", loc)

    def _call(self, call: A.Call) -> A.Expr:
        if call.name in self.fns:
            args = tuple(self._expr(a) for a in call.args)
            return self._inline(self.fns[call.name], replace(call, args=args))
        b = bi.lookup(call.name)
        if b is None:
            if "::" in call.name:
                raise FuseError(f"unknown function '{call.name}'", call.loc)
            # Not a function: a boolean tensor reference `Parent(x, y)` if every argument is index-like.
            items: list[A.IndexItem] = []
            for a in call.args:
                if isinstance(a, A.TensorRef) and a.indices is None and a.name not in self.consts:
                    items.append(A.IndexName(a.name, a.loc))
                elif isinstance(a, A.Number) and a.is_int:
                    items.append(A.IndexNumber(int(a.value), a.loc))
                elif isinstance(a, A.TensorRef) and a.indices is None and a.name in self.consts:
                    items.append(self._index_item(A.IndexName(a.name, a.loc)))
                else:
                    raise FuseError(
                        f"unknown function '{call.name}' (not a builtin or a declared fn; a boolean tensor "
                        "reference takes index names only)",
                        call.loc,
                    )
            if call.kwargs:
                raise FuseError(f"unknown function '{call.name}'", call.loc)
            return A.TensorRef(call.name, tuple(items), call.loc, boolean=True)
        n = len(call.args)
        if n < b.min_args or (b.max_args >= 0 and n > b.max_args):
            want = (
                f"{b.min_args}"
                if b.min_args == b.max_args
                else (f"at least {b.min_args}" if b.max_args < 0 else f"{b.min_args} to {b.max_args}")
            )
            raise FuseError(f"{b.name}() takes {want} argument{'s' if want != '1' else ''}, got {n}", call.loc)
        for key, value in call.kwargs:
            if key not in b.kwargs:
                allowed = ", ".join(b.kwargs) or "none"
                raise FuseError(f"{b.name}() has no keyword '{key}' (accepted: {allowed})", value.loc)
        if b.kind is bi.Kind.INDEX_FN:
            args = tuple(a if isinstance(a, A.TensorRef) and a.indices is None else self._expr(a) for a in call.args)
        else:
            args = tuple(self._expr(a) for a in call.args)
        kwargs = tuple(
            (k, v if (k == "axis" and isinstance(v, A.TensorRef) and v.indices is None) else self._expr(v))
            for k, v in call.kwargs
        )
        return replace(call, args=args, kwargs=kwargs)

    # -- fn inlining ---------------------------------------------------------

    def _inline(self, fn: A.FnDef, call: A.Call) -> A.Expr:
        """Expand a ``fn`` call into an expression over the call site's indices (see module docstring)."""
        if call.kwargs:
            raise FuseError(f"fn '{fn.name}' takes no keyword arguments", call.kwargs[0][1].loc)
        if len(call.args) != len(fn.params):
            raise FuseError(
                f"fn '{fn.name}' takes {len(fn.params)} argument{'s' * (len(fn.params) != 1)}, got {len(call.args)}",
                call.loc,
                [(f"'{fn.name}' is defined here", fn.loc)],
            )
        tag = next(self._fresh)
        binding: dict[str, str] = {}  # body index name -> call-site index name
        args: dict[str, tuple[A.Expr, tuple[str, ...]]] = {}
        for param, arg in zip(fn.params, call.args):
            names = free_indices(arg)
            declared = [i.name for i in param.indices]
            if len(names) < len(declared):
                raise FuseError(
                    f"argument for {param.name}[{', '.join(declared)}] has {len(names)} free "
                    f"ind{'ex' if len(names) == 1 else 'ices'} {names}, needs at least {len(declared)}",
                    arg.loc,
                )
            tail = names[len(names) - len(declared) :] if declared else []
            renames: dict[str, str] = {}
            for d, actual in zip(declared, tail):
                if d in binding and binding[d] != actual:
                    renames[actual] = binding[d]
                else:
                    binding.setdefault(d, actual)
            if renames:
                arg = rename_indices(arg, renames)
            args[param.name] = (arg, tuple(declared))
        body = self._flatten(list(fn.body))
        env: dict[str, tuple[tuple[str, ...], A.Expr]] = {}

        def local(name: str) -> str:
            return binding.get(name) or f"{name}__{fn.name.split('::')[-1]}{tag}"

        for stmt in body:
            if not isinstance(stmt, A.Equation):
                raise FuseError("a fn body may contain equations only", stmt.loc)
            lhs_names: list[str] = []
            for item in stmt.lhs.indices or ():
                if not isinstance(item, A.IndexName):
                    raise FuseError("left-hand sides inside a fn body take plain index names", item.loc)
                lhs_names.append(local(item.name))
            rhs = self._substitute(stmt.rhs, args, env, local)
            if stmt.guard is not None:
                rhs = A.BinOp("*", A.Paren(rhs, rhs.loc), self._substitute(stmt.guard, args, env, local), rhs.loc)
            scoped = {local(n) for n in _stmt_index_names(stmt)}
            contribution = project_terms(rhs, lhs_names, stmt.projection, scoped)
            if stmt.lhs.boolean:
                contribution = A.Call("step", (contribution,), (), contribution.loc)
            name = stmt.lhs.name
            if name in env:
                prev_names, prev = env[name]
                if len(prev_names) != len(lhs_names):
                    raise FuseError(f"'{name}' is defined with {len(prev_names)} indices before", stmt.loc)
                contribution = rename_indices(contribution, dict(zip(lhs_names, prev_names)))
                env[name] = (prev_names, A.BinOp("+", prev, contribution, stmt.loc))
            else:
                env[name] = (tuple(lhs_names), contribution)
        if fn.result not in env:
            raise FuseError(f"fn '{fn.name}' never defines its result '{fn.result}'", fn.loc)
        names, expr = env[fn.result]
        if fn.result_indices and len(fn.result_indices) != len(names):
            raise FuseError(
                f"fn '{fn.name}' declares {len(fn.result_indices)} result indices but '{fn.result}' has {len(names)}",
                fn.loc,
            )
        return A.Paren(self._expr_post_inline(expr), call.loc)

    def _expr_post_inline(self, e: A.Expr) -> A.Expr:
        return e

    def _substitute(self, e: A.Expr, args, env, local) -> A.Expr:
        """Replace parameters and body tensors inside a fn body expression; rename body-local indices."""

        def sub(x: A.Expr) -> A.Expr:
            match x:
                case A.TensorRef(name=n, indices=idx) if n in args:
                    arg, declared = args[n]
                    used = [] if idx is None else list(idx)
                    if idx is not None and len(used) != len(declared):
                        raise FuseError(
                            f"parameter {n} has {len(declared)} indices but is used with {len(used)}", x.loc
                        )
                    if idx is None:
                        return A.Paren(arg, x.loc)
                    mapping = {}
                    for d, item in zip(declared, used):
                        if not isinstance(item, A.IndexName):
                            raise FuseError("parameters inside a fn body take plain index names", item.loc)
                        mapping[local(d)] = local(item.name)
                    return A.Paren(rename_indices(arg, mapping), x.loc)
                case A.TensorRef(name=n, indices=idx) if n in env:
                    names, body = env[n]
                    used = [] if idx is None else list(idx)
                    if idx is not None and len(used) != len(names):
                        raise FuseError(f"'{n}' has {len(names)} indices but is used with {len(used)}", x.loc)
                    mapping = {}
                    for d, item in zip(names, used):
                        if not isinstance(item, A.IndexName):
                            raise FuseError("body tensors inside a fn take plain index names", item.loc)
                        mapping[d] = local(item.name)
                    return A.Paren(rename_indices(body, mapping), x.loc)
                case A.TensorRef(indices=idx) if idx is not None:
                    return replace(x, indices=tuple(_rename_item(i, local, sub) for i in idx))
                case A.Reduce(indices=idx, body=body):
                    return replace(x, indices=tuple(replace(i, name=local(i.name)) for i in idx), body=sub(body))
                case A.Call(args=cargs, kwargs=kw):
                    new_kw = tuple(
                        (
                            k,
                            A.TensorRef(local(v.name), None, v.loc)
                            if k == "axis" and isinstance(v, A.TensorRef)
                            else sub(v),
                        )
                        for k, v in kw
                    )
                    b = bi.lookup(x.name)
                    if b is not None and b.kind is bi.Kind.INDEX_FN:
                        new_args = tuple(
                            A.TensorRef(local(a.name), None, a.loc) if isinstance(a, A.TensorRef) else sub(a)
                            for a in cargs
                        )
                        return replace(x, args=new_args, kwargs=new_kw)
                    return self._call(replace(x, args=tuple(sub(a) for a in cargs), kwargs=new_kw))
            return _map_children(x, sub)

        return sub(e)


def _rename_item(item: A.IndexItem, local, sub) -> A.IndexItem:
    match item:
        case A.IndexName(name=n):
            return replace(item, name=local(n))
        case A.IndexOffset(name=n):
            return replace(item, name=local(n))
        case A.IndexTensor(expr=e):
            return replace(item, expr=sub(e))
    return item


def _map_children(x: A.Expr, f) -> A.Expr:
    match x:
        case A.Paren(expr=e):
            return replace(x, expr=f(e))
        case A.UnaryOp(operand=e):
            return replace(x, operand=f(e))
        case A.BinOp(lhs=lhs, rhs=rhs):
            return replace(x, lhs=f(lhs), rhs=f(rhs))
        case A.Ternary(cond=c, then=t, orelse=o):
            return replace(x, cond=f(c), then=f(t), orelse=f(o))
        case A.Case(branches=br, default=d):
            return replace(x, branches=tuple((f(c), f(v)) for c, v in br), default=None if d is None else f(d))
        case A.Reduce(body=body):
            return replace(x, body=f(body))
        case A.Call(args=args, kwargs=kw):
            return replace(x, args=tuple(f(a) for a in args), kwargs=tuple((k, f(v)) for k, v in kw))
        case A.ListLit(items=items):
            return replace(x, items=tuple(f(i) for i in items))
    return x


def rename_indices(e: A.Expr, mapping: dict[str, str]) -> A.Expr:
    """Rename free index names throughout an expression (``reduce`` binders included)."""
    if not mapping:
        return e

    def r(name: str) -> str:
        return mapping.get(name, name)

    def f(x: A.Expr) -> A.Expr:
        match x:
            case A.TensorRef(indices=idx) if idx is not None:
                return replace(x, indices=tuple(_rename_item(i, r, f) for i in idx))
            case A.TensorRef(indices=None) if x.name in mapping:
                return x
            case A.Reduce(indices=idx, body=body):
                return replace(x, indices=tuple(replace(i, name=r(i.name)) for i in idx), body=f(body))
            case A.Call(args=args, kwargs=kw):
                b = bi.lookup(x.name)
                idx_fn = b is not None and b.kind is bi.Kind.INDEX_FN
                new_args = tuple(
                    A.TensorRef(r(a.name), None, a.loc)
                    if idx_fn and isinstance(a, A.TensorRef) and a.indices is None
                    else f(a)
                    for a in args
                )
                new_kw = tuple(
                    (
                        k,
                        A.TensorRef(r(v.name), None, v.loc)
                        if k == "axis" and isinstance(v, A.TensorRef) and v.indices is None
                        else f(v),
                    )
                    for k, v in kw
                )
                return replace(x, args=new_args, kwargs=new_kw)
        return _map_children(x, f)

    return f(e)


def _stmt_index_names(stmt: A.Equation) -> set[str]:
    """Every index name written in an equation (left side, right side, guard, reduce binders)."""
    names: set[str] = set()

    def walk(x: object) -> None:
        if isinstance(x, A.IndexName | A.IndexOffset):
            names.add(x.name)
        elif isinstance(x, A.IndexTensor):
            walk(x.expr)
        elif isinstance(x, A.Call):
            b = bi.lookup(x.name)
            for a in x.args:
                if b is not None and b.kind is bi.Kind.INDEX_FN and isinstance(a, A.TensorRef):
                    names.add(a.name)
                else:
                    walk(a)
            for k, v in x.kwargs:
                if k == "axis" and isinstance(v, A.TensorRef) and v.indices is None:
                    names.add(v.name)
                else:
                    walk(v)
        elif isinstance(x, A.TensorRef):
            for i in x.indices or ():
                walk(i)
        elif isinstance(x, tuple):
            for y in x:
                walk(y)
        elif x is not None and hasattr(x, "__dataclass_fields__"):
            for f in x.__dataclass_fields__:
                if f != "loc":
                    walk(getattr(x, f))

    walk(stmt.lhs)
    walk(stmt.rhs)
    walk(stmt.guard)
    return names


def reduce_body_shares(needed: set[str], gone: set[str], keep: list[str], implicit: bool) -> set[str]:
    """The indices a reduce's body shares with its surroundings, for the call rule inside it.

    The reduced names are bound by the reduce: an outer use of the same name
    is another index (an inlined fn's contracted index bound to a call-site
    index the caller keeps). An explicit ``reduce(op, j) f(...)`` works along
    j, as ``sum(f(...), axis=j)`` does, so calls inside keep j and the
    reduction applies to their results; the projection an equation's term
    performs (``implicit``) projects inside calls, as the equation would.
    """
    shared = (needed - gone) | set(keep)
    return shared if implicit else shared | gone


def project_terms(rhs: A.Expr, keep: list[str], projection: str, scoped: set[str] | None = None) -> A.Expr:
    """Rewrite a right-hand side so each term reduces its indices not in ``keep`` (as an equation would).

    With ``scoped``, only those names are reduced: the others are batch indices
    that a fn call's arguments carry through the body.
    """
    out: A.Expr | None = None
    for sign, term in split_terms(rhs):
        gone = [n for n in free_indices(term) if n not in keep and (scoped is None or n in scoped)]
        if gone:
            names = tuple(A.IndexName(n, term.loc) for n in gone)
            part: A.Expr = A.Reduce(projection, names, term, term.loc, implicit=True)
        else:
            part = term
        if out is None:
            out = part if sign > 0 else A.UnaryOp("-", part, part.loc)
        else:
            out = A.BinOp("+" if sign > 0 else "-", out, part, part.loc)
    assert out is not None
    return out


def resolve(module: A.Module, base_dir: Path) -> Resolved:
    """Resolve a parsed module; see the module docstring."""
    return Resolver(module, base_dir).run()


def literal_array(e: A.Expr) -> np.ndarray:
    """A list/number literal as an array: ints → int64, floats → float64, ragged lists are errors."""

    def conv(x: A.Expr) -> object:
        match x:
            case A.Number(value=v):
                return v
            case A.Bool(value=v):
                return int(v)
            case A.UnaryOp(op="-", operand=A.Number(value=v)):
                return -v
            case A.ListLit(items=items):
                return [conv(i) for i in items]
        raise FuseError("expected a number or a list of numbers", x.loc)

    data = conv(e)
    try:
        arr = np.array(data)
    except ValueError:
        raise FuseError("ragged list literal: every row must have the same length", e.loc) from None
    if arr.dtype == object:
        raise FuseError("ragged list literal: every row must have the same length", e.loc)
    if arr.dtype.kind == "i":
        arr = arr.astype(np.int64)
    elif arr.dtype.kind == "f":
        arr = arr.astype(np.float64)
    return arr
