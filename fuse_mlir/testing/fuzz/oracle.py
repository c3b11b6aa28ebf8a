"""An evaluator of the fuzzer's program descriptions written from LANGUAGE.md, on plain NumPy.

It shares no code with the compiler (it imports nothing from ``fuse_mlir``
outside this package) and reads the fuzzer's own nodes, never the parser's
AST, so a disagreement between it and a backend is a disagreement about the
language, to be settled by the spec. Values are named arrays: an
``np.ndarray`` with one index name per axis, or a weak Python scalar for a
literal (NEP 50, §8). The rules, each from LANGUAGE.md:

- §4 join/broadcast: a pointwise operator aligns its operands by name.
- §4 projection: in each top-level term of a right-hand side, names not on the left are reduced with the
  equation's operator (sum / max / min / mean); the term is then broadcast to the left-hand side.
- §4 function calls: an argument keeps the names it shares with the rest of the equation (the left-hand
  side, the other factors of its term, the call's other arguments) plus the axis of a reducing or
  normalising builtin; its other names are projected inside the call, term by term, with the equation's
  operator.
- §4 same left-hand side: a group's value is the sum of its equations' contributions (OR for booleans).
- §4 numeric indices, gathers, zero-filled offsets and slices named by their text; §6 builtins; §8 dtypes
  (sum/mean reductions follow ``np.sum``/``np.mean``; products without projection keep the dtype).

:class:`Undefined` marks a program whose value the spec leaves open (empty max/min/mean, integer overflow,
a negative integer power); :class:`Reject` a program outside what the oracle models. Both are skipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fuse_mlir.testing.fuzz.program import (
    Bin,
    Call,
    CaseExpr,
    Eq,
    Expr,
    FnCall,
    FnDef,
    FuzzProgram,
    IGather,
    IName,
    INum,
    IOff,
    ISlice,
    ITime,
    ListConst,
    Lit,
    Paren,
    Reduce,
    Ref,
    Ternary,
    Un,
    nodes,
    tensors_read,
)


class Undefined(Exception):
    """The spec leaves this program's value open: the fuzzer does not compare it."""


class Reject(Exception):
    """The program is outside what the oracle models (a generator slip): the fuzzer regenerates."""


Scalar = int | float


@dataclass
class NA:
    """A named array: ``a`` has one axis per entry of ``names``; a Python scalar ``a`` is a weak literal."""

    a: Any
    names: tuple[str, ...]

    @property
    def weak(self) -> bool:
        return isinstance(self.a, int | float) and not isinstance(self.a, np.generic)


OPS = {"=": "sum", "+=": "sum", "max=": "max", "min=": "min", "avg=": "mean"}
AXIS_FNS = {"softmax", "masked_softmax", "softmax_grad", "lnorm"}
REDUCE_FNS = {"logsumexp", "avg", "sum", "max1", "min1"}
ALIASES = {"layernorm": "lnorm", "layer_norm": "lnorm", "mean": "avg"}


def align(*vals: NA) -> tuple[list[Any], tuple[str, ...]]:
    """Arrays of ``vals`` expanded to one common name order (first appearance), ready to broadcast."""
    names: list[str] = []
    for v in vals:
        for n in v.names:
            if n not in names:
                names.append(n)
    out = []
    for v in vals:
        if v.weak or not v.names:
            out.append(v.a)
            continue
        arr = np.asarray(v.a)
        perm = [v.names.index(n) for n in names if n in v.names]
        arr = arr.transpose(perm)
        shape = []
        it = iter(arr.shape)
        for n in names:
            shape.append(next(it) if n in v.names else 1)
        out.append(arr.reshape(shape))
    return out, tuple(names)


def _check_wide(wide: np.ndarray, res: np.ndarray) -> None:
    info = np.iinfo(res.dtype)
    if np.any(wide > info.max) or np.any(wide < info.min):
        raise Undefined("integer overflow")


