"""The native ABI of a loop-level module, in one place: its tables, slot layout, ids and error codes.

A loop module (``func.func @fuse_main`` over buffers) carries what a caller needs in module attributes:

- ``fuse.args``: one entry per argument slot, ``[name, kind]`` with kind ``input`` or ``source``, or
  ``[name, "constant", dense(, float type)]`` for a constant whose value rides in the table;
- ``fuse.results``: one entry per result slot, ``[name, "export"]`` or ``[path, "sink", value name, loc,
  sink number]`` (the values of one ``te.sink`` share its number);
- ``fuse.errors``: ``[message, loc]`` per error code (code k is entry k - 1; ``loop.check`` returns it);
- ``fuse.host_calls``: ``{fn, params}`` per ``loop.host_call`` id;
- ``fuse.reuse``: ``[alloc id, input name]`` pairs a donated input's buffer may back;
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

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute

from fuse_mlir.diagnostics import Loc
from fuse_mlir.dialects import loop
from fuse_mlir.dialects import tensor_eq as te

ENTRY = "fuse_main"
"""The entry function of a loop module and of its native code."""
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


def _str(a: Attribute, what: str) -> str:
    if not isinstance(a, StringAttr):
        raise AbiError(f"{what}: expected a string, got {a}")
    return a.data


def _int(a: Attribute, what: str) -> int:
    if not isinstance(a, IntegerAttr):
        raise AbiError(f"{what}: expected an integer, got {a}")
    return a.value.data


def _entries(module: ModuleOp, name: str) -> list[Attribute] | None:
    attr = module.attributes.get(name)
    if attr is None:
        return None
    if not isinstance(attr, ArrayAttr):
        raise AbiError(f"{name}: expected an array, got {attr}")
    return list(attr.data)


def _parts(entry: Attribute, what: str) -> tuple[Attribute, ...]:
    if not isinstance(entry, ArrayAttr):
        raise AbiError(f"{what}: expected an array entry, got {entry}")
    return tuple(entry.data)


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

    def to_attr(self) -> ArrayAttr:
        parts: list[Attribute] = [StringAttr(self.name), StringAttr(self.kind)]
        if self.dense is not None:
            parts.append(self.dense)
            if self.float_type is not None:
                parts.append(self.float_type)
        return ArrayAttr(parts)

    @classmethod
    def from_attr(cls, entry: Attribute) -> ArgEntry:
        parts = _parts(entry, ARGS)
        if len(parts) < 2:
            raise AbiError(f"{ARGS}: expected [name, kind, ...], got {entry}")
        name, kind = _str(parts[0], ARGS), _str(parts[1], ARGS)
        if kind not in ARG_KINDS:
            raise AbiError(f"{ARGS}: unknown slot kind '{kind}' (kinds: {', '.join(ARG_KINDS)})")
        dense = parts[2] if len(parts) > 2 else None
        if dense is not None and not isinstance(dense, DenseIntOrFPElementsAttr):
            raise AbiError(f"{ARGS}: constant '{name}' needs a dense value, got {dense}")
        return cls(name, kind, dense, parts[3] if len(parts) > 3 else None)


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

    def to_attr(self) -> ArrayAttr:
        if self.kind == "export":
            return ArrayAttr([StringAttr(self.name), StringAttr("export")])
        return ArrayAttr(
            [
                StringAttr(self.name),
                StringAttr("sink"),
                StringAttr(self.value_name),
                StringAttr(self.loc),
                IntegerAttr(self.sink, i64),
            ]
        )

    @classmethod
    def from_attr(cls, entry: Attribute, position: int) -> ResultEntry:
        parts = _parts(entry, RESULTS)
        if len(parts) < 2:
            raise AbiError(f"{RESULTS}: expected [name, kind, ...], got {entry}")
        name, kind = _str(parts[0], RESULTS), _str(parts[1], RESULTS)
        if kind == "export":
            return cls(name)
        if kind != "sink":
            raise AbiError(f"{RESULTS}: unknown result kind '{kind}' (kinds: {', '.join(RESULT_KINDS)})")
        value = _str(parts[2], RESULTS) if len(parts) > 2 else name
        loc = _str(parts[3], RESULTS) if len(parts) > 3 else ""
        sink = _int(parts[4], RESULTS) if len(parts) > 4 else position
        return cls(name, "sink", value, loc, sink)


@dataclass(frozen=True)
class ErrorEntry:
    """One error code's message (``str.format`` with the two values ``loop.check`` reports) and location."""

    message: str
    loc: str = ""

    def location(self) -> Loc | None:
        return _decode_loc(self.loc)

    def to_attr(self) -> ArrayAttr:
        return ArrayAttr([StringAttr(self.message), StringAttr(self.loc)])

    @classmethod
    def from_attr(cls, entry: Attribute) -> ErrorEntry:
        parts = _parts(entry, ERRORS)
        if not parts:
            raise AbiError(f"{ERRORS}: expected [message, loc], got {entry}")
        return cls(_str(parts[0], ERRORS), _str(parts[1], ERRORS) if len(parts) > 1 else "")


@dataclass(frozen=True)
class HostCallEntry:
    """One host call: the builtin ``fn`` and its parameters (an attribute dictionary; :meth:`param_values`)."""

    fn: str
    params: DictionaryAttr = field(default_factory=lambda: DictionaryAttr({}))

    def param_values(self) -> dict[str, object]:
        return te.params_of(self.params)

    def to_attr(self) -> DictionaryAttr:
        return DictionaryAttr({"fn": StringAttr(self.fn), "params": self.params})

    @classmethod
    def from_attr(cls, entry: Attribute) -> HostCallEntry:
        if not isinstance(entry, DictionaryAttr):
            raise AbiError(f"{HOST_CALLS}: expected a dictionary entry, got {entry}")
        fn = _str(entry.data.get("fn", StringAttr("")), HOST_CALLS)
        params = entry.data.get("params", DictionaryAttr({}))
        if not isinstance(params, DictionaryAttr):
            raise AbiError(f"{HOST_CALLS}: params of {fn} must be a dictionary, got {params}")
        return cls(fn, params)


@dataclass(frozen=True)
class ReuseEntry:
    """A ``loop.alloc`` (by id) whose buffer a donated input (by name) may back."""

    alloc: int
    input: str

    def to_attr(self) -> ArrayAttr:
        return ArrayAttr([IntegerAttr(self.alloc, i64), StringAttr(self.input)])

    @classmethod
    def from_attr(cls, entry: Attribute) -> ReuseEntry:
        parts = entry.data if isinstance(entry, ArrayAttr) else ()
        if len(parts) != 2 or not isinstance(parts[0], IntegerAttr) or not isinstance(parts[1], StringAttr):
            raise AbiError(f"{REUSE}: expected [alloc_id, input_name] entries, got {entry}")
        return cls(parts[0].value.data, parts[1].data)


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
            results=None if results is None else [ResultEntry.from_attr(e, k) for k, e in enumerate(results)],
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
    "ArgEntry",
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
