"""The ``te`` (tensor_eq) dialect: equation-level tensor ops with named indices and value semantics.

Every tensor value is produced by an op whose ``indices`` attribute names its
axes in order; ops that combine tensors carry ``operand_indices`` saying how
each operand's axes are named, so joins, projections and broadcasts are by
name, exactly as in the language. Extents are SSA ``index`` values (``te.dim``
of an input, ``arith.constant``, ``te.slice_len``) checked once up front with
``te.check_dim``, so one module serves every input shape of the same ranks.
This is the level the reference interpreter runs.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from enum import auto
from typing import cast

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    BoolAttr,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    NoneAttr,
    Signedness,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Block, Dialect, Operation, ParametrizedAttribute, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    attr_def,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_attr_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from fuse_mlir.diagnostics import FuseRuntimeError, Loc
from fuse_mlir.dialects.enum_attr import AngleBracketEnum
from fuse_mlir.dialects.locations import set_location, source_loc

# --------------------------------------------------------------------------
# dtype <-> element type
# --------------------------------------------------------------------------

_NP_TO_ELEM: dict[str, Attribute] = {
    "float64": Float64Type(),
    "float32": Float32Type(),
    "float16": Float16Type(),
    "int64": IntegerType(64),
    "int32": IntegerType(32),
    "int16": IntegerType(16),
    "int8": IntegerType(8),
    "uint64": IntegerType(64, Signedness.UNSIGNED),
    "uint32": IntegerType(32, Signedness.UNSIGNED),
    "uint16": IntegerType(16, Signedness.UNSIGNED),
    "uint8": IntegerType(8, Signedness.UNSIGNED),
    "bool": IntegerType(1),
}
_ELEM_TO_NP: dict[Attribute, np.dtype] = {v: np.dtype(k) for k, v in _NP_TO_ELEM.items()}

DYNAMIC = DYNAMIC_INDEX


def element_type(dtype: np.dtype | type | str) -> Attribute:
    """The xDSL element type for a NumPy dtype (booleans become i1; the language stores them as int8)."""
    key = np.dtype(dtype).name
    try:
        return _NP_TO_ELEM[key]
    except KeyError:
        raise TypeError(f"unsupported dtype {key}") from None


def np_dtype(elem: Attribute) -> np.dtype:
    """The NumPy dtype of an xDSL element type."""
    try:
        return _ELEM_TO_NP[elem]
    except KeyError:
        raise TypeError(f"unsupported element type {elem}") from None


def tensor_type(dtype: np.dtype | str, shape: Sequence[int]) -> TensorType:
    """A ranked tensor type; unknown extents are ``DYNAMIC`` (printed ``?``)."""
    return _tensor_type(np.dtype(dtype).name, tuple(shape))


@functools.lru_cache(maxsize=4096)  # bounded: constants give every program its own static shapes
def _tensor_type(dtype: str, shape: tuple[int, ...]) -> TensorType:
    return TensorType(element_type(dtype), list(shape))


def dtype_of(value: SSAValue) -> np.dtype:
    """The NumPy dtype of a tensor-typed SSA value."""
    t = value.type
    assert isinstance(t, TensorType)
    return np_dtype(t.element_type)


def str_array(names: Sequence[str]) -> ArrayAttr[StringAttr]:
    return ArrayAttr([StringAttr(n) for n in names])


def str_array_array(lists: Sequence[Sequence[str]]) -> ArrayAttr[ArrayAttr[StringAttr]]:
    return ArrayAttr([str_array(x) for x in lists])


def names_of(attr: Attribute) -> tuple[str, ...]:
    """Decode an ``ArrayAttr`` of ``StringAttr`` into a tuple of names (a TypeError for any other attribute)."""
    if isinstance(attr, ArrayAttr):  # isinstance, not xDSL's slower generic isa (see elemwise.ints_of)
        items = attr.data
        if all(isinstance(a, StringAttr) for a in items):
            return tuple(cast(StringAttr, a).data for a in items)
    raise TypeError(f"expected an array of strings, got {attr}")


def names_of_each(attr: Attribute) -> tuple[tuple[str, ...], ...]:
    """Decode an ``ArrayAttr`` of name arrays (``operand_indices``) into a tuple of name tuples."""
    if not isinstance(attr, ArrayAttr):
        raise TypeError(f"expected an array of name arrays, got {attr}")
    return tuple(names_of(a) for a in attr.data)


def params_attr(params: dict[str, object]) -> DictionaryAttr:
    """Encode static builtin parameters (numbers, bools, strings, int lists) as a dictionary attribute."""
    out: dict[str, Attribute] = {}
    for key in sorted(params):
        out[key] = _to_attr(params[key])
    return DictionaryAttr(out)


def _to_attr(v: object) -> Attribute:
    if isinstance(v, bool):
        return BoolAttr.from_bool(v)
    if isinstance(v, int | np.integer):
        return IntegerAttr(int(v), i64)
    if isinstance(v, float | np.floating):
        return FloatAttr(float(v), Float64Type())
    if isinstance(v, str):
        return StringAttr(v)
    if isinstance(v, list | tuple):
        return ArrayAttr([_to_attr(x) for x in v])
    raise TypeError(f"cannot encode parameter {v!r}")


def _from_attr(a: Attribute) -> object:
    if isinstance(a, IntegerAttr):
        if isinstance(a.type, IntegerType) and a.type.width.data == 1:
            return bool(a.value.data)
        return int(a.value.data)
    if isinstance(a, FloatAttr):
        return float(a.value.data)
    if isinstance(a, StringAttr):
        return a.data
    if isinstance(a, ArrayAttr):
        return [_from_attr(x) for x in a.data]
    raise TypeError(f"cannot decode parameter {a}")


def params_of(attr: DictionaryAttr | None) -> dict[str, object]:
    """Decode a parameter dictionary written by :func:`params_attr`."""
    if attr is None:
        return {}
    return {k: _from_attr(v) for k, v in attr.data.items()}


def dense_attr(array: np.ndarray) -> DenseIntOrFPElementsAttr:
    """A dense elements attribute holding ``array`` bit for bit (so NaN and -0.0 survive)."""
    arr = np.array(array, order="C", copy=True)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.int8)
    t = TensorType(element_type(arr.dtype), list(arr.shape))
    return DenseIntOrFPElementsAttr(t, BytesAttr(arr.astype(arr.dtype.newbyteorder("<")).tobytes()))  # type: ignore[arg-type]


def dense_value(attr: DenseIntOrFPElementsAttr) -> np.ndarray:
    """Decode a dense elements attribute into a NumPy array."""
    t = attr.type
    dtype = np_dtype(t.get_element_type()).newbyteorder("<")
    shape = t.get_shape()
    data = np.frombuffer(attr.data.data, dtype=dtype)
    if data.size == 1 and int(np.prod(shape)) != 1:  # splat
        return np.full(shape, data[0], dtype=dtype.newbyteorder("="))
    return data.reshape(shape).astype(dtype.newbyteorder("="))


# --------------------------------------------------------------------------
# Access axes: how te.access reads each axis of its source
# --------------------------------------------------------------------------


class AxisKind(StrEnum):
    """What one source axis of a ``te.access`` is read by."""

    NAME = auto()
    OFFSET = auto()
    POSITION = auto()
    SLICE = auto()
    GATHER = auto()


@irdl_attr_definition
class AxisKindAttr(EnumAttribute[AxisKind]):
    """The kind of an access axis (a parameter of ``#te.axis``; never written on its own)."""

    name = "te.axis_kind"


_AXIS_KEYWORDS = ("slice", "gather")
"""Words that open a slice or gather axis; an index with one of these names prints quoted."""


@irdl_attr_definition
class AccessAxisAttr(ParametrizedAttribute):
    """One source axis of a ``te.access``: an index name, an offset name, a position, a slice or a gather.

    Printed forms (inside ``#te.axis<...>``): ``i`` (the index ``i``; names
    that are not MLIR identifiers print quoted), ``i + 1`` / ``i - 1`` (offset;
    zero past the ends), ``3`` (position 3), ``slice 1:?:2 as "1::2"`` (a slice
    with absent bounds written ``?``, producing the axis named by the string)
    and ``gather 0`` (the values of gather operand 0).
    """

    name = "te.axis"

    kind: AxisKindAttr
    index: StringAttr
    number: IntAttr
    bounds: ArrayAttr[Attribute]

    def __init__(self, kind: AxisKind, index: str = "", number: int = 0, bounds: Sequence[int | None] = ()):
        parts: list[Attribute] = [NoneAttr() if b is None else IntAttr(b) for b in bounds]
        super().__init__(AxisKindAttr(kind), StringAttr(index), IntAttr(number), ArrayAttr(parts))

    @classmethod
    def named(cls, index: str) -> AccessAxisAttr:
        """The axis is the index ``index`` (a repeated name takes a diagonal)."""
        return cls(AxisKind.NAME, index)

    @classmethod
    def offset(cls, index: str, offset: int) -> AccessAxisAttr:
        """The axis is read at ``index + offset``; positions past the ends read zero."""
        return cls(AxisKind.OFFSET, index, offset)

    @classmethod
    def position(cls, position: int) -> AccessAxisAttr:
        """The axis is fixed at ``position`` (checked against the extent at run time)."""
        return cls(AxisKind.POSITION, "", position)

    @classmethod
    def slice(cls, start: int | None, stop: int | None, step: int | None, text: str) -> AccessAxisAttr:
        """The axis is ``range(extent)[start:stop:step]``, producing the index named ``text``."""
        return cls(AxisKind.SLICE, text, 0, (start, stop, step))

    @classmethod
    def gather(cls, operand: int) -> AccessAxisAttr:
        """The axis is read at the values of gather operand ``operand``."""
        return cls(AxisKind.GATHER, "", operand)

    @property
    def axis_kind(self) -> AxisKind:
        return self.kind.data

    @property
    def index_name(self) -> str:
        """The index a name, offset or slice axis produces or reads ("" for positions and gathers)."""
        return self.index.data

    @property
    def value(self) -> int:
        """The offset, the position or the gather operand number (0 for names and slices)."""
        return self.number.data

    def slice_bounds(self) -> tuple[int | None, int | None, int | None]:
        """A slice's start, stop and step (None where absent)."""
        start, stop, step = (b.data if isinstance(b, IntAttr) else None for b in self.bounds.data)
        return start, stop, step

    def verify(self) -> None:
        kind = self.axis_kind
        has_index = kind in (AxisKind.NAME, AxisKind.OFFSET, AxisKind.SLICE)
        if has_index != bool(self.index_name):
            raise VerifyException(f"#te.axis: a {kind} axis {'needs' if has_index else 'takes no'} index name")
        if kind == AxisKind.SLICE:
            if len(self.bounds.data) != 3 or not all(isinstance(b, IntAttr | NoneAttr) for b in self.bounds.data):
                raise VerifyException("#te.axis: a slice has three bounds (start, stop, step), each an integer or ?")
            if self.slice_bounds()[2] == 0:
                raise VerifyException("#te.axis: slice step cannot be zero")
        elif self.bounds.data:
            raise VerifyException(f"#te.axis: only a slice axis has bounds, not a {kind} axis")
        if kind in (AxisKind.POSITION, AxisKind.GATHER) and self.value < 0:
            raise VerifyException(f"#te.axis: a {kind} axis needs a non-negative number, got {self.value}")
        if kind in (AxisKind.NAME, AxisKind.SLICE) and self.value != 0:
            raise VerifyException(f"#te.axis: a {kind} axis has no number")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            if (number := parser.parse_optional_integer(allow_boolean=False)) is not None:
                return cls.position(number).parameters
            if parser.parse_optional_keyword("gather") is not None:
                operand = parser.parse_integer(False, False, " (a gather operand number, 0 or more)")
                return cls.gather(operand).parameters
            if parser.parse_optional_keyword("slice") is not None:
                bounds = [_parse_bound(parser)]
                for _ in range(2):
                    parser.parse_punctuation(":", " between slice bounds (start:stop:step, ? where absent)")
                    bounds.append(_parse_bound(parser))
                parser.parse_keyword("as", " and the slice's index name after the slice bounds")
                text = parser.parse_identifier_or_str_literal(" (the index name a slice produces)")
                return cls.slice(bounds[0], bounds[1], bounds[2], text).parameters
            index = parser.parse_optional_identifier_or_str_literal()
            if index is None:
                parser.raise_error('expected an access axis: name, name + n, name - n, n, slice a:b:c as "t", gather n')
            if (sign := parser.parse_optional_punctuation("+") or parser.parse_optional_punctuation("-")) is not None:
                offset = parser.parse_integer(False, False, " (an offset: name + n or name - n)")
                return cls.offset(index, offset if sign == "+" else -offset).parameters
            return cls.named(index).parameters

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            kind = self.axis_kind
            if kind == AxisKind.POSITION:
                printer.print_int(self.value)
            elif kind == AxisKind.GATHER:
                printer.print_string(f"gather {self.value}")
            elif kind == AxisKind.SLICE:
                text = ":".join("?" if b is None else str(b) for b in self.slice_bounds())
                printer.print_string(f"slice {text} as ")
                printer.print_string_literal(self.index_name)
            else:
                if self.index_name in _AXIS_KEYWORDS:
                    printer.print_string_literal(self.index_name)
                else:
                    printer.print_identifier_or_string_literal(self.index_name)
                if kind == AxisKind.OFFSET:
                    printer.print_string(f" {'-' if self.value < 0 else '+'} {abs(self.value)}")


def _parse_bound(parser: AttrParser) -> int | None:
    """One slice bound: an integer, or ``?`` where it is absent."""
    if parser.parse_optional_punctuation("?") is not None:
        return None
    return parser.parse_integer(allow_boolean=False, allow_negative=True, context_msg=" or ? as a slice bound")


def axis_attrs(axes: Sequence[AccessAxisAttr | str]) -> ArrayAttr[AccessAxisAttr]:
    """An access's axes as an attribute; a plain string is an index name."""
    return ArrayAttr([a if isinstance(a, AccessAxisAttr) else AccessAxisAttr.named(a) for a in axes])


# --------------------------------------------------------------------------
# Shared verification helpers
# --------------------------------------------------------------------------


class Reduction(StrEnum):
    """How a ``te.reduce`` combines the values along the indices it drops."""

    SUM = auto()
    MAX = auto()
    MIN = auto()
    MEAN = auto()
    PROD = auto()
    ANY = auto()
    LOGSUMEXP = auto()


class Projection(StrEnum):
    """How a ``te.contract`` projects away the indices absent from its result (the equation's ``=``, ``max=``...)."""

    SUM = auto()
    MAX = auto()
    MIN = auto()
    MEAN = auto()
    PROD = auto()


@irdl_attr_definition
class ReductionAttr(AngleBracketEnum[Reduction], EnumAttribute[Reduction]):
    """``#te.reduction<logsumexp>``: the combiner of a ``te.reduce``."""

    name = "te.reduction"


@irdl_attr_definition
class ProjectionAttr(AngleBracketEnum[Projection], EnumAttribute[Projection]):
    """``#te.projection<sum>``: the projection of a ``te.contract``."""

    name = "te.projection"


PROJECTIONS = tuple(Projection)
REDUCTIONS = tuple(Reduction)


def _check_rank(op: Operation, value: SSAValue, names: Sequence[str], what: str) -> None:
    t = value.type
    if not isinstance(t, TensorType):
        raise VerifyException(f"{op.name}: {what} must be a tensor, got {t}")
    if t.get_num_dims() != len(names):
        raise VerifyException(
            f"{op.name}: {what} has rank {t.get_num_dims()} but {len(names)} index names {list(names)}"
        )


def _check_unique(op: Operation, names: Sequence[str], what: str) -> None:
    if len(set(names)) != len(names):
        raise VerifyException(f"{op.name}: {what} {list(names)} repeats an index name")


class NamedOp(IRDLOperation):
    """Base of ops that combine named-index tensor operands into one named-index result."""

    def verify_named(self, operands: Sequence[SSAValue], operand_indices: ArrayAttr, indices: ArrayAttr) -> None:
        each = names_of_each(operand_indices)
        if len(each) != len(operands):
            raise VerifyException(f"{self.name}: {len(operands)} operands but {len(each)} operand_indices entries")
        for k, (v, names) in enumerate(zip(operands, each)):
            _check_rank(self, v, names, f"operand #{k}")
            _check_unique(self, names, f"operand #{k} indices")
        out = names_of(indices)
        _check_rank(self, self.results[0], out, "result")
        _check_unique(self, out, "result indices")


# --------------------------------------------------------------------------
# Program boundary: inputs, sources, constants, sinks, exports
# --------------------------------------------------------------------------


@irdl_op_definition
class InputOp(IRDLOperation):
    """A tensor the caller passes in (a name used but never defined)."""

    name = "te.input"
    tensor_name = attr_def(StringAttr, attr_name="name")
    indices = attr_def(ArrayAttr[StringAttr])
    result = result_def(TensorType)
    assembly_format = "$name attr-dict `:` type($result)"

    def __init__(self, name: str, indices: Sequence[str], type: TensorType):
        super().__init__(result_types=[type], attributes={"name": StringAttr(name), "indices": str_array(indices)})

    def verify_(self) -> None:
        _check_rank(self, self.result, names_of(self.indices), "result")


@irdl_op_definition
class SourceOp(IRDLOperation):
    """A tensor loaded from a file (``W[h,d] = "w.npy"``); the path is relative to the program file."""

    name = "te.source"
    tensor_name = attr_def(StringAttr, attr_name="name")
    path = attr_def(StringAttr)
    indices = attr_def(ArrayAttr[StringAttr])
    result = result_def(TensorType)
    assembly_format = "$name $path attr-dict `:` type($result)"

    def __init__(self, name: str, path: str, indices: Sequence[str], type: TensorType, loc: Loc | str = ""):
        attrs: dict[str, Attribute] = {
            "name": StringAttr(name),
            "path": StringAttr(path),
            "indices": str_array(indices),
        }
        super().__init__(result_types=[type], attributes=attrs)
        set_location(self, loc)

    def verify_(self) -> None:
        _check_rank(self, self.result, names_of(self.indices), "result")


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A literal tensor (a number, a list literal, ``const(...)``)."""

    name = "te.constant"
    value = attr_def(DenseIntOrFPElementsAttr)
    indices = attr_def(ArrayAttr[StringAttr])
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def print(self, printer: Printer) -> None:
        """Values print in decimal when finite, else as MLIR's hex blob (xDSL reads hex floats as integers)."""
        arr = dense_value(self.value)
        printer.print_string(" ")
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            blob = arr.astype(arr.dtype.newbyteorder("<")).tobytes().hex().upper()
            printer.print_string(f'dense<"0x{blob}"> : ')
            printer.print_attribute(self.value.type)
        else:
            printer.print_attribute(self.value)
        printer.print_op_attributes(self.attributes, reserved_attr_names=("value",))
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error("te.constant expects a dense elements attribute")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        result_type = parser.parse_type()
        op = cls.__new__(cls)
        IRDLOperation.__init__(op, result_types=[result_type], attributes={"value": value, **attrs})
        return op

    def __init__(self, array: np.ndarray, indices: Sequence[str]):
        attr = dense_attr(np.asarray(array))
        super().__init__(
            result_types=[TensorType(attr.type.get_element_type(), attr.type.get_shape())],
            attributes={"value": attr, "indices": str_array(indices)},
        )

    def verify_(self) -> None:
        _check_rank(self, self.result, names_of(self.indices), "result")
        if self.value.type.get_shape() != self.result.type.get_shape():
            raise VerifyException("te.constant: value shape differs from result type")


@irdl_op_definition
class SinkOp(IRDLOperation):
    """Write values to a file after the run (``"out/y.npz" = Y[i,j]``); several values make a dict."""

    name = "te.sink"
    path = attr_def(StringAttr)
    names = attr_def(ArrayAttr[StringAttr])
    values = var_operand_def(TensorType)
    assembly_format = "$path $values attr-dict `:` type($values)"

    def __init__(self, path: str, values: Sequence[SSAValue], names: Sequence[str], loc: Loc | str = ""):
        attrs: dict[str, Attribute] = {"path": StringAttr(path), "names": str_array(names)}
        super().__init__(operands=[list(values)], attributes=attrs)
        set_location(self, loc)

    def verify_(self) -> None:
        if len(names_of(self.names)) != len(self.values):
            raise VerifyException("te.sink: one name per value expected")


@irdl_op_definition
class ExportOp(IRDLOperation):
    """The program's outputs, by name, in order."""

    name = "te.export"
    names = attr_def(ArrayAttr[StringAttr])
    values = var_operand_def(TensorType)
    assembly_format = "$values attr-dict `:` type($values)"

    def __init__(self, values: Sequence[SSAValue], names: Sequence[str]):
        super().__init__(operands=[list(values)], attributes={"names": str_array(names)})

    def verify_(self) -> None:
        if len(names_of(self.names)) != len(self.values):
            raise VerifyException("te.export: one name per value expected")


# --------------------------------------------------------------------------
# Extents
# --------------------------------------------------------------------------


@irdl_op_definition
class DimOp(IRDLOperation):
    """The extent of one axis of a tensor, as an ``index``."""

    name = "te.dim"
    source = operand_def(TensorType)
    axis = attr_def(IntegerAttr)
    result = result_def(IndexType)
    traits = traits_def(Pure())
    assembly_format = "$source `,` $axis attr-dict `:` type($source)"

    def __init__(self, source: SSAValue, axis: int):
        super().__init__(operands=[source], result_types=[IndexType()], attributes={"axis": IntegerAttr(axis, i64)})

    def verify_(self) -> None:
        t = self.source.type
        assert isinstance(t, TensorType)
        if not 0 <= self.axis.value.data < t.get_num_dims():
            raise VerifyException(f"te.dim: axis {self.axis.value.data} out of range for {t}")


@irdl_op_definition
class SliceLenOp(IRDLOperation):
    """The length of ``range(n)[start:stop:step]`` (Python slice rules)."""

    name = "te.slice_len"
    extent = operand_def(IndexType)
    slice = attr_def(ArrayAttr[IntegerAttr])  # start, stop, step; absent parts are encoded by `present`
    present = attr_def(ArrayAttr[IntegerAttr])
    result = result_def(IndexType)
    traits = traits_def(Pure())
    assembly_format = "$extent attr-dict"

    def __init__(self, extent: SSAValue, start: int | None, stop: int | None, step: int | None):
        parts = [start, stop, step]
        super().__init__(
            operands=[extent],
            result_types=[IndexType()],
            attributes={
                "slice": ArrayAttr([IntegerAttr(p or 0, i64) for p in parts]),
                "present": ArrayAttr([IntegerAttr(int(p is not None), i64) for p in parts]),
            },
        )

    def bounds(self) -> tuple[int | None, int | None, int | None]:
        vals = [a.value.data for a in self.slice.data]
        pres = [a.value.data for a in self.present.data]
        start, stop, step = (v if p else None for v, p in zip(vals, pres))
        return start, stop, step

    def verify_(self) -> None:
        if self.bounds()[2] == 0:
            raise VerifyException("te.slice_len: slice step cannot be zero")


#: The relations ``te.check_dim`` asserts between its two extents: equal, less than, at most, and ``dvd``
#: (``rhs`` divides ``lhs``: rope's even feature axis).
CHECK_PREDICATES = {
    "eq": lambda a, b: a == b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "dvd": lambda a, b: b != 0 and a % b == 0,
}


@irdl_op_definition
class CheckDimOp(IRDLOperation):
    """Assert ``lhs == rhs`` (or another of :data:`CHECK_PREDICATES` named by ``predicate``) on extents before
    the values that depend on them are computed.

    ``message`` is a template with ``{0}``/``{1}`` for the two values, saying
    where each came from.
    """

    name = "te.check_dim"
    lhs = operand_def(IndexType)
    rhs = operand_def(IndexType)
    message = attr_def(StringAttr)
    predicate = opt_attr_def(StringAttr)
    assembly_format = "$lhs `,` $rhs attr-dict"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, message: str, loc: Loc | str = "", predicate: str = "eq"):
        attrs: dict[str, Attribute] = {"message": StringAttr(message)}
        if predicate != "eq":
            attrs["predicate"] = StringAttr(predicate)
        super().__init__(operands=[lhs, rhs], attributes=attrs)
        set_location(self, loc)

    def predicate_name(self) -> str:
        return self.predicate.data if self.predicate else "eq"

    def enforce(self, lhs: int, rhs: int) -> None:
        """Raise the check's located FuseRuntimeError when the extents ``lhs`` and ``rhs`` fail it: the one
        evaluation the reference, the array backends and shape inference share."""
        if not CHECK_PREDICATES[self.predicate_name()](lhs, rhs):
            raise FuseRuntimeError(self.message.data.format(lhs, rhs), source_loc(self))

    def verify_(self) -> None:
        if self.predicate_name() not in CHECK_PREDICATES:
            raise VerifyException(f"te.check_dim: unknown predicate {self.predicate_name()!r}")


