"""The dataflow graph of a module, at any level, as Graphviz text (``fuse-opt --emit=dot``).

One node per op, labelled with the op name and its ``name``/``fn``/``kind``
(or ``sym_name``) attribute; one edge per SSA use, from the defining op (or,
for a block argument, from the op owning the block, dashed). An op with
regions (a fused kernel, a function) is drawn as a cluster holding its own
node and the ops inside it. An op whose ``inplace`` attribute names an operand
index (or several) writes into that operand's buffer: that edge is bold, red
and labelled ``inplace``. Node ids follow program order, so the text is
deterministic.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, StringAttr
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult

from fuse_mlir.dialects import loop
from fuse_mlir.mathlib.ops import SCALAR_DIALECTS

_LABEL_ATTRS = ("name", "fn", "kind", "sym_name", "callee")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attr(op: Operation, key: str) -> Attribute | None:
    """An attribute or property (attributes can be falsy: an IntegerAttr of 0)."""
    attr = op.attributes.get(key)
    return attr if attr is not None else op.properties.get(key)


def op_label(op: Operation) -> str:
    """The op name and its naming attribute, e.g. ``te.map "add"``."""
    for key in _LABEL_ATTRS:
        attr = _attr(op, key)
        if isinstance(attr, StringAttr | EnumAttribute):
            return f'{op.name} "{attr.data}"'  # EnumAttribute: te.reduce's kind
        if isinstance(attr, ArrayAttr) and attr.data and all(isinstance(a, EnumAttribute) for a in attr.data):
            return f'{op.name} "{",".join(str(a.data) for a in attr.data)}"'  # ew.generic's kinds
        if attr is not None and key in ("sym_name", "callee"):
            return f"{op.name} {attr}"
    return op.name


def inplace_operands(op: Operation) -> set[int]:
    """The operand indices the op's ``inplace`` attribute names (an int or an array of ints)."""
    attr = _attr(op, "inplace")
    items = attr.data if isinstance(attr, ArrayAttr) else (attr,)
    return {int(a.value.data) for a in items if isinstance(a, IntegerAttr)}


class _Dot:
    def __init__(self) -> None:
        self.ids: dict[Operation, str] = {}
        self.lines: list[str] = []
        self.clusters = 0

    def node_id(self, op: Operation) -> str:
        if op not in self.ids:
            self.ids[op] = f"n{len(self.ids)}"
        return self.ids[op]

    def blocks(self, blocks: list[Block], indent: str) -> None:
        for block in blocks:
            for op in block.ops:
                self.op(op, indent)

    def op(self, op: Operation, indent: str) -> None:
        label = _quote(op_label(op))
        if not op.regions:
            self.lines.append(f"{indent}{self.node_id(op)} [label={label}];")
            return
        self.clusters += 1
        self.lines.append(f"{indent}subgraph cluster_{self.clusters} {{")
        self.lines.append(f"{indent}  label={label};")
        self.lines.append(f'{indent}  style=rounded; color="#4477aa";')
        self.lines.append(f'{indent}  {self.node_id(op)} [label={label}, style=filled, fillcolor="#dde8f4"];')
        for region in op.regions:
            self.blocks(list(region.blocks), indent + "  ")
        self.lines.append(f"{indent}}}")

    def edges(self, root: Operation) -> None:
        for op in root.walk():
            if op is root or op not in self.ids:
                continue
            inplace = inplace_operands(op)
            for k, value in enumerate(op.operands):
                attrs: list[str] = []
                if isinstance(value, OpResult):
                    src = value.op
                    if len(src.results) > 1:
                        attrs.append(f'taillabel="#{value.index}"')
                elif isinstance(value, BlockArgument):
                    owner = value.block.parent_op()
                    if owner is None or owner not in self.ids:
                        continue
                    src = owner
                    attrs += ["style=dashed", f'label="arg{value.index}"']
                else:
                    continue
                if src not in self.ids:
                    continue
                if k in inplace:
                    attrs = [a for a in attrs if not a.startswith("label=")]
                    attrs += ["color=red", "penwidth=2", "style=bold", 'label="inplace"', "fontcolor=red"]
                suffix = f" [{', '.join(attrs)}]" if attrs else ""
                self.lines.append(f"  {self.ids[src]} -> {self.ids[op]}{suffix};")


