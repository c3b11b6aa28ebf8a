"""Extent inference: a union-find over tensor axes and per-equation index names.

Every axis of every tensor (``T``-keys) and every index name inside one
equation (``L``-keys) is a node; using a name at an axis unifies them. A
class of nodes is one extent. Its *definitions* are where a value comes
from: a constant (a source file's shape, an ``axis`` declaration, a literal),
an input's axis (known only at run time), or a derived expression (a slice's
length, a concat's sum, a flatten's product). One definition is canonical; each
other one becomes an equality check: a compile-time error when both are
constants, a ``te.check_dim`` when either is known only at run time. Index
names that only broadcast take the extent of that name elsewhere in the
program, and it is an error when that is ambiguous.

Each union remembers the reference that caused it, so a conflict between two
definitions (two constants, or an input that disagrees at run time) is
reported where the program joins them, in that equation's own index names
and references, with notes at the definitions.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

from fuse_mlir.diagnostics import FuseError, Loc

Key = tuple  # ("T", tensor, axis) | ("L", equation id, name)


@dataclass(frozen=True)
class Where:
    """Where a definition was seen, for messages: the index name, the reference as written, its location."""

    name: str
    text: str
    loc: Loc


@dataclass(frozen=True)
class DimDef:
    """One definition of an extent: ``const`` (value int), ``input`` (value (tensor, axis)), ``derived``,
    or ``bound`` (a facts file's lower bound, settled into a constant).

    A derived value is ``(op, args)`` with op ``slice`` (args: key, start, stop,
    step), ``sum`` or ``mul`` (args: keys).
    """

    kind: str
    value: object
    where: Where
    node: Key | None = field(default=None, compare=False)  # the axis or local name it was given at

    def identity(self) -> tuple:
        return (self.kind, self.value)


_CANONICAL_RANK = {"const": 0, "input": 1, "derived": 2}
"""The kinds :meth:`Dims.canonical` prefers, best first (a ``bound`` is never canonical)."""


@dataclass
class Dims:
    """The union-find of extents with the definitions gathered for each class."""

    parent: dict[Key, Key] = field(default_factory=dict)
    defs: dict[Key, list[DimDef]] = field(default_factory=dict)

    order: dict[Key, int] = field(default_factory=dict)
    edges: dict[Key, list[tuple[Key, Where | None]]] = field(default_factory=dict)
    _unions: int = 0  # edges added so far (the version of the cached search trees)
    _trees: dict[Key, tuple[int, dict]] = field(default_factory=dict, repr=False)
    _canon: dict[Key, tuple[list[DimDef], int, DimDef | None]] = field(default_factory=dict, repr=False)

    def find(self, k: Key) -> Key:
        if k not in self.parent:
            self.parent[k] = k
            self.order[k] = len(self.order)
        root = k
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[k] != root:  # path compression, iterative
            self.parent[k], k = root, self.parent[k]
        return root

    def union(self, a: Key, b: Key, via: Where | None = None) -> None:
        """Join the classes of ``a`` and ``b``; ``via`` is the reference (index as written) that joins them."""
        self._unions += 1
        self.edges.setdefault(a, []).append((b, via))
        self.edges.setdefault(b, []).append((a, via))
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        # Deterministic: the older node (first inserted) stays the root.
        if self.order[rb] < self.order[ra]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.defs.setdefault(ra, []).extend(self.defs.pop(rb, []))

    def add_def(self, k: Key, d: DimDef) -> None:
        r = self.find(k)
        lst = self.defs.setdefault(r, [])
        if all(x.identity() != d.identity() for x in lst):
            lst.append(replace(d, node=k) if d.node is None else d)

    def _tree(self, a: Key) -> dict[Key, tuple[Key, Where | None] | None]:
        """The breadth-first tree of unions from ``a`` (each node's parent and joining reference), kept until the
        next union: every check of a class starts from its canonical definition, so one walk serves them all
        (a walk per check was quadratic in the size of a class, e.g. the model width of a long program)."""
        cached = self._trees.get(a)
        if cached is not None and cached[0] == self._unions:
            return cached[1]
        prev: dict[Key, tuple[Key, Where | None] | None] = {a: None}
        todo = deque([a])
        while todo:
            k = todo.popleft()
            for nxt, via in self.edges.get(k, ()):
                if nxt not in prev:
                    prev[nxt] = (k, via)
                    todo.append(nxt)
        self._trees[a] = (self._unions, prev)
        return prev

    def _path(self, a: Key, b: Key) -> list[tuple[Key, Where | None]]:
        """The unions that connect ``a`` to ``b`` (breadth first): each step's node and the reference that joined it."""
        prev = self._tree(a)
        if b not in prev:
            return []
        steps: list[tuple[Key, Where | None]] = []
        k = b
        while (p := prev[k]) is not None:
            steps.append((k, p[1]))
            k = p[0]
        return steps[::-1]

    def conflict(self, a: DimDef, b: DimDef) -> tuple[str, str, str, Loc]:
        """Where two definitions of one class meet: (index name, ``a``'s side, ``b``'s side, location).

        The place is the equation that joins them: the last equation-local
        index on the chain of unions from ``a`` to ``b`` that two references
        of that equation meet at (``k`` in ``Y[b, k] = X[b, k] Z[b, k]``),
        named as written there. Without such a join (a declared axis or a
        ``const(...)`` met by one reference), that reference.
        """
        start = a.node
        path = self._path(start, b.node) if start is not None and b.node is not None else []
        vias = [via for _, via in path]
        nodes: list[Key] = ([start] if start is not None else []) + [k for k, _ in path]
        for i in range(len(path) - 1, 0, -1):
            into, out = vias[i - 1], vias[i]
            node = nodes[i]
            if node[0] == "L" and into is not None and out is not None and into.text != out.text:
                return out.name, into.text, out.text, out.loc
        last = next((v for v in reversed(vias) if v is not None), None)
        if last is None:
            return b.where.name, a.where.text, b.where.text, b.where.loc

        def side(d: DimDef) -> str:
            # A tensor's axis is named by the joining reference; a declaration or const(...) by itself.
            return last.text if d.node is not None and d.node[0] == "T" else d.where.text

        return last.name, side(a), side(b), last.loc

    def conflict_error(self, a: DimDef, b: DimDef) -> FuseError:
        """The compile-time error for two different constant extents ``a`` and ``b`` of one class."""
        name, a_text, b_text, loc = self.conflict(a, b)
        notes = [(f"{a.value} comes from {a.where.text} here", a.where.loc)]
        if b.where.loc != loc or b.where.text != b_text:
            notes.append((f"{b.value} comes from {b.where.text} here", b.where.loc))
        return FuseError(f"{name} is {b.value} in {b_text} but {a.value} in {a_text}", loc, notes)

    def definitions(self, k: Key) -> list[DimDef]:
        return self.defs.get(self.find(k), [])

    def canonical(self, k: Key) -> DimDef | None:
        """The preferred definition: a constant, else an input axis, else a derived one (the first of its kind).

        Kept per class and brought up to date from the definitions added since (a class's list only grows
        until it is replaced): a scan per call was quadratic in a class's size, e.g. the one index of a sum
        of thousands of inputs."""
        r = self.find(k)
        ds = self.defs.get(r, [])
        cached = self._canon.get(r)
        seen, best = (cached[1], cached[2]) if cached is not None and cached[0] is ds else (0, None)
        for d in ds[seen:]:
            rank = _CANONICAL_RANK.get(d.kind)
            if rank is not None and (best is None or rank < _CANONICAL_RANK[best.kind]):
                best = d
        self._canon[r] = (ds, len(ds), best)
        return best

    def static_extent(self, k: Key) -> int | None:
        d = self.canonical(k)
        return d.value if d is not None and d.kind == "const" else None  # type: ignore[return-value]

    def check_constants(self) -> None:
        """Two different constants in one class are a compile-time error naming both places."""
        for root in list(self.defs):
            consts = [d for d in self.defs[root] if d.kind == "const"]
            for d in consts[1:]:
                if d.value != consts[0].value:
                    raise self.conflict_error(consts[0], d)

    def settle_bounds(self) -> None:
        """Facts files give lower bounds (one past the largest coordinate): a class's extent is the largest.

        A declared or otherwise constant extent must cover every bound; a class
        that only an input sizes cannot take a facts file (its extent would be
        known only at run time, after the file was padded).
        """
        for root in list(self.defs):
            defs = self.defs[root]
            bounds = [d for d in defs if d.kind == "bound"]
            if not bounds:
                continue
            rest = [d for d in defs if d.kind != "bound"]
            top = max(bounds, key=lambda d: d.value)  # type: ignore[arg-type,return-value]
            consts = [d for d in rest if d.kind == "const"]
            if consts:
                if top.value > consts[0].value:  # type: ignore[operator]
                    c = consts[0]
                    raise FuseError(
                        f"{top.where.name} needs at least {top.value} in {top.where.text} (a facts file) "
                        f"but is {c.value} in {c.where.text}",
                        top.where.loc,
                        [(f"{c.where.name} is {c.value} here", c.where.loc)],
                    )
                self.defs[root] = rest
            elif rest:
                other = rest[0]
                raise FuseError(
                    f"the extent of {top.where.name} comes from a facts file ({top.where.text}) and from "
                    f"{other.where.text}, known only at run time; declare it with `axis {top.where.name} = N`",
                    top.where.loc,
                    [("sized here", other.where.loc)],
                )
            else:
                self.defs[root] = [DimDef("const", top.value, top.where, top.node)]

    def resolve_by_name(self, locals_by_name: dict[str, list[Key]], undecided_where: dict[Key, Where]) -> None:
        """Give each undefined class the extent its index name has elsewhere (broadcast-only indices).

        When the name is sized in several unrelated places, the broadcast takes the extent they share: the
        classes are joined, so where an extent is known only at run time the runner checks that they agree
        (``m`` from two inputs of two other equations is one extent, as long as the inputs say so). Two
        different compile-time extents are ambiguous: an error.
        """
        changed = True
        while changed:
            changed = False
            for name, keys in locals_by_name.items():
                for k in keys:
                    if self.definitions(k):
                        continue
                    candidates: dict[Key, Key] = {}
                    for other in keys:
                        r = self.find(other)
                        if r != self.find(k) and self.definitions(other):
                            candidates.setdefault(r, other)
                    if len(candidates) == 1:
                        self.union(k, next(iter(candidates.values())))
                        changed = True
                    elif len(candidates) > 1:
                        where = undecided_where.get(k)
                        statics = {self.static_extent(other) for other in candidates.values()} - {None}
                        if len(statics) <= 1:
                            for other in candidates.values():
                                self.union(k, other, where)
                            changed = True
                            continue
                        places = []
                        for other in candidates.values():
                            d = self.definitions(other)[0]
                            places.append((f"{name} could take its extent from {d.where.text}", d.where.loc))
                        raise FuseError(
                            f"the extent of index {name} is ambiguous: it appears with different extents "
                            f"elsewhere in the program; declare it with `axis {name} = N`",
                            where.loc if where else None,
                            places,
                        )

    def require_all(self, keys: list[Key], where: dict[Key, Where]) -> None:
        for k in keys:
            if not self.definitions(k):
                w = where.get(k)
                name = w.name if w else str(k[-1])
                raise FuseError(
                    f"cannot infer the extent of index {name}: it appears on no tensor of known size; "
                    f"declare it with `axis {name} = N`",
                    w.loc if w else None,
                )
