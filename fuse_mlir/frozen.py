"""Frozen (interned, immutable) IR: structural identity for kernel bodies and whole modules.

Freezing a block turns each op into a :class:`FrozenNode` keyed on its name,
canonical attributes, operand nodes, result types and nested regions, and the
block into a :class:`FrozenGraph`. Nodes and graphs are interned (hash-consed)
in weak tables, so two structurally equal bodies are *the same object*:
equality is identity and ``hash`` is a stored integer, both O(1), however
large or deeply nested the body is. SSA names, name hints and the order of
independent pure ops do not matter (a node's key holds its operands' keys,
and a graph lists its nodes in :func:`canonical_schedule` order, which comes
from the dataflow alone); locations and every other attribute do. Since they
are shared by every holder, nodes and graphs refuse assignment and deletion.

Two modes, as in PyTensor's frozen graphs:

- pure ops are merged when equal (freezing a body also eliminates its common
  subexpressions);
- ops that allocate, write memory, have any other side effect, or are marked
  to overwrite an input in place (``inplace`` attribute) are keyed on their
  schedule position (their rank among the block's effectful ops), so two
  identical ``zeros(5)`` that are each written in place stay two.

Constants compare by (element type, shape, bytes): NaN equals NaN, and 0.0
differs from -0.0. Every node also carries a sha256 :attr:`digest` of a
canonical serialisation, built bottom-up from its operands' digests (never
from ``hash()``, never recursively), which is what on-disk caches key on.
Freezing the same block twice, pickling and unpickling, and thawing then
freezing again all give the identical object.
"""

from __future__ import annotations

import hashlib
import struct
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.traits import IsTerminator, is_side_effect_free

from fuse_mlir.dialects.elemwise import INPLACE_ATTR
from fuse_mlir.dialects.locations import loc_text, set_location

ALLOCATING_OPS = frozenset({"loop.alloc"})
"""Ops that create a fresh buffer: never merged, keyed on their position."""


Ref = tuple[str, int, int]
"""How a graph wires an operand: ("arg", k, 0) block argument k; ("free", k, 0) the k-th value from outside
the block; ("node", i, r) result r of the graph's i-th node. Node keys use the operand node's digest instead
of its index, so equal subexpressions are one node across graphs."""


LOC_KEY = "loc"
"""The name an op's known location takes among its attributes in a frozen node (see :func:`keyed_attributes`)."""


def keyed_attributes(op: Operation) -> tuple[tuple[str, Attribute], ...]:
    """``op``'s attributes, sorted by name, with its location (when known) as one more: locations are part of an
    op's identity here (two checks that report different places stay two), and :func:`thaw` restores them."""
    items = dict(op.attributes)
    text = loc_text(op)
    if text:
        items[LOC_KEY] = StringAttr(text)
    return tuple(sorted(items.items()))


def canonical_attr(attr: Attribute) -> tuple[str, ...]:
    """A hashable, process-independent description of an attribute's value.

    Dense constants become (type, shape, sha256 of their bytes) and floats
    their IEEE bytes, so NaN matches NaN and 0.0 differs from -0.0; anything
    else is its MLIR text.
    """
    if isinstance(attr, DenseIntOrFPElementsAttr):
        raw = attr.data.data
        return ("dense", str(attr.type), hashlib.sha256(raw).hexdigest())
    if isinstance(attr, FloatAttr):
        width = getattr(attr.type, "bitwidth", 64)
        fmt = {16: "<e", 32: "<f"}.get(width, "<d")
        return ("float", str(attr.type), struct.pack(fmt, attr.value.data).hex())
    return ("attr", str(attr))


def _digest(parts: Sequence[object]) -> bytes:
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode())
        h.update(b"\x00")
    return h.digest()


