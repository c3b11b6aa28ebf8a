"""Frozen (interned, immutable) IR: structural identity for kernel bodies and whole modules.

Freezing a block turns each op into a :class:`FrozenNode` keyed on its name,
canonical attributes, operand nodes, result types and nested regions, and the
block into a :class:`FrozenGraph`. Nodes and graphs are interned (hash-consed)
in weak tables, so two structurally equal bodies are *the same object*:
equality is identity and ``hash`` is a stored integer, both O(1), however
large or deeply nested the body is. SSA names, name hints and the order of
independent pure ops do not matter; locations and every other attribute do.

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
import weakref
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, ModuleOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.traits import IsTerminator, is_side_effect_free

from fuse_mlir.dialects.elemwise import INPLACE_ATTR

ALLOCATING_OPS = frozenset({"loop.alloc"})
"""Ops that create a fresh buffer: never merged, keyed on their position."""


Ref = tuple[str, int, int]
"""How a graph wires an operand: ("arg", k, 0) block argument k; ("free", k, 0) the k-th value from outside
the block; ("node", i, r) result r of the graph's i-th node. Node keys use the operand node's digest instead
of its index, so equal subexpressions are one node across graphs."""


def canonical_attr(attr: Attribute) -> tuple[str, ...]:
    """A hashable, process-independent description of an attribute's value.

    Dense constants become (type, shape, sha256 of their bytes) and floats
    their IEEE bytes, so NaN matches NaN and 0.0 differs from -0.0; anything
    else is its MLIR text.
    """
    if isinstance(attr, DenseIntOrFPElementsAttr):
        raw = attr.data.data  # type: ignore[attr-defined]
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
    def _intern(cls, table: weakref.WeakValueDictionary, key: tuple) -> tuple[_Interned, bool]:
        """The object for ``key`` and whether it was created now (the caller then fills its payload)."""
        obj = table.get(key)
        if obj is not None:
            return obj, False
        obj = object.__new__(cls)
        obj.key = key
        obj.digest = _digest(key)
        obj._hash = int.from_bytes(obj.digest[:8], "little")
        table[key] = obj
        return obj, True

    def __hash__(self) -> int:
        return self._hash

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
        node, fresh = FrozenNode._intern(_NODES, key)
        if fresh:
            node.cls, node.attrs, node.props, node.types, node.regions = op_cls, attrs, props, types, regions
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
        graph, fresh = FrozenGraph._intern(_GRAPHS, key)
        if fresh:
            graph.arg_types, graph.nodes, graph.n_free = arg_types, nodes, n_free
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


def freeze_block(block: Block) -> tuple[FrozenGraph, list[SSAValue]]:
    """The frozen form of ``block`` and the outside values it reads (in the order its refs number them).

    Equal pure ops (same name, attributes, operands and types) become one
    node; ops :func:`keyed_on_position` keep their position in the block.
    Nested regions are frozen first (depth = region nesting, not op count).
    """
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
    for op in block.ops:
        regions: list[FrozenGraph] = []
        inner_values: list[SSAValue] = []
        for region in op.regions:
            for inner in region.blocks:
                graph, inner_free = freeze_block(inner)
                regions.append(graph)
                inner_values.extend(inner_free)  # what a body reads from outside is, structurally, an operand
        refs = tuple(ref(v) for v in [*op.operands, *inner_values])
        keyed = keyed_on_position(op)
        operand_key = tuple(("node", r[2], nodes[r[1]][0].digest) if r[0] == "node" else r[:2] for r in refs)
        node = FrozenNode.make(
            type(op),
            op.name,
            tuple(sorted(op.attributes.items())),
            tuple(sorted(op.properties.items())),
            operand_key,
            tuple(r.type for r in op.results),
            tuple(regions),
            effects if keyed else None,
        )
        effects += keyed
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
        op = node.cls.create(
            operands=operands,
            result_types=list(node.types),
            attributes=dict(node.attrs),
            properties=dict(node.props),
            regions=regions,
        )
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
