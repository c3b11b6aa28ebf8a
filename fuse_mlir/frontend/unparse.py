"""Print a tensor_eq module back as `.fuse` text (``fuse grad`` prints gradient programs with it).

Every tensor value becomes one equation: an equation group keeps its name (a
contribution read only by its group is printed as that group's equation), an
input or source keeps its name, and any other value is named ``_t<n>``. 0-d
constants are written as literals (weak, as in the source); extents that only
a ``te.dim`` knows come from an int8 ones vector over that axis
(``step(X[0, i] ** 0)``), so the text never needs an ``axis`` declaration. The
text parses back into a program computing the same values with the same
dtypes; what the language cannot spell (a float64 to float32 cast, the
``rope``/``tucker_dense``/``topk`` blocks, a ``logsumexp`` over several axes)
is a FuseError. A ``te.scatter_add`` (the adjoint of a gather) has no surface form: it prints as the
update contracted with one-hot ``iota(s) == index`` factors, which computes the same sums.
"""

from __future__ import annotations

import json
import re

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.dialects import tensor_eq as te

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*'*\Z")
_INFIX = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "pow": "**",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
    "and": "&&",
    "or": "||",
}
_CALLS = {"maximum": "max", "minimum": "min"}
_PROJ = {"sum": "=", "max": "max=", "min": "min=", "mean": "avg="}


def _literal(value: np.ndarray) -> str:
    v = value.item()
    if isinstance(v, float):
        if not np.isfinite(v):
            raise FuseError(f"cannot print the non-finite constant {v} as .fuse text")
        text = repr(v)
    else:
        text = str(int(v))
    return f"({text})" if text.startswith("-") else text


def _slice_text(axis: te.AccessAxisAttr) -> str:
    """A slice axis written as in the language, ``start:stop:step`` with absent bounds left empty."""
    return ":".join("" if b is None else str(b) for b in axis.slice_bounds())


def _list_literal(arr: np.ndarray) -> str:
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise FuseError("cannot print a constant holding inf or NaN as .fuse text")
    return repr(arr.tolist()).replace("True", "1").replace("False", "0")


