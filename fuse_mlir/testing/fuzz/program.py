"""The fuzzer's own structured description of a `.fuse` program, and its rendering to text.

The generator builds these nodes, the oracle evaluates them and the
minimiser shrinks them; none of them is the compiler's AST (the fuzzer never
imports the frontend), so the oracle's reading of the language is
independent of the parser's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

# ----------------------------------------------------------------------------- index items


@dataclass(frozen=True)
class IName:
    """A plain index name; on the left-hand side ``dotted`` marks the normalising axis (``q.``)."""

    name: str
    dotted: bool = False

    def text(self) -> str:
        return self.name + ("." if self.dotted else "")


@dataclass(frozen=True)
class INum:
    """A numeric position (``X[0, d]`` selects, ``W[1, h] = ...`` writes)."""

    pos: int

    def text(self) -> str:
        return str(self.pos)


@dataclass(frozen=True)
class IOff:
    """A zero-filled shift ``j+1`` / ``j-1``: reads position j+delta, 0 outside the axis."""

    name: str
    delta: int

    def text(self) -> str:
        return f"{self.name}{'+' if self.delta >= 0 else '-'}{abs(self.delta)}"


@dataclass(frozen=True)
class ISlice:
    """A slice ``start:stop`` / ``::step``; the sliced axis is named by its text."""

    start: int | None
    stop: int | None
    step: int | None

    def text(self) -> str:
        s = "" if self.start is None else str(self.start)
        s += ":" + ("" if self.stop is None else str(self.stop))
        if self.step is not None:
            s += ":" + str(self.step)
        return s


@dataclass(frozen=True)
class IGather:
    """An indirect index: an integer tensor reference in an index position (``Table[Tok[t], d]``)."""

    ref: Ref

    def text(self) -> str:
        return self.ref.text()


@dataclass(frozen=True)
class ITime:
    """Streaming mode's virtual-time index, ``offset`` steps from ``t``: ``*t+1`` (the step a left-hand side
    defines), ``*t`` and ``*t-1`` (one and two steps before it)."""

    offset: int

    def text(self) -> str:
        return "*t" + (f"{self.offset:+d}" if self.offset else "")


Index = IName | INum | IOff | ISlice | IGather | ITime

# ----------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Ref:
    """A tensor reference ``X[i, j]`` (``X`` alone for a 0-d tensor, ``X[]`` when ``brackets``)."""

    name: str
    idx: tuple[Index, ...]
    brackets: bool = True

    def text(self) -> str:
        if not self.idx and not self.brackets:
            return self.name
        return f"{self.name}[{', '.join(i.text() for i in self.idx)}]"


@dataclass(frozen=True)
class Lit:
    """A numeric literal (a weak scalar, §8); ``name`` set when it is a declared param/const used by name."""

    value: int | float
    name: str = ""

    def text(self) -> str:
        if self.name:
            return self.name
        return lit_text(self.value)


@dataclass(frozen=True)
class Call:
    """A builtin call: ``fn(args..., key=value...)``; kwargs values are literals or index names (str)."""

    fn: str
    args: tuple[Expr, ...]
    kwargs: tuple[tuple[str, Any], ...] = ()
    spelled: str = ""  # how the name is written (aliases, case): defaults to fn

    def text(self) -> str:
        parts = [a.text() for a in self.args]
        for k, v in self.kwargs:
            parts.append(f"{k}={v if isinstance(v, str) else lit_text(v)}")
        return f"{self.spelled or self.fn}({', '.join(parts)})"


@dataclass(frozen=True)
class FnCall:
    """A call of a program-defined ``fn``."""

    fn: str
    args: tuple[Expr, ...]

    def text(self) -> str:
        return f"{self.fn}({', '.join(a.text() for a in self.args)})"


@dataclass(frozen=True)
class Bin:
    """A binary operator: ``+ - * / **``, comparisons, ``&& ||``; ``juxt`` renders ``*`` as a space."""

    op: str
    a: Expr
    b: Expr
    juxt: bool = False

    def text(self) -> str:
        # parenthesise operands by precedence, so the text parses back to this tree (the minimiser drops
        # Paren nodes: ``-1.25 * (1.0 < X)`` must not print as ``-1.25 1.0 < X``)
        p = _prec(self)
        a, b = self.a.text(), self.b.text()
        right_assoc = self.op == "**"
        if _prec(self.a) < p or (right_assoc and _prec(self.a) <= p):
            a = f"({a})"
        if _prec(self.b) < p or (not right_assoc and _prec(self.b) <= p):
            b = f"({b})"
        if self.op == "*" and self.juxt:
            # after a complete factor, '-' is always binary minus: a negated factor needs parentheses
            b = "(" + b + ")" if b[:1] in "-!+" else b
            if b.startswith("(") and (a[-1:].isalnum() or a[-1:] in "_'"):
                return f"{a} * {b}"  # `c0 (x)` would read as a call of c0
            return f"{a} {b}"
        if self.op in ("*", "/", "**") and b.startswith("-"):
            b = f"({b})"
        return f"{a} {self.op} {b}"


@dataclass(frozen=True)
class Un:
    """Unary ``-`` or ``!``."""

    op: str
    a: Expr

    def text(self) -> str:
        a = self.a.text()
        return f"{self.op}({a})" if _prec(self.a) < _prec(self) or a[:1] in "-!" else f"{self.op}{a}"


@dataclass(frozen=True)
class Paren:
    """A parenthesised expression."""

    a: Expr

    def text(self) -> str:
        return f"({self.a.text()})"


@dataclass(frozen=True)
class Ternary:
    """``c ? a : b``."""

    c: Expr
    a: Expr
    b: Expr

    def text(self) -> str:
        return f"({self.c.text()} ? {self.a.text()} : {self.b.text()})"


@dataclass(frozen=True)
class CaseExpr:
    """``case { c1 -> v1; ...; default -> d }``."""

    arms: tuple[tuple[Expr, Expr], ...]
    default: Expr

    def text(self) -> str:
        arms = "; ".join(f"{c.text()} -> {v.text()}" for c, v in self.arms)
        return f"case {{ {arms}; default -> {self.default.text()} }}"


@dataclass(frozen=True)
class Reduce:
    """``reduce(op, i, j) body``: an explicit projection of the named indices of ``body``."""

    op: str
    names: tuple[str, ...]
    body: Expr

    def text(self) -> str:
        return f"(reduce({self.op}, {', '.join(self.names)}) {self.body.text()})"


@dataclass(frozen=True)
class ListConst:
    """``const([[...]])`` / ``const(2.5)``: a constructor over the left-hand side's indices."""

    value: Any  # nested lists or a scalar

    def text(self) -> str:
        return f"const({_list_text(self.value)})"


