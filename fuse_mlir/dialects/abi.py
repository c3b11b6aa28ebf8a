"""The native ABI of a loop-level module, in one place: its tables, slot layout, ids and error codes.

A loop module (``func.func @fuse_main`` over buffers) carries what a caller needs in module attributes, arrays of
typed ``fuse`` attributes (the :data:`Fuse` dialect; each verifies its own shape):

- ``fuse.args``: one ``#fuse.arg<"X", input>`` (or ``source``) per argument slot, or
  ``#fuse.arg<"C", constant dense<...> : tensor<...>>`` for a constant whose value rides in the table (``... as
  f64`` when a non-finite float constant is kept bit for bit as integers);
- ``fuse.results``: one ``#fuse.result<"Y", export>`` or ``#fuse.result<"path", sink 0, "value", "loc">`` per
  result slot (the values of one ``te.sink`` share its number, 0 here);
- ``fuse.errors``: ``#fuse.error<"message", "loc">`` per error code (code k is entry k - 1; ``loop.check``
  returns it);
- ``fuse.host_calls``: ``#fuse.host_call<"fn", {params}>`` per ``loop.host_call`` id;
- ``fuse.reuse``: ``#fuse.reuse<alloc id, "input">``: a ``loop.alloc`` a donated input's buffer may back;
- ``fuse.checked``: present on a bounds-checked build.

:class:`LoopAbi` is the one typed reader (:meth:`LoopAbi.read`) and writer (:meth:`LoopAbi.write`) of those
tables; every producer (lower-ew-to-loop, check-bounds) and consumer (the runtime, the executors, the loop
interpreter, the numba renderer, lower-loop-to-llvm) goes through it. The slot layout (:func:`abi_layout`), the
alloc and host-call ids and the return codes of ``fuse_main`` live here too. docs/native-abi.md describes the
calling convention built on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import auto
from typing import TypeVar

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    StringAttr,
)
from xdsl.dialects.func import FuncOp
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Block, Dialect, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from fuse_mlir.diagnostics import Loc
from fuse_mlir.dialects import loop
from fuse_mlir.dialects import tensor_eq as te

ENTRY = "fuse_main"
"""The entry function of a loop module and of its native code."""


def entry_block(module: ModuleOp) -> Block | None:
    """The body of the module's ``@fuse_main`` (the top-level kernels the loop-level passes rewrite), if any."""
    for op in module.body.block.ops:
        if isinstance(op, FuncOp) and op.sym_name.data == ENTRY and op.body.blocks:
            return op.body.blocks[0]
    return None


ERR_HOST_CALL = -1
"""Return code of ``fuse_main`` when a host call reported failure."""
ERR_ALLOC = -2
"""Return code of ``fuse_main`` when ``fuse_alloc`` returned NULL (``err = [ERR_ALLOC, nbytes, alloc_id]``)."""
ERR_LAYOUT = -3
"""Return code of ``fuse_enter`` when an argument is not C-contiguous and aligned."""
ERR_SIZE = -4
"""Return code of ``fuse_main`` when a buffer's byte size would pass 2^63 - 1 (``err = [ERR_SIZE, alloc_id, 0]``)."""

ARGS, RESULTS, ERRORS, HOST_CALLS, REUSE, CHECKED = (
    "fuse.args",
    "fuse.results",
    "fuse.errors",
    "fuse.host_calls",
    "fuse.reuse",
    "fuse.checked",
)
ARG_KINDS = ("input", "source", "constant")
RESULT_KINDS = ("export", "sink")


class AbiError(ValueError):
    """A malformed ABI table: which attribute, and what was expected (a compiler bug or a hand-written module)."""


def _entries(module: ModuleOp, name: str) -> list[Attribute] | None:
    attr = module.attributes.get(name)
    if attr is None:
        return None
    if not isinstance(attr, ArrayAttr):
        raise AbiError(f"{name}: expected an array, got {attr}")
    return list(attr.data)