def _int_op(fn: Any, a: Any, b: Any) -> Any:
    res = fn(a, b)
    r = np.asarray(res)
    if r.dtype.kind in "iu":
        wide = fn(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
        _check_wide(wide, r)
    return res


def reduce_axes(arr: Any, axes: tuple[int, ...], op: str) -> Any:
    """``op`` (sum / max / min / mean / prod) over ``axes``; empty max/min/mean are left open by the spec."""
    if not axes:
        return arr
    arr = np.asarray(arr)
    if op in ("max", "min", "mean") and any(arr.shape[k] == 0 for k in axes):
        raise Undefined(f"{op} over an empty axis")
    if op == "sum":
        if arr.dtype.kind in "iu":
            return np.sum(arr.astype(np.int64), axis=axes)
        return np.sum(arr, axis=axes)
    if op == "max":
        return np.max(arr, axis=axes)
    if op == "min":
        return np.min(arr, axis=axes)
    if op == "mean":
        return np.mean(arr, axis=axes)
    if op == "prod":
        if arr.dtype.kind in "iu":
            res = np.prod(arr.astype(np.int64), axis=axes)
            _check_wide(np.prod(arr.astype(np.float64), axis=axes), res)
            return res
        return np.prod(arr, axis=axes)
    raise Reject(f"unknown reduction {op}")


def project(v: NA, keep: set[str] | list[str] | tuple[str, ...], op: str) -> NA:
    """Reduce the names of ``v`` not in ``keep`` with ``op``."""
    if v.weak:
        return v
    axes = tuple(k for k, n in enumerate(v.names) if n not in keep)
    if not axes:
        return v
    return NA(reduce_axes(v.a, axes, op), tuple(n for n in v.names if n in keep))


def split_terms(e: Expr) -> list[tuple[int, Expr]]:
    """Top-level ``+`` / ``-`` operands with their signs (parentheses stop the split)."""
    if isinstance(e, Bin) and e.op in "+-" and len(e.op) == 1:
        left = split_terms(e.a)
        right = split_terms(e.b)
        if e.op == "-":
            right = [(-s, t) for s, t in right]
        return left + right
    return [(1, e)]


def _neg(v: NA) -> NA:
    if v.weak:
        return NA(-v.a, ())
    return NA(np.negative(v.a), v.names)


def add_values(vals: list[NA]) -> NA:
    """Pointwise sum of several named values (NEP 50: weak literals do not widen)."""
    acc = vals[0]
    for v in vals[1:]:
        if acc.weak and v.weak:  # literal + literal stays a weak literal
            acc = NA(acc.a + v.a, ())
            continue
        (x, y), names = align(acc, v)
        acc = NA(_int_op(np.add, x, y), names)
    return acc


class Oracle:
    """Evaluates a :class:`FuzzProgram` on given inputs; ``values`` holds every tensor computed."""

    def __init__(self, prog: FuzzProgram, arrays: dict[str, np.ndarray]):
        self.prog = prog
        self.values: dict[str, np.ndarray] = {k: np.asarray(v) for k, v in arrays.items()}
        self.fns: dict[str, FnDef] = {f.name: f for f in prog.fns}
        self.extents = dict(prog.extents)
        self.eq: Eq | None = None
        self.sized_names = _sized_names(prog)
        #: Fixpoint mode, per recursive group (its names sorted, joined by ``+``): runs and converged flag,
        #: each run's largest change as a multiple of the convergence tolerance, and whether it is float.
        self.runs: dict[str, tuple[int, bool]] = {}
        self.changes: dict[str, list[float]] = {}
        self.inexact: set[str] = set()

    # -- programs -----------------------------------------------------------------------------------

    def run(self) -> dict[str, np.ndarray]:
        """The exports; in fixpoint mode also ``<names>#iterations`` and ``<names>#converged`` per recursive
        group (its tensor names sorted and joined by ``+``), as 0-d int64 and int8 arrays."""
        if self.prog.mode == "streaming":
            return self.stream()
        groups: dict[str, list[Eq]] = {}
        for eq in self.prog.eqs:
            groups.setdefault(eq.lhs, []).append(eq)
        done: set[str] = set()
        for name, eqs in groups.items():
            if name in done:
                continue
            comp = recursive_group(name, groups)
            if not comp:
                self.values[name] = self.group(eqs)
                done.add(name)
                continue
            if self.prog.mode != "fixpoint":
                raise Reject(f"recursive group {'+'.join(comp)} outside fixpoint mode")
            self.fixpoint(comp, groups)
            done.update(comp)
        exports = self.prog.exports or list(groups)
        out = {n: self.values[n] for n in exports}
        for q in self.prog.queries:
            if q.name not in self.values:
                raise Reject(f"query of {q.name}, which the program does not define")
            try:
                out[q.label()] = np.array(self.values[q.name][q.index(self.prog.axis_names(q.name))], copy=True)
            except IndexError as e:
                raise Reject(f"query {q.text()}: {e}") from None
        for label, (iters, converged) in self.runs.items():
            out[f"{label}#iterations"] = np.array(iters, dtype=np.int64)
            out[f"{label}#converged"] = np.array(int(converged), dtype=np.int8)
        return out

    def stream(self) -> dict[str, np.ndarray]:
        """Streaming mode (LANGUAGE.md §5, as ``docs/modes.md`` pins it down): ``steps`` steps, each evaluating
        every group once in order, a reference ``d`` steps behind its left-hand side reading the value that
        many steps back (zeros before the first step); stream inputs are the data's slices along its last
        axis. The exports of step ``s`` come back as ``name@s``.

        Each equation is rewritten once: its left-hand time index dropped and each timed reference renamed to
        ``name@d`` for its lag ``d`` (``name`` itself at lag 0), so a step is an ordinary evaluation. A
        computed tensor's zero history has the tensor's own dtype: from the promoted dtype of the inputs its
        equations read (float64 when none, int8 for a boolean tensor), widened while its first step
        promotes further.
        """
        prog = self.prog
        streams = set(prog.stream_inputs())
        groups: dict[str, list[Eq]] = {}
        lags: dict[str, set[int]] = {}
        for eq in prog.eqs:
            groups.setdefault(eq.lhs, []).append(_drop_time(eq, lags))
        computed = {eq.lhs for eq in prog.eqs if any(isinstance(i, ITime) for i in eq.lidx)}
        data = {u: np.asarray(self.values[u]) for u in streams}
        shapes = {n: tuple(self.extents[i.name] for i in groups[n][0].lidx if isinstance(i, IName)) for n in computed}
        history: dict[str, list[np.ndarray]] = {n: [] for n in lags}

        def step(s: int, dtypes: dict[str, np.dtype]) -> None:
            for u in streams:
                self.values[u] = data[u][..., s]
            for n, ds in lags.items():
                for d in ds:
                    if len(history[n]) >= d:
                        self.values[f"{n}@{d}"] = history[n][-d]
                    elif n in streams:
                        self.values[f"{n}@{d}"] = np.zeros_like(data[n][..., 0])
                    else:
                        self.values[f"{n}@{d}"] = np.zeros(shapes[n], dtypes[n])
            for name, eqs in groups.items():
                self.values[name] = self.group(eqs)

        start: dict[str, np.dtype] = {}
        for n in computed:
            read = {t for eq in groups[n] for t in tensors_read(eq.rhs) if "@" not in t}
            outside = [
                np.asarray(self.values[t]).dtype if t not in streams else data[t].dtype
                for t in sorted(read)
                if t in prog.inputs
            ]
            start[n] = np.result_type(*outside) if outside else np.dtype(np.float64)
        saved = dict(self.values)

        def first_step(trial: dict[str, np.dtype]) -> dict[str, np.dtype]:
            step(0, trial)
            got = {n: self.values[n].dtype for n in computed}
            self.values = dict(saved)
            return got

        dtypes = _settle_dtypes(start, {n for n in computed if groups[n][0].boolean}, first_step, "streamed tensors")
        out: dict[str, np.ndarray] = {}
        exports = prog.exports or list(groups)
        for s in range(prog.steps):
            step(s, dtypes)
            for n in history:
                history[n].append(np.asarray(self.values[n]))
            for e in exports:
                out[f"{e}@{s + 1}"] = np.asarray(self.values[e])
        return out

    def fixpoint(self, comp: list[str], groups: dict[str, list[Eq]]) -> None:
        """Iterate one recursive group (LANGUAGE.md §5 fixpoint, as ``docs/modes.md`` pins it down).

        Every tensor starts at zeros of its carried dtype; each run evaluates every group of ``comp`` from
        the previous run's values (Jacobi order), casts each to its carried dtype, and the runs stop at
        the first that changes nothing (floats: ``|new - old| <= 1e-6 + 1e-5 |new|``, NaN equal to NaN;
        integers exactly) or after ``max_iters`` runs. A boolean tensor is carried as int8; any other
        starts from the promoted dtype of the tensors its group reads outside ``comp`` (literals are weak:
        float64 when it reads none) and widens while a run's value promotes further.
        """
        shapes = {n: tuple(self.extents[i.name] for i in groups[n][0].lidx) for n in comp}
        if any(not isinstance(i, IName) for n in comp for eq in groups[n] for i in eq.lidx):
            raise Reject("numeric left-hand positions in a recursive group")
        boolean = {n for n in comp if any(eq.boolean for eq in groups[n])}
        outside = [
            np.asarray(self.values[t]).dtype
            for n in comp
            for eq in groups[n]
            for t in sorted(tensors_read(eq.rhs))
            if t not in comp and t in self.values
        ]
        base = np.result_type(*outside) if outside else np.dtype(np.float64)

        def first_run(trial: dict[str, np.dtype]) -> dict[str, np.dtype]:
            for n in comp:
                self.values[n] = np.zeros(shapes[n], trial[n])
            return {n: self.group(groups[n]).dtype for n in comp}

        dtypes = _settle_dtypes(dict.fromkeys(comp, base), boolean, first_run, "recursive group")
        for n in comp:
            self.values[n] = np.zeros(shapes[n], dtypes[n])
        runs, converged, changes = 0, False, []
        while runs < self.prog.max_iters:
            nxt = {n: np.asarray(self.group(groups[n])).astype(dtypes[n]) for n in comp}
            runs += 1
            same = all(_unchanged(self.values[n], nxt[n]) for n in comp)
            changes.append(max(_change(self.values[n], nxt[n]) for n in comp))
            self.values.update(nxt)
            if same:
                converged = True
                break
        label = "+".join(sorted(comp))
        self.runs[label] = (runs, converged)
        self.changes[label] = changes
        if any(d.kind == "f" for d in dtypes.values()):
            self.inexact.add(label)

    def group(self, eqs: list[Eq]) -> np.ndarray:
        """The value of one left-hand side: the sum (booleans: OR) of its equations' contributions."""
        # a concat's or flatten's left index is sized by the call: evaluate the first equation once to learn it
        self.equation(eqs[0], None)
        shape = self.lhs_shape(eqs)
        total: NA | None = None
        for eq in eqs:
            c = self.equation(eq, shape)
            if eqs[0].boolean:
                _check_float_truth(
                    c,
                    projects=bool(self.free(eq.rhs) - {i.name for i in eq.lidx if isinstance(i, IName)})
                    or _sums_inside(eq.rhs),
                )
                c = NA((np.asarray(c.a) != 0).astype(np.int8), c.names)
                total = c if total is None else NA(np.logical_or(total.a, c.a).astype(np.int8), c.names)
            else:
                total = c if total is None else add_values([total, c])
        assert total is not None
        out = total.a
        if total.weak:
            out = np.full(shape, out)
        return np.asarray(out)

    def lhs_shape(self, eqs: list[Eq]) -> tuple[int, ...]:
        """Extents of the left-hand side: names from the program, numeric positions one past the largest."""
        first = eqs[0]
        shape = []
        for k, item in enumerate(first.lidx):
            if isinstance(item, IName):
                shape.append(self.extent(item.name, first))
            else:
                shape.append(max(int(e.lidx[k].pos) for e in eqs if isinstance(e.lidx[k], INum)) + 1)
        return tuple(shape)

    def extent(self, name: str, eq: Eq) -> int:
        """An index's extent in ``eq``: from its tensors there, else (a pure broadcast, §4 Extents) from an
        ``axis`` declaration or the name's use on a tensor elsewhere in the program; none is an error."""
        ext = self.eq_extents.get(name) if getattr(self, "eq_extents", None) else None
        if ext is not None:
            return ext
        if name in self.extents and name in self.sized_names:
            return self.extents[name]
        raise Reject(f"no extent for {name} in {eq.text()}")

    def equation(self, eq: Eq, shape: tuple[int, ...] | None) -> NA:
        """One equation's contribution over the left-hand side's full shape (numeric positions placed)."""
        self.eq = eq
        self.eq_extents: dict[str, int] = {}
        lnames = [i.name for i in eq.lidx if isinstance(i, IName)]
        op = OPS[eq.op]
        if isinstance(eq.rhs, ListConst) or (isinstance(eq.rhs, Call) and eq.rhs.fn == "causal_mask"):
            body = self.constructor(eq.rhs, eq, shape)
        else:
            parts = []
            for sign, term in split_terms(eq.rhs):
                v = self.ev(term, set(lnames))
                v = project(v, set(lnames), op)
                parts.append(_neg(v) if sign < 0 else v)
            body = add_values(parts)
        # broadcast to the named left-hand side axes
        lshape = [self.extent(n, eq) for n in lnames]
        if body.weak:
            arr = np.full(lshape, body.a) if lnames else np.asarray(body.a)
            if not eq.lidx:
                return NA(arr, ())
        else:
            missing = [n for n in body.names if n not in lnames]
            if missing:
                raise Reject(f"names {missing} left after projection")
            arr = np.asarray(body.a)
            cur = list(body.names)
            for n in lnames:
                if n not in cur:
                    arr = arr[..., None]
                    cur.append(n)
            arr = np.broadcast_to(arr.transpose([cur.index(n) for n in lnames]), lshape).copy()
        # place numeric left-hand positions
        if len(lnames) == len(eq.lidx) or shape is None:
            return NA(arr, tuple(lnames))
        out = np.zeros(shape, dtype=np.asarray(arr).dtype)
        index: list[Any] = [slice(None) if isinstance(i, IName) else i.pos for i in eq.lidx]
        out[tuple(index)] = arr
        return NA(out, tuple(f"#{k}" for k in range(len(shape))))

    def constructor(self, e: Expr, eq: Eq, shape: tuple[int, ...]) -> NA:
        names = tuple(i.name for i in eq.lidx if isinstance(i, IName))
        if isinstance(e, ListConst):
            arr = np.asarray(e.value)
            if arr.ndim == 0:
                return NA(arr, ())
            if arr.ndim != len(eq.lidx):
                raise Reject("const rank")
            for n, s in zip(names, arr.shape):
                self.eq_extents[n] = s
            return NA(arr, names)
        assert isinstance(e, Call)
        n = int(e.args[0].value) if e.args else self.extent(names[0], eq)
        return NA(np.tri(n, n, 0, dtype=np.float64), names)

    # -- expressions --------------------------------------------------------------------------------

    def ev(self, e: Expr, keep: set[str]) -> NA:
        """The pointwise value of ``e``; ``keep`` holds the names its context shares (for calls inside).

        An expression of literals only (``1.0 < 2``, ``min(2, 1.5)``, ``-1.25 * 2``) is itself a weak
        literal (§8: a literal does not widen a typed tensor), whatever operators and builtins combine them.
        """
        v = self._ev(e, keep)
        if not v.weak and not v.names and _literal_only(e):
            item = np.asarray(v.a).item()
            return NA(int(item) if isinstance(item, int | bool) else float(item), ())
        return v

    def _ev(self, e: Expr, keep: set[str]) -> NA:
        if isinstance(e, Ref):
            return self.ref(e)
        if isinstance(e, Lit):
            return NA(e.value, ())
        if isinstance(e, Paren):
            return self.ev(e.a, keep)
        if isinstance(e, Un):
            v = self.ev(e.a, keep)
            _check_threshold(v.a, e.op == "!" and _computed(e.a))
            if e.op == "-":
                if not v.weak and np.asarray(v.a).dtype.kind in "iu":
                    _int_op(np.subtract, np.zeros((), np.asarray(v.a).dtype), v.a)
                return _neg(v)
            return NA((np.asarray(v.a) == 0).astype(np.int8), v.names)
        if isinstance(e, Bin) and e.op == "*":
            return self.product(_product_factors(e), keep)
        if isinstance(e, Bin):
            a = self.ev(e.a, keep | self.free(e.b))
            b = self.ev(e.b, keep | self.free(e.a))
            if e.op in THRESHOLD_OPS and (_computed(e.a) or _computed(e.b)):
                (x, y), _ = align(a, b)
                with np.errstate(all="ignore"):
                    _check_threshold(np.subtract(x, y) if e.op not in ("&&", "||") else x, True)
                    _check_threshold(y, e.op in ("&&", "||"))
            return self.binary(e.op, a, b)
        if isinstance(e, Ternary):
            return self.select([e.c, e.a, e.b], keep)
        if isinstance(e, CaseExpr):
            flat: list[Expr] = []
            for c, v in e.arms:
                flat += [c, v]
            return self.select([*flat, e.default], keep)
        if isinstance(e, Reduce):
            # the reduced names are bound by the reduce: the body shares the outer names it keeps and its own
            # other factors' names, as a one-term equation over the kept names would
            bound = set(e.names)
            body = self.ev(e.body, (keep - bound) | (self.free(e.body) - bound))
            missing = [n for n in e.names if n not in body.names]
            if missing:
                raise Reject("reduce of a name its body lacks")
            return project(body, set(body.names) - set(e.names), e.op)
        if isinstance(e, Call):
            return self.call(e, keep)
        if isinstance(e, FnCall):
            return self.fn_call(e, keep)
        raise Reject(f"cannot evaluate {type(e).__name__} here")

    def free(self, e: Expr) -> set[str]:
        """The index names ``e``'s value ranges over: what it can share with the rest of the equation.

        A name bound inside ``e`` (the axis a reducing builtin consumes, the names of a ``reduce``) is not
        free: ``sum(B[j], axis=j)`` shares no ``j`` with a neighbouring factor. Names a call's argument
        projects inside the call still count (the call is written over them).
        """
        if isinstance(e, Ref):
            out: set[str] = set()
            for i in e.idx:
                if isinstance(i, IName | IOff):
                    out.add(i.name)
                elif isinstance(i, ISlice):
                    out.add(i.text())
                elif isinstance(i, IGather):
                    out |= self.free(i.ref)
            return out
        if isinstance(e, Lit | ListConst):
            return set()
        if isinstance(e, Reduce):
            return self.free(e.body) - set(e.names)
        if isinstance(e, Call):
            fn = ALIASES.get(e.fn.lower(), e.fn.lower())
            if fn in ("const", "causal_mask"):
                return set()
            if fn == "concat" and len(e.args) == 1:
                try:
                    outer, inner, target = self._flatten_names(e.args[0])
                except Reject:
                    return self.free(e.args[0])
                return (self.free(e.args[0]) - {outer, inner}) | {target}
            args = set().union(*(self.free(a) for a in e.args)) if e.args else set()
            if fn in REDUCE_FNS or (fn in ("max", "min") and len(e.args) == 1):
                try:
                    return args - {self.axis_name(e, e.args[0])}
                except Reject:
                    return args
            return args
        parts = [v for v in vars(e).values() if hasattr(v, "__dataclass_fields__")]
        if isinstance(e, CaseExpr):
            parts = [x for arm in e.arms for x in arm] + [e.default]
        if isinstance(e, FnCall):
            # a fn's value ranges over its result's indices, bound to the call site's names by position
            f = self.fns.get(e.fn)
            if f is not None and all(isinstance(a, Ref) and all(isinstance(i, IName) for i in a.idx) for a in e.args):
                bind: dict[str, str] = {}
                for (_, pidx), a in zip(f.params, e.args):
                    names = [i.name for i in a.idx]
                    for p, n in zip(pidx, names[len(names) - len(pidx) :] if pidx else []):
                        bind.setdefault(p, n)
                return {bind[o] for o in f.out_idx if o in bind}
            parts = list(e.args)
        return set().union(*(self.free(x) for x in parts)) if parts else set()

    def product(self, factors: list[Expr], keep: set[str]) -> NA:
        """A product of factors is one join (§4): its dtype is NumPy's promotion of all factors at once.

        The literals are weak (§8) against the whole product, whatever their
        place: ``B[i] 0.5 X[i]`` with int8 B and float32 X is float32, as
        ``X[i] B[i] 0.5`` is (a pairwise left-to-right NumPy chain would give
        float64 for the first, since ``B * 0.5`` alone is float64).
        """
        frees = [self.free(f) for f in factors]
        vals = [self.ev(f, keep.union(*(g for j, g in enumerate(frees) if j != k))) for k, f in enumerate(factors)]
        out = vals[0]
        for v in vals[1:]:
            out = self.binary("*", out, v)
        if out.weak:
            return out
        want = np.result_type(*(v.a if v.weak else np.asarray(v.a).dtype for v in vals))
        return NA(np.asarray(out.a).astype(want), out.names) if np.asarray(out.a).dtype != want else out

    def binary(self, op: str, a: NA, b: NA) -> NA:
        if a.weak and b.weak and op in ("+", "-", "*", "/", "**"):
            # literal with literal stays a weak Python scalar (NEP 50): it must not widen a typed tensor later
            x, y = a.a, b.a
            if op == "**" and isinstance(x, int) and isinstance(y, int) and y < 0:
                raise Undefined("negative integer power")
            if op == "/" and y == 0:
                raise Undefined("division of literals by zero")
            if op == "+":
                return NA(x + y, ())
            if op == "-":
                return NA(x - y, ())
            if op == "*":
                return NA(x * y, ())
            if op == "/":
                return NA(x / y, ())
            if x == 0 and y < 0:
                raise Undefined("zero to a negative power")
            return NA(x**y, ())
        (x, y), names = align(a, b)
        if op == "+":
            return NA(_int_op(np.add, x, y), names)
        if op == "-":
            return NA(_int_op(np.subtract, x, y), names)
        if op == "*":
            return NA(_int_op(np.multiply, x, y), names)
        if op == "/":
            with np.errstate(divide="ignore", invalid="ignore"):
                return NA(np.true_divide(x, y), names)
        if op == "**":
            xa, ya = np.asarray(x), np.asarray(y)
            if xa.dtype.kind in "iu" and ya.dtype.kind in "iu" and np.any(ya < 0):
                raise Undefined("negative integer power")
            with np.errstate(all="ignore"):
                return NA(_int_op(np.power, x, y), names)
        cmp = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal}
        if op in cmp:
            return NA(np.asarray(cmp[op](x, y)).astype(np.int8), names)
        if op == "!=":
            return NA(np.asarray(np.not_equal(x, y)).astype(np.int8), names)
        if op == "&&":
            return NA(np.logical_and(np.not_equal(x, 0), np.not_equal(y, 0)).astype(np.int8), names)
        if op == "||":
            return NA(np.logical_or(np.not_equal(x, 0), np.not_equal(y, 0)).astype(np.int8), names)
        raise Reject(f"operator {op}")

    def select(self, parts: list[Expr], keep: set[str]) -> NA:
        """``c1 ? v1 : (c2 ? v2 : ... default)``: the value of the first true condition."""
        vals = [
            self.ev(p, keep.union(*(self.free(q) for j, q in enumerate(parts) if j != k))) for k, p in enumerate(parts)
        ]
        xs, names = align(*vals)
        result = xs[-1]
        for k in range(len(xs) - 3, -1, -2):
            _check_threshold(xs[k], _computed(parts[k]))
            result = np.where(np.not_equal(xs[k], 0), xs[k + 1], result)
        return NA(np.asarray(result), names) if names or not all(v.weak for v in vals[1::2]) else NA(result, ())

    # -- references ---------------------------------------------------------------------------------

    def ref(self, r: Ref) -> NA:
        if r.name not in self.values:
            raise Reject(f"unknown tensor {r.name}")
        arr = np.asarray(self.values[r.name])
        if arr.ndim != len(r.idx):
            raise Reject(f"rank of {r.name}")
        names: list[str] = []
        axis = 0
        for item in r.idx:
            size = arr.shape[axis]
            if isinstance(item, INum):
                if not 0 <= item.pos < size:
                    raise Reject("numeric index out of range")
                arr = np.take(arr, item.pos, axis=axis)
                continue
            if isinstance(item, IName):
                names.append(item.name)
                self.note_extent(item.name, size)
            elif isinstance(item, IOff):
                shifted = np.zeros_like(arr)
                d = item.delta
                src = [slice(None)] * arr.ndim
                dst = [slice(None)] * arr.ndim
                if d >= 0:
                    src[axis], dst[axis] = slice(d, None), slice(0, max(size - d, 0))
                else:
                    src[axis], dst[axis] = slice(0, max(size + d, 0)), slice(-d, None)
                if abs(d) < size:
                    shifted[tuple(dst)] = arr[tuple(src)]
                arr = shifted
                names.append(item.name)
                self.note_extent(item.name, size)
            elif isinstance(item, ISlice):
                sl = [slice(None)] * arr.ndim
                sl[axis] = slice(item.start, item.stop, item.step)
                arr = arr[tuple(sl)]
                names.append(item.text())
                self.note_extent(item.text(), arr.shape[axis])  # same text joins: the lengths must agree
            elif isinstance(item, IGather):
                idx = self.ref(item.ref)
                ia = np.asarray(idx.a)
                if ia.dtype.kind not in "iu":
                    raise Reject("gather with a non-integer index")
                if ia.size and (ia.min() < 0 or ia.max() >= size):
                    raise Reject("gathered index out of range")
                arr = np.take(arr, ia, axis=axis)
                names.extend(idx.names)
                axis += ia.ndim
                continue
            axis += 1
        return _diagonals(arr, names)

    def note_extent(self, name: str, size: int) -> None:
        old = self.eq_extents.setdefault(name, size)
        if old != size:
            raise Reject(f"extent conflict on {name}")

    # -- calls --------------------------------------------------------------------------------------

    def arg(self, e: Expr, keep: set[str]) -> NA:
        """A call argument: projected inside the call, term by term, over the names not in ``keep``."""
        assert self.eq is not None
        op = OPS[self.eq.op]
        parts = []
        for sign, term in split_terms(e):
            v = project(self.ev(term, keep), keep, op)
            parts.append(_neg(v) if sign < 0 else v)
        return add_values(parts)

    def call_args(self, c: Call | FnCall, keep: set[str], axis: str | None) -> list[NA]:
        out = []
        for k, a in enumerate(c.args):
            others = set().union(*(self.free(b) for j, b in enumerate(c.args) if j != k))
            kept = keep | others | ({axis} if axis else set())
            out.append(self.arg(a, kept))
        return out

    def axis_name(self, c: Call, arg0: Expr) -> str:
        """The axis of a normalising/reducing builtin: ``axis=``, else the dotted left axis, else the last."""
        assert self.eq is not None
        for k, v in c.kwargs:
            if k == "axis":
                if isinstance(v, str):
                    return v
                if isinstance(arg0, Ref) and all(isinstance(i, IName) for i in arg0.idx):
                    return arg0.idx[int(v)].name
                raise Reject("axis=int on a composite argument")
        for i in self.eq.lidx:
            if isinstance(i, IName) and i.dotted:
                return i.name
        if isinstance(arg0, Ref) and arg0.idx and isinstance(arg0.idx[-1], IName):
            return arg0.idx[-1].name
        raise Reject("no axis for a composite argument")

    def call(self, c: Call, keep: set[str]) -> NA:
        fn = ALIASES.get(c.fn.lower(), c.fn.lower())
        kw = dict(c.kwargs)
        if fn in ("max", "min") and len(c.args) == 1:
            fn += "1"
        if fn in AXIS_FNS or fn in REDUCE_FNS:
            axis = self.axis_name(c, c.args[0])
            args = self.call_args(c, keep, axis)
            x = args[0]
            if axis not in x.names:
                raise Reject(f"axis {axis} not in the argument")
            k = x.names.index(axis)
            xa = np.asarray(x.a)
            return self.along(fn, xa, k, x.names, args, kw)
        if fn == "concat" and len(c.args) == 1:
            return self.flatten(c.args[0], keep)
        if fn == "concat":
            axis = kw.get("axis")
            if not isinstance(axis, str):
                raise Reject("concat without a named axis")
            # each argument has its own extent along the joined axis; the result's is their sum (§4 Extents)
            outer = self.eq_extents.pop(axis, None)
            args = []
            for k, a in enumerate(c.args):
                self.eq_extents.pop(axis, None)
                others = set().union(*(self.free(b) for j, b in enumerate(c.args) if j != k))
                args.append(self.arg(a, keep | others | {axis}))
            names = args[0].names
            if axis not in names or any(set(a.names) != set(names) for a in args):
                raise Reject("concat arguments differ")
            arrs = [np.asarray(a.a).transpose([a.names.index(n) for n in names]) for a in args]
            out = np.concatenate(arrs, axis=names.index(axis))
            self.eq_extents.pop(axis, None)
            if outer is not None and outer != out.shape[names.index(axis)]:
                raise Reject("concat axis used elsewhere in the equation")
            self.eq_extents[axis] = out.shape[names.index(axis)]
            return NA(out, names)
        args = self.call_args(c, keep, None)
        hard_sig = fn == "sig" and len(c.args) == 1 and not kw.get("T")
        if fn in ("step", "log", "sqrt") or hard_sig:
            _check_threshold(args[0].a, _computed(c.args[0]))
        if fn in ("select", "case"):
            xs, names = align(*args)
            result = xs[-1]
            for k in range(len(xs) - 3, -1, -2):
                _check_threshold(xs[k], _computed(c.args[k]))
                result = np.where(np.not_equal(xs[k], 0), xs[k + 1], result)
            return NA(np.asarray(result), names)
        xs, names = align(*args)
        return NA(elementwise(fn, xs, kw), names)

    def _flatten_names(self, arg: Expr) -> tuple[str, str, str]:
        """(outer, inner, target) of a one-argument concat (§6 "one argument: flatten the last two axes"):
        the argument's last two indices as written that the left side does not name, flattened into the one
        left index the argument lacks."""
        assert self.eq is not None
        if not (isinstance(arg, Ref) and all(isinstance(i, IName) for i in arg.idx)):
            raise Reject("flatten of a composite argument")
        names = [i.name for i in arg.idx]
        lnames = [i.name for i in self.eq.lidx if isinstance(i, IName)]
        target = [n for n in lnames if n not in names]
        free = [n for n in names if n not in lnames]
        if len(target) != 1 or len(free) < 2:
            raise Reject("flatten needs one target and two free indices")
        return free[-2], free[-1], target[0]

    def flatten(self, arg: Expr, keep: set[str]) -> NA:
        outer, inner, target = self._flatten_names(arg)
        x = self.arg(arg, keep | {outer, inner})
        rest = [n for n in x.names if n not in (outer, inner)]
        arr = np.asarray(x.a).transpose([x.names.index(n) for n in [*rest, outer, inner]])
        out = arr.reshape(arr.shape[: len(rest)] + (arr.shape[-2] * arr.shape[-1],))
        old = self.eq_extents.setdefault(target, out.shape[-1])
        if old != out.shape[-1]:
            raise Reject("flattened extent conflicts")
        return NA(out, (*rest, target))

    def along(self, fn: str, xa: np.ndarray, k: int, names: tuple[str, ...], args: list[NA], kw: dict) -> NA:
        if fn in REDUCE_FNS:
            out_names = tuple(n for n in names if n != names[k])
            if fn == "sum":
                return NA(reduce_axes(xa, (k,), "sum"), out_names)
            if fn == "avg":
                return NA(reduce_axes(xa, (k,), "mean"), out_names)
            if fn in ("max1", "min1"):
                return NA(reduce_axes(xa, (k,), fn[:3]), out_names)
            # logsumexp
            if xa.shape[k] == 0:
                raise Undefined("logsumexp over an empty axis")
            xf = xa if xa.dtype.kind == "f" else xa.astype(np.float64)
            m = np.max(xf, axis=k, keepdims=True)
            with np.errstate(over="ignore", divide="ignore"):
                s = np.log(np.sum(np.exp(xf - m), axis=k)) + np.squeeze(m, axis=k)
            return NA(s, out_names)
        xf = xa if xa.dtype.kind == "f" else xa.astype(np.float64)
        if fn == "softmax":
            return NA(_softmax(xf, k), names)
        if fn == "masked_softmax":
            (x, mask), _ = align(NA(xf, names), args[1])
            mask = np.broadcast_to(np.asarray(mask), np.shape(x))
            keep = np.not_equal(mask, 0)
            if keep.shape != np.shape(x):
                raise Reject("mask shape")
            neg = np.where(keep, x, -np.inf)
            m = np.max(neg, axis=k, keepdims=True) if x.shape[k] else np.zeros_like(x)
            m = np.where(np.isfinite(m), m, 0)
            e = np.where(keep, np.exp(np.where(keep, x - m, 0)), 0).astype(xf.dtype)
            s = np.sum(e, axis=k, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                out = np.where(s > 0, e / np.where(s > 0, s, 1), 0).astype(xf.dtype)
            return NA(out, names)
        if fn == "softmax_grad":
            (y, g), nm = align(NA(xf, names), args[1])
            if nm != names:
                raise Reject("softmax_grad shapes")
            return NA(y * (g - np.sum(y * g, axis=k, keepdims=True)), names)
        if fn == "lnorm":
            eps = float(kw.get("eps", 1e-5))
            mean = np.mean(xf, axis=k, keepdims=True) if xf.shape[k] else np.zeros_like(xf)
            d = xf - mean
            var = np.mean(d * d, axis=k, keepdims=True) if xf.shape[k] else np.zeros_like(xf)
            return NA((d / np.sqrt(var + eps)).astype(xf.dtype), names)
        raise Reject(fn)

    def fn_call(self, c: FnCall, keep: set[str]) -> NA:
        """A program ``fn``: arguments projected as for any call, bound by position to the parameters'
        indices, the body evaluated as an equation over the result's indices."""
        f = self.fns[c.fn]
        args = self.call_args(c, keep, None)
        bind: dict[str, str] = {}
        inner = Oracle(FuzzProgram(), {})
        inner.fns = self.fns
        for (pname, pidx), a in zip(f.params, args):
            if len(pidx) != len(a.names):
                raise Reject("fn argument rank")
            for p, n in zip(pidx, a.names):
                if bind.setdefault(p, n) != n:
                    raise Reject("fn binding conflict")
            inner.values[pname] = np.asarray(a.a)
        eq = Eq(f.out, tuple(IName(n) for n in f.out_idx), "=", f.body)
        inner.extents = {p: self.extent_of(bind[p], args) for p in bind}
        inner.sized_names = set(inner.extents)
        val = inner.group([eq])
        return NA(val, tuple(bind[n] for n in f.out_idx))

    def extent_of(self, name: str, args: list[NA]) -> int:
        for a in args:
            if name in a.names:
                return int(np.shape(a.a)[a.names.index(name)])
        raise Reject("fn extent")


THRESHOLD_OPS = ("<", "<=", ">", ">=", "==", "!=", "&&", "||")
"""Operators whose result jumps where their (float) operands meet or reach 0."""


def _computed(e: Expr) -> bool:
    """Whether ``e`` is a computed value (not a reference or literal): its last bits depend on the evaluation."""
    while isinstance(e, Paren):
        e = e.a
    return not isinstance(e, Ref | Lit)


def _check_threshold(x: Any, computed: bool) -> None:
    """A discontinuous function of a computed float at its threshold is open: rounding decides the side.

    ``step``, a hard ``sig``, comparisons, conditions, ``!``/``&&``/``||``
    jump at 0 (comparisons at equal operands) and ``log``/``sqrt`` turn NaN
    below it; a computed value that is 0 up to rounding (a cancelling sum,
    a normalised row's mean) lands on either side depending on the
    summation order or the vector math, so the program has no one answer.
    """
    arr = np.asarray(x)
    if not computed or arr.dtype.kind != "f" or arr.size == 0:
        return
    finite = arr[np.isfinite(arr)]
    scale = max(1.0, float(np.max(np.abs(finite)))) if finite.size else 1.0
    if np.any(np.abs(finite) <= 1e-9 * scale):
        raise Undefined("a discontinuous function of a computed float at its threshold")


#: Builtins whose value is a float sum over an axis (so its rounding depends on the summation order).
SUMMING_CALLS = frozenset(
    {"softmax", "masked_softmax", "softmax_grad", "lnorm", "layernorm", "logsumexp", "sum", "mean", "avg"}
)


def _sums_inside(e: Expr) -> bool:
    """Whether ``e`` sums inside a call: a summing builtin, a ``reduce`` or a fn (whose body contracts)."""
    return any(
        (isinstance(n, Call) and n.fn.lower() in SUMMING_CALLS)
        or (isinstance(n, Reduce) and n.op in ("sum", "mean", "prod"))
        or isinstance(n, FnCall)
        for n in nodes(e)
    )


def _check_float_truth(c: NA, projects: bool) -> None:
    """A boolean of a projected float sum is open where the sum is near 0: rounding decides which side of 0.

    (``T(i) = A[j] X[i,m]`` with ``Σ_j A = 0`` is exactly 0 in one summation
    order and 1e-16 in another; the 0/1 result then depends on the order. The
    same holds for a sum inside a call: ``softmax_grad(softmax(x), g)`` with a
    constant ``g`` is 0 up to rounding.)
    """
    arr = np.asarray(c.a)
    if not projects or arr.dtype.kind != "f" or arr.size == 0:
        return
    with np.errstate(invalid="ignore"):
        scale = max(1.0, float(np.nanmax(np.abs(arr))) if np.isfinite(arr).any() else 1.0)
        if np.any(np.abs(arr) <= 1e-9 * scale):
            raise Undefined("boolean of a float sum that is 0 up to rounding")


def _product_factors(e: Expr) -> list[Expr]:
    """The factors of a ``*`` chain (juxtaposition or ``*``), left to right.

    The chain is left-associative: a product nested on the right prints in
    parentheses (see ``Bin.text``), so it is one factor with its own dtype.
    """
    out: list[Expr] = []
    x = e
    while isinstance(x, Bin) and x.op == "*":
        out.append(x.b)
        x = x.a
    out.append(x)
    return out[::-1]


def _literal_only(e: Any) -> bool:
    """Whether ``e`` is built from numeric literals alone (no tensor, constructor or fn call)."""
    if isinstance(e, Ref | ListConst | FnCall):
        return False
    if isinstance(e, Call) and e.fn.lower() in ("const", "causal_mask"):
        return False
    if isinstance(e, tuple):
        return all(_literal_only(x) for x in e)
    if hasattr(e, "__dataclass_fields__"):
        return all(
            _literal_only(v) for v in vars(e).values() if isinstance(v, tuple) or hasattr(v, "__dataclass_fields__")
        )
    return True


def _settle_dtypes(
    start: dict[str, np.dtype],
    boolean: set[str],
    trial: Callable[[dict[str, np.dtype]], dict[str, np.dtype]],
    what: str,
) -> dict[str, np.dtype]:
    """The carried dtypes of tensors computed from their own earlier values (a recursive group, a streamed
    tensor's history): ``start`` (int8 for the ``boolean`` ones), widened by the dtypes ``trial`` computes
    from them until nothing promotes further (``Reject`` after 8 rounds)."""
    dtypes = {n: np.dtype(np.int8) if n in boolean else d for n, d in start.items()}
    for _ in range(8):
        got = trial(dtypes)
        new = {n: d if n in boolean else np.result_type(d, got[n]) for n, d in dtypes.items()}
        if new == dtypes:
            return dtypes
        dtypes = new
    raise Reject(f"the dtypes of the {what} do not settle")


def _drop_time(eq: Eq, lags: dict[str, set[int]]) -> Eq:
    """``eq`` for one streaming step: the time index dropped from its left-hand side, and each timed reference
    renamed ``name@d`` for its lag ``d`` behind the left-hand side (kept at lag 0); lags are noted in ``lags``."""
    lt = next((i.offset for i in eq.lidx if isinstance(i, ITime)), None)
    if lt is None:
        return eq

    def rename(e: Any) -> Any:
        if isinstance(e, Ref):
            t = next((i.offset for i in e.idx if isinstance(i, ITime)), None)
            idx = tuple(
                IGather(rename(i.ref)) if isinstance(i, IGather) else i for i in e.idx if not isinstance(i, ITime)
            )
            if t is None:
                return replace(e, idx=idx)
            lag = lt - t
            if lag < 0:
                raise Reject("a read from the future")
            if lag:
                lags.setdefault(e.name, set()).add(lag)
            return Ref(f"{e.name}@{lag}" if lag else e.name, idx, brackets=bool(idx) or e.brackets)
        if hasattr(e, "__dataclass_fields__") and not isinstance(e, Lit):
            changes = {}
            for f, v in vars(e).items():
                if isinstance(v, tuple):
                    changes[f] = tuple(tuple(rename(y) for y in x) if isinstance(x, tuple) else rename(x) for x in v)
                elif hasattr(v, "__dataclass_fields__"):
                    changes[f] = rename(v)
            return replace(e, **changes)
        return e

    return replace(eq, lidx=tuple(i for i in eq.lidx if not isinstance(i, ITime)), rhs=rename(eq.rhs))


def recursive_group(name: str, groups: dict[str, list[Eq]]) -> list[str]:
    """The groups on a dependency cycle with ``name`` (itself included), in program order; [] when none."""
    reads = {n: {t for eq in eqs for t in tensors_read(eq.rhs) if t in groups} for n, eqs in groups.items()}

    def reach(src: str) -> set[str]:
        seen: set[str] = set()
        todo = [src]
        while todo:
            for t in reads[todo.pop()]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return seen

    from_name = reach(name)
    if name not in from_name:
        return []
    return [n for n in groups if n == name or (n in from_name and name in reach(n))]


def _unchanged(old: np.ndarray, new: np.ndarray) -> bool:
    """Fixpoint convergence for one tensor: floats within ``1e-6 + 1e-5 |new|`` (NaN equal to NaN; an infinity
    never, as ``inf - inf`` is NaN), other dtypes equal."""
    if new.dtype.kind != "f":
        return bool(np.array_equal(old, new))
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.abs(new - old) <= 1e-6 + 1e-5 * np.abs(new)
    return bool(np.all(close | (np.isnan(old) & np.isnan(new))))


def _change(old: np.ndarray, new: np.ndarray) -> float:
    """The largest change of one run as a multiple of the float convergence tolerance (a run converges at
    1 or below); 0 or infinity for other dtypes. How near 1 it is says how near rounding is to deciding."""
    if new.dtype.kind != "f":
        return 0.0 if np.array_equal(old, new) else math.inf
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        ratio = np.abs(new.astype(np.float64) - old) / (1e-6 + 1e-5 * np.abs(new.astype(np.float64)))
    ratio = np.where(np.isnan(old) & np.isnan(new), 0.0, ratio)
    return float(np.nan_to_num(ratio, nan=math.inf).max(initial=0.0))


def _sized_names(prog: FuzzProgram) -> set[str]:
    """Index names that have an extent somewhere in the program: declared axes, names indexing a tensor
    (inputs and defined tensors, inside gathers too), and the left-hand names of constructors."""
    out = {d.name for d in prog.decls if d.kind == "axis"}

    def walk(e: Any) -> None:
        if isinstance(e, Ref):
            for i in e.idx:
                if isinstance(i, IName | IOff):
                    out.add(i.name)
                elif isinstance(i, IGather):
                    walk(i.ref)
            return
        if isinstance(e, tuple):
            for x in e:
                walk(x)
            return
        if hasattr(e, "__dataclass_fields__"):
            for v in vars(e).values():
                walk(v)

    for eq in prog.eqs:
        walk(eq.rhs)
        if isinstance(eq.rhs, ListConst) or (isinstance(eq.rhs, Call) and eq.rhs.fn == "causal_mask"):
            out.update(i.name for i in eq.lidx if isinstance(i, IName))
    return out


def _softmax(x: np.ndarray, k: int) -> np.ndarray:
    if x.shape[k] == 0:
        return x.copy()
    m = np.max(x, axis=k, keepdims=True)
    e = np.exp(x - m)
    return (e / np.sum(e, axis=k, keepdims=True)).astype(x.dtype)


def _fdt(*xs: Any) -> Any:
    """The float dtype an elementwise float builtin gives: the array's float dtype, float64 for integers."""
    for x in xs:
        if isinstance(x, np.ndarray | np.generic) and np.asarray(x).dtype == np.float32:
            return np.float32
    return np.float64


def elementwise(fn: str, xs: list[Any], kw: dict) -> Any:
    """§6 elementwise builtins on aligned operands."""
    x = xs[0]
    xa = np.asarray(x)
    if fn == "relu":
        return np.maximum(x, 0)
    if fn == "abs":
        return np.abs(x)
    if fn == "step":
        return np.greater(x, 0).astype(np.int8)
    if fn in ("max", "min"):
        return (np.maximum if fn == "max" else np.minimum)(xs[0], xs[1])
    dt = _fdt(*xs)
    xf = xa.astype(dt) if xa.dtype.kind != "f" else xa
    with np.errstate(all="ignore"):
        if fn == "sig":
            t = xs[1] if len(xs) > 1 else kw.get("T")
            if t is None or (np.ndim(t) == 0 and float(t) == 0):
                return np.greater(xf, 0).astype(dt)
            z = xf / t
            return (1 / (1 + np.exp(-z))).astype(dt)
        if fn == "gelu":
            c = math.sqrt(2 / math.pi)
            return (0.5 * xf * (1 + np.tanh(c * (xf + 0.044715 * xf**3)))).astype(dt)
        if fn == "gelu_grad":
            c = math.sqrt(2 / math.pi)
            u = c * (xf + 0.044715 * xf**3)
            t = np.tanh(u)
            return (0.5 * (1 + t) + 0.5 * xf * (1 - t * t) * c * (1 + 3 * 0.044715 * xf**2)).astype(dt)
        simple = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "sin": np.sin, "cos": np.cos}
        if fn in simple:
            return simple[fn](xf).astype(dt)
        if fn == "pow":
            return np.power(xs[0], xs[1])
    raise Reject(f"builtin {fn}")