Expr = Ref | Lit | Call | FnCall | Bin | Un | Paren | Ternary | CaseExpr | Reduce | ListConst

# ----------------------------------------------------------------------------- statements

PROJ_OPS = ("=", "+=", "max=", "min=", "avg=")


@dataclass(frozen=True)
class Eq:
    """One equation: left-hand side, projection operator and right-hand side (terms are top-level + / -)."""

    lhs: str
    lidx: tuple[IName | INum | ITime, ...]
    op: str
    rhs: Expr
    boolean: bool = False  # ``Name(i, j) = ...``

    def text(self) -> str:
        inner = ", ".join(i.text() for i in self.lidx)
        if self.boolean:
            head = f"{self.lhs}({inner})"
        elif self.lidx:
            head = f"{self.lhs}[{inner}]"
        else:
            head = self.lhs
        return f"{head} {self.op} {self.rhs.text()}"


@dataclass(frozen=True)
class FnDef:
    """``fn name(p[x, y], q[y]) -> out[x] { out[x] = body }`` with a single body equation."""

    name: str
    params: tuple[tuple[str, tuple[str, ...]], ...]
    out: str
    out_idx: tuple[str, ...]
    body: Expr

    def text(self) -> str:
        ps = ", ".join(f"{p}[{', '.join(ix)}]" if ix else p for p, ix in self.params)
        oi = f"[{', '.join(self.out_idx)}]" if self.out_idx else ""
        return f"fn {self.name}({ps}) -> {self.out}{oi} {{ {self.out}{oi} = {self.body.text()} }}"


@dataclass(frozen=True)
class Decl:
    """``param n: type = v``, ``const n = v`` or ``axis i = n``."""

    kind: str
    name: str
    value: int | float

    def text(self) -> str:
        if self.kind == "param":
            ty = "int" if isinstance(self.value, int) else "float"
            return f"param {self.name}: {ty} = {lit_text(self.value)}"
        return f"{self.kind} {self.name} = {lit_text(self.value)}"


#: One axis's selection in a demand query: an int position, or a slice as (start, stop, step).
Pick = int | tuple[int | None, int | None, int | None]


