"""Typed AST of the `.fuse` language (core and structured syntax in one tree).

The parser produces these nodes; every node carries the :class:`Loc` of its
first token. The tree is syntactic: calls are not yet resolved to builtins,
``fn``s or boolean tensor references (see :mod:`fuse_mlir.frontend.resolve`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fuse_mlir.diagnostics import Loc

# --------------------------------------------------------------------------
# Index items: what may stand between the brackets of a tensor reference.
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IndexName:
    """A named index: ``i``, ``p'``, a dotted axis ``q.`` or a virtual-time index ``*t``."""

    name: str  # includes primes: "p'"
    loc: Loc
    dotted: bool = False
    time: bool = False  # written with a leading '*'


@dataclass(frozen=True, slots=True)
class IndexOffset:
    """A shifted index ``j+1`` / ``j-1`` / ``*t+1``: zero-filled beyond the ends."""

    name: str
    offset: int
    loc: Loc
    time: bool = False


@dataclass(frozen=True, slots=True)
class IndexNumber:
    """A numeric position ``X[0, d]`` (selects on the right, writes on the left)."""

    value: int
    loc: Loc


@dataclass(frozen=True, slots=True)
class IndexSlice:
    """A slice ``0:2`` / ``::2``; ``text`` is the slice as written (without spaces) and names the axis."""

    start: int | None
    stop: int | None
    step: int | None
    text: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class IndexTensor:
    """An indirect (gather) index: an integer tensor expression such as ``Tok[t]``."""

    expr: Expr
    loc: Loc


IndexItem = IndexName | IndexOffset | IndexNumber | IndexSlice | IndexTensor

# --------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Number:
    """A numeric literal; ``is_int`` is True for integer literals (``2``), False for ``2.0``/``1e-3``."""

    value: float | int
    is_int: bool
    loc: Loc


@dataclass(frozen=True, slots=True)
class String:
    value: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class Bool:
    value: bool
    loc: Loc


@dataclass(frozen=True, slots=True)
class ListLit:
    """A (possibly nested) list literal ``[[1,2],[3,4]]``."""

    items: tuple[Expr, ...]
    loc: Loc


@dataclass(frozen=True, slots=True)
class DictLit:
    """A dict literal ``{k: v}``; keys are identifiers or strings."""

    items: tuple[tuple[str, Expr], ...]
    loc: Loc


@dataclass(frozen=True, slots=True)
class TensorRef:
    """A tensor reference ``X[i, j]``; ``indices is None`` for a bare name ``X``.

    ``boolean`` marks the parenthesised form ``Parent(x, y)`` when it is known
    to be a tensor reference (always so on a left-hand side; on the right the
    resolver turns unresolved calls into boolean references).
    """

    name: str
    indices: tuple[IndexItem, ...] | None
    loc: Loc
    boolean: bool = False


@dataclass(frozen=True, slots=True)
class Call:
    """``f(args, key=value)``: a builtin, a declared ``fn`` (maybe ``lib::f``) or a boolean tensor.

    ``name`` keeps the spelling as written; builtin lookup is case-insensitive.
    """

    name: str
    args: tuple[Expr, ...]
    kwargs: tuple[tuple[str, Expr], ...]
    loc: Loc


@dataclass(frozen=True, slots=True)
class BinOp:
    """A binary operator. ``op`` is one of ``+ - * / ** < <= > >= == != && ||``.

    Juxtaposition (``W[i,j] X[j]``) is ``*`` with ``juxtaposed=True``.
    """

    op: str
    lhs: Expr
    rhs: Expr
    loc: Loc
    juxtaposed: bool = False


@dataclass(frozen=True, slots=True)
class UnaryOp:
    """A prefix operator: ``-``, ``+`` or ``!`` (logical not)."""

    op: str
    operand: Expr
    loc: Loc


@dataclass(frozen=True, slots=True)
class Ternary:
    """``c ? a : b``."""

    cond: Expr
    then: Expr
    orelse: Expr
    loc: Loc