class _Interned:
    """Base of interned objects: made once per key (in a weak table), compared by identity, hashed by digest."""

    __slots__ = ("key", "digest", "_hash", "__weakref__")

    key: tuple
    digest: bytes

    def __new__(cls, *args: Any, **kwargs: Any) -> _Interned:  # noqa: D102
        raise TypeError(f"{cls.__name__} objects are made by freeze_block / {cls.__name__}.make")

    @classmethod
    def _intern(kind, table: weakref.WeakValueDictionary, key: tuple, **payload: object) -> _Interned:
        """The object for ``key``, made with ``payload`` on first use.

        Under a lock, and published in the table only once complete, so two
        threads freezing equal bodies get the one object, never a half-filled one.
        """
        with _INTERN_LOCK:
            obj = table.get(key)
            if obj is None:
                obj = object.__new__(kind)
                digest = _digest(key)
                obj._fill(key=key, digest=digest, _hash=int.from_bytes(digest[:8], "little"), **payload)
                table[key] = obj
            return obj

    def __hash__(self) -> int:
        return self._hash

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: it is interned and shared by every holder")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: it is interned and shared by every holder")

    def _fill(self, **fields: object) -> None:
        """Set the payload of a freshly interned object (the only writes it ever sees)."""
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        return self is other


class FrozenNode(_Interned):
    """One interned op: compare with ``is`` (``==`` is identity); ``digest`` is its sha256."""

    __slots__ = ("cls", "attrs", "props", "types", "regions")

    @staticmethod
    def make(
        op_cls: type[Operation],
        name: str,
        attrs: tuple[tuple[str, Attribute], ...],
        props: tuple[tuple[str, Attribute], ...],
        operands: tuple[tuple, ...],
        types: tuple[Attribute, ...],
        regions: tuple[FrozenGraph, ...],
        position: int | None,
    ) -> FrozenNode:
        """The interned node for these parts (created on first use)."""
        canon = tuple((k, canonical_attr(v)) for k, v in attrs) + tuple((k, canonical_attr(v)) for k, v in props)
        key = (
            name,
            canon,
            len(attrs),
            operands,
            tuple(str(t) for t in types),
            tuple(g.digest for g in regions),
            position,
        )
        node = FrozenNode._intern(_NODES, key, cls=op_cls, attrs=attrs, props=props, types=types, regions=regions)
        return node  # type: ignore[return-value]

    @property
    def name(self) -> str:
        return self.key[0]

    def __reduce__(self) -> tuple:
        name, _canon, _n_attrs, operands, _types, _regions, position = self.key
        args = (self.cls, name, self.attrs, self.props, operands, self.types, self.regions, position)
        return (FrozenNode.make, args)

    def __repr__(self) -> str:
        return f"<FrozenNode {self.name} {self.digest.hex()[:12]}>"


class FrozenGraph(_Interned):
    """An interned block: argument types, nodes in schedule order, and the free values it reads."""

    __slots__ = ("arg_types", "nodes", "n_free")

    @staticmethod
    def make(
        arg_types: tuple[Attribute, ...], nodes: tuple[tuple[FrozenNode, tuple[Ref, ...]], ...], n_free: int
    ) -> FrozenGraph:
        """The interned graph for these parts: each node with the refs of its operands."""
        key = (tuple(str(t) for t in arg_types), tuple((n.digest, refs) for n, refs in nodes), n_free)
        graph = FrozenGraph._intern(_GRAPHS, key, arg_types=arg_types, nodes=nodes, n_free=n_free)
        return graph  # type: ignore[return-value]

    @property
    def hexdigest(self) -> str:
        """The sha256 key of the graph, as hex (for caches and the ``body_key`` attribute)."""
        return self.digest.hex()

    def __len__(self) -> int:
        return len(self.nodes)

    def __reduce__(self) -> tuple:
        return (FrozenGraph.make, (self.arg_types, self.nodes, self.n_free))

    def __repr__(self) -> str:
        return f"<FrozenGraph {len(self.nodes)} nodes {self.hexdigest[:12]}>"


_INTERN_LOCK = threading.Lock()
_NODES: weakref.WeakValueDictionary[tuple, FrozenNode] = weakref.WeakValueDictionary()
_GRAPHS: weakref.WeakValueDictionary[tuple, FrozenGraph] = weakref.WeakValueDictionary()


