"""The ``ew`` (elemwise) dialect: positional tensor kernels with scalar bodies, like linalg.generic.

A module at this level keeps tensor_eq's boundary and extent ops (``te.input``,
``te.dim``, ``te.check_dim``, ``te.export``, ...) and expresses all
computation as:

- ``ew.generic``: a loop nest over an iteration space of ``len(extents)``
  dims, each ``parallel`` or ``reduction``. Each mapped input reads one
  element per iteration point (``maps[k][a]`` is the iteration dim of its axis
  a; broadcasting is a dim the input lacks). Each *table* input is passed
  whole and read inside the body with ``ew.extract`` at computed positions
  (gathers, offsets, slices, concat). The body computes one scalar per
  result (``ew.yield``); reduction dims combine each with its kind (``kind``
  lists one ``#ew.kind`` per result, e.g. ``[#ew.kind<sum>, #ew.kind<max>]``;
  iterators are ``#ew.iterator<parallel>`` / ``#ew.iterator<reduction>``). Each result is a tensor
  over the parallel dims, in order. Several results make a fused kernel: the
  sum and the max of one expression come out of one loop nest.
- ``ew.contract``: a sum-of-products of two float tensors kept whole so the
  loop level can call BLAS (gemm/gemv, batched).
- ``ew.scatter_add``: an update added into zeros at positions read from
  index tensors (the adjoint of a gather); repeated positions accumulate.
- ``ew.host_call``: a builtin run by the runtime on NumPy (``tucker_dense``,
  ``topk``): rare, shape-static, and not worth native code.

Body-only ops: ``ew.index`` (the current iteration index of a dim),
``ew.extract`` (read a table; out-of-range is a run-time error carrying a
message and source location when ``check`` is set), ``ew.assert`` (a
run-time check of a value, e.g. a negative integer exponent), ``ew.yield``.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import auto
from typing import cast

from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    Signedness,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Block, Dialect, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    EqAttrConstraint,
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
from xdsl.traits import HasParent, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from fuse_mlir.diagnostics import Loc
from fuse_mlir.dialects.enum_attr import AngleBracketEnum
from fuse_mlir.dialects.locations import set_location
from fuse_mlir.dialects.tensor_eq import params_attr


class IteratorType(StrEnum):
    """What one iteration dim of an ``ew.generic`` does: index the results, or be combined away."""

    PARALLEL = auto()
    REDUCTION = auto()


class ReductionKind(StrEnum):
    """How a result combines its values over the reduction dims (``none``: the kernel has none)."""

    NONE = auto()
    SUM = auto()
    PROD = auto()
    MAX = auto()
    MIN = auto()
    ANY = auto()


@irdl_attr_definition
class IteratorTypeAttr(AngleBracketEnum[IteratorType], EnumAttribute[IteratorType]):
    """``#ew.iterator<parallel>`` / ``#ew.iterator<reduction>`` (model: linalg's ``IteratorTypeAttr``)."""

    name = "ew.iterator"


@irdl_attr_definition
class ReductionKindAttr(AngleBracketEnum[ReductionKind], EnumAttribute[ReductionKind]):
    """``#ew.kind<sum>``: one result's combiner over the reduction dims (``none`` without reduction dims)."""

    name = "ew.kind"


ITERATORS = tuple(IteratorType)
INPLACE_ATTR = "inplace"
"""The attribute the inplace pass sets on an ``ew.generic`` whose results overwrite input buffers: one input
index per result, -1 for a fresh buffer (``GenericOp.inplace_list``)."""
KINDS = tuple(ReductionKind)


def is_float(t: Attribute) -> bool:
    return isinstance(t, Float16Type | Float32Type | Float64Type)


def is_unsigned(t: Attribute) -> bool:
    return isinstance(t, IntegerType) and t.signedness.data == Signedness.UNSIGNED


def signless(t: Attribute) -> Attribute:
    """Scalars in bodies are signless (arith's rule); unsigned-ness lives in the ops (extui, cmpi ult, ...)."""
    if isinstance(t, IntegerType):
        return IntegerType(t.width.data)
    return t


