"""Source locations on ops as real MLIR locations (``op.location``), not string attributes.

The .fuse lowering gives the ops that can fail at run time (sources, sinks,
extent checks, accesses, asserts, checked extracts, the kernels holding them)
the place in the program they come from. It lives in the op's location, so it
is printed as a trailing ``loc("file":line:col)`` only when asked
(``fuse-opt --mlir-print-debuginfo``, as ``mlir-opt``), is read back by the
parser, and plays no part in the op's attributes (CSE, dedup and printed IR
ignore it). A location wider than one character is MLIR's file-line-column
range, ``loc("file":line:col to :endcol)``, so diagnostics keep their caret
width.
"""

from __future__ import annotations

from xdsl.dialects.builtin import BuiltinAttribute, FileLineColLoc, IntAttr, LocationAttr, StringAttr, UnknownLoc
from xdsl.ir import Operation, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.printer import Printer

from fuse_mlir.diagnostics import Loc


@irdl_attr_definition
class FileLineColRange(ParametrizedAttribute, BuiltinAttribute):
    """A location spanning columns ``column`` to ``end_column`` (exclusive) of one line (MLIR's FileLineColRange).

    Printed ``loc("file":line:col to :endcol)`` as in MLIR; the parser of
    :mod:`fuse_mlir.ir` reads it back.
    """

    name = "fuse.file_line_col_range"

    filename: StringAttr
    line: IntAttr
    column: IntAttr
    end_column: IntAttr

    def print_builtin(self, printer: Printer) -> None:
        """Print in MLIR's location syntax, like xDSL's builtin locations."""
        with printer.in_location():
            printer.print_string_literal(self.filename.data)
            printer.print_string(f":{self.line.data}:{self.column.data} to :{self.end_column.data}")


def location_attr(loc: Loc | str | None) -> LocationAttr | FileLineColRange:
    """The MLIR location of ``loc`` (a :class:`Loc` or its :meth:`Loc.encode` text; empty or None: unknown)."""
    if isinstance(loc, str):
        loc = Loc.decode(loc) if loc else None
    if loc is None or loc.line <= 0:
        return UnknownLoc()
    if loc.length > 1:
        return FileLineColRange(
            StringAttr(loc.file), IntAttr(loc.line), IntAttr(loc.col), IntAttr(loc.col + loc.length)
        )
    return FileLineColLoc(StringAttr(loc.file), IntAttr(loc.line), IntAttr(loc.col))


def decode_location(attr: object) -> Loc | None:
    """The :class:`Loc` an MLIR location names, if it names a file position."""
    if isinstance(attr, FileLineColRange):
        length = max(1, attr.end_column.data - attr.column.data)
        return Loc(attr.filename.data, attr.line.data, attr.column.data, length)
    if isinstance(attr, FileLineColLoc):
        return Loc(attr.filename.data, attr.line.data, attr.column.data)
    return None


def source_loc(op: Operation) -> Loc | None:
    """Where in the program ``op`` comes from (its location), or None when unknown."""
    return decode_location(op.location)


def loc_text(op: Operation) -> str:
    """``op``'s location as :meth:`Loc.encode` text (``""`` when unknown), for run-time error tables."""
    loc = source_loc(op)
    return loc.encode() if loc is not None else ""


def set_location(op: Operation, loc: Loc | str | None) -> Operation:
    """Give ``op`` the location ``loc`` (a no-op when it is unknown); returns ``op``."""
    attr = location_attr(loc)
    if not isinstance(attr, UnknownLoc):
        op.location = attr  # type: ignore[assignment]  # xDSL types it as the builtin location union
    return op