def keyed_on_position(op: Operation) -> bool:
    """Whether ``op`` must never merge with an equal op: it allocates, writes, overwrites an input, or has
    any other side effect (a region op: when an op in its body does; terminators do not count)."""
    if op.name in ALLOCATING_OPS or INPLACE_ATTR in op.attributes:
        return True
    if op.regions:
        return any(
            keyed_on_position(inner)
            for region in op.regions
            for block in region.blocks
            for inner in block.ops
            if not inner.has_trait(IsTerminator)
        )
    return not is_side_effect_free(op)


def _anonymous_digests(
    ops: Sequence[Operation], deps_of: dict[Operation, list[Operation]], regions_of: dict[Operation, list[FrozenGraph]]
) -> dict[Operation, bytes]:
    """A digest of each op's structure that ignores which outside values it reads (for ordering dead ops only)."""
    out: dict[Operation, bytes] = {}
    for op in ops:  # block order: producers come first
        attrs = tuple(
            (k, canonical_attr(v))
            for k, v in sorted([*keyed_attributes(op), *op.properties.items()], key=lambda kv: kv[0])
        )
        out[op] = _digest(
            (
                op.name,
                attrs,
                tuple(out[d] for d in deps_of[op]),
                tuple(str(r.type) for r in op.results),
                tuple(g.digest for g in regions_of[op]),
            )
        )
    return out


def canonical_schedule(
    ops: Sequence[Operation],
    deps_of: dict[Operation, list[Operation]],
    keyed: set[Operation],
    regions_of: dict[Operation, list[FrozenGraph]],
) -> list[Operation]:
    """The ``ops`` of a block in an order that depends only on its dataflow, not on how independent ops were listed.

    Ops :func:`keyed_on_position` (the terminator among them) are the roots, in their block order, which is
    semantic; every other op is pure and is placed by an iterative post-order walk from the roots over its
    operands, in operand order, so ``exp; sin`` and ``sin; exp`` feeding one ``addf`` schedule alike. Pure ops
    nothing in the block reads (dead code) are walked last, before the terminator, ordered by their structure.
    """
    used: set[Operation] = {d for op in ops for d in deps_of[op]}
    roots = [op for op in ops if op in keyed]
    terminator = roots[-1:] if roots and roots[-1] is ops[-1] and ops[-1].has_trait(IsTerminator) else []
    roots = roots[: len(roots) - len(terminator)]
    dead = [op for op in ops if op not in keyed and op not in used]
    if len(dead) > 1:
        anon = _anonymous_digests(ops, deps_of, regions_of)
        rank = {op: k for k, op in enumerate(ops)}
        dead.sort(key=lambda op: (anon[op], rank[op]))
    order: list[Operation] = []
    placed: set[Operation] = set()
    for root in [*roots, *dead, *terminator]:
        if root in placed:
            continue
        placed.add(root)
        stack = [(root, iter(deps_of[root]))]
        while stack:
            op, pending = stack[-1]
            for dep in pending:
                if dep not in placed:
                    placed.add(dep)
                    stack.append((dep, iter(deps_of[dep])))
                    break
            else:
                stack.pop()
                order.append(op)
    return order