# --------------------------------------------------------------------------
# Tensor computation
# --------------------------------------------------------------------------


@irdl_op_definition
class AccessOp(NamedOp):
    """Read a tensor through index expressions: names, diagonals, offsets, positions, slices, gathers.

    ``axes`` has one :class:`AccessAxisAttr` per source axis: ``#te.axis<i>``
    (a name; repeated names take a diagonal), ``#te.axis<i + 1>`` (offset,
    zero past the ends), ``#te.axis<3>`` (position 3), ``#te.axis<slice
    a:b:c as "text">`` (a slice, producing the axis named ``text``) or
    ``#te.axis<gather 0>`` (the values of gather operand 0, whose axes are
    named by ``gather_indices[0]``). Out-of-range positions and gathered
    values are run-time errors.
    """

    name = "te.access"
    source = operand_def(TensorType)
    gathers = var_operand_def(TensorType)
    extents = var_operand_def(IndexType)
    axes = attr_def(ArrayAttr[AccessAxisAttr])
    gather_indices = attr_def(ArrayAttr[ArrayAttr[StringAttr]])
    indices = attr_def(ArrayAttr[StringAttr])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(),)
    assembly_format = "$source `[` $gathers `]` `(` $extents `)` attr-dict `:` type($source) `[` type($gathers) `]` `->` type($result)"

    def __init__(
        self,
        source: SSAValue,
        axes: Sequence[AccessAxisAttr | str],
        indices: Sequence[str],
        result_type: TensorType,
        gathers: Sequence[SSAValue] = (),
        gather_indices: Sequence[Sequence[str]] = (),
        extents: Sequence[SSAValue] = (),
        loc: Loc | str = "",
    ):
        attrs: dict[str, Attribute] = {
            "axes": axis_attrs(axes),
            "gather_indices": str_array_array(gather_indices),
            "indices": str_array(indices),
        }
        super().__init__(operands=[source, list(gathers), list(extents)], result_types=[result_type], attributes=attrs)
        set_location(self, loc)

    def axis_list(self) -> list[AccessAxisAttr]:
        """How each source axis is read, in order."""
        return list(self.axes.data)

    def verify_(self) -> None:
        axes = self.axis_list()
        t = self.source.type
        assert isinstance(t, TensorType)
        if t.get_num_dims() != len(axes):
            raise VerifyException(f"te.access: source has rank {t.get_num_dims()} but {len(axes)} axes")
        self.verify_named(list(self.gathers), self.gather_indices, self.indices)
        produced = {a.index_name for a in axes if a.axis_kind != AxisKind.POSITION and a.index_name}
        produced.update(n for names in names_of_each(self.gather_indices) for n in names)
        if produced != set(names_of(self.indices)):
            raise VerifyException(
                f"te.access: result indices {list(names_of(self.indices))} must be exactly the indices the axes "
                f"and gathers produce {sorted(produced)}"
            )
        for a in axes:
            if a.axis_kind == AxisKind.GATHER and a.value >= len(self.gathers):
                raise VerifyException(
                    f"te.access: axis {a} names gather operand {a.value}, but there are {len(self.gathers)}"
                )