@dataclass(frozen=True)
class Query:
    """A demand query, ``runner.query(name, select)`` (``docs/modes.md``): tensor ``name`` restricted by
    ``select``, pairs of an axis (an index name of the tensor's left-hand side, or a position, negative
    counting from the end) and an int (the axis goes) or a slice."""

    name: str
    select: tuple[tuple[str | int, Pick], ...] = ()

    def selection(self) -> dict[str | int, int | slice]:
        """``select`` as the mapping ``runner.query`` takes."""
        return {a: v if isinstance(v, int) else slice(*v) for a, v in self.select}

    def label(self) -> str:
        """The output name its value is compared under: ``T1?{0: 2, 'j': slice(None, None, -1)}``."""
        return f"{self.name}?{self.selection()!r}"

    def index(self, names: tuple[str | None, ...]) -> tuple[int | slice, ...]:
        """The NumPy index of the selection on a value whose axes have these index names (None: no name);
        IndexError when an axis is not one of them."""
        out: list[int | slice] = [slice(None)] * len(names)
        for a, v in self.selection().items():
            if isinstance(a, str):
                if a not in names:
                    raise IndexError(f"{self.name} has no axis {a}")
                k = names.index(a)
            elif -len(names) <= a < len(names):
                k = a % len(names)
            else:
                raise IndexError(f"{self.name} has no axis {a}")
            out[k] = v
        return tuple(out)

    def text(self) -> str:
        return f"runner.query({self.name!r}, {self.selection()!r})"


@dataclass
class InputSpec:
    """One input tensor: shape, dtype and the kind of values it holds."""

    shape: tuple[int, ...]
    dtype: str
    kind: str = "any"  # "any" | "pos" (float values in [0.5, 2]) | "index:<n>" (ints in [0, n))


@dataclass
class FuzzProgram:
    """A whole generated program: declarations, fns, equations (topological), inputs and exports.

    ``order`` is the order equations are written in the text (a permutation: the language evaluates by
    dependency, not line order); ``extents`` gives the extent of every index name for names only broadcast.
    """

    decls: list[Decl] = field(default_factory=list)
    fns: list[FnDef] = field(default_factory=list)
    eqs: list[Eq] = field(default_factory=list)
    inputs: dict[str, InputSpec] = field(default_factory=dict)
    exports: list[str] = field(default_factory=list)
    extents: dict[str, int] = field(default_factory=dict)
    order: list[int] | None = None
    seed: int = 0
    data: dict[str, np.ndarray] = field(default_factory=dict)
    #: Evaluation mode (LANGUAGE.md §5): "single", "fixpoint" (recursive groups) or "streaming" (``*t``).
    mode: str = "single"
    #: Fixpoint mode's run limit and whether boolean groups may be evaluated semi-naively.
    max_iters: int = 32
    semi_naive: bool = True
    #: Streaming mode: how many steps a run makes (stream inputs carry a last axis of this length).
    steps: int = 0
    #: Demand queries made after the full run (any mode but streaming), each compared under its :meth:`Query.label`.
    queries: list[Query] = field(default_factory=list)

    def compile_options(self) -> dict[str, Any]:
        """The keywords ``Program.compile`` needs besides the backend's: the mode and its settings."""
        if self.mode == "fixpoint":
            return {"mode": "fixpoint", "max_iters": self.max_iters, "semi_naive": self.semi_naive}
        if self.mode == "streaming":
            return {"mode": "streaming"}
        return {}

    def stream_inputs(self) -> tuple[str, ...]:
        """The inputs read with a time index: given one step at a time (their data's last axis is the step)."""
        timed = {
            n.name
            for eq in self.eqs
            for n in nodes(eq.rhs)
            if isinstance(n, Ref) and any(isinstance(i, ITime) for i in n.idx)
        }
        return tuple(sorted(timed & set(self.inputs)))

    def source(self) -> str:
        lines = [d.text() for d in self.decls] + [f.text() for f in self.fns]
        order = self.order if self.order is not None and len(self.order) == len(self.eqs) else range(len(self.eqs))
        lines += [self.eqs[k].text() for k in order]
        if self.exports:
            lines.append("export " + ", ".join(self.exports))
        return "\n".join(lines) + "\n"

    def arrays(self) -> dict[str, np.ndarray]:
        """The input arrays of the inputs the program still uses (the generator's dyadic values)."""
        used = self.used_inputs()
        return {k: v.copy() for k, v in self.data.items() if k in used}

    def used_inputs(self) -> set[str]:
        """Names of inputs referenced anywhere (equations and fn calls)."""
        return {n for eq in self.eqs for n in tensors_read(eq.rhs) if n in self.inputs}

    def axis_names(self, name: str) -> tuple[str | None, ...]:
        """The index name a demand query may select each axis of tensor ``name`` by: the name every equation
        of ``name`` writes at that position, once; None where they differ, repeat it, or write a number, and for
        every axis of an input (those are selected by position)."""
        if name in self.inputs:
            return (None,) * len(self.inputs[name].shape)
        sides = [e.lidx for e in self.eqs if e.lhs == name]
        out: list[str | None] = []
        for k, item in enumerate(sides[0]):
            same = isinstance(item, IName) and all(len(s) > k and s[k] == item for s in sides)
            repeated = sum(1 for x in sides[0] if x == item) > 1
            out.append(item.name if same and not repeated else None)  # type: ignore[union-attr]
        return tuple(out)

    def copy(self, **changes: Any) -> FuzzProgram:
        new = replace(self, **changes)
        new.decls, new.fns, new.eqs = list(new.decls), list(new.fns), list(new.eqs)
        new.inputs, new.exports, new.extents = dict(new.inputs), list(new.exports), dict(new.extents)
        new.queries = list(new.queries)
        new.data = dict(new.data)
        new.order = list(new.order) if new.order is not None else None
        return new


