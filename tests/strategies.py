"""Hypothesis strategies for random valid `.fuse` programs, with an independent NumPy oracle.

A generated program is a chain of equations over random inputs: each equation
has a random left-hand side (a subset and order of the indices in play, so
some are projected and some broadcast), one to three terms, each a product of
one to three factors (input or earlier tensors with random index patterns, a
literal, an elementwise builtin of a factor, or a call whose argument
projects), and a random projection operator. Extents include 0 and 1.

The oracle evaluates the same structure by broadcasting named axes directly,
without the compiler, so it checks the frontend's index semantics; later
backends compare against the reference interpreter with the same programs.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

INDEX_NAMES = list("ijklm")
UNARY = {
    "relu": lambda x: np.maximum(x, 0),
    "tanh": np.tanh,
    "abs": np.abs,
    "exp": lambda x: np.exp(np.clip(x, -30, 30)),
}
PROJ = {"=": "sum", "max=": "max", "min=": "min", "avg=": "mean"}


@dataclass
class Factor:
    kind: str  # "tensor" | "literal" | "unary" | "call"
    name: str = ""
    indices: tuple[str, ...] = ()
    value: float = 0.0
    fn: str = ""
    inner: Factor | None = None

    def text(self) -> str:
        if self.kind == "tensor":
            return f"{self.name}[{', '.join(self.indices)}]"
        if self.kind == "literal":
            return f"({self.value!r})" if self.value < 0 else repr(self.value)
        if self.kind == "unary":
            assert self.inner is not None
            fn = "exp" if self.fn == "exp" else self.fn
            arg = self.inner.text()
            return f"{fn}({arg})" if self.fn != "exp" else f"exp(min(max({arg}, -30), 30))"
        raise AssertionError(self.kind)

    def names(self) -> list[str]:
        if self.kind == "tensor":
            return list(dict.fromkeys(self.indices))
        if self.kind == "unary":
            assert self.inner is not None
            return self.inner.names()
        return []


@dataclass
class Eq:
    lhs: str
    lhs_indices: tuple[str, ...]
    op: str
    terms: list[tuple[int, list[Factor]]]

    def text(self) -> str:
        lhs = f"{self.lhs}[{', '.join(self.lhs_indices)}]"
        parts = []
        for k, (sign, factors) in enumerate(self.terms):
            body = " ".join(f.text() for f in factors)
            parts.append(("- " if sign < 0 else ("+ " if k else "")) + body)
        return f"{lhs} {self.op} {' '.join(parts)}"


@dataclass
class GenProgram:
    extents: dict[str, int]
    inputs: dict[str, tuple[str, ...]]
    equations: list[Eq] = field(default_factory=list)

    declare_axes: bool = False

    def source(self) -> str:
        axes = [f"axis {n} = {e}" for n, e in self.extents.items()] if self.declare_axes else []
        return "\n".join(axes + [e.text() for e in self.equations]) + f"\nexport {self.equations[-1].lhs}"

    def used_inputs(self) -> list[str]:
        used: set[str] = set()

        def walk(f: Factor) -> None:
            if f.kind == "tensor":
                used.add(f.name)
            elif f.inner is not None:
                walk(f.inner)

        for eq in self.equations:
            for _, factors in eq.terms:
                for f in factors:
                    walk(f)
        return [n for n in self.inputs if n in used]

    def arrays(self, seed: int, dtype=np.float64) -> dict[str, np.ndarray]:
        """Random inputs for the inputs the program uses (others would be unknown inputs)."""
        rng = np.random.default_rng(seed)
        return {
            n: rng.uniform(-2, 2, [self.extents[i] for i in self.inputs[n]]).astype(dtype) for n in self.used_inputs()
        }


def _align(arr: np.ndarray, names: list[str], target: list[str]) -> np.ndarray:
    order = [names.index(n) for n in target if n in names]
    out = np.transpose(arr, order)
    shape, it = [], iter(out.shape)
    for n in target:
        shape.append(next(it) if n in names else 1)
    return out.reshape(shape)


def _diag(arr: np.ndarray, indices: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    """Take diagonals for repeated index names (A[i,i])."""
    names = list(indices)
    letters = {n: string.ascii_letters[k] for k, n in enumerate(dict.fromkeys(names))}
    out = list(dict.fromkeys(names))
    spec = "".join(letters[n] for n in names) + "->" + "".join(letters[n] for n in out)
    return np.einsum(spec, arr), out


def oracle(prog: GenProgram, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """Evaluate a generated program by explicit named-axis broadcasting (no compiler involved)."""
    env: dict[str, tuple[np.ndarray, list[str]]] = {}
    for n in arrays:
        env[n] = (arrays[n], list(prog.inputs[n]))
    groups: dict[str, np.ndarray] = {}
    for eq in prog.equations:
        lhs = list(eq.lhs_indices)
        total = None
        for sign, factors in eq.terms:
            vals = []
            for k, f in enumerate(factors):
                others = {n for j, g in enumerate(factors) if j != k for n in g.names()}
                vals.append(_eval_factor(f, env, set(lhs) | others, PROJ[eq.op]))
            names = list(dict.fromkeys(n for _, ns in vals for n in ns))
            shape = [prog.extents[n] for n in names]
            prod = np.ones(shape)
            for v, ns in vals:
                prod = prod * _align(v, ns, names)
            proj = tuple(k for k, n in enumerate(names) if n not in lhs)
            red = _reduce(prod, proj, PROJ[eq.op])
            kept = [n for n in names if n in lhs]
            term = np.broadcast_to(_align(red, kept, lhs), [prog.extents[n] for n in lhs]) * sign
            total = term if total is None else total + term
        groups[eq.lhs] = np.array(total)
        env[eq.lhs] = (groups[eq.lhs], lhs)
    return groups[prog.equations[-1].lhs]


def _reduce(x: np.ndarray, axes: tuple[int, ...], kind: str) -> np.ndarray:
    if not axes:
        return x
    return {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[kind](x, axis=axes)


def _eval_factor(f: Factor, env, keep: set[str], kind: str) -> tuple[np.ndarray, list[str]]:
    if f.kind == "literal":
        return np.asarray(f.value), []
    if f.kind == "tensor":
        arr, _ = env[f.name]
        if len(set(f.indices)) != len(f.indices):
            return _diag(arr, f.indices)
        return arr, list(f.indices)
    assert f.inner is not None
    # A call's argument keeps the indices shared with the rest of the equation; the rest project inside.
    v, ns = _eval_factor(f.inner, env, keep, kind)
    axes = tuple(k for k, n in enumerate(ns) if n not in keep)
    v = _reduce(v, axes, kind)
    return UNARY[f.fn](v), [n for n in ns if n in keep]


@st.composite
def programs(draw, max_equations: int = 3, allow_empty: bool = True) -> GenProgram:
    """A random valid program (see the module docstring)."""
    n_idx = draw(st.integers(2, 4))
    names = INDEX_NAMES[:n_idx]
    lo = 0 if allow_empty else 1
    extents = {n: draw(st.integers(lo, 4)) for n in names}
    n_inputs = draw(st.integers(1, 3))
    inputs: dict[str, tuple[str, ...]] = {}
    for k in range(n_inputs):
        rank = draw(st.integers(0, min(3, n_idx)))
        idx = tuple(draw(st.lists(st.sampled_from(names), min_size=rank, max_size=rank, unique=True)))
        inputs[f"X{k}"] = idx
    prog = GenProgram(extents, inputs)
    tensors: dict[str, tuple[str, ...]] = dict(inputs)
    for e in range(draw(st.integers(1, max_equations))):
        terms = []
        for _ in range(draw(st.integers(1, 2))):
            factors = []
            for _ in range(draw(st.integers(1, 3))):
                factors.append(draw(_factor(tensors, names, extents)))
            terms.append((draw(st.sampled_from([1, 1, -1])) if terms else 1, factors))
        in_play = list(dict.fromkeys(n for _, fs in terms for f in fs for n in f.names()))
        lhs_idx = tuple(draw(st.permutations(in_play)))[: draw(st.integers(0, len(in_play)))]
        # Sometimes broadcast to an index the right-hand side lacks (its extent then comes from `axis`).
        spare = [n for n in names if n not in lhs_idx]
        if spare and draw(st.booleans()):
            lhs_idx = lhs_idx + (draw(st.sampled_from(spare)),)
            prog.declare_axes = True
        op = draw(st.sampled_from(list(PROJ)))
        if 0 in extents.values():
            op = "="  # max/min/mean over an empty axis have no value
        name = f"T{e}"
        prog.equations.append(Eq(name, lhs_idx, op, terms))
        tensors[name] = lhs_idx
    return prog


def _factor(tensors: dict[str, tuple[str, ...]], names: list[str], extents: dict[str, int]):
    @st.composite
    def build(draw) -> Factor:
        kind = draw(st.sampled_from(["tensor", "tensor", "tensor", "literal", "unary"]))
        if kind == "literal":
            return Factor("literal", value=draw(st.sampled_from([0.5, 2.0, -1.0, 3.0])))
        name = draw(st.sampled_from(sorted(tensors)))
        # Rename the tensor's axes: usually its own names, sometimes others (a transpose or a diagonal).
        if draw(st.booleans()):
            idx = tensors[name]
        else:
            idx = tuple(
                draw(st.sampled_from([n for n in names if extents[n] == extents[own]])) for own in tensors[name]
            )
        t = Factor("tensor", name=name, indices=idx)
        if kind == "unary":
            return Factor("unary", fn=draw(st.sampled_from(sorted(UNARY))), inner=t)
        return t

    return build()
