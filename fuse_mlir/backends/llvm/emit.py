"""A deterministic emitter from xDSL's llvm dialect to LLVM IR text.

Replaces ``xdsl.backend.llvm.convert``, which mangles no intrinsic names,
drops fast-math flags on some calls, emits no function or parameter
attributes and orders fast-math flags by hash. Here:

- values are named ``%vN`` and blocks ``bbN`` in program order; constants and
  ``llvm.mlir.addressof`` are printed inline (floats as exact hex, ``@name``);
  block arguments become ``phi`` nodes with their incoming edges in block order;
- fast-math flags are printed in LLVM's own fixed order (``fast`` when all are set);
- ``llvm.call_intrinsic`` names are taken as already mangled (``llvm.exp.f64``),
  and each intrinsic is declared once, sorted by name, at the end;
  ``llvm.intr.*`` ops are mangled from their result type;
- parameter and result attributes (``noalias``, ``align``, ...) and function
  attributes (``nounwind``, ...) are printed from the ``llvm.func`` properties.

The output depends only on the module's structure: the same module gives
byte-identical text in every process, whatever ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    VectorType,
)
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.ir import Attribute, Block, Operation, SSAValue

from fuse_mlir.dialects.llvmx import LOOP_DEPTH, FenceOp, mangle

__all__ = ["EmitError", "Unit", "emit_llvm_ir", "emit_llvm_units", "type_text"]


class EmitError(ValueError):
    """The module holds something this emitter cannot print as LLVM IR."""


# --------------------------------------------------------------------------- types and constants


def type_text(t: Attribute) -> str:
    """LLVM IR spelling of a type."""
    if isinstance(t, IntegerType):
        return f"i{t.width.data}"
    if isinstance(t, IndexType):
        return "i64"
    if isinstance(t, Float64Type):
        return "double"
    if isinstance(t, Float32Type):
        return "float"
    if isinstance(t, Float16Type):
        return "half"
    if isinstance(t, BFloat16Type):
        return "bfloat"
    if isinstance(t, llvm.LLVMPointerType):
        return "ptr"
    if isinstance(t, llvm.LLVMVoidType):
        return "void"
    if isinstance(t, VectorType):
        shape = t.get_shape()
        if len(shape) != 1:
            raise EmitError(f"only 1-d vectors exist in LLVM IR, got {t}")
        return f"<{shape[0]} x {type_text(t.element_type)}>"
    if isinstance(t, llvm.LLVMArrayType):
        return f"[{t.size.data} x {type_text(t.type)}]"
    if isinstance(t, llvm.LLVMStructType):
        return "{ " + ", ".join(type_text(x) for x in t.types.data) + " }"
    raise EmitError(f"no LLVM IR type for {t}")


def _float_text(value: float, t: Attribute) -> str:
    """An exact hexadecimal float literal (LLVM prints double bits for float and double)."""
    if isinstance(t, Float16Type):
        return "0xH" + format(int(np.array(value, dtype=np.float16).view(np.uint16)), "04X")
    if isinstance(t, BFloat16Type):
        bits = int(np.array(value, dtype=np.float32).view(np.uint32)) >> 16
        return "0xR" + format(bits, "04X")
    if isinstance(t, Float32Type):
        with np.errstate(over="ignore"):
            value = float(np.float32(value))
    (bits,) = struct.unpack(">Q", struct.pack(">d", value))
    return "0x" + format(bits, "016X")


def _const_text(attr: Attribute, t: Attribute) -> str:
    if isinstance(attr, IntegerAttr):
        v = int(attr.value.data)
        if isinstance(t, IntegerType) and t.width.data == 1:
            return "true" if v else "false"
        if isinstance(t, IntegerType):
            w = t.width.data
            v &= (1 << w) - 1
            if v >= 1 << (w - 1):
                v -= 1 << w
        return str(v)
    if isinstance(attr, FloatAttr):
        return _float_text(float(attr.value.data), t)
    raise EmitError(f"unsupported llvm.mlir.constant value {attr}")


_FM_ORDER = (
    FastMathFlag.REASSOC,
    FastMathFlag.NO_NANS,
    FastMathFlag.NO_INFS,
    FastMathFlag.NO_SIGNED_ZEROS,
    FastMathFlag.ALLOW_RECIP,
    FastMathFlag.ALLOW_CONTRACT,
    FastMathFlag.APPROX_FUNC,
)


def _fm_text(op: Operation) -> str:
    """The op's fast-math flags followed by a space, or empty (LLVM's order; ``fast`` when all are set)."""
    attr = op.properties.get("fastmathFlags")
    if attr is None:
        return ""
    flags = attr.data  # type: ignore[attr-defined]
    if not flags:
        return ""
    if all(f in flags for f in _FM_ORDER):
        return "fast "
    return " ".join(f.value for f in _FM_ORDER if f in flags) + " "


# --------------------------------------------------------------------------- attributes

_ARG_ATTR_ORDER = (
    ("llvm.noalias", "noalias"),
    ("llvm.nonnull", "nonnull"),
    ("llvm.noundef", "noundef"),
    ("llvm.readonly", "readonly"),
    ("llvm.writeonly", "writeonly"),
    ("llvm.align", "align"),
    ("llvm.dereferenceable", "dereferenceable"),
)
_KNOWN_ARG_ATTRS = {k for k, _ in _ARG_ATTR_ORDER}


def _param_attrs(d: Attribute | None) -> str:
    """Parameter/return attributes (from an MLIR ``llvm.*`` dictionary), each followed by a space."""
    if d is None:
        return ""
    assert isinstance(d, DictionaryAttr)
    unknown = set(d.data) - _KNOWN_ARG_ATTRS
    if unknown:
        raise EmitError(f"unsupported parameter attributes: {', '.join(sorted(unknown))}")
    out = []
    for key, word in _ARG_ATTR_ORDER:
        if key not in d.data:
            continue
        val = d.data[key]
        if isinstance(val, IntegerAttr):
            out.append(f"{word}({val.value.data})" if word == "dereferenceable" else f"{word} {val.value.data}")
        else:
            out.append(word)
    return "".join(w + " " for w in out)


def _fprop(f: llvm.FuncOp, name: str) -> Attribute | None:
    """A function property; after a round trip through text, xDSL keeps the unknown ones as attributes."""
    v = f.properties.get(name)
    return v if v is not None else f.attributes.get(name)


def _fn_attrs(f: llvm.FuncOp) -> str:
    """Function attributes printed after the parameter list (leading space), in a fixed order."""
    out: list[str] = []
    if _fprop(f, "no_inline") is not None or _fprop(f, "optimize_none") is not None:
        out.append("noinline")
    if _fprop(f, "no_unwind") is not None:
        out.append("nounwind")
    if _fprop(f, "optimize_none") is not None:
        out.append("optnone")
    passthrough = _fprop(f, "passthrough")
    if isinstance(passthrough, ArrayAttr):
        for item in passthrough.data:
            if isinstance(item, StringAttr):
                out.append(item.data)
            elif isinstance(item, ArrayAttr) and len(item.data) == 2:
                k, v = item.data
                assert isinstance(k, StringAttr) and isinstance(v, StringAttr)
                out.append(f'"{k.data}"="{v.data}"')
            else:
                raise EmitError(f"unsupported passthrough attribute {item}")
    cpu = _fprop(f, "target_cpu")
    if isinstance(cpu, StringAttr):
        out.append(f'"target-cpu"="{cpu.data}"')
    return "".join(" " + w for w in out)


_LINKAGE = {"external": "", "internal": "internal ", "private": "private ", "weak": "weak ", "linkonce": "linkonce "}

# --------------------------------------------------------------------------- instructions

_INT_BIN = {
    "llvm.add": "add",
    "llvm.sub": "sub",
    "llvm.mul": "mul",
    "llvm.udiv": "udiv",
    "llvm.sdiv": "sdiv",
    "llvm.urem": "urem",
    "llvm.srem": "srem",
    "llvm.and": "and",
    "llvm.or": "or",
    "llvm.xor": "xor",
    "llvm.shl": "shl",
    "llvm.lshr": "lshr",
    "llvm.ashr": "ashr",
}
_FLOAT_BIN = {"llvm.fadd": "fadd", "llvm.fsub": "fsub", "llvm.fmul": "fmul", "llvm.fdiv": "fdiv", "llvm.frem": "frem"}
_CASTS = {
    "llvm.trunc": "trunc",
    "llvm.zext": "zext",
    "llvm.sext": "sext",
    "llvm.fpext": "fpext",
    "llvm.fptrunc": "fptrunc",
    "llvm.sitofp": "sitofp",
    "llvm.uitofp": "uitofp",
    "llvm.fptosi": "fptosi",
    "llvm.fptoui": "fptoui",
    "llvm.bitcast": "bitcast",
    "llvm.ptrtoint": "ptrtoint",
    "llvm.inttoptr": "inttoptr",
}
# llvm.intr.* ops that are plain overloaded intrinsics on their result type.
NONTEMPORAL_MD = 0
"""Number of the ``!{i32 1}`` metadata node a streaming store's ``!nontemporal`` refers to."""
_NONTEMPORAL_TAG = f", !nontemporal !{NONTEMPORAL_MD}"