_A = TypeVar("_A", bound=Attribute)
_FLOAT_TYPES = (Float16Type, Float32Type, Float64Type)


def _typed(entry: Attribute, cls: type[_A], table: str) -> _A:
    if not isinstance(entry, cls):
        raise AbiError(f"{table}: expected #{cls.name} entries, got {entry}")
    return entry


# --------------------------------------------------------------------------- the typed table attributes


class ArgKind(StrEnum):
    """What fills an argument slot: a caller's input, a persistent source, or a constant held in the table."""

    INPUT = auto()
    SOURCE = auto()
    CONSTANT = auto()


class ResultKind(StrEnum):
    """What a result slot holds: an exported tensor, or one value a ``te.sink`` writes."""

    EXPORT = auto()
    SINK = auto()


@irdl_attr_definition
class ArgKindAttr(EnumAttribute[ArgKind]):
    """The kind of an argument slot (a parameter of ``#fuse.arg``; never written on its own)."""

    name = "fuse.arg_kind"


@irdl_attr_definition
class ResultKindAttr(EnumAttribute[ResultKind]):
    """The kind of a result slot (a parameter of ``#fuse.result``; never written on its own)."""

    name = "fuse.result_kind"


@irdl_attr_definition
class ArgAttr(ParametrizedAttribute):
    """One ``fuse.args`` entry: ``#fuse.arg<"X", input>``, ``#fuse.arg<"C", constant dense<..> : tensor<..>>``.

    A constant's value may be absent; ``as f64`` follows an integer value that holds a float constant's bits.
    """

    name = "fuse.arg"

    slot: StringAttr
    kind: ArgKindAttr
    dense: Attribute  # a DenseIntOrFPElementsAttr, or NoneAttr
    float_type: Attribute  # the float type ``dense`` holds the bits of, or NoneAttr

    def verify(self) -> None:
        if not isinstance(self.dense, DenseIntOrFPElementsAttr | NoneAttr):
            raise VerifyException(f"#fuse.arg: a constant's value is a dense attribute, got {self.dense}")
        if isinstance(self.dense, DenseIntOrFPElementsAttr) and self.kind.data != ArgKind.CONSTANT:
            raise VerifyException(f"#fuse.arg: only a constant slot holds a value, not a {self.kind.data} slot")
        if isinstance(self.float_type, NoneAttr):
            return
        element = self.dense.type.get_element_type() if isinstance(self.dense, DenseIntOrFPElementsAttr) else None
        if not isinstance(element, IntegerType) or not isinstance(self.float_type, _FLOAT_TYPES):
            raise VerifyException("#fuse.arg: 'as <float type>' follows an integer dense value holding its bits")
        if te.np_dtype(self.float_type).itemsize * 8 != element.width.data:
            raise VerifyException(f"#fuse.arg: {element} bits cannot hold {self.float_type}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            slot = parser.parse_str_literal(" (the slot's name)")
            parser.parse_punctuation(",")
            kind = ArgKind(parser.parse_str_enum(ArgKind))
            dense: Attribute = NoneAttr()
            float_type: Attribute = NoneAttr()
            if kind == ArgKind.CONSTANT and (value := parser.parse_optional_attribute()) is not None:
                dense = value
                if parser.parse_optional_keyword("as") is not None:
                    float_type = parser.parse_type()
        return (StringAttr(slot), ArgKindAttr(kind), dense, float_type)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(self.slot.data)
            printer.print_string(f", {self.kind.data}")
            if not isinstance(self.dense, NoneAttr):
                printer.print_string(" ")
                printer.print_attribute(self.dense)
            if not isinstance(self.float_type, NoneAttr):
                printer.print_string(" as ")
                printer.print_attribute(self.float_type)


@irdl_attr_definition
class ResultAttr(ParametrizedAttribute):
    """One ``fuse.results`` entry: ``#fuse.result<"Y", export>`` or ``#fuse.result<"path", sink 0, "v", "loc">``."""

    name = "fuse.result"

    slot: StringAttr
    kind: ResultKindAttr
    sink: IntAttr  # a sink's number (-1 for an export)
    value_name: StringAttr  # a sink's tensor ("" for an export)
    loc: StringAttr  # a sink's source location, Loc.encode text ("" for an export)

    def verify(self) -> None:
        if self.kind.data == ResultKind.EXPORT and (self.sink.data != -1 or self.value_name.data or self.loc.data):
            raise VerifyException("#fuse.result: an export slot has no sink number, value or location")
        if self.kind.data == ResultKind.SINK and self.sink.data < 0:
            raise VerifyException(f"#fuse.result: a sink number is 0 or more, got {self.sink.data}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            slot = parser.parse_str_literal(" (the slot's name)")
            parser.parse_punctuation(",")
            kind = ResultKind(parser.parse_str_enum(ResultKind))
            sink, value, loc = -1, "", ""
            if kind == ResultKind.SINK:
                sink = parser.parse_integer(False, False, " (the sink's number)")
                parser.parse_punctuation(",")
                value = parser.parse_str_literal(" (the sink's value name)")
                parser.parse_punctuation(",")
                loc = parser.parse_str_literal(" (the sink's location)")
        return (StringAttr(slot), ResultKindAttr(kind), IntAttr(sink), StringAttr(value), StringAttr(loc))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(self.slot.data)
            printer.print_string(f", {self.kind.data}")
            if self.kind.data == ResultKind.SINK:
                printer.print_string(f" {self.sink.data}, ")
                printer.print_string_literal(self.value_name.data)
                printer.print_string(", ")
                printer.print_string_literal(self.loc.data)


@irdl_attr_definition
class ErrorAttr(ParametrizedAttribute):
    """One ``fuse.errors`` entry: ``#fuse.error<"message", "loc">`` (the location may be "")."""

    name = "fuse.error"

    message: StringAttr
    loc: StringAttr


@irdl_attr_definition
class HostCallAttr(ParametrizedAttribute):
    """One ``fuse.host_calls`` entry: ``#fuse.host_call<"concat", {axis = 1 : i64}>``."""

    name = "fuse.host_call"

    fn: StringAttr
    params: DictionaryAttr


@irdl_attr_definition
class ReuseAttr(ParametrizedAttribute):
    """One ``fuse.reuse`` entry: ``#fuse.reuse<3, "X">``, the ``loop.alloc`` id 3 a donated ``X`` may back."""

    name = "fuse.reuse"

    alloc: IntAttr
    input: StringAttr

    def verify(self) -> None:
        if self.alloc.data < 0:
            raise VerifyException(f"#fuse.reuse: an alloc id is 0 or more, got {self.alloc.data}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            alloc = parser.parse_integer(False, False, " (a loop.alloc id)")
            parser.parse_punctuation(",")
            name = parser.parse_str_literal(" (the donated input's name)")
        return (IntAttr(alloc), StringAttr(name))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(f"{self.alloc.data}, ")
            printer.print_string_literal(self.input.data)


Fuse = Dialect("fuse", [], [ArgKindAttr, ResultKindAttr, ArgAttr, ResultAttr, ErrorAttr, HostCallAttr, ReuseAttr])
"""The attributes of a loop module's ABI tables (loaded by ``ir.make_context``)."""


# --------------------------------------------------------------------------- table entries


@dataclass(frozen=True)
class ArgEntry:
    """One argument slot: its name and kind; a constant also holds its value (``dense``, see :meth:`constant`)."""

    name: str
    kind: str
    dense: DenseIntOrFPElementsAttr | None = None
    float_type: Attribute | None = None  # set when ``dense`` holds a float constant's bits as integers

    @classmethod
    def constant(cls, name: str, value: DenseIntOrFPElementsAttr) -> ArgEntry:
        """The entry of a constant.

        xDSL prints non-finite floats of a dense attribute as hex integers that
        it then reads back as (wrong) finite numbers, so a float constant holding
        inf/NaN is stored bit for bit as a same-width integer dense attribute,
        with its float type as a fourth element.
        """
        arr = te.dense_value(value)
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            bits = arr.view(np.dtype(f"i{arr.dtype.itemsize}"))
            return cls(name, "constant", te.dense_attr(bits), value.type.get_element_type())
        return cls(name, "constant", value)

    def value(self) -> np.ndarray | None:
        """The array of a constant entry (None for other kinds, or a constant without its value in the table)."""
        if self.dense is None:
            return None
        arr = te.dense_value(self.dense)
        return arr.view(te.np_dtype(self.float_type)) if self.float_type is not None else arr

    def to_attr(self) -> ArgAttr:
        return ArgAttr(
            StringAttr(self.name),
            ArgKindAttr(ArgKind(self.kind)),
            NoneAttr() if self.dense is None else self.dense,
            NoneAttr() if self.float_type is None else self.float_type,
        )

    @classmethod
    def from_attr(cls, entry: Attribute) -> ArgEntry:
        a = _typed(entry, ArgAttr, ARGS)
        dense = a.dense if isinstance(a.dense, DenseIntOrFPElementsAttr) else None
        return cls(a.slot.data, a.kind.data, dense, None if isinstance(a.float_type, NoneAttr) else a.float_type)


@dataclass(frozen=True)
class ResultEntry:
    """One result slot: an export (``name``) or one value of a sink (``name`` is the path)."""

    name: str
    kind: str = "export"
    value_name: str = ""  # a sink's tensor (an export's is its name)
    loc: str = ""  # a sink's source location (Loc.encode text)
    sink: int = -1  # a sink's number: the values of one te.sink share it

    @property
    def tensor(self) -> str:
        """The tensor the slot holds."""
        return self.value_name if self.kind == "sink" else self.name

    def location(self) -> Loc | None:
        return _decode_loc(self.loc)

    def to_attr(self) -> ResultAttr:
        return ResultAttr(
            StringAttr(self.name),
            ResultKindAttr(ResultKind(self.kind)),
            IntAttr(self.sink),
            StringAttr(self.value_name),
            StringAttr(self.loc),
        )

    @classmethod
    def from_attr(cls, entry: Attribute) -> ResultEntry:
        r = _typed(entry, ResultAttr, RESULTS)
        return cls(r.slot.data, r.kind.data, r.value_name.data, r.loc.data, r.sink.data)


@dataclass(frozen=True)
class ErrorEntry:
    """One error code's message (``str.format`` with the two values ``loop.check`` reports) and location."""

    message: str
    loc: str = ""

    def location(self) -> Loc | None:
        return _decode_loc(self.loc)

    def to_attr(self) -> ErrorAttr:
        return ErrorAttr(StringAttr(self.message), StringAttr(self.loc))

    @classmethod
    def from_attr(cls, entry: Attribute) -> ErrorEntry:
        e = _typed(entry, ErrorAttr, ERRORS)
        return cls(e.message.data, e.loc.data)


@dataclass(frozen=True)
class HostCallEntry:
    """One host call: the builtin ``fn`` and its parameters (an attribute dictionary; :meth:`param_values`)."""

    fn: str
    params: DictionaryAttr = field(default_factory=lambda: DictionaryAttr({}))

    def param_values(self) -> dict[str, object]:
        return te.params_of(self.params)

    def to_attr(self) -> HostCallAttr:
        return HostCallAttr(StringAttr(self.fn), self.params)

    @classmethod
    def from_attr(cls, entry: Attribute) -> HostCallEntry:
        h = _typed(entry, HostCallAttr, HOST_CALLS)
        return cls(h.fn.data, h.params)


@dataclass(frozen=True)
class ReuseEntry:
    """A ``loop.alloc`` (by id) whose buffer a donated input (by name) may back."""

    alloc: int
    input: str

    def to_attr(self) -> ReuseAttr:
        return ReuseAttr(IntAttr(self.alloc), StringAttr(self.input))

    @classmethod
    def from_attr(cls, entry: Attribute) -> ReuseEntry:
        r = _typed(entry, ReuseAttr, REUSE)
        return cls(r.alloc.data, r.input.data)


def _decode_loc(text: str) -> Loc | None:
    if not text:
        return None
    try:
        return Loc.decode(text)
    except ValueError:
        return None


# --------------------------------------------------------------------------- the tables together


@dataclass
class LoopAbi:
    """The ABI tables of a loop module; ``args``/``results`` are None when the module has no such table
    (a hand-written module: every slot is then an input, results are numbered)."""

    args: list[ArgEntry] | None = None
    results: list[ResultEntry] | None = None
    errors: list[ErrorEntry] = field(default_factory=list)
    host_calls: list[HostCallEntry] = field(default_factory=list)
    reuse: list[ReuseEntry] = field(default_factory=list)
    checked: bool = False

    absent: frozenset[str] = frozenset()  # error/host-call tables the module read had not: not written while empty

    @classmethod
    def read(cls, module: ModuleOp) -> LoopAbi:
        """The tables of ``module`` (an :class:`AbiError` names a malformed one)."""
        args = _entries(module, ARGS)
        results = _entries(module, RESULTS)
        return cls(
            args=None if args is None else [ArgEntry.from_attr(e) for e in args],
            results=None if results is None else [ResultEntry.from_attr(e) for e in results],
            errors=[ErrorEntry.from_attr(e) for e in _entries(module, ERRORS) or ()],
            host_calls=[HostCallEntry.from_attr(e) for e in _entries(module, HOST_CALLS) or ()],
            reuse=[ReuseEntry.from_attr(e) for e in _entries(module, REUSE) or ()],
            checked=CHECKED in module.attributes,
            absent=frozenset(n for n in (ERRORS, HOST_CALLS) if n not in module.attributes),
        )

    def attributes(self) -> dict[str, Attribute]:
        """The tables as module attributes, in the order the loop module prints them."""
        out: dict[str, Attribute] = {}
        if self.args is not None:
            out[ARGS] = ArrayAttr([a.to_attr() for a in self.args])
        if self.results is not None:
            out[RESULTS] = ArrayAttr([r.to_attr() for r in self.results])
        if self.errors or ERRORS not in self.absent:
            out[ERRORS] = ArrayAttr([e.to_attr() for e in self.errors])
        if self.host_calls or HOST_CALLS not in self.absent:
            out[HOST_CALLS] = ArrayAttr([h.to_attr() for h in self.host_calls])
        if self.reuse:
            out[REUSE] = ArrayAttr([r.to_attr() for r in self.reuse])
        if self.checked:
            out[CHECKED] = StringAttr("bounds")
        return out

    def write(self, module: ModuleOp) -> None:
        """Set the tables on ``module``, replacing those it had (a table this record lacks is removed)."""
        attrs = self.attributes()
        for name in (ARGS, RESULTS, ERRORS, HOST_CALLS, REUSE, CHECKED):
            if name not in attrs:
                module.attributes.pop(name, None)
        module.attributes.update(attrs)

    def arg_names(self, n_slots: int) -> list[str]:
        """The name of each argument slot (``argK`` without a ``fuse.args`` table)."""
        if self.args is None:
            return [f"arg{k}" for k in range(n_slots)]
        return [a.name for a in self.args]

    def result_names(self, n_slots: int) -> list[str]:
        """The name of each result slot (``resultK`` without a ``fuse.results`` table)."""
        if self.results is None:
            return [f"result{k}" for k in range(n_slots)]
        return [r.name for r in self.results]

    def error(self, code: int) -> ErrorEntry:
        """The entry of a positive error code returned by a ``loop.check``."""
        return self.errors[code - 1]


# --------------------------------------------------------------------------- slot layout and ids


@dataclass(frozen=True)
class AbiLayout:
    """Where each slot's extents live in ``arg_shapes`` / ``result_shapes``."""

    arg_types: tuple[MemRefType | None, ...]
    arg_offsets: tuple[int, ...]
    result_types: tuple[MemRefType | None, ...]
    result_offsets: tuple[int, ...]

    @property
    def n_arg_extents(self) -> int:
        return _total(self.arg_types)

    @property
    def n_result_extents(self) -> int:
        return _total(self.result_types)


def _total(types: Sequence[MemRefType | None]) -> int:
    return sum(len(t.get_shape()) for t in types if t is not None)


def _slot_types(ops: Sequence[loop.ArgOp | loop.ResultOp], count: int, what: str) -> list[MemRefType | None]:
    types: list[MemRefType | None] = [None] * count
    for op in ops:
        slot = op.slot.value.data
        t = op.result.type if isinstance(op, loop.ArgOp) else op.buffer.type
        assert isinstance(t, MemRefType)
        if slot < 0:
            raise ValueError(f"{op.name}: negative slot {slot}")
        if slot >= len(types):
            types.extend([None] * (slot + 1 - len(types)))
        old = types[slot]
        if old is not None and old != t:
            raise ValueError(f"{what} slot {slot} used with two types: {old} and {t}")
        types[slot] = t
    return types


def _offsets(types: Sequence[MemRefType | None]) -> tuple[int, ...]:
    out, at = [], 0
    for t in types:
        out.append(at)
        at += 0 if t is None else len(t.get_shape())
    return tuple(out)


def _table_len(module: ModuleOp, name: str) -> int:
    a = module.attributes.get(name)
    return len(a.data) if isinstance(a, ArrayAttr) else 0


def abi_layout(module: ModuleOp) -> AbiLayout:
    """The slots of a loop-level module: their memref types (from ``loop.arg``/``loop.result``) and extent offsets.

    The slot counts come from ``fuse.args``/``fuse.results`` when present
    (otherwise the highest slot used + 1); a slot no op touches has type None
    and contributes no extents.
    """
    args = [op for op in module.walk() if isinstance(op, loop.ArgOp)]
    results = [op for op in module.walk() if isinstance(op, loop.ResultOp)]
    at = _slot_types(args, _table_len(module, ARGS), "argument")
    rt = _slot_types(results, _table_len(module, RESULTS), "result")
    return AbiLayout(tuple(at), _offsets(at), tuple(rt), _offsets(rt))


def host_call_id(op: loop.HostCallOp, position: int) -> int:
    """The index of a host call into ``fuse.host_calls``: its ``id`` attribute, else its position in walk order."""
    a = op.attributes.get("id")
    return a.value.data if isinstance(a, IntegerAttr) else position


def alloc_id(op: loop.AllocOp, position: int) -> int:
    """The arena slot of a ``loop.alloc`` (passed to ``fuse_alloc``): its ``id`` attribute, else its walk position."""
    a = op.attributes.get("id")
    return a.value.data if isinstance(a, IntegerAttr) else position


def reuse_table(module: ModuleOp) -> list[tuple[int, str]]:
    """The ``fuse.reuse`` entries of a loop-level module: (alloc id, input name) pairs a donated input may back."""
    return [(r.alloc, r.input) for r in (ReuseEntry.from_attr(e) for e in _entries(module, REUSE) or ())]


__all__ = [
    "ENTRY",
    "ERR_ALLOC",
    "ERR_HOST_CALL",
    "ERR_LAYOUT",
    "ERR_SIZE",
    "AbiError",
    "AbiLayout",
    "ArgAttr",
    "ArgEntry",
    "ArgKind",
    "ErrorAttr",
    "Fuse",
    "HostCallAttr",
    "ResultAttr",
    "ResultKind",
    "ReuseAttr",
    "ErrorEntry",
    "HostCallEntry",
    "LoopAbi",
    "ResultEntry",
    "ReuseEntry",
    "abi_layout",
    "alloc_id",
    "host_call_id",
    "reuse_table",
]
