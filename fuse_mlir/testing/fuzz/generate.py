"""A random generator of valid `.fuse` programs covering the language, built on the fuzzer's own nodes.

Generation is bottom-up and checked: each new equation group is evaluated
by the oracle on the program's inputs, and redrawn when the oracle rejects
it (a generator slip), finds its value left open by the spec, or finds
values that are not finite or too large to compare. Values stay
well-conditioned by construction: inputs are multiples of 1/8, log/sqrt/
division/pow bases get positive operands, exp gets bounded arguments, and
comparisons, ``step`` and conditions only see *exact* values (built from
inputs, small literals, ``+ - *``, relu/abs/max/min and sum/max/min
projections), so rounding can never flip them.

With ``fixpoint`` > 0 a share of the programs (drawn from a stream of its
own, so a seed's other programs stay the same) also get a recursive group
and run in fixpoint mode: a contraction (``R = base + c f(R)`` with
``|c| <= 1/2`` and ``f`` 1-Lipschitz: elementwise, a transpose or a shift,
a mean, ``max`` with an input, or a matrix-vector product scaled to
contract), a shifted recursion (``R[i] = base + f(R[i-1])``, which settles
exactly after as many runs as the axis is long), or a boolean closure
(transitive, right-linear, non-linear, mutually recursive or a reachability
vector; over a 0/1 input or a comparison). The oracle iterates it itself;
float groups that do not settle within ``max_iters - 2`` runs are redrawn,
and now and then ``max_iters`` is 2 or 3, so the limit's path is run too.

With ``streaming`` > 0 a share gets a streamed recurrence over a stream input
instead, run step by step. With ``demand`` > 0 a share of the programs that
are not streamed also carries one to three demand queries
(:meth:`Generator.queries`), drawn after the program is complete.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fuse_mlir.testing.fuzz import oracle
from fuse_mlir.testing.fuzz.program import (
    Bin,
    Call,
    CaseExpr,
    Decl,
    Eq,
    Expr,
    FnCall,
    FnDef,
    FuzzProgram,
    IGather,
    IName,
    InputSpec,
    INum,
    IOff,
    ISlice,
    ITime,
    ListConst,
    Lit,
    Paren,
    Pick,
    Query,
    Reduce,
    Ref,
    Ternary,
    Un,
    mentions,
)

NAMES = ["i", "j", "k", "l", "m", "p'"]
ELEMENTWISE = ["relu", "step", "sig", "gelu", "exp", "log", "sqrt", "abs", "tanh", "sin", "cos", "pow", "max2", "min2"]
FLOAT_FNS = {"sig", "gelu", "exp", "log", "sqrt", "tanh", "sin", "cos", "pow"}


@dataclass
class Info:
    """What the generator knows of a subexpression: a bound on |value|, exactness, integer-ness, positivity."""

    bound: float
    exact: bool
    isint: bool
    pos: bool = False


class Generator:
    """Draws one program from a seed; :meth:`program` returns a :class:`FuzzProgram` the oracle accepts."""

    def __init__(
        self, seed: int, *, max_groups: int = 4, fixpoint: float = 0.0, streaming: float = 0.0, demand: float = 0.0
    ):
        self.seed = seed
        self.rng = random.Random(seed)
        self.max_groups = max_groups
        # drawn from streams of their own, so the programs of seeds that get neither stay the same
        self.recursive = fixpoint > 0 and random.Random(f"fixpoint:{seed}").random() < fixpoint
        self.streamed = not self.recursive and streaming > 0 and random.Random(f"streaming:{seed}").random() < streaming
        self.demanded = demand > 0 and random.Random(f"demand:{seed}").random() < demand

    # -- program ------------------------------------------------------------------------------------

    def program(self) -> FuzzProgram:
        r = self.rng
        for _ in range(50):
            prog = self._attempt()
            if prog is not None and prog.eqs:
                if self.demanded and prog.mode != "streaming":
                    prog.queries = self.queries(prog)
                return prog
            self.rng = random.Random(r.random())
        raise RuntimeError(f"generator found no program for seed {self.seed}")

    def _attempt(self) -> FuzzProgram | None:
        r = self.rng
        p = FuzzProgram(seed=self.seed)
        self.p = p
        weights = [1, 5, 6, 6, 5] if r.random() < 0.3 else [0, 2, 6, 6, 4]
        for n in NAMES:
            p.extents[n] = r.choices([0, 1, 2, 3, 4], weights)[0]
        mode = r.random()
        self.fdt = "float32" if mode < 0.25 else "float64"
        self.idt = r.choice(["int8", "int32", "int64"]) if mode > 0.8 else None
        self.info: dict[str, Info] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self.counter = 0
        self.params: list[Decl] = []
        if r.random() < 0.2:
            self.params.append(Decl(r.choice(["param", "const"]), "c0", r.choice([0.5, 2, 1.25, -1.5])))
        p.decls.extend(self.params)
        if r.random() < 0.3:
            n = r.choice(NAMES)
            p.decls.append(Decl("axis", n, p.extents[n]))
        self.fn_defs()
        groups = r.randint(1, self.max_groups)
        for g in range(groups):
            if not self.add_group(f"T{g}", self.group):
                break
        if self.recursive:
            p.mode = "fixpoint"
            p.semi_naive = r.random() < 0.7
            p.max_iters = r.choice([2, 3]) if r.random() < 0.15 else 64
            if not self.add_group(f"T{groups}", self.recursive_group):
                return None
            if r.random() < 0.5:
                self.add_group(f"T{groups + 1}", self.group)
        if self.streamed:
            p.mode = "streaming"
            p.steps = r.randint(2, 4)
            if not self.add_group(f"T{groups}", self.stream_group):
                return None
            if r.random() < 0.5:
                self.add_group(f"T{groups + 1}", self.stream_reader)
        if not p.eqs:
            return None
        defined = list(dict.fromkeys(e.lhs for e in p.eqs))
        p.exports = defined if r.random() < 0.7 else [defined[-1]]
        if r.random() < 0.3:
            order = list(range(len(p.eqs)))
            r.shuffle(order)
            p.order = order
        mentioned = {n for e in p.eqs for n in mentions(e.rhs)}
        declared = {d.name for d in p.decls if d.kind == "axis"}
        for e in p.eqs:
            for item in e.lidx:
                if (
                    isinstance(item, IName)
                    and item.name in p.extents  # concat's and flatten's axes are sized by the call
                    and item.name not in mentioned
                    and item.name not in declared
                ):
                    p.decls.append(Decl("axis", item.name, p.extents[item.name]))
                    declared.add(item.name)
        p.data = self.arrays
        used = p.used_inputs()
        p.inputs = {k: v for k, v in p.inputs.items() if k in used}
        p.data = {k: v for k, v in p.data.items() if k in used}
        return p

    def add_group(self, name: str, make: Callable[[str], list[Eq]]) -> bool:
        """Append the equations ``make(name)`` draws, redrawn (up to 12 times) until the oracle accepts them
        with finite values below 1e5 and, for a float recursive group, settling within ``max_iters - 2``
        runs (unless ``max_iters`` is small on purpose) with no run's change within a factor 1.25 of the
        convergence tolerance, where a backend's rounding (float32's especially) could decide the test the
        other way; False (and the program unchanged) when no draw passes."""
        p = self.p
        for _ in range(12):
            snapshot = (list(p.eqs), dict(p.inputs), dict(self.arrays), dict(self.info), list(p.decls))
            try:
                eqs = make(name)
                p.eqs.extend(eqs)
                out = oracle.Oracle(p, self.arrays)
                with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
                    out.run()
                for label, (runs, converged) in out.runs.items():
                    if label not in out.inexact:
                        continue
                    if p.max_iters > 3 and (not converged or runs > p.max_iters - 2):
                        raise oracle.Undefined(f"fixpoint of {label} does not settle")
                    if any(0.8 <= c <= 1.25 for c in out.changes[label]):
                        raise oracle.Undefined(f"fixpoint of {label} has a run whose convergence rounding decides")
                for lhs in dict.fromkeys(e.lhs for e in eqs):
                    v = out.values[lhs]
                    vf = np.asarray(v, dtype=np.float64)
                    if not np.all(np.isfinite(vf)) or (vf.size and np.max(np.abs(vf)) > 1e5):
                        raise oracle.Undefined("not finite or too large")
                    if v.dtype == np.float16:
                        raise oracle.Reject("float16")
                    self.info[lhs] = Info(
                        float(np.max(np.abs(vf))) if vf.size else 0.0,
                        all(self.exact_eq(e) for e in eqs) and v.dtype != np.float32,
                        v.dtype.kind in "iu",
                        bool(vf.size == 0 or np.min(vf) > 0.25),
                    )
                return True
            except (oracle.Reject, oracle.Undefined, FloatingPointError, ValueError, IndexError):
                p.eqs, p.inputs, self.arrays, self.info, p.decls = snapshot
        return False

    # -- demand queries ----------------------------------------------------------------------------

    def queries(self, p: FuzzProgram) -> list[Query]:
        """One to three demand queries of ``p``'s tensors (any equation's, sometimes an input's), each axis left
        whole, picked by an int (in range, negative too) or sliced (bounds past either end, negative steps),
        by its index name or its position. Drawn from a stream of their own after the program is complete, so
        the program is the one the seed gives without queries; none when the oracle does not accept it."""
        r = random.Random(f"demand-draw:{self.seed}")
        o = oracle.Oracle(p, p.arrays())
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
                o.run()
        except (oracle.Undefined, oracle.Reject):
            return []
        defined = list(dict.fromkeys(e.lhs for e in p.eqs))
        inputs = sorted(p.used_inputs())
        out = []
        for _ in range(r.choice([1, 1, 2, 3])):
            name = r.choice(inputs) if inputs and r.random() < 0.1 else r.choice(defined)
            shape = o.values[name].shape
            names = p.axis_names(name)
            select: list[tuple[str | int, Pick]] = []
            for k, extent in enumerate(shape):
                kind = r.choice(["whole", "int", "slice"])
                if kind == "whole" or (kind == "int" and extent == 0):
                    continue
                pick: Pick
                if kind == "int":
                    pick = r.randint(-extent, extent - 1)
                else:
                    start, stop = (None if r.random() < 0.4 else r.randint(-extent - 2, extent + 2) for _ in "ab")
                    pick = (start, stop, r.choice([None, 1, 2, -1, -2]))
                axis: str | int = names[k] if names[k] is not None and r.random() < 0.5 else k
                if isinstance(axis, int) and r.random() < 0.3:
                    axis -= len(shape)
                select.append((axis, pick))
            r.shuffle(select)
            out.append(Query(name, tuple(select)))
        return out

    # -- helpers ------------------------------------------------------------------------------------

    def fresh(self, prefix: str = "X") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def ext(self, n: str) -> int:
        return self.p.extents[n]

    def new_input(self, shape: tuple[int, ...], *, dtype: str | None = None, kind: str = "any") -> str:
        r = self.rng
        name = self.fresh("B" if kind == "bool" else ("Ix" if kind.startswith("index") else "X"))
        if dtype is None:
            if self.idt is not None:
                dtype = self.idt
            elif r.random() < 0.08:
                dtype = "int32"
            else:
                dtype = self.fdt
        spec = InputSpec(tuple(shape), dtype, kind)
        self.p.inputs[name] = spec
        rng = np.random.default_rng(zlib.crc32(f"{self.seed}:{name}".encode()))  # stable across processes
        dt = np.dtype(dtype)
        if kind.startswith("index:"):
            n = int(kind.split(":")[1])
            arr = rng.integers(0, max(n, 1), size=shape).astype(dt)
        elif kind == "bool":
            arr = rng.integers(0, 2, size=shape).astype(dt)
        elif dt.kind in "iu":
            arr = rng.integers(-3, 4, size=shape).astype(dt)
        elif kind == "pos":
            arr = (rng.integers(4, 17, size=shape) / 8).astype(dt)
        else:
            arr = (rng.integers(-16, 17, size=shape) / 8).astype(dt)
        self.arrays[name] = arr
        vf = arr.astype(np.float64)
        self.info[name] = Info(
            float(np.max(np.abs(vf))) if vf.size else 0.0,
            dt != np.float32 or True,
            dt.kind in "iu",
            kind == "pos",
        )
        return name

    def exact_eq(self, eq: Eq) -> bool:
        return eq.op != "avg=" and _exact(eq.rhs, self.info)

    # -- fns ----------------------------------------------------------------------------------------

    def fn_defs(self) -> None:
        r = self.rng
        if r.random() < 0.15:
            self.p.fns.append(
                FnDef(
                    "dot",
                    (("a", ("x",)), ("b", ("x",))),
                    "s",
                    (),
                    Bin("*", Ref("a", (IName("x"),)), Ref("b", (IName("x"),)), True),
                )
            )
        if r.random() < 0.15:
            body = Call("relu", (Bin("*", Ref("w", (IName("o"), IName("x"))), Ref("v", (IName("x"),)), True),))
            self.p.fns.append(FnDef("layer", (("w", ("o", "x")), ("v", ("x",))), "y", ("o",), body))

    # -- equations ----------------------------------------------------------------------------------

    def group(self, name: str) -> list[Eq]:
        r = self.rng
        rank = r.choices([0, 1, 2, 3], [1, 3, 4, 2])[0]
        lnames = r.sample(NAMES, rank)
        special = r.random()
        if special < 0.06:
            return [self.const_eq(name, lnames)]
        if special < 0.1 and rank >= 1:
            return [self.concat_eq(name, lnames)]
        if special < 0.12:
            return [self.flatten_eq(name, lnames[:2])]
        if special < 0.13:
            return self.numeric_lhs_group(name, lnames)
        boolean = r.random() < 0.07 and rank > 0
        dotted = r.random() < 0.25 and rank > 0
        lidx = [IName(n) for n in lnames]
        if dotted:
            k = r.randrange(rank)
            lidx[k] = IName(lnames[k], True)
        n_eqs = r.choices([1, 2, 3], [6, 2, 1])[0]
        eqs = []
        for e in range(n_eqs):
            op = r.choices(["=", "+=", "max=", "min=", "avg="], [5, 1, 2, 1, 1])[0]
            if e > 0 and op == "=":
                op = r.choice(["=", "+="])
            self.dot = lidx[[i.dotted for i in lidx].index(True)].name if dotted else None
            rhs = self.rhs(lnames, depth=2)
            eqs.append(Eq(name, tuple(lidx), op, rhs, boolean))
        return eqs

    # -- recursive groups (fixpoint mode) ----------------------------------------------------------

    def recursive_group(self, name: str) -> list[Eq]:
        """A recursive group whose iteration settles by construction (see the module docstring)."""
        r = self.rng
        kind = r.choice(["contract", "contract", "shifted", "shifted", "closure"])
        if kind == "closure":
            eqs = self.closure_group(name)
            if eqs:
                return eqs
            kind = "shifted"
        rank = r.choices([1, 2, 3], [3, 4, 2])[0]
        lnames = r.sample(NAMES, rank)
        lidx = tuple(IName(n) for n in lnames)
        self.dot = None
        base = self.rhs(lnames, depth=1)
        step = self.shifted_step(name, lnames) if kind == "shifted" else self.contracting_step(name, lnames)
        # an extent comes from a tensor of known size, and the group's own tensor is not one yet
        declared = {d.name for d in self.p.decls if d.kind == "axis"}
        sized = set(mentions(base))
        self.p.decls.extend(Decl("axis", n, self.ext(n)) for n in lnames if n not in sized | declared)
        if r.random() < 0.5:
            return [Eq(name, lidx, "=", Bin("+", base, step))]
        return [Eq(name, lidx, "=", base), Eq(name, lidx, "+=", step)]

    def contracting_step(self, name: str, lnames: list[str]) -> Expr:
        """``c f(R)`` with ``|c| <= 1/2`` and ``f`` 1-Lipschitz in the largest element, so runs converge
        geometrically to the one fixed point."""
        r = self.rng
        idx: list[IName | IOff] = [IName(n) for n in lnames]
        same = [(a, b) for a in range(len(lnames)) for b in range(a) if self.ext(lnames[a]) == self.ext(lnames[b])]
        if same and r.random() < 0.3:  # a transpose
            a, b = r.choice(same)
            idx[a], idx[b] = idx[b], idx[a]
        if r.random() < 0.25:  # a zero-filled shift
            k = r.randrange(len(idx))
            idx[k] = IOff(idx[k].name, r.choice([1, -1]))
        ref = Ref(name, tuple(idx))
        c = r.choice([0.5, 0.25, -0.5])
        form = r.choice(["plain", "fn", "fn", "max", "matvec", "mean"])
        inner: Expr = ref
        if form == "fn":
            inner = Call(r.choice(["relu", "tanh", "sin", "abs"]), (ref,))
        elif form == "max":
            inner = Call(r.choice(["max", "min"]), (ref, self.input_ref(lnames)))
        elif form in ("matvec", "mean"):
            k = r.randrange(len(idx))
            axis = idx[k].name
            other = [m for m in NAMES if m not in lnames and self.ext(m) == self.ext(axis)]
            if other:
                m = r.choice(other)
                moved = Ref(name, tuple(IName(m) if j == k else x for j, x in enumerate(idx)))
                if form == "mean":
                    inner = Reduce("mean", (m,), moved)
                else:  # |W| <= 2 over at most 4 columns: |W x| <= 8 |x|, so c / 8 keeps the step contracting
                    w = self.new_input((self.ext(axis), self.ext(m)), dtype=self.fdt)
                    inner = Bin("*", Ref(w, (IName(axis), IName(m))), moved, juxt=True)
                    c /= 8
        step = Bin("*", Lit(abs(c)), inner, juxt=r.random() < 0.7)
        return Un("-", step) if c < 0 else step

    def shifted_step(self, name: str, lnames: list[str]) -> Expr:
        """``f(R)`` read one or two places along an axis: each element depends only on elements before it (or
        after it), so the runs settle exactly once the dependence has crossed the axis."""
        r = self.rng
        k = r.randrange(len(lnames))
        idx: list[IName | IOff] = [IName(n) for n in lnames]
        idx[k] = IOff(lnames[k], r.choice([-1, 1, -2]))
        ref = Ref(name, tuple(idx))
        form = r.choice(["plain", "half", "relu", "scaled", "max"])
        if form == "half":
            return Bin("*", Lit(0.5), ref, juxt=True)
        if form == "relu":
            return Call("relu", (ref,))
        if form == "scaled":
            return Bin("*", self.input_ref(lnames), ref, juxt=r.random() < 0.7)
        if form == "max":
            return Call("max", (ref, self.input_ref(lnames)))
        return ref

    def closure_group(self, name: str) -> list[Eq]:
        """Boolean closures over a relation E: transitive (``R(i,j) = E(i,j) + R(i,k) E(k,j)``), right-linear,
        non-linear (``R R``), mutually recursive (odd and even paths) or a reachability vector. E is a 0/1
        int8 input or a comparison of a float input (a boolean value, so semi-naive evaluation applies).
        [] when no three index names share an extent of at least 1."""
        r = self.rng
        exts = [e for e in {self.ext(n) for n in NAMES} if e >= 1 and sum(self.ext(n) == e for n in NAMES) >= 3]
        if not exts:
            return []
        e = r.choice(sorted(exts))
        i, j, k = (IName(n) for n in r.sample([n for n in NAMES if self.ext(n) == e], 3))
        if r.random() < 0.5:
            x = self.new_input((e, e), dtype="int8", kind="bool")

            def rel(a: IName, b: IName) -> Expr:
                return Ref(x, (a, b))
        else:
            x = self.new_input((e, e), dtype=self.fdt)

            def rel(a: IName, b: IName) -> Expr:
                return Paren(Bin(">", Ref(x, (a, b)), Lit(0)))

        def join(a: Expr, b: Expr) -> Expr:
            return Bin("+", rel(i, j), Bin("*", a, b, juxt=True))

        shape = r.choice(["linear", "right", "square", "mutual", "reach"])
        if shape == "reach":
            s = self.new_input((e,), dtype="int8", kind="bool")
            return [Eq(name, (j,), "=", Bin("+", Ref(s, (j,)), Bin("*", Ref(name, (k,)), rel(k, j), True)), True)]
        if shape == "mutual":
            odd, even = name, f"{name}e"
            return [
                Eq(odd, (i, j), "=", join(Ref(even, (i, k)), rel(k, j)), True),
                Eq(even, (i, j), "=", Bin("*", Ref(odd, (i, k)), rel(k, j), True), True),
            ]
        if shape == "right":
            return [Eq(name, (i, j), "=", join(rel(i, k), Ref(name, (k, j))), True)]
        if shape == "square":
            return [Eq(name, (i, j), "=", join(Ref(name, (i, k)), Ref(name, (k, j))), True)]
        return [Eq(name, (i, j), "=", join(Ref(name, (i, k)), rel(k, j)), True)]

    # -- streamed groups (streaming mode) ----------------------------------------------------------

    def stream_group(self, name: str) -> list[Eq]:
        """``S[.., *t+1] = base + U[.., *t+1] + f(S[.., *t or *t-1])`` (and now and then ``U[.., *t]``): a
        recurrence over a stream input ``U`` (its data's last axis is the step), ``base`` an ordinary
        right-hand side. ``U`` ranges over every left-hand name, so the zero history's shape follows from
        the inputs."""
        r = self.rng
        lnames = r.sample(NAMES, r.choices([0, 1, 2], [1, 3, 3])[0])
        names = tuple(IName(n) for n in lnames)
        self.dot = None
        base = self.rhs(lnames, depth=1)
        u = self.new_input((*(self.ext(n) for n in lnames), self.p.steps))
        e: Expr = Bin("+", base, Ref(u, (*names, ITime(1))))
        if r.random() < 0.3:
            e = Bin("+", e, Bin("*", Lit(0.5), Ref(u, (*names, ITime(0))), juxt=True))
        prev = Ref(name, (*names, ITime(r.choice([0, 0, -1]))))
        form = r.choice(["plain", "half", "relu", "tanh", "max", "scaled"])
        if form == "half":
            step: Expr = Bin("*", Lit(0.5), prev, juxt=True)
        elif form in ("relu", "tanh"):
            step = Call(form, (prev,))
        elif form == "max":
            step = Call("max", (prev, self.input_ref(lnames)))
        elif form == "scaled":
            step = Bin("*", self.input_ref(lnames), prev, juxt=r.random() < 0.7)
        else:
            step = prev
        self.stream = (name, lnames)
        return [Eq(name, (*names, ITime(1)), "=", Bin(r.choice("+-"), e, step))]

    def stream_reader(self, name: str) -> list[Eq]:
        """A second streamed tensor reading the first this step (and, now and then, one step back), projected
        onto some of its names."""
        r = self.rng
        src, lnames = self.stream
        keep = [n for n in lnames if r.random() < 0.6]
        now = Ref(src, (*(IName(n) for n in lnames), ITime(1)))
        e: Expr = Bin("*", now, self.input_ref(lnames), juxt=True) if r.random() < 0.5 else Call("relu", (now,))
        if r.random() < 0.4:
            e = Bin("-", e, Ref(src, (*(IName(n) for n in lnames), ITime(0))))
        op = r.choice(["=", "=", "max="]) if len(keep) < len(lnames) else "="
        return [Eq(name, (*(IName(n) for n in keep), ITime(1)), op, e)]

    def const_eq(self, name: str, lnames: list[str]) -> Eq:
        r = self.rng
        if lnames and r.random() < 0.3 and len(lnames) == 2:
            n = self.ext(lnames[0])
            lnames = [lnames[0], next((m for m in NAMES if m != lnames[0] and self.ext(m) == n), lnames[0])]
            if lnames[0] != lnames[1]:
                return Eq(name, tuple(IName(x) for x in lnames), "=", Call("causal_mask", (Lit(n),)))
        shape = [self.ext(n) for n in lnames]
        vals = np.asarray([r.choice([-1.5, 0.5, 2.0, 3]) for _ in range(int(np.prod(shape)))]).reshape(shape)
        return Eq(name, tuple(IName(x) for x in lnames), "=", ListConst(vals.tolist()))

    def concat_eq(self, name: str, lnames: list[str]) -> Eq:
        r = self.rng
        axis = "c"
        pos = r.randrange(len(lnames) + 1)
        names = lnames[:pos] + [axis] + lnames[pos:]
        self.p.extents.pop(axis, None)
        args = []
        for _ in range(r.randint(2, 3)):
            order = list(names)
            if r.random() < 0.3:
                r.shuffle(order)
            shape = tuple(r.choice([0, 1, 2, 3]) if n == axis else self.ext(n) for n in order)
            x = self.new_input(shape)
            args.append(Ref(x, tuple(IName(n) for n in order)))
        return Eq(name, tuple(IName(n) for n in names), "=", Call("concat", tuple(args), (("axis", axis),)))

    def flatten_eq(self, name: str, lnames: list[str]) -> Eq:
        """A one-argument concat: flattens the argument's last two indices that the left side lacks into the
        one left index the argument lacks (``f``); other indices the equation does not use are projected."""
        r = self.rng
        free = r.sample([n for n in NAMES if n not in lnames], 3)
        a, c, extra = free
        body = list(lnames) + ([extra] if r.random() < 0.4 else [])
        r.shuffle(body)
        names = body + [a, c] if r.random() < 0.6 else body[:1] + [a] + body[1:] + [c]
        x = self.new_input(tuple(self.ext(n) for n in names))
        lhs = list(lnames)
        lhs.insert(r.randrange(len(lhs) + 1), "f")
        self.p.extents.pop("f", None)
        return Eq(name, tuple(IName(n) for n in lhs), "=", Call("concat", (Ref(x, tuple(IName(n) for n in names)),)))

    def numeric_lhs_group(self, name: str, lnames: list[str]) -> list[Eq]:
        r = self.rng
        k = r.randrange(len(lnames) + 1)
        positions = r.sample([0, 1, 2], r.randint(1, 2))
        eqs = []
        for pos in positions:
            lidx: list[IName | INum] = [IName(n) for n in lnames]
            lidx.insert(k, INum(pos))
            self.dot = None
            eqs.append(Eq(name, tuple(lidx), "=", self.rhs(lnames, depth=1)))
        return eqs

    def rhs(self, lnames: list[str], depth: int) -> Expr:
        r = self.rng
        terms = []
        for t in range(r.choices([1, 2, 3], [5, 3, 1])[0]):
            term = self.term(lnames, depth)
            if t and r.random() < 0.3:
                terms.append(("-", term))
            else:
                terms.append(("+", term))
        e = terms[0][1]
        for op, t in terms[1:]:
            e = Bin(op, e, t)
        return e

    def term(self, lnames: list[str], depth: int) -> Expr:
        r = self.rng
        n = r.choices([1, 2, 3], [4, 4, 2])[0]
        extra = [x for x in NAMES if x not in lnames]
        pool = lnames + r.sample(extra, min(len(extra), r.randint(0, 2)))
        facs = [self.factor(pool, depth) for _ in range(n)]
        e = facs[0]
        for f in facs[1:]:
            e = Bin("*", e, f, juxt=r.random() < 0.7)
        return e

    # -- factors ------------------------------------------------------------------------------------

    def factor(self, pool: list[str], depth: int) -> Expr:
        r = self.rng
        kinds = ["input", "input", "input", "defined", "literal"]
        if depth > 0:
            kinds += ["elementwise"] * 3 + ["axisfn"] * 2 + ["reducefn"] * 2 + ["structured"] * 3
            kinds += ["reduce", "paren", "cond", "fn"]
        kind = r.choice(kinds)
        if kind == "input":
            return self.input_ref(pool)
        if kind == "defined":
            return self.defined_ref(pool) or self.input_ref(pool)
        if kind == "literal":
            return self.literal()
        if kind == "elementwise":
            return self.elementwise(pool, depth)
        if kind == "axisfn":
            return self.axis_fn(pool, depth)
        if kind == "reducefn":
            return self.reduce_fn(pool, depth)
        if kind == "structured":
            return self.structured(pool, depth)
        if kind == "reduce":
            op = r.choice(["sum", "max", "min", "mean", "prod"])
            name = r.choice([x for x in NAMES if x not in pool] or NAMES)
            body = self.factor(pool + [name], depth - 1)
            body = Bin("*", body, self.input_ref([name] + r.sample(pool, min(len(pool), 1))), True)
            return Reduce(op, (name,), body)
        if kind == "paren":
            a, b = self.factor(pool, depth - 1), self.factor(pool, depth - 1)
            return Paren(Bin(r.choice("+-"), a, b))
        if kind == "cond":
            return self.conditional(pool, depth)
        if kind == "fn":
            return self.fn_call(pool) or self.input_ref(pool)
        raise AssertionError(kind)

    def literal(self) -> Expr:
        r = self.rng
        if self.params and r.random() < 0.3:
            d = self.params[0]
            return Lit(d.value, d.name)
        if self.idt is not None or r.random() < 0.3:
            v: int | float = r.choice([1, 2, 3, -1, -2, 0])
        else:
            v = r.choice([0.5, 1.5, 2.0, 0.25, -0.5, -1.25])
        return Lit(v) if v >= 0 else Paren(Lit(v)) if r.random() < 0.5 else Un("-", Lit(-v))

    def input_ref(self, pool: list[str], *, kind: str = "any", dtype: str | None = None) -> Ref:
        """A new input referenced over some names of ``pool``, with the odd diagonal, numeric index,
        offset, slice or gather."""
        r = self.rng
        k = r.randint(0 if pool else 0, min(3, len(pool)))
        names = r.sample(pool, k) if pool else []
        idx: list = [IName(n) for n in names]
        shape = [self.ext(n) for n in names]
        if kind != "any" or r.random() < 0.6:
            return Ref(self.new_input(tuple(shape), kind=kind, dtype=dtype), tuple(idx))
        extra = r.choice(["diag", "num", "off", "slice", "gather"])
        if extra == "diag" and names:
            k2 = r.randrange(len(names))
            idx.insert(r.randrange(len(idx) + 1), IName(names[k2]))
            shape.insert(idx.index(IName(names[k2])), self.ext(names[k2]))
            shape = [self.ext(i.name) for i in idx]
        elif extra == "num":
            size = r.randint(1, 3)
            pos = r.randrange(size)
            at = r.randrange(len(idx) + 1)
            idx.insert(at, INum(pos))
            shape.insert(at, size)
        elif extra == "off" and names:
            k2 = r.randrange(len(names))
            idx[k2] = IOff(names[k2], r.choice([1, -1, 2]))
        elif extra == "slice":
            size = r.randint(2, 5)
            sl = r.choice([ISlice(0, 2, None), ISlice(None, None, 2), ISlice(1, None, None), ISlice(0, 2, None)])
            at = r.randrange(len(idx) + 1)
            idx.insert(at, sl)
            shape.insert(at, size)
        elif extra == "gather" and pool:
            size = r.randint(1, 4)
            gnames = r.sample(pool, r.randint(1, min(2, len(pool))))
            ix = self.new_input(
                tuple(self.ext(n) for n in gnames), dtype=r.choice(["int32", "int64"]), kind=f"index:{size}"
            )
            at = r.randrange(len(idx) + 1)
            idx.insert(at, IGather(Ref(ix, tuple(IName(n) for n in gnames))))
            shape.insert(at, size)
        return Ref(self.new_input(tuple(shape), kind=kind, dtype=dtype), tuple(idx))

    def defined_ref(self, pool: list[str]) -> Ref | None:
        r = self.rng
        defined = [e.lhs for e in self.p.eqs]
        if not defined:
            return None
        name = r.choice(defined)
        shape = np.shape(self.oracle_value(name))
        idx = []
        for s in shape:
            cands = [n for n in pool if self.ext(n) == s] or [n for n in NAMES if self.ext(n) == s]
            if cands and r.random() < 0.9:
                idx.append(IName(r.choice(cands)))
            elif s > 0:
                idx.append(INum(r.randrange(s)))
            else:
                return None
        return Ref(name, tuple(idx), brackets=bool(idx) or r.random() < 0.5)

    def oracle_value(self, name: str) -> np.ndarray:
        o = oracle.Oracle(self.p, self.arrays)
        o.run()
        return o.values[name]

    def bounded(self, e: Expr, limit: float) -> Expr:
        """``e``, squashed through tanh when its bound might pass ``limit`` (keeps exp finite)."""
        b = _bound(e, self.info, self.p.extents)
        if b <= limit:
            return e
        return Call("tanh", (e,))

    def elementwise(self, pool: list[str], depth: int) -> Expr:
        r = self.rng
        fn = r.choice(ELEMENTWISE)
        arg = self.term(pool, depth - 1) if r.random() < 0.4 else self.factor(pool, depth - 1)
        isint = _isint(arg, self.info)
        if fn in FLOAT_FNS and self.idt == "int8" and isint:
            fn = "relu"
        if fn in ("step",) and not _exact(arg, self.info):
            fn = "relu"
        spelled = (fn[:3] if fn in ("max2", "min2") else fn).upper() if r.random() < 0.05 else ""
        if fn == "sig":
            if r.random() < 0.5 or not _exact(arg, self.info):
                return Call("sig", (arg,), (("T", r.choice([0.5, 1.0, 2.0])),) if r.random() < 0.5 else (), spelled)
            return Call("sig", (arg, Lit(r.choice([0.5, 1.0]))))
        if fn == "exp":
            return Call("exp", (self.bounded(arg, 20),), (), spelled)
        if fn in ("log", "sqrt"):
            return Call(fn, (self.positive(pool, depth - 1),), (), spelled)
        if fn == "pow":
            return Call("pow", (self.positive(pool, depth - 1), Lit(r.choice([2, 0.5, -1, 3, 1.5]))))
        if fn in ("max2", "min2"):
            other = self.factor(pool, depth - 1)
            return Call(fn[:3], (arg, other), (), spelled)
        return Call(fn, (arg,), (), spelled)

    def positive(self, pool: list[str], depth: int) -> Expr:
        r = self.rng
        c = r.random()
        if c < 0.4:
            return self.input_ref(pool, kind="pos", dtype=None if self.idt is None else "float64")
        if c < 0.7:
            inner = self.factor(pool, max(depth, 0))
            if self.idt == "int8" and _isint(inner, self.info):
                return self.input_ref(pool, kind="pos", dtype="float64")
            return Paren(Bin("+", Call("abs", (inner,)), Lit(1)))
        return (
            Call("exp", (self.bounded(self.factor(pool, max(depth, 0)), 10),))
            if self.idt != "int8"
            else self.input_ref(pool, kind="pos", dtype="float64")
        )

    def axis_arg(self, pool: list[str], axis: str, depth: int) -> Expr:
        """A call argument that ranges over ``axis``: a term with a plain reference carrying it."""
        r = self.rng
        base = self.input_ref([axis] + r.sample(pool, min(len(pool), r.randint(0, 2))))
        if axis not in [i.name for i in base.idx if isinstance(i, IName)]:
            base = Ref(base.name, base.idx, True)
            spec = self.p.inputs[base.name]
            base = Ref(self.new_input((*spec.shape, self.ext(axis)), dtype=spec.dtype), (*base.idx, IName(axis)))
            del self.p.inputs[base.name.replace(base.name, base.name)]
            self.p.inputs[base.name] = InputSpec(tuple(self.arrays[base.name].shape), str(self.arrays[base.name].dtype))
        if r.random() < 0.5 and depth > 0:
            other = self.factor(pool + [r.choice(NAMES)], depth - 1)
            e: Expr = Bin("*", base, other, juxt=True)
            if r.random() < 0.4:
                e = Bin("+", e, self.input_ref(pool + [axis]))
            return e
        return base

    def axis_kw(self, arg: Expr, axis: str) -> tuple[tuple[str, object], ...]:
        r = self.rng
        simple = isinstance(arg, Ref) and all(isinstance(i, IName) for i in arg.idx)
        names = [i.name for i in arg.idx] if simple else []  # type: ignore[union-attr]
        if simple and len(set(names)) == len(names):
            c = r.random()
            if c < 0.3 and names[-1] == axis and self.dot is None:
                return ()
            if c < 0.5:
                return (("axis", names.index(axis)),)
        if self.dot == axis and r.random() < 0.6:
            return ()
        return (("axis", axis),)

    def axis_fn(self, pool: list[str], depth: int) -> Expr:
        r = self.rng
        fn = r.choice(["softmax", "softmax", "masked_softmax", "lnorm", "layernorm", "softmax_grad"])
        axis = self.dot if self.dot is not None and self.dot in pool and r.random() < 0.7 else r.choice(pool or NAMES)
        arg = self.axis_arg(pool, axis, depth - 1)
        if self.idt == "int8" and _isint(arg, self.info):
            return self.input_ref(pool)
        kw = self.axis_kw(arg, axis)
        if fn == "masked_softmax":
            mask = self.input_ref([axis] + [n for n in pool if r.random() < 0.3], kind="bool", dtype="int8")
            kw2 = kw + ((("fill", -1e9),) if r.random() < 0.5 else ())
            return Call(fn, (arg, mask), kw2)
        if fn == "softmax_grad":
            return Call(fn, (Call("softmax", (arg,), kw), self.input_ref([axis])), kw)
        if fn == "softmax":
            return Call("softmax", (arg,), kw)
        if r.random() < 0.3:
            kw = kw + (("eps", 0.01),)
        return Call("lnorm", (arg,), kw, "" if fn == "lnorm" else fn)

    def reduce_fn(self, pool: list[str], depth: int) -> Expr:
        r = self.rng
        fn = r.choice(["logsumexp", "max", "min", "avg", "mean", "sum"])
        axis = r.choice([n for n in NAMES if n not in pool] or NAMES)
        arg = self.axis_arg(pool, axis, depth - 1)
        if fn == "logsumexp":
            if self.idt == "int8" and _isint(arg, self.info):
                fn = "sum"
            else:
                arg = self.bounded(arg, 30) if not isinstance(arg, Ref) else arg
        kw = self.axis_kw(arg, axis) if isinstance(arg, Ref) else (("axis", axis),)
        if fn in ("max", "min") and not kw:
            kw = (("axis", axis),)
        return Call("avg" if fn == "avg" else fn, (arg,), kw, "" if fn != "mean" else "mean")

    def structured(self, pool: list[str], depth: int) -> Expr:
        r = self.rng
        c = r.choice(["/", "**", "neg", "cmp", "logic", "not"])
        a = self.factor(pool, depth - 1)
        if c == "/":
            return Bin("/", a, self.positive(pool, depth - 1))
        if c == "**":
            if _isint(a, self.info) and r.random() < 0.5:
                return Bin("**", Paren(a), Lit(2))
            return Bin("**", self.positive(pool, depth - 1), Lit(r.choice([2, 0.5, -1, 3])))
        if c == "neg":
            return Un("-", a)
        ea = a if _exact(a, self.info) else self.input_ref(pool)
        eb = self.factor(pool, 0)
        if not _exact(eb, self.info):
            eb = self.literal()
        if c == "cmp":
            return Paren(Bin(r.choice(["<", "<=", ">", ">=", "==", "!="]), ea, eb))
        if c == "logic":
            x = Paren(Bin(">", ea, Lit(0)))
            y = Paren(Bin("<=", eb, Lit(1)))
            return Paren(Bin(r.choice(["&&", "||"]), x, y))
        return Un("!", Paren(Bin(">", ea, Lit(0))))

    def conditional(self, pool: list[str], depth: int) -> Expr:
        r = self.rng
        cond_src = self.input_ref([n for n in pool if r.random() < 0.7])
        cond = Bin(r.choice([">", ">=", "<"]), cond_src, Lit(0))
        a = self.factor(pool, depth - 1)
        b = self.factor(pool, depth - 1)
        c = r.random()
        if c < 0.3:
            return Ternary(cond, a, b)
        if c < 0.55:
            return Call("select", (cond, a, b))
        if c < 0.8:
            return CaseExpr(((cond, a),), b)
        return Call("case", (cond, a, b))

    def fn_call(self, pool: list[str]) -> Expr | None:
        r = self.rng
        if not self.p.fns:
            return None
        f = r.choice(self.p.fns)
        if f.name == "dot":
            x = r.choice(pool or NAMES)
            return FnCall("dot", (self.input_ref_exact([x]), self.input_ref_exact([x])))
        o = r.choice(pool or NAMES)
        x = r.choice([n for n in NAMES if n != o])
        return FnCall("layer", (self.input_ref_exact([o, x]), self.input_ref_exact([x])))

    def input_ref_exact(self, names: list[str]) -> Ref:
        x = self.new_input(tuple(self.ext(n) for n in names))
        return Ref(x, tuple(IName(n) for n in names))


# ----------------------------------------------------------------------------- static facts


def _exact(e: Expr, info: dict[str, Info]) -> bool:
    """Whether ``e``'s value is computed exactly by any correct backend (so comparisons cannot flip)."""
    if isinstance(e, Ref):
        return info.get(e.name, Info(0, False, False)).exact
    if isinstance(e, Lit):
        return True
    if isinstance(e, Paren | Un):
        return _exact(e.a, info)
    if isinstance(e, Bin):
        if e.op in ("/", "**"):
            return False
        return _exact(e.a, info) and _exact(e.b, info)
    if isinstance(e, Call):
        if e.fn.lower() in ("relu", "abs", "max", "min", "step", "select", "case", "sum"):
            return all(_exact(a, info) for a in e.args)
        return False
    if isinstance(e, Ternary):
        return all(_exact(x, info) for x in (e.c, e.a, e.b))
    if isinstance(e, CaseExpr):
        return all(_exact(c, info) and _exact(v, info) for c, v in e.arms) and _exact(e.default, info)
    if isinstance(e, Reduce):
        return e.op in ("sum", "max", "min") and _exact(e.body, info)
    return False


def _isint(e: Expr, info: dict[str, Info]) -> bool:
    if isinstance(e, Ref):
        return info.get(e.name, Info(0, False, False)).isint
    if isinstance(e, Lit):
        return isinstance(e.value, int)
    if isinstance(e, Paren | Un):
        return _isint(e.a, info)
    if isinstance(e, Bin):
        return e.op not in ("/",) and _isint(e.a, info) and _isint(e.b, info)
    if isinstance(e, Call):
        return e.fn.lower() in ("relu", "abs", "max", "min", "step", "sum") and all(_isint(a, info) for a in e.args)
    return False


def _bound(e: Expr, info: dict[str, Info], extents: dict[str, int]) -> float:
    """A loose upper bound on |e| (projections inside count with the largest extent)."""
    big = max([*extents.values(), 1])
    if isinstance(e, Ref):
        return info.get(e.name, Info(1e9, False, False)).bound
    if isinstance(e, Lit):
        return abs(float(e.value))
    if isinstance(e, Paren | Un):
        return _bound(e.a, info, extents)
    if isinstance(e, Bin):
        a, b = _bound(e.a, info, extents), _bound(e.b, info, extents)
        if e.op in "+-":
            return (a + b) * big**2
        if e.op == "*":
            return a * b * big**2
        if e.op in ("/", "**"):
            return 1e9
        return 1.0
    if isinstance(e, Call):
        fn = e.fn.lower()
        if fn in ("tanh", "sin", "cos", "sig", "softmax", "masked_softmax", "step"):
            return 1.0
        return 1e9
    return 1e9