_PREC = {"||": 1, "&&": 2, "<": 3, "<=": 3, ">": 3, ">=": 3, "==": 3, "!=": 3, "+": 4, "-": 4, "*": 5, "/": 5, "**": 7}


def _prec(e: object) -> int:
    """How tightly ``e``'s text binds: operators by the grammar's precedence, unary 6, atoms 10."""
    if isinstance(e, Bin):
        return _PREC[e.op]
    if isinstance(e, Un):
        return 6
    if isinstance(e, Lit) and not e.name and e.value < 0:
        return 6
    return 10


def lit_text(v: int | float) -> str:
    """A literal's text: ints plainly, floats with repr (negative ones parenthesised by callers)."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    r = repr(float(v))
    return r


def _list_text(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_list_text(x) for x in v) + "]"
    return lit_text(v)


def mentions(e: Expr) -> list[str]:
    """Every index name written anywhere in ``e`` (inside calls, gathers and reductions too), in order.

    LANGUAGE.md §4 keeps, in a call's argument, the indices it *shares* with the rest of the equation: an
    index is shared when the other side mentions it at all, so this is syntactic.
    """
    out: list[str] = []

    def add(ns: list[str]) -> None:
        for n in ns:
            if n not in out:
                out.append(n)

    if isinstance(e, Ref):
        for i in e.idx:
            if isinstance(i, IName | IOff):
                add([i.name])
            elif isinstance(i, ISlice):
                add([i.text()])
            elif isinstance(i, IGather):
                add(mentions(i.ref))
    elif isinstance(e, Call):
        for a in e.args:
            add(mentions(a))
        for k, v in e.kwargs:
            if k == "axis" and isinstance(v, str):
                add([v])
    elif isinstance(e, FnCall):
        for a in e.args:
            add(mentions(a))
    elif isinstance(e, Bin):
        add(mentions(e.a))
        add(mentions(e.b))
    elif isinstance(e, Un | Paren):
        add(mentions(e.a))
    elif isinstance(e, Ternary):
        for x in (e.c, e.a, e.b):
            add(mentions(x))
    elif isinstance(e, CaseExpr):
        for c, v in e.arms:
            add(mentions(c))
            add(mentions(v))
        add(mentions(e.default))
    elif isinstance(e, Reduce):
        add(list(e.names))
        add(mentions(e.body))
    return out


def nodes(e: Any) -> Iterator[Any]:
    """Every node of ``e``, ``e`` first: operands, call arguments, reduction bodies, index items and the
    references inside gathers."""
    yield e
    for v in vars(e).values() if hasattr(e, "__dataclass_fields__") else ():
        for x in v if isinstance(v, tuple) else (v,):
            for y in x if isinstance(x, tuple) else (x,):
                if hasattr(y, "__dataclass_fields__"):
                    yield from nodes(y)


def tensors_read(e: Any) -> set[str]:
    """Names of every tensor ``e`` reads (references, gather index tensors and fn-call arguments included)."""
    return {n.name for n in nodes(e) if isinstance(n, Ref)}
