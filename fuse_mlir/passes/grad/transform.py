"""Reverse-mode differentiation of a tensor_eq module: the adjoint sweep.

:func:`differentiate` finds the ops on a path from a ``wrt`` tensor to the
scalar ``of`` (forward reachable from a ``wrt`` and backward reachable from
``of``), walks them in reverse order and asks each op's rule
(:mod:`fuse_mlir.passes.grad.rules`) for its operands' adjoints, summing the
contributions of every use. The backward ops read the forward SSA values
directly, so what the backward needs is kept and nothing else: forward ops
that neither ``of`` nor a gradient reads are removed at the end, and later
fusion recomputes cheap elementwise values inside the kernels that read them
instead of storing them. The exports become ``of`` and one ``d<of>_d<name>``
per ``wrt`` tensor (same shape and dtype as the tensor).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.passes.grad.blocks import block_rule
from fuse_mlir.passes.grad.emit import Emitter, T, rename
from fuse_mlir.passes.grad.rules import RULES


def grad_name(of: str, name: str) -> str:
    """The export name of the gradient of ``of`` with respect to ``name``: ``d<of>_d<name>``."""
    return f"d{of}_d{name}"


def named_values(module: ModuleOp) -> dict[str, SSAValue]:
    """Each tensor the program names (inputs, sources, equation groups) and its value."""
    out: dict[str, SSAValue] = {}
    for op in module.body.block.ops:
        if isinstance(op, te.InputOp | te.SourceOp | te.GroupOp):
            out[op.tensor_name.data] = op.results[0]
    export = _export(module)
    for name, v in zip(te.names_of(export.names), export.values):
        out.setdefault(name, v)
    return out


def _export(module: ModuleOp) -> te.ExportOp:
    for op in reversed(list(module.body.block.ops)):
        if isinstance(op, te.ExportOp):
            return op
    raise FuseError("grad: the program exports nothing")


def _is_float(v: SSAValue) -> bool:
    return isinstance(v.type, TensorType) and te.dtype_of(v).kind == "f"


def _names(v: SSAValue) -> tuple[str, ...]:
    owner = v.owner
    assert isinstance(owner, Operation)
    return te.names_of(owner.attributes["indices"])


def _reads(op: Operation) -> list[SSAValue]:
    """Every value ``op`` reads, including those read inside its regions (a fixpoint body)."""
    vals = list(op.operands)
    for region in op.regions:
        for inner in region.walk():
            vals.extend(inner.operands)
    return vals


def check_request(module: ModuleOp, of: str, wrt: Sequence[str]) -> tuple[SSAValue, list[SSAValue]]:
    """The values of ``of`` and of each ``wrt`` name; a FuseError naming the valid choices for a bad request."""
    values = named_values(module)
    if not wrt:
        raise FuseError("grad: name at least one tensor to differentiate with respect to (wrt)")
    floats = sorted(n for n, v in values.items() if _is_float(v))
    if of not in values:
        raise FuseError(f"grad: {of} is not a tensor of the program (its float tensors: {', '.join(floats) or 'none'})")
    ov = values[of]
    scalars = sorted(n for n in floats if values[n].type.get_num_dims() == 0)  # type: ignore[attr-defined]
    if not _is_float(ov) or ov.type.get_num_dims() != 0:  # type: ignore[attr-defined]
        raise FuseError(
            f"grad: {of} must be a float scalar (a tensor with no indices) to be differentiated, "
            f"but it is {ov.type}; its float scalars: {', '.join(scalars) or 'none'}"
        )
    wv = []
    for name in wrt:
        if name not in values:
            raise FuseError(
                f"grad: no tensor {name} to differentiate with respect to (its float tensors: {', '.join(floats)})"
            )
        if not _is_float(values[name]):
            raise FuseError(
                f"grad: {name} is {te.dtype_of(values[name])}: only float tensors have gradients "
                f"(its float tensors: {', '.join(floats)})"
            )
        wv.append(values[name])
    if len(set(wrt)) != len(wrt):
        raise FuseError(f"grad: wrt names a tensor twice: {', '.join(wrt)}")
    return ov, wv


def differentiate(module: ModuleOp, of: str, wrt: Sequence[str]) -> list[str]:
    """Make ``module`` compute ``of`` and ``d<of>_d<name>`` for each ``wrt`` name, in place; the export names."""
    of_value, wrt_values = check_request(module, of, wrt)
    block = module.body.block
    ops = list(block.ops)
    reach: set[SSAValue] = set(wrt_values)
    for op in ops:
        if any(v in reach for v in _reads(op)):
            reach.update(op.results)
    need: set[SSAValue] = {of_value}
    active: list[Operation] = []
    for op in reversed(ops):
        if any(r in need for r in op.results):
            need.update(_reads(op))
            if any(v in reach for v in _reads(op)):
                active.append(op)
    for op in active:
        if isinstance(op, te.FixpointOp):
            raise FuseError(
                f"grad: the recursive group {op.label.data} ({', '.join(te.names_of(op.names))}) lies between "
                f"{', '.join(wrt)} and {of}: fixpoint groups cannot be differentiated"
            )
    export = _export(module)
    em = Emitter(block, export)
    # The seed d of / d of = 1 as ``of ** 0``: typed by ``of`` itself, never by a literal.
    adj: dict[SSAValue, list[T]] = {of_value: [em.map("pow", T(of_value, ()), em.const(0, te.dtype_of(of_value)))]}

    def total(v: SSAValue) -> T | None:
        parts = adj.get(v)
        if not parts:
            return None
        acc = parts[0]
        for p in parts[1:]:
            acc = em.map("add", acc, rename(p, acc.names))
        adj[v] = [acc]
        return acc

    for op in active:  # already in reverse order
        # The one result with an adjoint (topk's values; its indices are integers and get none).
        res = next((r for r in op.results if adj.get(r)), None)
        if res is None:
            continue
        g = total(res)
        assert g is not None
        g = rename(g, _names(res))
        rule = RULES.get(type(op))
        if rule is None:
            if isinstance(op, te.BlockOp):
                rule = block_rule
            else:
                raise FuseError(f"grad: cannot differentiate through {op.name}")
        want = [v in reach and _is_float(v) for v in op.operands]
        for v, d in zip(op.operands, rule(em, op, g, want)):
            if d is None or v not in reach or not _is_float(v):
                continue
            adj.setdefault(v, []).append(em.cast(d, te.dtype_of(v)))

    grads: list[SSAValue] = []
    names = [grad_name(of, n) for n in wrt]
    for v, gname in zip(wrt_values, names):
        vn = _names(v)
        d = total(v)
        if d is None:  # ``of`` does not depend on it: a zero gradient of its shape
            zero = em.const(0, te.dtype_of(v))
            d = em.map("mul", em.map("pow", T(v, vn), zero), zero)
        d = em.cast(d, te.dtype_of(v))
        group = em.op(te.GroupOp(gname, [d.value], vn, False, em.ttype(te.dtype_of(v), len(vn))))
        grads.append(group.results[0])
    em.op(te.ExportOp([of_value, *grads], [of, *names]))
    for op in list(block.ops):
        if op is export or isinstance(op, te.SinkOp):
            block.erase_op(op)
    remove_dead(module)
    return [of, *names]


def remove_dead(module: ModuleOp) -> None:
    """Erase ops whose results nothing reads (inputs and sources stay: they are the program's interface)."""
    block = module.body.block
    for op in reversed(list(block.ops)):
        if not op.results or isinstance(op, te.InputOp | te.SourceOp):
            continue
        if all(not r.uses for r in op.results):
            block.erase_op(op)