class Unparser:
    """Turns one module into equations, in module order (a value is always printed before its readers)."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.block = module.body.block
        self.names: dict[SSAValue, str] = {}
        self.literals: dict[SSAValue, str] = {}
        self.lines: list[str] = []
        self.ones: dict[tuple[SSAValue, int], str] = {}
        self.index_names: dict[str, str] = {}
        self.counter = 0
        self.taken: set[str] = set()
        self.into: dict[SSAValue, tuple[str, bool]] = {}  # a contribution printed as its group's equation

    # -- names -----------------------------------------------------------------

    def fresh(self, stem: str = "_t") -> str:
        while True:
            self.counter += 1
            name = f"{stem}{self.counter}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    def index(self, name: str) -> str:
        """A name usable as an index (slice texts and the like are renamed apart)."""
        if _IDENT.match(name):
            return name
        if name not in self.index_names:
            self.index_names[name] = self.fresh("_s")
        return self.index_names[name]

    def ref(self, v: SSAValue, names: tuple[str, ...] | list[str]) -> str:
        """A reference to ``v`` with its axes named ``names`` (or the literal of a 0-d constant)."""
        if v in self.literals:
            return self.literals[v]
        name = self.names[v]
        if not names:
            return name
        return f"{name}[{', '.join(self.index(n) for n in names)}]"

    def lhs(self, name: str, names: tuple[str, ...] | list[str], raw: bool = False) -> str:
        if not names:
            return name
        return f"{name}[{', '.join(n if raw else self.index(n) for n in names)}]"

    def extent_ones(self, extent: SSAValue, name: str) -> str:
        """An int8 vector of ones along ``name`` whose extent is ``extent`` (a ``te.dim``)."""
        owner = extent.owner
        if isinstance(owner, arith.ConstantOp):
            n = int(owner.value.value.data)  # type: ignore[union-attr]
            key = (extent, 0)
            if key not in self.ones:
                vec = self.fresh("_ones")
                self.lines.append(f"{vec}[_n] = const({[1] * n})")
                self.ones[key] = vec
            return f"{self.ones[key]}[{self.index(name)}]"
        if not isinstance(owner, te.DimOp):
            raise FuseError(f"cannot print an extent computed by {getattr(owner, 'name', 'a block argument')}")
        src, axis = owner.source, owner.axis.value.data
        key = (src, axis)
        if key not in self.ones:
            vec = self.fresh("_ones")
            rank = src.type.get_num_dims()  # type: ignore[attr-defined]
            items = ["0"] * rank
            items[axis] = "_n"
            self.lines.append(f"{vec}[_n] = step({self.names[src]}[{', '.join(items)}] ** 0)")
            self.ones[key] = vec
        return f"{self.ones[key]}[{self.index(name)}]"

    # -- printing ----------------------------------------------------------------

    def run(self) -> str:
        for op in self.block.ops:
            if isinstance(op, te.InputOp | te.SourceOp | te.GroupOp):
                self.taken.add(op.tensor_name.data)
        for op in self.block.ops:
            if isinstance(op, te.GroupOp) and not op.boolean.value.data:
                for k, v in enumerate(op.inputs):
                    if v.has_one_use() and v not in self.into and not isinstance(v.owner, te.InputOp | te.SourceOp):
                        self.into[v] = (op.tensor_name.data, k > 0)
        for op in self.block.ops:
            self.print_op(op)
        return "\n".join(self.lines) + "\n"

    def define(self, op: Operation, rhs: str, names: tuple[str, ...], sign: str = "=", raw: bool = False) -> None:
        v = op.results[0]
        if v in self.into:
            group, more = self.into[v]
            self.names[v] = group
            sign = "+=" if more and sign == "=" else sign
            self.lines.append(f"{self.lhs(group, names, raw)} {sign} {rhs}")
            return
        name = self.fresh()
        self.names[v] = name
        self.lines.append(f"{self.lhs(name, names, raw)} {sign} {rhs}")

    def print_op(self, op: Operation) -> None:  # noqa: C901 - one branch per op, flat
        if isinstance(op, te.InputOp):
            self.names[op.result] = op.tensor_name.data
        elif isinstance(op, te.SourceOp):
            self.names[op.result] = op.tensor_name.data
            self.lines.append(f"{self.lhs(op.tensor_name.data, te.names_of(op.indices))} = {json.dumps(op.path.data)}")
        elif isinstance(op, te.ConstantOp):
            arr = te.dense_value(op.value)
            if arr.ndim == 0 and arr.dtype.kind in "fiu":  # a literal: weak, it takes its neighbours' dtype
                self.literals[op.result] = _literal(arr)
            else:
                if arr.dtype not in (np.float64, np.int64):
                    raise FuseError(f"cannot print a {arr.dtype} constant as .fuse text (const() makes int64/float64)")
                names = te.names_of(op.indices) or ()
                self.define(op, f"const({_list_literal(arr)})", names)
        elif isinstance(op, te.ContractOp):
            self.contract(op)
        elif isinstance(op, te.MapOp):
            self.map(op)
        elif isinstance(op, te.BroadcastOp):
            names = te.names_of_each(op.operand_indices)[0]
            out = te.names_of(op.indices)
            new = [n for n in out if n not in names]
            factors = [self.ref(op.input, names)] + [self.extent_ones(e, n) for e, n in zip(op.extents, new)]
            self.define(op, " * ".join(factors), out)
        elif isinstance(op, te.ReduceOp):
            self.reduce(op)
        elif isinstance(op, te.AxisOp):
            args = [self.ref(v, ns) for v, ns in zip(op.inputs, te.names_of_each(op.operand_indices))]
            params = te.params_of(op.params)
            kw = [f"axis={self.index(op.axis.data)}", *(f"{k}={_literal(np.asarray(v))}" for k, v in params.items())]
            self.define(op, f"{op.fn.data}({', '.join(args + kw)})", te.names_of(op.indices))
        elif isinstance(op, te.AccessOp):
            self.access(op)
        elif isinstance(op, te.ConcatOp):
            axis = op.axis.data
            args = []
            for v, ns, part in zip(op.inputs, te.names_of_each(op.operand_indices), te.names_of(op.operand_axes)):
                args.append(self.ref(v, [axis if n == part else n for n in ns]))
            self.define(op, f"concat({', '.join(args)}, axis={self.index(axis)})", te.names_of(op.indices))
        elif isinstance(op, te.FlattenOp):
            self.define(
                op, f"concat({self.ref(op.input, te.names_of_each(op.operand_indices)[0])})", te.names_of(op.indices)
            )
        elif isinstance(op, te.GenerateOp):
            (name,) = te.names_of(op.indices)[:1]
            names = te.names_of(op.indices)
            if op.fn.data == "causal_mask":
                owner = op.extents[0].owner
                if not isinstance(owner, arith.ConstantOp):
                    raise FuseError("cannot print causal_mask of a run-time extent as .fuse text")
                self.define(op, f"causal_mask({owner.value.value.data})", names)  # type: ignore[union-attr]
            else:
                self.define(op, f"{op.fn.data}({self.index(name)}) {self.extent_ones(op.extents[0], name)}", names)
        elif isinstance(op, te.PlaceOp):
            out = te.names_of(op.indices)
            factors = [self.ref(op.input, te.names_of_each(op.operand_indices)[0])]
            extents = iter(op.extents)
            for n, p in zip(out, op.position_list()):
                if p >= 0:
                    ones = self.extent_ones(next(extents), n)
                    factors.append(f"(iota({self.index(n)}) == {p}) {ones}")
            self.define(op, " * ".join(factors), out)
        elif isinstance(op, te.ScatterAddOp):
            self.scatter_add(op)
        elif isinstance(op, te.BlockOp):
            self.block_op(op)
        elif isinstance(op, te.GroupOp):
            self.group(op)
        elif isinstance(op, te.CastOp):
            src, dst = te.dtype_of(op.input), te.dtype_of(op.result)
            names = te.names_of(op.indices)
            if dst == np.float64:
                self.define(op, f"{self.ref(op.input, names)} * {self.float64_one()}", names)
            else:
                raise FuseError(f"cannot print a cast from {src} to {dst} as .fuse text")
        elif isinstance(op, te.SinkOp):
            vals = [self.ref(v, self.value_names(v)) for v in op.values]
            self.lines.append(f"{json.dumps(op.path.data)} = {', '.join(vals)}")
        elif isinstance(op, te.ExportOp):
            outs = []
            for name, v in zip(te.names_of(op.names), op.values):
                if self.names.get(v) != name:
                    names = self.value_names(v)
                    self.lines.append(f"{self.lhs(name, names)} = {self.ref(v, names)}")
                outs.append(name)
            self.lines.append(f"export {', '.join(outs)}")
        elif isinstance(op, te.FixpointOp):
            raise FuseError("cannot print a fixpoint group as .fuse text (print the program before fixpoint lowering)")
        elif isinstance(op, te.DimOp | te.CheckDimOp | te.SliceLenOp | arith.ConstantOp | arith.AddiOp | arith.MuliOp):
            return  # extents and their checks come back from the text's own indices
        else:
            raise FuseError(f"cannot print {op.name} as .fuse text")

    def float64_one(self) -> str:
        if not hasattr(self, "_one64"):
            self._one64 = self.fresh("_one")
            self.lines.append(f"{self._one64} = 1.0")
        return self._one64

    @staticmethod
    def value_names(v: SSAValue) -> tuple[str, ...]:
        owner = v.owner
        assert isinstance(owner, Operation)
        return te.names_of(owner.attributes["indices"])

    def contract(self, op: te.ContractOp) -> None:
        each = te.names_of_each(op.operand_indices)
        out = te.names_of(op.indices)
        refs = [self.ref(v, ns) for v, ns in zip(op.inputs, each)]
        proj = op.projection.data
        body = " ".join(refs)
        if proj == "prod":
            projected = [n for n in dict.fromkeys(n for ns in each for n in ns) if n not in out]
            if projected:
                body = f"reduce(prod, {', '.join(self.index(n) for n in projected)}) ({body})"
            self.define(op, body, out)
            return
        self.define(op, body, out, _PROJ[proj])

    def map(self, op: te.MapOp) -> None:
        args = [self.ref(v, ns) for v, ns in zip(op.inputs, te.names_of_each(op.operand_indices))]
        fn = op.fn.data
        params = te.params_of(op.params)
        if fn == "pow":
            rhs = f"pow({args[0]}, {args[1]})"
        elif fn in _INFIX:
            rhs = f"({args[0]}) {_INFIX[fn]} ({args[1]})"
        elif fn == "neg":
            rhs = f"-({args[0]})"
        elif fn == "not":
            rhs = f"!({args[0]})"
        elif fn == "sig" and "T" in params:
            rhs = f"sig({args[0]}, {_literal(np.asarray(params['T']))})"
        else:
            rhs = f"{_CALLS.get(fn, fn)}({', '.join(args)})"
        self.define(op, rhs, te.names_of(op.indices))

    def reduce(self, op: te.ReduceOp) -> None:
        (names,) = te.names_of_each(op.operand_indices)
        out = te.names_of(op.indices)
        gone = [n for n in names if n not in out]
        x = self.ref(op.input, names)
        kind = op.kind.data
        if not gone:
            self.define(op, x, out)
        elif kind == "logsumexp":
            if len(gone) != 1:
                raise FuseError("cannot print a logsumexp over several axes as .fuse text")
            self.define(op, f"logsumexp({x}, axis={self.index(gone[0])})", out)
        elif kind == "any":
            self.define(op, f"reduce(max, {', '.join(self.index(n) for n in gone)}) ({x} != 0)", out)
        else:
            self.define(op, f"reduce({kind}, {', '.join(self.index(n) for n in gone)}) {x}", out)

    def access(self, op: te.AccessOp) -> None:
        gathers = [self.ref(v, ns) for v, ns in zip(op.gathers, te.names_of_each(op.gather_indices))]
        axes = op.axis_list()
        items = []
        for a in axes:
            kind = a.axis_kind
            if kind == te.AxisKind.POSITION:
                items.append(str(a.value))
            elif kind == te.AxisKind.GATHER:
                items.append(gathers[a.value])
            elif kind == te.AxisKind.SLICE:
                items.append(_slice_text(a))
            elif kind == te.AxisKind.OFFSET:
                items.append(f"{self.index(a.index_name)}{a.value:+d}")
            else:
                items.append(self.index(a.index_name))
        src = self.names.get(op.source)
        if src is None:
            raise FuseError("cannot print a read of a literal as .fuse text")
        out = te.names_of(op.indices)
        # A sliced axis is named by its slice text, on the left-hand side too.
        slice_of = {a.index_name: _slice_text(a) for a in axes if a.axis_kind == te.AxisKind.SLICE}
        if any(text.startswith("-") for text in slice_of.values()):
            raise FuseError(
                "cannot print a slice with a negative start as .fuse text (a left-hand side cannot name it)"
            )
        lhs_names = tuple(slice_of.get(n, self.index(n)) for n in out)
        rhs = f"{src}[{', '.join(items)}]" if items else src
        self.define(op, rhs, lhs_names, raw=True)

    def scatter_add(self, op: te.ScatterAddOp) -> None:
        """The language has no left-hand gather, so a scatter-add prints as the sum it is: the update times a
        one-hot ``iota(s) == index`` per gathered axis (same values; it runs as a contraction when read back)."""
        factors = [self.ref(op.update, op.update_names())]
        out = te.names_of(op.indices)
        extents = iter(op.extents)
        for n, a in zip(out, op.axis_list()):
            if a.axis_kind == te.AxisKind.GATHER:
                g, names = op.gathers[a.value], te.names_of_each(op.gather_indices)[a.value]
                ones = self.extent_ones(next(extents), n)
                factors.append(f"((iota({self.index(n)}) {ones}) == ({self.ref(g, names)}))")
        self.define(op, " * ".join(factors), out)

    def block_op(self, op: te.BlockOp) -> None:
        if op.fn.data != "attention":
            raise FuseError(f"cannot print the {op.fn.data} block as .fuse text")
        args = [self.ref(v, ns) for v, ns in zip(op.inputs, te.names_of_each(op.operand_indices))]
        params = te.params_of(op.params)
        if params.get("scale") is not None:
            args.append(f"scale={_literal(np.asarray(float(params['scale'])))}")  # type: ignore[arg-type]
        if params.get("causal"):
            args.append("causal=true")
        self.define(op, f"attention({', '.join(args)})", te.names_of(op.indices))

    def group(self, op: te.GroupOp) -> None:
        name = op.tensor_name.data
        names = te.names_of(op.indices)
        boolean = op.boolean.value.data
        for k, v in enumerate(op.inputs):
            if self.names.get(v) == name:
                continue  # printed as this group's own equation
            ref = self.ref(v, names)
            if boolean:
                self.lines.append(f"{name}({', '.join(self.index(n) for n in names)}) = {ref}")
            else:
                self.lines.append(f"{self.lhs(name, names)} {'+=' if k else '='} {ref}")
        self.names[op.result] = name


def module_to_fuse(module: ModuleOp) -> str:
    """The `.fuse` text of a tensor_eq module (see the module docstring for what it can spell)."""
    return Unparser(module).run()