def _metadata(text: str) -> list[str]:
    """The module-level metadata nodes ``text`` refers to (defined once per module, after the functions)."""
    return [f"!{NONTEMPORAL_MD} = !{{i32 1}}"] if _NONTEMPORAL_TAG in text else []


_INTR_OVERLOADED = {
    "llvm.intr.fabs": "llvm.fabs",
    "llvm.intr.ceil": "llvm.ceil",
    "llvm.intr.sqrt": "llvm.sqrt",
    "llvm.intr.floor": "llvm.floor",
    "llvm.intr.exp2": "llvm.exp2",
    "llvm.intr.log": "llvm.log",
    "llvm.intr.exp": "llvm.exp",
    "llvm.intr.sin": "llvm.sin",
    "llvm.intr.cos": "llvm.cos",
    "llvm.intr.log2": "llvm.log2",
    "llvm.intr.maxnum": "llvm.maxnum",
    "llvm.intr.minnum": "llvm.minnum",
    "llvm.intr.copysign": "llvm.copysign",
    "llvm.intr.fma": "llvm.fma",
    "llvm.intr.pow": "llvm.pow",
}


class _FuncEmitter:
    """Prints one ``llvm.func`` definition."""

    def __init__(self, func: llvm.FuncOp, signatures: dict[str, llvm.LLVMFunctionType], intrinsics: dict[str, str]):
        self.func = func
        self.signatures = signatures
        self.intrinsics = intrinsics
        self.names: dict[SSAValue, str] = {}
        self.labels: dict[Block, str] = {}
        self.incoming: dict[Block, list[tuple[Block, Sequence[SSAValue]]]] = {}
        self.lines: list[str] = []

    # ---- naming

    def name_all(self) -> None:
        blocks = list(self.func.body.blocks)
        for k, a in enumerate(blocks[0].args):
            self.names[a] = f"%arg{k}"
        counter = 0
        for b_index, block in enumerate(blocks):
            self.labels[block] = f"bb{b_index}"
            if b_index:
                for a in block.args:
                    self.names[a] = f"%v{counter}"
                    counter += 1
            for op in block.ops:
                if isinstance(op, llvm.ConstantOp):
                    self.names[op.result] = _const_text(op.value, op.result.type)
                    continue
                if isinstance(op, llvm.ZeroOp):
                    t = op.results[0].type
                    self.names[op.results[0]] = "null" if isinstance(t, llvm.LLVMPointerType) else "zeroinitializer"
                    continue
                if isinstance(op, llvm.UndefOp):
                    self.names[op.results[0]] = "undef"
                    continue
                if isinstance(op, llvm.AddressOfOp):
                    self.names[op.result] = f"@{op.global_name.root_reference.data}"
                    continue
                for r in op.results:
                    self.names[r] = f"%v{counter}"
                    counter += 1
            term = block.last_op
            for succ, args in _successors(term):
                self.incoming.setdefault(succ, []).append((block, args))

    def ref(self, v: SSAValue) -> str:
        try:
            return self.names[v]
        except KeyError:
            raise EmitError(f"value {v} is not defined in @{self.func.sym_name.data}") from None

    def typed(self, v: SSAValue) -> str:
        return f"{type_text(v.type)} {self.ref(v)}"

    # ---- printing

    def emit(self) -> list[str]:
        self.name_all()
        f = self.func
        ft = f.function_type
        blocks = list(f.body.blocks)
        params = []
        arg_attrs = f.arg_attrs.data if f.arg_attrs is not None else [None] * len(ft.inputs.data)
        for a, attrs in zip(blocks[0].args, arg_attrs):
            params.append(f"{type_text(a.type)} {_param_attrs(attrs)}{self.ref(a)}")
        ret_attrs = _param_attrs(f.res_attrs.data[0]) if f.res_attrs is not None and f.res_attrs.data else ""
        linkage = _LINKAGE.get(f.linkage.linkage.data)
        if linkage is None:
            raise EmitError(f"unsupported linkage {f.linkage.linkage.data}")
        head = f"define {linkage}{ret_attrs}{type_text(ft.output)} @{f.sym_name.data}({', '.join(params)})"
        self.lines.append(head + _fn_attrs(f) + " {")
        for block in blocks:
            self.lines.append(f"{self.labels[block]}:")
            self.emit_phis(block)
            for op in block.ops:
                text = self.inst(op)
                if text is not None:
                    self.lines.append("  " + text)
        self.lines.append("}")
        return self.lines

    def emit_phis(self, block: Block) -> None:
        if not block.args or block is self.func.body.blocks.first:
            return
        edges = self.incoming.get(block, [])
        if not edges:
            raise EmitError(f"block {self.labels[block]} has arguments but no predecessors")
        for k, a in enumerate(block.args):
            parts = ", ".join(f"[ {self.ref(args[k])}, %{self.labels[pred]} ]" for pred, args in edges)
            self.lines.append(f"  {self.ref(a)} = phi {type_text(a.type)} {parts}")

    def res(self, op: Operation) -> str:
        return f"{self.ref(op.results[0])} = "

    def inst(self, op: Operation) -> str | None:
        name = op.name
        if isinstance(op, llvm.ConstantOp | llvm.ZeroOp | llvm.UndefOp | llvm.AddressOfOp):
            return None
        if name in _INT_BIN:
            lhs, rhs = op.operands
            flags = ""
            ov = op.properties.get("overflowFlags")
            if isinstance(ov, IntegerAttr) and ov.value.data:
                bits = ov.value.data
                flags = ("nuw " if bits & 2 else "") + ("nsw " if bits & 1 else "")
            if op.properties.get("isExact") is not None:
                flags += "exact "
            if op.properties.get("isDisjoint") is not None:
                flags += "disjoint "
            return f"{self.res(op)}{_INT_BIN[name]} {flags}{self.typed(lhs)}, {self.ref(rhs)}"
        if name in _FLOAT_BIN:
            lhs, rhs = op.operands
            return f"{self.res(op)}{_FLOAT_BIN[name]} {_fm_text(op)}{self.typed(lhs)}, {self.ref(rhs)}"
        if name == "llvm.fneg":
            return f"{self.res(op)}fneg {_fm_text(op)}{self.typed(op.operands[0])}"
        if name in _CASTS:
            (arg,) = op.operands
            nneg = "nneg " if op.properties.get("nonNeg") is not None else ""
            return f"{self.res(op)}{_CASTS[name]} {nneg}{self.typed(arg)} to {type_text(op.results[0].type)}"
        if isinstance(op, llvm.ICmpOp):
            pred = llvm.ICmpPredicateFlag.from_int(op.predicate.value.data).value
            return f"{self.res(op)}icmp {pred} {self.typed(op.lhs)}, {self.ref(op.rhs)}"
        if isinstance(op, llvm.FCmpOp):
            pred = llvm.FCmpPredicateFlag.from_int(op.predicate.value.data).value.lstrip("_")
            return f"{self.res(op)}fcmp {_fm_text(op)}{pred} {self.typed(op.lhs)}, {self.ref(op.rhs)}"
        if isinstance(op, llvm.SelectOp):
            return (
                f"{self.res(op)}select {_fm_text(op)}{self.typed(op.cond)}, {self.typed(op.lhs)}, {self.typed(op.rhs)}"
            )
        if isinstance(op, llvm.GEPOp):
            return self.gep(op)
        if isinstance(op, llvm.LoadOp):
            align = f", align {op.alignment.value.data}" if op.alignment is not None else ""
            return f"{self.res(op)}load {type_text(op.dereferenced_value.type)}, {self.typed(op.ptr)}{align}"
        if isinstance(op, llvm.StoreOp):
            align = f", align {op.alignment.value.data}" if op.alignment is not None else ""
            vol = "volatile " if op.volatile_ is not None else ""
            nt = _NONTEMPORAL_TAG if op.nontemporal is not None else ""
            return f"store {vol}{self.typed(op.value)}, {self.typed(op.ptr)}{align}{nt}"
        if isinstance(op, FenceOp):
            return f"fence {op.ordering.data}"
        if isinstance(op, llvm.AllocaOp):
            align = f", align {op.alignment.value.data}" if op.alignment is not None else ""
            return f"{self.res(op)}alloca {type_text(op.elem_type)}, {self.typed(op.size)}{align}"
        if isinstance(op, llvm.CallOp):
            return self.call(op)
        if isinstance(op, llvm.CallIntrinsicOp):
            ret = op.ress.type if op.ress is not None else llvm.LLVMVoidType()
            return self.intrinsic_call(op, op.intrin.data, list(op.args), ret)
        if name in _INTR_OVERLOADED:
            ret = op.results[0].type
            return self.intrinsic_call(op, f"{_INTR_OVERLOADED[name]}.{mangle(ret)}", list(op.operands), ret)
        if isinstance(op, llvm.BrOp):
            return f"br label %{self.labels[op.successor]}"
        if isinstance(op, llvm.CondBrOp):
            return f"br {self.typed(op.cond)}, label %{self.labels[op.then_block]}, label %{self.labels[op.else_block]}"
        if isinstance(op, llvm.ReturnOp):
            return "ret void" if op.arg is None else f"ret {self.typed(op.arg)}"
        if isinstance(op, llvm.UnreachableOp):
            return "unreachable"
        raise EmitError(f"cannot emit {name} as LLVM IR")

    def gep(self, op: llvm.GEPOp) -> str:
        ssa = iter(op.ssa_indices)
        parts = []
        current: Attribute | None = None
        for k, raw in enumerate(op.rawConstantIndices.iter_values()):
            struct_field = isinstance(current, llvm.LLVMStructType)
            if raw == llvm.GEP_USE_SSA_VAL:
                parts.append(self.typed(next(ssa)))
            else:
                parts.append(f"{'i32' if struct_field else 'i64'} {raw}")
            if k == 0:
                current = op.elem_type
            elif isinstance(current, llvm.LLVMArrayType):
                current = current.type
            elif isinstance(current, llvm.LLVMStructType):
                current = current.types.data[raw]
        inb = "inbounds " if op.inbounds is not None else ""
        idx = "".join(", " + p for p in parts)
        return f"{self.res(op)}getelementptr {inb}{type_text(op.elem_type)}, {self.typed(op.ptr)}{idx}"

    def call(self, op: llvm.CallOp) -> str:
        if op.callee is None:
            raise EmitError("indirect llvm.call is not supported")
        assert isinstance(op.callee, SymbolRefAttr)
        callee = op.callee.root_reference.data
        sig = self.signatures.get(callee)
        if sig is None:
            raise EmitError(f"llvm.call to @{callee}, which the module does not declare")
        ret = type_text(sig.output)
        args = ", ".join(self.typed(a) for a in op.args)
        prefix = self.res(op) if op.returned is not None else ""
        return f"{prefix}call {_fm_text(op)}{ret} @{callee}({args})"

    def intrinsic_call(self, op: Operation, name: str, args: list[SSAValue], ret: Attribute) -> str:
        decl = f"declare {type_text(ret)} @{name}({', '.join(type_text(a.type) for a in args)})"
        old = self.intrinsics.setdefault(name, decl)
        if old != decl:
            raise EmitError(f"intrinsic @{name} used with two signatures: {old!r} and {decl!r}")
        prefix = self.res(op) if op.results else ""
        return f"{prefix}call {_fm_text(op)}{type_text(ret)} @{name}({', '.join(self.typed(a) for a in args)})"