def int_array(values: Sequence[int]) -> ArrayAttr[IntegerAttr]:
    return ArrayAttr([IntegerAttr(v, i64) for v in values])


def ints_of(attr: Attribute) -> tuple[int, ...]:
    """Decode an ``ArrayAttr`` of ``IntegerAttr`` (maps, ``out``, ``inplace``) into a tuple of ints."""
    # Plain isinstance tests: xDSL's generic ``isa`` builds a constraint per element, and this decodes every
    # kernel's maps on each fusion step (a 2,000-term sum spent a fifth of its compile here).
    if isinstance(attr, ArrayAttr):
        items = attr.data
        if all(isinstance(a, IntegerAttr) for a in items):
            return tuple(cast(IntegerAttr, a).value.data for a in items)
    raise TypeError(f"expected an array of integers, got {attr}")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a generic body with the scalar it computes for each result."""

    name = "ew.yield"
    values = var_operand_def()
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(GenericOp)))
    assembly_format = "$values attr-dict `:` type($values)"

    def __init__(self, values: SSAValue | Sequence[SSAValue]):
        super().__init__(operands=[[values] if isinstance(values, SSAValue) else list(values)])

    @property
    def value(self) -> SSAValue:
        """The yielded scalar of a single-result kernel."""
        return self.values[0]


@irdl_op_definition
class IndexOp(IRDLOperation):
    """The current iteration index of dim ``dim`` inside a generic body."""

    name = "ew.index"
    dim = attr_def(IntegerAttr)
    result = result_def(IndexType)
    traits = traits_def(Pure())
    assembly_format = "$dim attr-dict"

    def __init__(self, dim: int):
        super().__init__(attributes={"dim": IntegerAttr(dim, i64)}, result_types=[IndexType()])


@irdl_op_definition
class ExtractOp(IRDLOperation):
    """Read one element of a table (a whole-tensor block argument) at computed positions.

    With ``check`` set, a position outside the table is a run-time error whose
    message is ``check`` (formatted with the position and extent) at ``loc``;
    without it the caller guarantees the positions are in range.
    """

    name = "ew.extract"
    table = operand_def(TensorType)
    positions = var_operand_def(IndexType)
    check = opt_attr_def(StringAttr)
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$table `[` $positions `]` attr-dict `:` type($table) `->` type($result)"

    def __init__(self, table: SSAValue, positions: Sequence[SSAValue], check: str = "", loc: Loc | str = ""):
        t = table.type
        assert isinstance(t, TensorType)
        attrs: dict[str, Attribute] = {}
        if check:
            attrs["check"] = StringAttr(check)
        super().__init__(operands=[table, list(positions)], result_types=[signless(t.element_type)], attributes=attrs)
        set_location(self, loc)

    def verify_(self) -> None:
        t = self.table.type
        assert isinstance(t, TensorType)
        if len(self.positions) != t.get_num_dims():
            raise VerifyException(f"ew.extract: {len(self.positions)} positions for a rank-{t.get_num_dims()} table")


@irdl_op_definition
class AssertOp(IRDLOperation):
    """A run-time check inside a generic body: where ``cond`` (i1) is false the run stops with an error.

    The error is ``message`` formatted with ``value`` (an integer scalar: the
    offending value) at ``loc``. Not pure: it is kept although it has no
    result, and a body holding one is run at every point of its iteration space
    (no zero-skipping). Used where a value, not a position, can be invalid: an
    integer raised to a negative integer power.
    """

    name = "ew.assert"
    cond = operand_def(EqAttrConstraint(IntegerType(1)))
    value = operand_def(IntegerType)
    message = attr_def(StringAttr)
    traits = lazy_traits_def(lambda: (HasParent(GenericOp),))
    assembly_format = "$cond `,` $value attr-dict `:` type($value)"

    def __init__(self, cond: SSAValue, value: SSAValue, message: str, loc: Loc | str = ""):
        attrs: dict[str, Attribute] = {"message": StringAttr(message)}
        super().__init__(operands=[cond, value], attributes=attrs)
        set_location(self, loc)


@irdl_op_definition
class GenericOp(IRDLOperation):
    """A loop nest with a scalar body; see the module docstring."""

    name = "ew.generic"
    inputs = var_operand_def(TensorType)
    tables = var_operand_def(TensorType)
    extents = var_operand_def(IndexType)
    maps = attr_def(ArrayAttr[ArrayAttr[IntegerAttr]])
    iterators = attr_def(ArrayAttr[IteratorTypeAttr])
    kind = attr_def(ArrayAttr[ReductionKindAttr])
    body = region_def("single_block")
    outputs = var_result_def(TensorType)
    irdl_options = (AttrSizedOperandSegments(),)
    traits = traits_def(Pure())
    assembly_format = (
        "`ins` `(` $inputs `:` type($inputs) `)` `tables` `(` $tables `:` type($tables) `)` "
        "`extents` `(` $extents `)` attr-dict-with-keyword `->` type($outputs) $body"
    )

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        tables: Sequence[SSAValue],
        extents: Sequence[SSAValue],
        maps: Sequence[Sequence[int]],
        iterators: Sequence[str],
        kind: str | Sequence[str],
        body: Region,
        result_type: TensorType | Sequence[TensorType],
        loc: Loc | str = "",
    ):
        kinds = [kind] if isinstance(kind, str) else list(kind)
        types = [result_type] if isinstance(result_type, TensorType) else list(result_type)
        attrs: dict[str, Attribute] = {
            "maps": ArrayAttr([int_array(m) for m in maps]),
            "iterators": ArrayAttr([IteratorTypeAttr(IteratorType(i)) for i in iterators]),
            "kind": ArrayAttr([ReductionKindAttr(ReductionKind(k)) for k in kinds]),
        }
        super().__init__(
            operands=[list(inputs), list(tables), list(extents)],
            result_types=[types],
            attributes=attrs,
            regions=[body],
        )
        set_location(self, loc)

    @property
    def result(self) -> SSAValue:
        """The result of a single-result kernel."""
        return self.outputs[0]

    def kind_list(self) -> list[ReductionKind]:
        """The combiner of each result (a ``StrEnum``: it compares equal to its name, e.g. ``"sum"``)."""
        return [k.data for k in self.kind.data]

    def map_list(self) -> list[tuple[int, ...]]:
        return [ints_of(m) for m in self.maps.data]

    def inplace_list(self) -> list[int]:
        """The input index each result overwrites in place (-1: a fresh buffer), from ``INPLACE_ATTR``."""
        attr = self.attributes.get(INPLACE_ATTR)
        if not isinstance(attr, ArrayAttr):
            return [-1] * len(self.outputs)
        return list(ints_of(attr))

    def iterator_list(self) -> list[IteratorType]:
        """Each iteration dim's iterator type (a ``StrEnum``: it compares equal to ``"parallel"``/``"reduction"``)."""
        return [s.data for s in self.iterators.data]

    def parallel_dims(self) -> list[int]:
        return [d for d, it in enumerate(self.iterator_list()) if it == "parallel"]

    def verify_(self) -> None:
        its = self.iterator_list()
        n = len(its)
        if len(self.extents) != n:
            raise VerifyException(f"ew.generic: {n} iteration dims but {len(self.extents)} extents")
        kinds = self.kind_list()
        if not self.outputs or len(kinds) != len(self.outputs):
            raise VerifyException(
                f"ew.generic: {len(self.outputs)} results but kinds {[str(k) for k in kinds]} (one per result)"
            )
        has_red = "reduction" in its
        for k in kinds:
            if has_red == (k == ReductionKind.NONE):
                raise VerifyException("ew.generic: a reduction kind is needed exactly when a dim is a reduction")
        maps = self.map_list()
        if len(maps) != len(self.inputs):
            raise VerifyException(f"ew.generic: {len(self.inputs)} inputs but {len(maps)} maps")
        for k, (v, m) in enumerate(zip(self.inputs, maps)):
            t = v.type
            assert isinstance(t, TensorType)
            if t.get_num_dims() != len(m):
                raise VerifyException(f"ew.generic: input #{k} has rank {t.get_num_dims()} but its map is {list(m)}")
            if any(not 0 <= d < n for d in m) or len(set(m)) != len(m):
                raise VerifyException(f"ew.generic: input #{k} map {list(m)} must name distinct dims below {n}")
        for out in self.outputs:
            t = out.type
            assert isinstance(t, TensorType)
            if t.get_num_dims() != len(self.parallel_dims()):
                raise VerifyException(
                    f"ew.generic: a result has rank {t.get_num_dims()} but there are "
                    f"{len(self.parallel_dims())} parallel dims"
                )
        block = self.body.block
        want = [signless(v.type.element_type) for v in self.inputs] + [v.type for v in self.tables]  # type: ignore[attr-defined]
        got = [a.type for a in block.args]
        if got != want:
            raise VerifyException(f"ew.generic: body arguments {got} should be {want} (input elements, then tables)")
        term = block.last_op
        if not isinstance(term, YieldOp):
            raise VerifyException("ew.generic: the body must end with ew.yield")
        if len(term.values) != len(self.outputs):
            raise VerifyException(f"ew.generic: body yields {len(term.values)} values for {len(self.outputs)} results")
        for v, out in zip(term.values, self.outputs):
            elem = out.type.element_type
            if v.type != signless(elem):
                raise VerifyException(f"ew.generic: body yields {v.type} but the result holds {elem}")

    @staticmethod
    def make_body(inputs: Sequence[SSAValue], tables: Sequence[SSAValue]) -> tuple[Region, Block]:
        """An empty body block with the right arguments, for builders."""
        types = [signless(v.type.element_type) for v in inputs] + [v.type for v in tables]  # type: ignore[attr-defined]
        block = Block(arg_types=types)
        return Region(block), block