def to_dot(module: Operation, title: str = "module") -> str:
    """Graphviz text for the dataflow of ``module`` (its body; the module op itself is not drawn)."""
    dot = _Dot()
    dot.lines += [
        f"digraph {_quote(title)} {{",
        "  compound=true;",
        '  node [shape=box, fontname="monospace", fontsize=10];',
        '  edge [fontname="monospace", fontsize=9];',
    ]
    for region in module.regions:
        dot.blocks(list(region.blocks), "  ")
    dot.edges(module)
    dot.lines.append("}")
    return "\n".join(dot.lines) + "\n"


# -- the kernel view ----------------------------------------------------------------------------------------------

DOT_DETAILS = ("kernels", "ops")
"""``--dot-detail`` values: one node per kernel (the default), or one per op (:func:`to_dot`)."""

# Ops that only name a constant or an extent: left out of the kernel view (they would connect to everything).
_TRIVIAL = frozenset({"arith.constant", "loop.dim", "te.dim", "te.constant", "arith.index_cast", "func.return"})
# Ops (not kernels themselves) whose operand at these positions is a buffer they write.
_WRITES = {"loop.store": (1,), "loop.gemm": (2,)}


def _top_ops(module: Operation) -> list[Operation]:
    """The ops the kernel view draws: the module body's, with functions opened (their body ops in order)."""
    out: list[Operation] = []

    def visit(block: Block) -> None:
        for op in block.ops:
            if op.name in ("func.func", "builtin.module", "llvm.func"):
                for region in op.regions:
                    for inner in region.blocks:
                        visit(inner)
            else:
                out.append(op)

    for region in module.regions:
        for block in region.blocks:
            visit(block)
    return out


def _kernel_label(op: Operation, number: int) -> str:
    """``kernel 3: loop.for (depth 2)`` plus the distinct compute ops inside, so a nest says what it computes."""
    inner = [o for o in op.walk() if o is not op]
    depth = loop.nest_depth(op, (loop.ForOp,))
    head = f"kernel {number}: {op_label(op)}" + (f" (depth {depth})" if depth > 1 else "")
    names = sorted({o.name.split(".", 1)[-1] for o in inner if o.name.split(".")[0] in (*SCALAR_DIALECTS, "te")})
    body = [n for n in names if n not in ("constant", "yield", "index_cast", "addi", "muli", "cmpi", "select")]
    return head + (f"\n{', '.join(body[:8])}{' ...' if len(body) > 8 else ''}" if body else "")


def to_kernel_dot(module: Operation, title: str = "module") -> str:
    """Graphviz text with one node per kernel: a readable overview of a module at any level.

    A top-level op with regions (a loop nest, an ``ew.generic``, a fixpoint)
    is one box, labelled with the compute ops inside; ops that only name
    constants or extents are left out. Buffers (``loop.alloc``, arguments)
    are ellipses: an edge goes from a kernel to each buffer it writes and
    from each buffer to the kernels that read it; other values are edges from
    their producer to their users. ``--dot-detail=ops`` draws every op
    instead (:func:`to_dot`).
    """
    lines = [
        f"digraph {_quote(title)} {{",
        '  node [shape=box, fontname="monospace", fontsize=10];',
        '  edge [fontname="monospace", fontsize=9];',
    ]
    ids: dict[Operation, str] = {}
    kernels = 0
    tops = [op for op in _top_ops(module) if op.name not in _TRIVIAL]
    for op in tops:
        ids[op] = f"n{len(ids)}"
        if op.regions or op.name in ("loop.gemm", "loop.host_call"):
            kernels += 1
            label = _kernel_label(op, kernels)
            lines.append(f'  {ids[op]} [label={_quote(label)}, style=filled, fillcolor="#dde8f4"];')
        elif op.name in ("loop.alloc", "loop.arg"):
            lines.append(f"  {ids[op]} [label={_quote(op_label(op))}, shape=ellipse];")
        else:
            lines.append(f"  {ids[op]} [label={_quote(op_label(op))}];")
    seen: set[tuple[str, str]] = set()

    def edge(src: Operation, dst: Operation, extra: str = "") -> None:
        if src in ids and dst in ids and src is not dst and (ids[src], ids[dst]) not in seen:
            seen.add((ids[src], ids[dst]))
            lines.append(f"  {ids[src]} -> {ids[dst]}{extra};")

    for op in tops:
        inside = set(op.walk())
        for inner in op.walk():
            writes = _WRITES.get(inner.name, ())
            for k, value in enumerate(inner.operands):
                if not isinstance(value, OpResult) or value.op in inside:
                    continue
                if k in writes:
                    edge(op, value.op, ' [color="#aa3377", label="writes"]')
                else:
                    edge(value.op, op)
    lines.append("}")
    return "\n".join(lines) + "\n"