def _diagonals(arr: np.ndarray, names: list[str]) -> NA:
    """Repeated names on one reference take the diagonal (``A[i, i]``)."""
    while len(set(names)) != len(names):
        seen: dict[str, int] = {}
        for k, n in enumerate(names):
            if n in seen:
                j = seen[n]
                if arr.shape[j] != arr.shape[k]:
                    raise Reject("diagonal of unequal extents")
                arr = np.diagonal(arr, axis1=j, axis2=k)  # the diagonal goes last
                names = [m for q, m in enumerate(names) if q not in (j, k)] + [n]
                break
            seen[n] = k
    return NA(arr, tuple(names))


def evaluate(
    prog: FuzzProgram, arrays: dict[str, np.ndarray], *, inexact: set[str] | None = None
) -> dict[str, np.ndarray]:
    """The exports of ``prog`` on ``arrays``, per LANGUAGE.md; raises :class:`Undefined` or :class:`Reject`.

    ``inexact``, when given, receives the labels of the float recursive groups (fixpoint mode), whose run
    counts rounding may move by one (:func:`fuse_mlir.testing.fuzz.driver.compare`'s ``slack``).
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        o = Oracle(prog, arrays)
        out = o.run()
    if inexact is not None:
        inexact.update(o.inexact)
    return out