@irdl_op_definition
class ContractOp(IRDLOperation):
    """``result[out] = sum over the rest of lhs[maps[0]] * rhs[maps[1]]``, kept whole for BLAS.

    ``maps`` give each operand's iteration dims; the result holds the dims in
    ``out`` in that order; ``extents`` size every iteration dim.
    """

    name = "ew.contract"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    extents = var_operand_def(IndexType)
    maps = attr_def(ArrayAttr[ArrayAttr[IntegerAttr]])
    out = attr_def(ArrayAttr[IntegerAttr])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$lhs `,` $rhs `extents` `(` $extents `)` attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"
    )

    def __init__(
        self,
        lhs: SSAValue,
        rhs: SSAValue,
        extents: Sequence[SSAValue],
        maps: Sequence[Sequence[int]],
        out: Sequence[int],
        result_type: TensorType,
    ):
        super().__init__(
            operands=[lhs, rhs, list(extents)],
            result_types=[result_type],
            attributes={"maps": ArrayAttr([int_array(m) for m in maps]), "out": int_array(out)},
        )

    def verify_(self) -> None:
        maps = [ints_of(m) for m in self.maps.data]
        n = len(self.extents)
        if len(maps) != 2:
            raise VerifyException("ew.contract: two maps expected")
        for v, m in zip((self.lhs, self.rhs), maps):
            if v.type.get_num_dims() != len(m) or any(not 0 <= d < n for d in m):  # type: ignore[attr-defined]
                raise VerifyException(f"ew.contract: map {list(m)} does not fit {v.type}")
        out = ints_of(self.out)
        if self.result.type.get_num_dims() != len(out):
            raise VerifyException("ew.contract: result rank differs from `out`")
        et = {self.lhs.type.element_type, self.rhs.type.element_type, self.result.type.element_type}  # type: ignore[attr-defined]
        if len(et) != 1:
            raise VerifyException("ew.contract: operands and result must share one float element type")