def _successors(op: Operation | None) -> list[tuple[Block, Sequence[SSAValue]]]:
    if isinstance(op, llvm.BrOp):
        return [(op.successor, list(op.arguments))]
    if isinstance(op, llvm.CondBrOp):
        return [(op.then_block, list(op.then_arguments)), (op.else_block, list(op.else_arguments))]
    return []


def _declaration(f: llvm.FuncOp) -> str:
    ft = f.function_type
    arg_attrs = f.arg_attrs.data if f.arg_attrs is not None else [None] * len(ft.inputs.data)
    params = ", ".join(f"{type_text(t)} {_param_attrs(a)}".rstrip() for t, a in zip(ft.inputs.data, arg_attrs))
    if ft.is_variadic:
        params += ", ..." if params else "..."
    ret_attrs = _param_attrs(f.res_attrs.data[0]) if f.res_attrs is not None and f.res_attrs.data else ""
    return f"declare {ret_attrs}{type_text(ft.output)} @{f.sym_name.data}({params}){_fn_attrs(f)}"


def emit_llvm_ir(
    module: ModuleOp, *, module_id: str = "fuse_mlir", triple: str | None = None, data_layout: str | None = None
) -> str:
    """LLVM IR text of an llvm-dialect module (functions and declarations only; no globals yet)."""
    lines = [f"; ModuleID = '{module_id}'", f'source_filename = "{module_id}"']
    if data_layout:
        lines.append(f'target datalayout = "{data_layout}"')
    if triple:
        lines.append(f'target triple = "{triple}"')
    funcs: list[llvm.FuncOp] = []
    for op in module.body.block.ops:
        if not isinstance(op, llvm.FuncOp):
            raise EmitError(f"cannot emit top-level {op.name} as LLVM IR")
        funcs.append(op)
    signatures = {f.sym_name.data: f.function_type for f in funcs}
    intrinsics: dict[str, str] = {}
    for f in funcs:
        lines.append("")
        if not f.body.blocks:
            lines.append(_declaration(f))
        else:
            lines.extend(_FuncEmitter(f, signatures, intrinsics).emit())
    if intrinsics:
        lines.append("")
        lines.extend(intrinsics[k] for k in sorted(intrinsics))
    metadata = _metadata("\n".join(lines))
    if metadata:
        lines.append("")
        lines.extend(metadata)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Unit:
    """One separately compiled piece of a program: a function's LLVM IR with declarations of what it calls.

    ``name`` is the function it defines: ``fuse_main`` for the entry, else
    ``fk_`` and a digest of the function's own text (its callees renamed the
    same way first), so the same kernel has the same name, and the same
    object code, in every program and at every position.
    """

    name: str
    ir: str
    loop_depth: int = 0  # how deeply the function's loops nest (fuse.loop_depth of an outlined nest, else 0)
    source: str = ""  # the module's function it was emitted from (the first one, when equal kernels share it)