@irdl_op_definition
class ContractOp(NamedOp):
    """Product of the operands joined by index name, other indices projected with ``projection``."""

    name = "te.contract"
    inputs = var_operand_def(TensorType)
    operand_indices = attr_def(ArrayAttr[ArrayAttr[StringAttr]])
    indices = attr_def(ArrayAttr[StringAttr])
    projection = attr_def(ProjectionAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$inputs attr-dict `:` functional-type($inputs, results)"

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        operand_indices: Sequence[Sequence[str]],
        indices: Sequence[str],
        projection: str | Projection,
        result_type: TensorType,
    ):
        super().__init__(
            operands=[list(inputs)],
            result_types=[result_type],
            attributes={
                "operand_indices": str_array_array(operand_indices),
                "indices": str_array(indices),
                "projection": ProjectionAttr(Projection(projection)),
            },
        )

    def verify_(self) -> None:
        self.verify_named(list(self.inputs), self.operand_indices, self.indices)
        union = {n for names in names_of_each(self.operand_indices) for n in names}
        missing = [n for n in names_of(self.indices) if n not in union]
        if missing:
            raise VerifyException(f"te.contract: result indices {missing} are on no operand (use te.broadcast)")


@irdl_op_definition
class MapOp(NamedOp):
    """An elementwise builtin or operator over the union of the operands' indices (broadcast by name)."""

    name = "te.map"
    inputs = var_operand_def(TensorType)
    fn = attr_def(StringAttr)
    operand_indices = attr_def(ArrayAttr[ArrayAttr[StringAttr]])
    indices = attr_def(ArrayAttr[StringAttr])
    params = opt_attr_def(DictionaryAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$fn $inputs attr-dict `:` functional-type($inputs, results)"

    def __init__(
        self,
        fn: str,
        inputs: Sequence[SSAValue],
        operand_indices: Sequence[Sequence[str]],
        indices: Sequence[str],
        result_type: TensorType,
        params: dict[str, object] | None = None,
    ):
        attrs: dict[str, Attribute] = {
            "fn": StringAttr(fn),
            "operand_indices": str_array_array(operand_indices),
            "indices": str_array(indices),
        }
        if params:
            attrs["params"] = params_attr(params)
        super().__init__(operands=[list(inputs)], result_types=[result_type], attributes=attrs)

    def verify_(self) -> None:
        self.verify_named(list(self.inputs), self.operand_indices, self.indices)
        union = {n for names in names_of_each(self.operand_indices) for n in names}
        if union != set(names_of(self.indices)):
            raise VerifyException("te.map: result indices must be exactly the union of the operand indices")


@irdl_op_definition
class BroadcastOp(NamedOp):
    """Permute a tensor to ``indices`` and repeat it along the new ones (extents given in order)."""

    name = "te.broadcast"
    input = operand_def(TensorType)
    extents = var_operand_def(IndexType)
    operand_indices = attr_def(ArrayAttr[ArrayAttr[StringAttr]])
    indices = attr_def(ArrayAttr[StringAttr])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input `(` $extents `)` attr-dict `:` type($input) `->` type($result)"

    def __init__(
        self,
        input: SSAValue,
        extents: Sequence[SSAValue],
        operand_indices: Sequence[str],
        indices: Sequence[str],
        result_type: TensorType,
    ):
        super().__init__(
            operands=[input, list(extents)],
            result_types=[result_type],
            attributes={"operand_indices": str_array_array([operand_indices]), "indices": str_array(indices)},
        )

    def verify_(self) -> None:
        self.verify_named([self.input], self.operand_indices, self.indices)
        src = set(names_of_each(self.operand_indices)[0])
        new = [n for n in names_of(self.indices) if n not in src]
        if not src <= set(names_of(self.indices)):
            raise VerifyException("te.broadcast: every operand index must stay in the result")
        if len(new) != len(self.extents):
            raise VerifyException(f"te.broadcast: {len(new)} new indices {new} but {len(self.extents)} extents")


@irdl_op_definition
class ReduceOp(NamedOp):
    """Reduce the operand's indices absent from ``indices`` with ``kind`` (sum/max/min/mean/prod/any/logsumexp)."""

    name = "te.reduce"
    input = operand_def(TensorType)
    operand_indices = attr_def(ArrayAttr[ArrayAttr[StringAttr]])
    indices = attr_def(ArrayAttr[StringAttr])
    kind = attr_def(ReductionAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$kind $input attr-dict `:` functional-type($input, results)"

    def __init__(
        self,
        kind: str | Reduction,
        input: SSAValue,
        operand_indices: Sequence[str],
        indices: Sequence[str],
        result_type: TensorType,
    ):
        super().__init__(
            operands=[input],
            result_types=[result_type],
            attributes={
                "kind": ReductionAttr(Reduction(kind)),
                "operand_indices": str_array_array([operand_indices]),
                "indices": str_array(indices),
            },
        )

    def verify_(self) -> None:
        self.verify_named([self.input], self.operand_indices, self.indices)
        if not set(names_of(self.indices)) <= set(names_of_each(self.operand_indices)[0]):
            raise VerifyException("te.reduce: result indices must be operand indices")


@irdl_op_definition
class AxisOp(NamedOp):
    """A builtin that works along one named axis and keeps all indices (softmax, lnorm, ...)."""

    name = "te.axis_fn"
    inputs = var_operand_def(TensorType)
    fn = attr_def(StringAttr)
    axis = attr_def(StringAttr)
    operand_indices = attr_def(ArrayAttr[ArrayAttr[StringAttr]])
    indices = attr_def(ArrayAttr[StringAttr])
    params = opt_attr_def(DictionaryAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$fn $inputs attr-dict `:` functional-type($inputs, results)"

    def __init__(
        self,
        fn: str,
        axis: str,
        inputs: Sequence[SSAValue],
        operand_indices: Sequence[Sequence[str]],
        indices: Sequence[str],
        result_type: TensorType,
        params: dict[str, object] | None = None,
    ):
        attrs: dict[str, Attribute] = {
            "fn": StringAttr(fn),
            "axis": StringAttr(axis),
            "operand_indices": str_array_array(operand_indices),
            "indices": str_array(indices),
        }
        if params:
            attrs["params"] = params_attr(params)
        super().__init__(operands=[list(inputs)], result_types=[result_type], attributes=attrs)

    def verify_(self) -> None:
        self.verify_named(list(self.inputs), self.operand_indices, self.indices)
        if self.axis.data not in names_of(self.indices):
            raise VerifyException(f"te.axis_fn: axis {self.axis.data!r} is not a result index")


@irdl_op_definition
class ConcatOp(NamedOp):
    """Join operands along one axis (``operand_axes[k]`` in operand k) into result axis ``axis``."""

    name = "te.concat"
    inputs = var_operand_def(TensorType)
    axis = attr_def(StringAttr)
    operand_axes = attr_def(ArrayAttr[StringAttr])
    operand_indices = attr_def(ArrayAttr[ArrayAttr[StringAttr]])
    indices = attr_def(ArrayAttr[StringAttr])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$inputs attr-dict `:` functional-type($inputs, results)"

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        axis: str,
        operand_axes: Sequence[str],
        operand_indices: Sequence[Sequence[str]],
        indices: Sequence[str],
        result_type: TensorType,
    ):
        super().__init__(
            operands=[list(inputs)],
            result_types=[result_type],
            attributes={
                "axis": StringAttr(axis),
                "operand_axes": str_array(operand_axes),
                "operand_indices": str_array_array(operand_indices),
                "indices": str_array(indices),
            },
        )

    def verify_(self) -> None:
        self.verify_named(list(self.inputs), self.operand_indices, self.indices)
        if len(names_of(self.operand_axes)) != len(self.inputs):
            raise VerifyException("te.concat: one operand axis per operand expected")


@irdl_op_definition
class FlattenOp(NamedOp):
    """Merge the operand's last two axes (row-major) into the result's last axis."""

    name = "te.flatten"
    input = operand_def(TensorType)
    operand_indices = attr_def(ArrayAttr[ArrayAttr[StringAttr]])
    indices = attr_def(ArrayAttr[StringAttr])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` functional-type($input, results)"

    def __init__(
        self, input: SSAValue, operand_indices: Sequence[str], indices: Sequence[str], result_type: TensorType
    ):
        super().__init__(
            operands=[input],
            result_types=[result_type],
            attributes={"operand_indices": str_array_array([operand_indices]), "indices": str_array(indices)},
        )

    def verify_(self) -> None:
        self.verify_named([self.input], self.operand_indices, self.indices)
        if len(names_of(self.indices)) + 1 != len(names_of_each(self.operand_indices)[0]):
            raise VerifyException("te.flatten: the result has one axis fewer than the operand")


@irdl_op_definition
class GenerateOp(IRDLOperation):
    """A tensor built from extents alone: ``causal_mask`` over two indices, ``even``/``odd``/``iota`` over one.

    ``iota`` is the int64 position along its one axis (0, 1, ..., n-1); the gradient transformation builds
    the one-hot selections of its scatter-adds from it. ``nonempty`` has no indices and any number of extents:
    the 0-d 1 when every extent is positive, else 0 (``contract-order`` guards a product it factored with it: a
    sum over an empty index is 0 whatever the factors, which a factored product cannot keep when a factor is
    NaN or infinite).
    """

    name = "te.generate"
    fn = attr_def(StringAttr)
    extents = var_operand_def(IndexType)
    indices = attr_def(ArrayAttr[StringAttr])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$fn `(` $extents `)` attr-dict `:` type($result)"

    def __init__(self, fn: str, extents: Sequence[SSAValue], indices: Sequence[str], result_type: TensorType):
        super().__init__(
            operands=[list(extents)],
            result_types=[result_type],
            attributes={"fn": StringAttr(fn), "indices": str_array(indices)},
        )

    def verify_(self) -> None:
        out = names_of(self.indices)
        _check_rank(self, self.result, out, "result")
        if self.fn.data == "nonempty":
            if out or not self.extents:
                raise VerifyException("te.generate: nonempty takes no indices and one or more extents")
            return
        want = {"causal_mask": 2, "even": 1, "odd": 1, "iota": 1}.get(self.fn.data)
        if want is None:
            raise VerifyException(f"te.generate: unknown generator {self.fn.data!r}")
        if len(out) != want or len(self.extents) != want:
            raise VerifyException(f"te.generate: {self.fn.data} takes {want} indices and extents")

    def shape_extents(self) -> list[SSAValue]:
        """The extents that are the result's axes (all but ``nonempty``'s, which is 0-d)."""
        return [] if self.fn.data == "nonempty" else list(self.extents)


@irdl_op_definition
class PlaceOp(NamedOp):
    """Write a value at fixed positions of some axes (``W[1, h] = B[h]``), zeros elsewhere.

    ``positions[k]`` is the position written on result axis k, or -1 when axis
    k is the operand's index ``indices[k]``; each fixed axis takes its extent
    from ``extents`` in order.
    """

    name = "te.place"
    input = operand_def(TensorType)
    extents = var_operand_def(IndexType)
    positions = attr_def(ArrayAttr[IntegerAttr])
    operand_indices = attr_def(ArrayAttr[ArrayAttr[StringAttr]])
    indices = attr_def(ArrayAttr[StringAttr])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input `(` $extents `)` attr-dict `:` type($input) `->` type($result)"

    def __init__(
        self,
        input: SSAValue,
        extents: Sequence[SSAValue],
        positions: Sequence[int],
        operand_indices: Sequence[str],
        indices: Sequence[str],
        result_type: TensorType,
        loc: Loc | str = "",
    ):
        attrs: dict[str, Attribute] = {
            "positions": ArrayAttr([IntegerAttr(p, i64) for p in positions]),
            "operand_indices": str_array_array([operand_indices]),
            "indices": str_array(indices),
        }
        super().__init__(operands=[input, list(extents)], result_types=[result_type], attributes=attrs)
        set_location(self, loc)

    def position_list(self) -> list[int]:
        return [a.value.data for a in self.positions.data]

    def verify_(self) -> None:
        self.verify_named([self.input], self.operand_indices, self.indices)
        pos = self.position_list()
        if len(pos) != len(names_of(self.indices)):
            raise VerifyException("te.place: one position per result axis expected")
        if sum(p >= 0 for p in pos) != len(self.extents):
            raise VerifyException("te.place: one extent per fixed axis expected")
        free = [n for n, p in zip(names_of(self.indices), pos) if p < 0]
        if sorted(free) != sorted(names_of_each(self.operand_indices)[0]):
            raise VerifyException("te.place: the free result axes must be exactly the operand's indices")


@irdl_op_definition
class ScatterAddOp(NamedOp):
    """Add an update into zeros at gathered positions: the transpose of a gathering ``te.access``.

    ``out = zeros(shape)``; for every position ``p`` of ``update`` (named by
    ``operand_indices[0]``), ``out[a_0(p), ..., a_r(p)] += update[p]``, where
    ``axes[k]`` is ``#te.axis<i>`` (update index ``i``) or ``#te.axis<gather
    n>`` (the value of gather operand ``n`` at ``p``; its axes are named by
    ``gather_indices[n]``, each an update index). Duplicate positions
    accumulate. The result's axes are named by ``indices``; a gathered axis
    takes its extent from ``extents``, one per gathered axis in order. A
    gathered value outside ``[0, extent)`` is a run-time error (never a write).
    Every update index is a named axis or indexes a gather operand.
    """

    name = "te.scatter_add"
    update = operand_def(TensorType)
    gathers = var_operand_def(TensorType)
    extents = var_operand_def(IndexType)
    axes = attr_def(ArrayAttr[AccessAxisAttr])
    operand_indices = attr_def(ArrayAttr[ArrayAttr[StringAttr]])
    gather_indices = attr_def(ArrayAttr[ArrayAttr[StringAttr]])
    indices = attr_def(ArrayAttr[StringAttr])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(),)
    assembly_format = "$update `[` $gathers `]` `(` $extents `)` attr-dict `:` type($update) `[` type($gathers) `]` `->` type($result)"

    def __init__(
        self,
        update: SSAValue,
        update_indices: Sequence[str],
        axes: Sequence[AccessAxisAttr | str],
        indices: Sequence[str],
        result_type: TensorType,
        gathers: Sequence[SSAValue],
        gather_indices: Sequence[Sequence[str]],
        extents: Sequence[SSAValue],
        loc: Loc | str = "",
    ):
        attrs: dict[str, Attribute] = {
            "axes": axis_attrs(axes),
            "operand_indices": str_array_array([update_indices]),
            "gather_indices": str_array_array(gather_indices),
            "indices": str_array(indices),
        }
        super().__init__(operands=[update, list(gathers), list(extents)], result_types=[result_type], attributes=attrs)
        set_location(self, loc)

    def axis_list(self) -> list[AccessAxisAttr]:
        """Where each result axis takes its position from, in order."""
        return list(self.axes.data)

    def update_names(self) -> tuple[str, ...]:
        return names_of_each(self.operand_indices)[0]

    def verify_(self) -> None:
        axes = self.axis_list()
        self.verify_named([self.update], self.operand_indices, self.indices)
        each = names_of_each(self.gather_indices)
        if len(each) != len(self.gathers):
            raise VerifyException(f"te.scatter_add: {len(self.gathers)} gathers but {len(each)} gather_indices")
        for k, (g, names) in enumerate(zip(self.gathers, each)):
            _check_rank(self, g, names, f"gather #{k}")
            _check_unique(self, names, f"gather #{k} indices")
            if not isinstance(elem := g.type.get_element_type(), IntegerType):  # type: ignore[attr-defined]
                raise VerifyException(f"te.scatter_add: gather #{k} must hold integers, not {elem}")
        out = names_of(self.indices)
        if len(axes) != len(out):
            raise VerifyException(f"te.scatter_add: {len(axes)} axes for a rank-{len(out)} result")
        upd = set(self.update_names())
        used: set[str] = set()
        for a in axes:
            if a.axis_kind == AxisKind.NAME:
                used.add(a.index_name)
            elif a.axis_kind == AxisKind.GATHER:
                if a.value >= len(self.gathers):
                    raise VerifyException(f"te.scatter_add: axis {a} names gather operand {a.value}, of {len(each)}")
            else:
                raise VerifyException(f"te.scatter_add: an axis is an index name or a gather, not a {a.axis_kind}")
        used.update(n for names in each for n in names)
        if used != upd:
            raise VerifyException(
                f"te.scatter_add: the update's indices {sorted(upd)} must be exactly those the axes and gathers "
                f"read {sorted(used)}"
            )
        named = [a.index_name for a in axes if a.axis_kind == AxisKind.NAME]
        if [n for n, a in zip(out, axes) if a.axis_kind == AxisKind.NAME] != named:
            raise VerifyException("te.scatter_add: a named axis must be named as its update index in the result")
        if sum(a.axis_kind == AxisKind.GATHER for a in axes) != len(self.extents):
            raise VerifyException("te.scatter_add: one extent per gathered axis expected")


@irdl_op_definition
class BlockOp(NamedOp):
    """A model block with its own index rules: ``attention``, ``rope``, ``tucker_dense``, ``topk``.

    ``roles`` names the axes each block needs (e.g. ``query``, ``key``,
    ``feature``); ``topk`` has two results (indices, values).
    """

    name = "te.block"
    inputs = var_operand_def(TensorType)
    fn = attr_def(StringAttr)
    operand_indices = attr_def(ArrayAttr[ArrayAttr[StringAttr]])
    indices = attr_def(ArrayAttr[StringAttr])
    roles = attr_def(DictionaryAttr)
    params = opt_attr_def(DictionaryAttr)
    outputs = var_result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$fn $inputs attr-dict `:` functional-type($inputs, results)"

    def __init__(
        self,
        fn: str,
        inputs: Sequence[SSAValue],
        operand_indices: Sequence[Sequence[str]],
        indices: Sequence[str],
        roles: dict[str, str],
        result_types: Sequence[TensorType],
        params: dict[str, object] | None = None,
    ):
        attrs: dict[str, Attribute] = {
            "fn": StringAttr(fn),
            "operand_indices": str_array_array(operand_indices),
            "indices": str_array(indices),
            "roles": params_attr(dict(roles)),
        }
        if params:
            attrs["params"] = params_attr(params)
        super().__init__(operands=[list(inputs)], result_types=[list(result_types)], attributes=attrs)

    def verify_(self) -> None:
        if self.fn.data not in ("attention", "rope", "tucker_dense", "topk"):
            raise VerifyException(f"te.block: unknown block {self.fn.data!r}")
        each = names_of_each(self.operand_indices)
        if len(each) != len(self.inputs):
            raise VerifyException("te.block: one operand_indices entry per operand expected")
        for k, (v, names) in enumerate(zip(self.inputs, each)):
            _check_rank(self, v, names, f"operand #{k}")
        for r in self.outputs:
            _check_rank(self, r, names_of(self.indices), "result")


@irdl_op_definition
class GroupOp(IRDLOperation):
    """Define tensor ``name`` as the combination of its equations' contributions (sum, or OR if boolean)."""

    name = "te.group"
    inputs = var_operand_def(TensorType)
    tensor_name = attr_def(StringAttr, attr_name="name")
    indices = attr_def(ArrayAttr[StringAttr])
    boolean = attr_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$name $inputs attr-dict `:` functional-type($inputs, results)"

    def __init__(
        self, name: str, inputs: Sequence[SSAValue], indices: Sequence[str], boolean: bool, result_type: TensorType
    ):
        super().__init__(
            operands=[list(inputs)],
            result_types=[result_type],
            attributes={
                "name": StringAttr(name),
                "indices": str_array(indices),
                "boolean": BoolAttr.from_bool(boolean),
            },
        )

    def verify_(self) -> None:
        out = names_of(self.indices)
        _check_rank(self, self.result, out, "result")
        if not self.inputs:
            raise VerifyException("te.group: at least one contribution expected")
        for k, v in enumerate(self.inputs):
            _check_rank(self, v, out, f"contribution #{k}")


@irdl_op_definition
class CastOp(IRDLOperation):
    """Convert a tensor's element type (NumPy ``astype`` semantics)."""

    name = "te.cast"
    input = operand_def(TensorType)
    indices = attr_def(ArrayAttr[StringAttr])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` functional-type($input, results)"

    def __init__(self, input: SSAValue, indices: Sequence[str], result_type: TensorType):
        super().__init__(operands=[input], result_types=[result_type], attributes={"indices": str_array(indices)})

    def verify_(self) -> None:
        _check_rank(self, self.input, names_of(self.indices), "operand")
        _check_rank(self, self.result, names_of(self.indices), "result")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a ``te.fixpoint`` body with the next values of the carried tensors."""

    name = "te.yield"
    values = var_operand_def(TensorType)
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(FixpointOp)))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[list(values)])


FIXPOINT_STATUS = ("iterations", "converged")
"""The two trailing results of ``te.fixpoint``: a 0-d int64 iteration count and a 0-d int8 converged flag."""


@irdl_op_definition
class FixpointOp(IRDLOperation):
    """Iterate a recursive group of tensors until no carried tensor changes, or ``max_iters`` body runs.

    The body's block arguments are the iteration number (a 0-d ``i64``
    tensor, 0 on the first run) and the current value of each carried tensor
    (``inits`` on the first run); ``te.yield`` gives their next values. After
    each run the next values are compared with the current ones: floats are
    unchanged when ``|new - old| <= atol + rtol * |new|`` (NaN where both are
    NaN), other types when equal; carried values whose ``checked`` entry is
    false (semi-naive deltas) take no part. The loop stops when all compared
    values are unchanged or after ``max_iters`` runs. Results: the final
    carried values, then the number of body runs (0-d ``i64``) and whether
    the last run changed nothing (0-d ``i8``, 1 = converged). ``names`` are
    the carried tensors' names (for reports), ``label`` names the group.
    """

    name = "te.fixpoint"
    inits = var_operand_def(TensorType)
    names = attr_def(ArrayAttr[StringAttr])
    label = attr_def(StringAttr)
    max_iters = attr_def(IntegerAttr)
    atol = attr_def(FloatAttr)
    rtol = attr_def(FloatAttr)
    checked = opt_attr_def(ArrayAttr)
    body = region_def("single_block")
    outputs = var_result_def(TensorType)
    assembly_format = "$label `(` $inits `)` attr-dict-with-keyword `:` functional-type($inits, $outputs) $body"

    def __init__(
        self,
        label: str,
        inits: Sequence[SSAValue],
        names: Sequence[str],
        body: Region,
        max_iters: int,
        atol: float,
        rtol: float,
        checked: Sequence[bool] | None = None,
    ):
        attrs: dict[str, Attribute] = {
            "label": StringAttr(label),
            "names": str_array(names),
            "max_iters": IntegerAttr(max_iters, i64),
            "atol": FloatAttr(float(atol), Float64Type()),
            "rtol": FloatAttr(float(rtol), Float64Type()),
        }
        if checked is not None and not all(checked):
            attrs["checked"] = ArrayAttr([BoolAttr.from_bool(bool(c)) for c in checked])
        types = [v.type for v in inits] + [counter_type(), flag_type()]
        super().__init__(operands=[list(inits)], result_types=[types], regions=[body], attributes=attrs)

    @staticmethod
    def make_body(inits: Sequence[SSAValue]) -> tuple[Region, Block]:
        """An empty body whose arguments are the iteration counter and one per carried value."""
        block = Block(arg_types=[counter_type(), *[v.type for v in inits]])
        return Region(block), block

    @property
    def carried(self) -> Sequence[SSAValue]:
        """The results that are the carried tensors' final values."""
        return self.outputs[: len(self.inits)]

    @property
    def iterations(self) -> SSAValue:
        return self.outputs[len(self.inits)]

    @property
    def converged(self) -> SSAValue:
        return self.outputs[len(self.inits) + 1]

    def checked_list(self) -> list[bool]:
        """Whether each carried value takes part in the convergence test."""
        if self.checked is None:
            return [True] * len(self.inits)
        return [bool(a.value.data) for a in self.checked.data]

    def verify_(self) -> None:
        n = len(self.inits)
        want = [v.type for v in self.inits]
        if len(names_of(self.names)) != n:
            raise VerifyException("te.fixpoint: one name per carried value expected")
        if [r.type for r in self.outputs] != [*want, counter_type(), flag_type()]:
            raise VerifyException(
                "te.fixpoint: results must be the carried types, then tensor<i64> (iterations) and tensor<i8> (converged)"
            )
        block = self.body.block
        if [a.type for a in block.args] != [counter_type(), *want]:
            raise VerifyException("te.fixpoint: body arguments must be the tensor<i64> counter, then the carried types")
        term = block.last_op
        if not isinstance(term, YieldOp) or [v.type for v in term.values] != want:
            raise VerifyException("te.fixpoint: the body must end with te.yield of the carried types")
        if self.max_iters.value.data < 1:
            raise VerifyException("te.fixpoint: max_iters must be at least 1")
        if self.atol.value.data < 0 or self.rtol.value.data < 0:
            raise VerifyException("te.fixpoint: atol and rtol must be non-negative")
        if len(self.checked_list()) != n:
            raise VerifyException("te.fixpoint: one checked flag per carried value expected")


def counter_type() -> TensorType:
    """The type of a fixpoint's iteration counter and count: a 0-d int64 tensor."""
    return tensor_type(np.dtype(np.int64), [])


def flag_type() -> TensorType:
    """The type of a fixpoint's converged flag: a 0-d int8 tensor."""
    return tensor_type(np.dtype(np.int8), [])


STRUCTURAL_OPS: tuple[type[Operation], ...] = (
    InputOp,
    SourceOp,
    ConstantOp,
    DimOp,
    SliceLenOp,
    CheckDimOp,
    SinkOp,
    ExportOp,
    arith.ConstantOp,
    arith.AddiOp,
    arith.MuliOp,
)
"""The ops of a tensor_eq module that compute no tensor: boundaries, constants and extent arithmetic. Lowering
to elemwise keeps them as they are; the run trace does not count them as kernels."""


TensorEq = Dialect(
    "te",
    [
        InputOp,
        SourceOp,
        ConstantOp,
        SinkOp,
        ExportOp,
        DimOp,
        SliceLenOp,
        CheckDimOp,
        AccessOp,
        ContractOp,
        MapOp,
        BroadcastOp,
        ReduceOp,
        AxisOp,
        ConcatOp,
        FlattenOp,
        GenerateOp,
        PlaceOp,
        ScatterAddOp,
        BlockOp,
        GroupOp,
        CastOp,
        FixpointOp,
        YieldOp,
    ],
    [AccessAxisAttr, AxisKindAttr, ReductionAttr, ProjectionAttr],
)
