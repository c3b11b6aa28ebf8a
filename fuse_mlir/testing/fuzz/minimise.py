"""Automatic minimisation of a failing program (delta debugging over the fuzzer's own nodes).

Greedy, to a fixed point: drop demand queries, exports, equations, terms of a right-hand
side, factors of a product, then replace calls, parentheses, operators,
reductions and conditionals by one of their operands. A candidate is kept
when the oracle still accepts it and the backend still fails the same way
(same outcome kind). Inputs keep the generator's values; unused ones go.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from fuse_mlir.testing.fuzz.program import (
    Bin,
    Call,
    CaseExpr,
    Eq,
    Expr,
    FnCall,
    FuzzProgram,
    Lit,
    Paren,
    Reduce,
    Ternary,
    Un,
)


def _smaller_exprs(e: Expr) -> Iterator[Expr]:
    """Candidate replacements of ``e``: its operands, then ``e`` with one operand shrunk."""
    if isinstance(e, Bin):
        yield e.a
        yield e.b
        for a in _smaller_exprs(e.a):
            yield replace(e, a=a)
        for b in _smaller_exprs(e.b):
            yield replace(e, b=b)
    elif isinstance(e, Un | Paren):
        yield e.a
        for a in _smaller_exprs(e.a):
            yield replace(e, a=a)
    elif isinstance(e, Call | FnCall):
        yield from e.args
        for k, arg in enumerate(e.args):
            for a in _smaller_exprs(arg):
                yield replace(e, args=e.args[:k] + (a,) + e.args[k + 1 :])
    elif isinstance(e, Ternary):
        yield e.a
        yield e.b
        for x in ("c", "a", "b"):
            for s in _smaller_exprs(getattr(e, x)):
                yield replace(e, **{x: s})
    elif isinstance(e, CaseExpr):
        yield e.default
        for _c, v in e.arms:
            yield v
    elif isinstance(e, Reduce):
        yield e.body
        for b in _smaller_exprs(e.body):
            yield replace(e, body=b)
    elif not isinstance(e, Lit):
        yield Lit(1.0)


def _candidates(p: FuzzProgram) -> Iterator[FuzzProgram]:
    for k in range(len(p.queries)):
        yield p.copy(queries=p.queries[:k] + p.queries[k + 1 :])
    if len(p.exports) > 1:
        for k in range(len(p.exports)):
            yield p.copy(exports=[p.exports[k]])
    for k in range(len(p.eqs)):
        eqs = p.eqs[:k] + p.eqs[k + 1 :]
        if any(e.lhs == p.eqs[k].lhs for e in eqs) or p.eqs[k].lhs not in p.exports:
            yield p.copy(eqs=eqs, order=None)
    if p.order is not None:
        yield p.copy(order=None)
    if p.decls:
        for k in range(len(p.decls)):
            yield p.copy(decls=p.decls[:k] + p.decls[k + 1 :])
    if p.fns:
        yield p.copy(fns=[])
    for k, eq in enumerate(p.eqs):
        for rhs in _smaller_exprs(eq.rhs):
            new: Eq = replace(eq, rhs=rhs)
            yield p.copy(eqs=p.eqs[:k] + [new] + p.eqs[k + 1 :])
        if eq.op != "=":
            yield p.copy(eqs=p.eqs[:k] + [replace(eq, op="=")] + p.eqs[k + 1 :])


def _trim(p: FuzzProgram) -> FuzzProgram:
    used = p.used_inputs()
    q = p.copy()
    q.inputs = {k: v for k, v in p.inputs.items() if k in used}
    q.data = {k: v for k, v in p.data.items() if k in used}
    defined = {e.lhs for e in q.eqs}
    q.exports = [x for x in q.exports if x in defined] or sorted(defined)[:1]
    return q


def minimise(p: FuzzProgram, fails: Callable[[FuzzProgram], bool], budget: int = 400) -> FuzzProgram:
    """The smallest program reachable from ``p`` by single reductions for which ``fails`` still holds.

    Sound by construction: a step is taken only when ``fails`` holds for the candidate, and the start is
    itself re-checked (after trimming unused inputs), so the result always fails; if even the trimmed
    start does not, ``p`` is returned unchanged.
    """
    best = _trim(p)
    try:
        if not fails(best):
            return p
    except Exception:  # noqa: BLE001 - the oracle refuses the trimmed program: keep the original
        return p
    tries = 0
    progress = True
    while progress and tries < budget:
        progress = False
        for cand in _candidates(best):
            tries += 1
            if tries >= budget:
                break
            cand = _trim(cand)
            if (len(cand.source()), len(cand.queries)) >= (len(best.source()), len(best.queries)):
                continue
            try:
                ok = fails(cand)
            except Exception:  # noqa: BLE001 - a candidate the oracle refuses is just not smaller
                ok = False
            if ok:
                best = cand
                progress = True
                break
    return best