_SYMBOL = re.compile(r"@([A-Za-z_.$][\w.$]*)")


def emit_llvm_units(module: ModuleOp, *, entry: str = "fuse_main") -> list[Unit]:
    """The module as compilation units, one per defined function (callees first, ``entry`` last; equal kernels
    once). LLVM's cost per unit does not grow with the program, and unchanged kernels keep their names, hence
    their cache keys, when the program around them changes (docs/optimisation.md, per-kernel compilation)."""
    funcs = [op for op in module.body.block.ops if isinstance(op, llvm.FuncOp)]
    if len(funcs) != len(module.body.block.ops):
        raise EmitError("cannot split a module with top-level ops other than llvm.func")
    signatures = {f.sym_name.data: f.function_type for f in funcs}
    by_name = {f.sym_name.data: f for f in funcs}
    bodies: dict[str, tuple[str, dict[str, str]]] = {}
    for f in funcs:
        if f.body.blocks:
            intrinsics: dict[str, str] = {}
            lines = _FuncEmitter(f, signatures, intrinsics).emit()
            head = lines[0].replace("define internal ", "define ", 1).replace("define private ", "define ", 1)
            bodies[f.sym_name.data] = ("\n".join([head, *lines[1:]]), intrinsics)
    if entry not in bodies:
        raise EmitError(f"the module defines no @{entry}")
    renamed: dict[str, str] = {}
    units: dict[str, Unit] = {}

    def unit_of(name: str, stack: tuple[str, ...] = ()) -> str:
        if name in renamed:
            return renamed[name]
        if name in stack:
            raise EmitError(f"@{name} calls itself (through {' -> '.join(stack)}): kernels are not recursive")
        text, intrinsics = bodies[name]
        refs = sorted({m for m in _SYMBOL.findall(text) if m != name and m not in intrinsics})
        new = {r: unit_of(r, (*stack, name)) for r in refs if r in bodies}
        decls: dict[str, str] = {}  # by final name: two equal kernels are one function
        for r in refs:
            f = by_name.get(r)
            if f is None:
                raise EmitError(f"@{name} refers to @{r}, which the module does not declare")
            decls.setdefault(new.get(r, r), _declaration(f).replace(f"@{r}(", f"@{new.get(r, r)}(", 1))
        lines = [decls[k] for k in sorted(decls)] + [intrinsics[k] for k in sorted(intrinsics)]
        own = name if name == entry else "\x00self"
        body = _SYMBOL.sub(lambda m: "@" + (own if m.group(1) == name else new.get(m.group(1), m.group(1))), text)
        ir = "\n".join([*lines, "", body, *_metadata(body)]) + "\n"
        if name != entry:
            final = "fk_" + hashlib.sha256(ir.encode()).hexdigest()[:24]
            ir = ir.replace("\x00self", final)
        else:
            final = name
        renamed[name] = final
        depth = by_name[name].attributes.get(LOOP_DEPTH)
        units.setdefault(final, Unit(final, ir, depth.value.data if isinstance(depth, IntegerAttr) else 0, name))
        return final

    unit_of(entry)
    for name in bodies:  # functions the entry never reaches still get compiled (as before), after it
        unit_of(name)
    ordered = [u for n, u in units.items() if n != entry]
    return [*ordered, units[entry]]