@dataclass(frozen=True, slots=True)
class Case:
    """``case { c1 -> v1; c2 -> v2; default -> d }`` (``default`` may be None)."""

    branches: tuple[tuple[Expr, Expr], ...]
    default: Expr | None
    loc: Loc


@dataclass(frozen=True, slots=True)
class Reduce:
    """``reduce(op, i, j) expr``: explicit projection of the named indices with op."""

    op: str  # sum | max | min | mean | prod
    indices: tuple[IndexName, ...]
    body: Expr
    loc: Loc
    # True for the projection an equation's term performs (an inlined fn body): calls inside follow the
    # equation's call rule. An explicit reduce works along its indices, so calls inside keep them.
    implicit: bool = False


@dataclass(frozen=True, slots=True)
class Paren:
    """A parenthesised expression (kept so terms/factors split the way the text groups them)."""

    expr: Expr
    loc: Loc


Expr = Number | String | Bool | ListLit | DictLit | TensorRef | Call | BinOp | UnaryOp | Ternary | Case | Reduce | Paren

# --------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------

PROJECTIONS = {"=": "sum", "+=": "sum", "max=": "max", "avg=": "mean", "min=": "min"}


@dataclass(frozen=True, slots=True)
class Equation:
    """``lhs op rhs``, op one of ``= += max= avg= min=``; ``guard`` is the ``when`` mask.

    A parenthesised left-hand side (``Aunt(x,z) = ...``) has ``lhs.boolean``.
    ``is_let`` records the ``let`` keyword (sugar, no semantic difference).
    """

    lhs: TensorRef
    op: str
    rhs: Expr
    loc: Loc
    guard: Expr | None = None
    is_let: bool = False

    @property
    def projection(self) -> str:
        return PROJECTIONS[self.op]


@dataclass(frozen=True, slots=True)
class Source:
    """``W[h,d] = "weights/w.npy"``: load a tensor from a file."""

    lhs: TensorRef
    path: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class Sink:
    """``"out/y.npz" = expr``: write a value to a file after the run."""

    path: str
    rhs: Expr
    loc: Loc


@dataclass(frozen=True, slots=True)
class Export:
    names: tuple[tuple[str, Loc], ...]
    loc: Loc


@dataclass(frozen=True, slots=True)
class ParamDecl:
    """``param D: int = 16`` (type optional)."""

    name: str
    type: str | None
    value: Expr
    loc: Loc


@dataclass(frozen=True, slots=True)
class ConstDecl:
    """``const c = 3.0``."""

    name: str
    value: Expr
    loc: Loc


@dataclass(frozen=True, slots=True)
class AxisDecl:
    """``axis i = 128``: fixes the extent of index ``i`` program-wide."""

    name: str
    value: Expr
    loc: Loc


@dataclass(frozen=True, slots=True)
class Block:
    """``{ ... }``: a group of statements (sugar; no scoping)."""

    body: tuple[Stmt, ...]
    loc: Loc


@dataclass(frozen=True, slots=True)
class FnParam:
    """A ``fn`` parameter ``a[x]`` (indices may be empty for a scalar parameter)."""

    name: str
    indices: tuple[IndexName, ...]
    loc: Loc


@dataclass(frozen=True, slots=True)
class FnDef:
    """``fn dot(a[x], b[x]) -> s { s = a[x] b[x] }``: pure, inlined at each call site.

    ``result`` is the name of the body tensor the call returns; ``result_indices``
    are the indices written after it (``-> y[i]``), empty when none are written.
    """

    name: str
    params: tuple[FnParam, ...]
    result: str
    result_indices: tuple[IndexName, ...]
    body: tuple[Stmt, ...]
    loc: Loc


@dataclass(frozen=True, slots=True)
class Import:
    """``import "lib.fuse" as lib``."""

    path: str
    alias: str
    loc: Loc


Stmt = Equation | Source | Sink | Export | ParamDecl | ConstDecl | AxisDecl | Block | FnDef | Import


@dataclass(slots=True)
class Module:
    """A parsed file: its statements in order, its file name and full text."""

    statements: list[Stmt]
    filename: str
    text: str
    imports: dict[str, Module] = field(default_factory=dict)