def freeze_block(block: Block) -> tuple[FrozenGraph, list[SSAValue]]:
    """The frozen form of ``block`` and the outside values it reads (in the order its refs number them).

    Equal pure ops (same name, attributes, operands and types) become one
    node; ops :func:`keyed_on_position` keep their position in the block.
    Nodes are listed in :func:`canonical_schedule` order and outside values
    numbered by first use in it, so the graph (and its key) does not depend on
    the order of independent ops. Nested regions are frozen first (depth =
    region nesting, not op count); nothing recurses over op chains.
    """
    producer: dict[SSAValue, Operation] = {}
    regions_of: dict[Operation, list[FrozenGraph]] = {}
    reads_of: dict[Operation, list[SSAValue]] = {}
    deps_of: dict[Operation, list[Operation]] = {}
    keyed: set[Operation] = set()
    ops = list(block.ops)
    for op in ops:
        regions: list[FrozenGraph] = []
        inner_values: list[SSAValue] = []
        for region in op.regions:
            for inner in region.blocks:
                graph, inner_free = freeze_block(inner)
                regions.append(graph)
                inner_values.extend(inner_free)  # what a body reads from outside is, structurally, an operand
        regions_of[op] = regions
        reads_of[op] = reads = [*op.operands, *inner_values]
        deps_of[op] = [producer[v] for v in reads if v in producer]
        for res in op.results:
            producer[res] = op
        if keyed_on_position(op):
            keyed.add(op)

    free: list[SSAValue] = []
    free_index: dict[SSAValue, int] = {}
    ref_of: dict[SSAValue, Ref] = {}
    for k, a in enumerate(block.args):
        ref_of[a] = ("arg", k, 0)
    node_index: dict[FrozenNode, int] = {}
    nodes: list[tuple[FrozenNode, tuple[Ref, ...]]] = []

    def ref(v: SSAValue) -> Ref:
        r = ref_of.get(v)
        if r is None:
            if v not in free_index:
                free_index[v] = len(free)
                free.append(v)
            r = ("free", free_index[v], 0)
        return r

    effects = 0  # effectful ops are keyed on their rank among the block's effectful ops, not on pure ops around them
    for op in canonical_schedule(ops, deps_of, keyed, regions_of):
        refs = tuple(ref(v) for v in reads_of[op])
        position = effects if op in keyed else None
        operand_key = tuple(("node", r[2], nodes[r[1]][0].digest) if r[0] == "node" else r[:2] for r in refs)
        node = FrozenNode.make(
            type(op),
            op.name,
            keyed_attributes(op),
            tuple(sorted(op.properties.items())),
            operand_key,
            tuple(r.type for r in op.results),
            tuple(regions_of[op]),
            position,
        )
        effects += position is not None
        index = node_index.get(node)
        if index is None:
            index = node_index[node] = len(nodes)
            nodes.append((node, refs))
        for k, res in enumerate(op.results):
            ref_of[res] = ("node", index, k)
    return FrozenGraph.make(tuple(a.type for a in block.args), tuple(nodes), len(free)), free


def thaw(graph: FrozenGraph, free: Sequence[SSAValue] = ()) -> Block:
    """A new block computing ``graph`` (each node once, in graph order), reading ``free`` for its free refs."""
    if len(free) != graph.n_free:
        raise ValueError(f"thaw: the graph reads {graph.n_free} outside values, {len(free)} given")
    block = Block(arg_types=graph.arg_types)
    results: list[Sequence[SSAValue]] = []

    def value(r: Ref) -> SSAValue:
        kind, i, k = r
        if kind == "arg":
            return block.args[i]
        if kind == "free":
            return free[i]
        return results[i][k]

    for node, refs in graph.nodes:
        n_own = len(refs) - sum(g.n_free for g in node.regions)
        operands = [value(r) for r in refs[:n_own]]
        regions = []
        inner_free_values = [value(r) for r in refs[n_own:]]
        offset = 0
        for g in node.regions:
            regions.append(Region(thaw(g, inner_free_values[offset : offset + g.n_free])))
            offset += g.n_free
        attrs = dict(node.attrs)
        loc = attrs.pop(LOC_KEY, None)
        op = node.cls.create(
            operands=operands,
            result_types=list(node.types),
            attributes=attrs,
            properties=dict(node.props),
            regions=regions,
        )
        if isinstance(loc, StringAttr):
            set_location(op, loc.data)
        block.add_op(op)
        results.append(op.results)
    return block


def freeze_op_body(op: Operation) -> tuple[FrozenGraph, list[SSAValue]]:
    """The frozen body of a single-region, single-block op (a kernel) and the outside values it reads."""
    return freeze_block(op.regions[0].block)


def module_key(module: ModuleOp) -> str:
    """A sha256 (hex) of the module's structure: equal for modules equal up to SSA names and pure-op order."""
    graph, free = freeze_block(module.body.block)
    if free:
        raise ValueError("module_key: a module reads no outside values")
    return graph.hexdigest