@irdl_op_definition
class HostCallOp(IRDLOperation):
    """A builtin the runtime evaluates with the reference NumPy kernels (``tucker_dense``, ``topk``)."""

    name = "ew.host_call"
    inputs = var_operand_def(TensorType)
    fn = attr_def(StringAttr)
    params = opt_attr_def(DictionaryAttr)
    outputs = var_result_def(TensorType)
    assembly_format = "$fn $inputs attr-dict `:` functional-type($inputs, results)"

    def __init__(
        self,
        fn: str,
        inputs: Sequence[SSAValue],
        result_types: Sequence[TensorType],
        params: dict[str, object] | None = None,
    ):
        attrs: dict[str, Attribute] = {"fn": StringAttr(fn)}
        if params:
            attrs["params"] = params_attr(params)
        super().__init__(operands=[list(inputs)], result_types=[list(result_types)], attributes=attrs)


@irdl_op_definition
class ScatterAddOp(IRDLOperation):
    """``update`` added into a zero tensor at computed positions; duplicate positions accumulate.

    The iteration space is the update's own axes. ``maps[n]`` is the update
    axis of each axis of gather operand ``n`` (an integer tensor). Result axis
    k is written at ``places[k]``: update axis ``p`` when ``p >= 0``, else the
    value of gather ``-1 - p`` (``-1`` is gather 0), whose result extent is the
    next of ``extents``. A gathered value outside ``[0, extent)`` is a run-time
    error with message ``check`` (formatted with the value and the extent) at
    ``loc``; nothing is written there.
    """

    name = "ew.scatter_add"
    update = operand_def(TensorType)
    gathers = var_operand_def(TensorType)
    extents = var_operand_def(IndexType)
    maps = attr_def(ArrayAttr[ArrayAttr[IntegerAttr]])
    places = attr_def(ArrayAttr[IntegerAttr])
    check = attr_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(),)
    assembly_format = "$update `[` $gathers `]` `(` $extents `)` attr-dict `:` type($update) `[` type($gathers) `]` `->` type($result)"

    def __init__(
        self,
        update: SSAValue,
        gathers: Sequence[SSAValue],
        extents: Sequence[SSAValue],
        maps: Sequence[Sequence[int]],
        places: Sequence[int],
        check: str,
        result_type: TensorType,
        loc: Loc | str = "",
    ):
        attrs: dict[str, Attribute] = {
            "maps": ArrayAttr([ArrayAttr([IntegerAttr(d, i64) for d in m]) for m in maps]),
            "places": ArrayAttr([IntegerAttr(p, i64) for p in places]),
            "check": StringAttr(check),
        }
        super().__init__(operands=[update, list(gathers), list(extents)], result_types=[result_type], attributes=attrs)
        set_location(self, loc)

    def map_list(self) -> list[tuple[int, ...]]:
        """The update axis of each axis of each gather operand."""
        return [ints_of(m) for m in self.maps.data]

    def place_list(self) -> list[int]:
        """Per result axis: the update axis it is (``>= 0``) or ``-1 - n`` for gather ``n``'s value."""
        return [a.value.data for a in self.places.data]

    def verify_(self) -> None:
        ut = self.update.type
        rt = self.result.type
        assert isinstance(ut, TensorType) and isinstance(rt, TensorType)
        rank = ut.get_num_dims()
        maps = self.map_list()
        if len(maps) != len(self.gathers):
            raise VerifyException(f"ew.scatter_add: {len(self.gathers)} gathers but {len(maps)} maps")
        for n, (g, m) in enumerate(zip(self.gathers, maps)):
            gt = g.type
            assert isinstance(gt, TensorType)
            if gt.get_num_dims() != len(m) or not all(0 <= d < rank for d in m):
                raise VerifyException(f"ew.scatter_add: map {list(m)} of gather {n} does not fit a rank-{rank} update")
            if not isinstance(gt.element_type, IntegerType):
                raise VerifyException(f"ew.scatter_add: gather {n} must hold integers")
        places = self.place_list()
        if len(places) != rt.get_num_dims():
            raise VerifyException(f"ew.scatter_add: {len(places)} places for a rank-{rt.get_num_dims()} result")
        if not all(-len(maps) <= p < rank for p in places):
            raise VerifyException(f"ew.scatter_add: places {places} name a missing update axis or gather")
        if sum(p < 0 for p in places) != len(self.extents):
            raise VerifyException("ew.scatter_add: one extent per gathered result axis expected")
        if ut.element_type != rt.element_type:
            raise VerifyException("ew.scatter_add: the update and the result share one element type")


Elemwise = Dialect(
    "ew",
    [GenericOp, ContractOp, ScatterAddOp, HostCallOp, YieldOp, IndexOp, ExtractOp, AssertOp],
    [IteratorTypeAttr, ReductionKindAttr],
)
