"""Reading MLIR text: the xDSL context with fuse_mlir's dialects, and located parse/verify errors.

Every tool that reads MLIR (``fuse-opt``, tests, later pass drivers) goes
through :func:`parse_mlir`, so xDSL's parse and verify errors always reach the
user as a :class:`~fuse_mlir.diagnostics.FuseError` with ``file:line:col``
and a caret, never as a Python traceback.
"""

from __future__ import annotations

import hashlib
import io
from weakref import WeakKeyDictionary

from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, FileLineColLoc, IntAttr, LocationAttr, ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.irdl import AttributeInvT
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.utils.lexer import Span

from fuse_mlir.diagnostics import FuseError, Loc, register_source
from fuse_mlir.dialects.locations import FileLineColRange, source_loc
from fuse_mlir.dialects.tensor_eq import TensorEq


def make_context(*, allow_unregistered: bool = False) -> Context:
    """A fresh xDSL context with every dialect of every level loaded (te, ew, loop, and the upstream ones).

    ``allow_unregistered`` lets the parser accept ops of dialects it does not
    know (``fuse-opt --allow-unregistered-dialect``, as in mlir-opt); they
    are kept as opaque generic ops.
    """
    from xdsl.dialects.cf import Cf
    from xdsl.dialects.func import Func
    from xdsl.dialects.llvm import LLVM
    from xdsl.dialects.math import Math

    from fuse_mlir.dialects.abi import Fuse
    from fuse_mlir.dialects.elemwise import Elemwise
    from fuse_mlir.dialects.loop import Loop
    from fuse_mlir.mathlib.ops import MathX

    ctx = Context(allow_unregistered=allow_unregistered)
    for dialect in (Builtin, Arith, Math, MathX, Func, Cf, LLVM, TensorEq, Elemwise, Loop, Fuse):
        ctx.load_dialect(dialect)
    return ctx


class _LocatingParser(Parser):
    """An xDSL parser that remembers where each operation starts, so that a
    verifier error found after parsing can still point at the op's source."""

    def __init__(self, ctx: Context, text: str, name: str) -> None:
        super().__init__(ctx, text, name)
        self.op_spans: dict[int, tuple[Operation, Span]] = {}
        self.first_uses: dict[str, Span] = {}

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        try:
            op = super().parse_operation()
        except DiagnosticException as err:
            # Raised while building the op from what was parsed (e.g. an attribute
            # of the wrong kind): blame the op, not the token after it.
            raise ParseError(start, str(err)) from None
        # Keyed by id; the op is kept alive alongside so the id cannot be reused.
        self.op_spans[id(op)] = (op, start)
        return op

    def _parse_location(self) -> LocationAttr:
        """MLIR's locations, and its same-line range ``"file":line:col to :endcol`` (see ``dialects.locations``)."""
        loc = super()._parse_location()
        if isinstance(loc, FileLineColLoc) and self.parse_optional_keyword("to") is not None:
            self.parse_punctuation(":", " before the end column of a location range (to :col)")
            end = self.parse_integer(False, False, " (the end column of a location range)")
            if end <= loc.column.data:
                self.raise_error(f"a location range must end after its start column {loc.column.data}")
            return FileLineColRange(loc.filename, loc.line, loc.column, IntAttr(end))  # type: ignore[return-value]
        return loc

    def _get_op_by_name(self, name: str) -> type[Operation]:
        try:
            return super()._get_op_by_name(name)
        except ParseError:
            # xDSL points past the name; point at the name itself.
            here = self._current_token.span
            pos = here.input.content.rfind(name, 0, here.start)
            if pos < 0:
                raise
            dialect = name.split(".", 1)[0]
            known = dialect in self.ctx.registered_dialect_names
            hint = "" if known else f" (dialect '{dialect}' is not loaded; --allow-unregistered-dialect keeps such ops)"
            raise ParseError(Span(pos, pos + len(name), here.input), f"unknown operation '{name}'{hint}") from None

    def resolve_operand(self, operand: UnresolvedOperand, type: AttributeInvT) -> SSAValue[AttributeInvT]:
        if operand.operand_name not in self.ssa_values:
            self.first_uses.setdefault(operand.operand_name, operand.span)
        return super().resolve_operand(operand, type)

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        try:
            return super().parse_module(allow_implicit_module)
        except ParseError as err:
            undefined = [n for n in self.forward_ssa_references if n in self.first_uses]
            if err.msg.startswith("values used but not defined") and undefined:
                raise ParseError(self.first_uses[undefined[0]], f"use of undefined value %{undefined[0]}") from None
            raise


def defined_outside(v: SSAValue, op: Operation) -> bool:
    """Whether ``v`` is defined outside ``op`` and its regions (so it is known before ``op`` runs)."""
    owner = v.owner
    cur: Operation | None = owner if isinstance(owner, Operation) else owner.parent_op()
    while cur is not None:
        if cur is op:
            return False
        cur = cur.parent_op()
    return True


def span_loc(span: Span, filename: str) -> Loc:
    """The :class:`Loc` of an xDSL span (its first line only)."""
    line, col = span.get_location()[1:]
    text = span.input.content
    line_end = text.find("\n", span.start)
    if line_end == -1:
        line_end = len(text)
    length = max(1, min(span.end, line_end) - span.start)
    return Loc(filename, line, col, length)


def _message(err: BaseException) -> str:
    """An exception's message (``str`` leaves out the notes where xDSL prints the whole module)."""
    return str(err).strip() or type(err).__name__


def _parse_message(err: ParseError) -> str:
    """xDSL's parse error message, mended where xDSL leaves it unreadable."""
    msg = err.msg.strip()
    content = err.span.input.content
    if err.span.start >= len(content.rstrip()):
        # xDSL reports a missing '}' at the end as just " in block definition".
        return f"unexpected end of file {msg}" if msg.startswith("in ") else msg or "unexpected end of file"
    if "{first_char}" in msg:  # an unformatted placeholder in xDSL 0.74's lexer
        first = content[err.span.start : err.span.start + 1]
        msg = msg.replace("{first_char}", repr(first if isinstance(first, str) else first.decode(errors="replace")))
    return msg or "syntax error"


# Where each parsed op came from: its first token's span (converted to a Loc only when asked,
# since counting lines for every op would make parsing quadratic) or a Loc set by a pass.
_OP_LOCS: WeakKeyDictionary[Operation, tuple[Span[str], str] | Loc] = WeakKeyDictionary()


def op_loc(op: Operation) -> Loc | None:
    """Where ``op`` comes from: its position in parsed MLIR text, else its location (``op.location``), else None."""
    entry = _OP_LOCS.get(op)
    if isinstance(entry, Loc):
        return entry
    if entry is not None:
        return span_loc(*entry)
    return source_loc(op)


def set_op_loc(op: Operation, loc: Loc | None) -> None:
    """Give ``op`` (typically one a pass created) the location diagnostics about it should point at."""
    if loc is not None:
        _OP_LOCS[op] = loc


def verify_module(module: Operation, context: str = "", fallback: Loc | None = None) -> None:
    """Verify ``module`` (each op's verifier, then :func:`check_dominance`); on failure raise a
    :class:`FuseError` located at the first op that fails on its own.

    ``context`` prefixes the message (e.g. ``"after pass 'cse': "``); ``fallback`` is the location used
    when no single op fails on its own.
    """
    try:
        module.verify()
    except (DiagnosticException, ValueError) as err:
        message = _message(err)
        for op in module.walk():
            try:
                op.verify(verify_nested_ops=False)
            except (DiagnosticException, ValueError) as op_err:
                detail = _message(op_err)
                if not detail.startswith(op.name):
                    detail = f"{op.name}: {detail}"
                raise FuseError(context + detail, op_loc(op)) from None
        raise FuseError(context + message, fallback) from None
    bad = check_dominance(module)
    if bad is not None:
        op, k = bad
        raise FuseError(
            f"{context}{op.name}: operand {k} is used where its definition is not visible "
            "(defined later in the block, or inside a region this op is not in)",
            op_loc(op) or fallback,
        )


def check_dominance(module: Operation) -> tuple[Operation, int] | None:
    """The first op (and operand number) that uses a value its definition does not dominate, or None.

    xDSL's verifier checks each op's own constraints but not SSA dominance, so a lowering that reads a value
    outside the region defining it (a ``loop.dim`` hoisted out of the ``loop.while`` that computes its buffer)
    verified, and failed later in the LLVM lowering. In a single-block region a value is visible to the ops
    after its definition and to the regions nested in them; in a region of several blocks (the llvm
    dialect's branches) every value of the region's blocks counts as visible there, a check this leaves to
    LLVM's own verifier. One walk with an undo list: linear in the module's size.
    """
    visible: set[SSAValue] = set()

    def block(b: Block, added: list[SSAValue]) -> tuple[Operation, int] | None:
        visible.update(b.args)
        added.extend(b.args)
        for op in b.ops:
            for k, operand in enumerate(op.operands):
                if operand not in visible:
                    return op, k
            for r in op.regions:
                bad = region(r)
                if bad is not None:
                    return bad
            visible.update(op.results)
            added.extend(op.results)
        return None

    def region(r: Region) -> tuple[Operation, int] | None:
        blocks = list(r.blocks)
        added: list[SSAValue] = []  # what this region made visible: taken back when it is done
        if len(blocks) > 1:
            for b in blocks:
                added.extend(b.args)
                for op in b.ops:
                    added.extend(op.results)
            visible.update(added)
        try:
            for b in blocks:
                bad = block(b, added)
                if bad is not None:
                    return bad
            return None
        finally:
            visible.difference_update(added)

    for r in module.regions:
        bad = region(r)
        if bad is not None:
            return bad
    return None


def parse_mlir(
    text: str, filename: str = "<stdin>", *, verify: bool = True, allow_unregistered: bool = False
) -> ModuleOp:
    """Parse (and by default verify) MLIR text in :func:`make_context`'s context.

    Syntax errors and verifier failures raise :class:`FuseError` located at
    the offending token or operation of ``filename``. ``allow_unregistered``
    accepts ops of unknown dialects (see :func:`make_context`).
    """
    register_source(filename, text)
    parser: _LocatingParser | None = None
    try:
        # The constructor already lexes the first token, so it can fail too.
        parser = _LocatingParser(make_context(allow_unregistered=allow_unregistered), text, filename)
        module = parser.parse_module()
    except ParseError as err:
        raise FuseError(_parse_message(err), span_loc(err.span, filename)) from None  # type: ignore[arg-type]  # text input: a Span[str]
    except DiagnosticException as err:
        # Attribute/type constructors may verify while parsing; point at the current token.
        loc = span_loc(parser._current_token.span, filename) if parser is not None else Loc(filename, 1, 1)
        raise FuseError(_message(err), loc) from None
    assert parser is not None
    for op, span in parser.op_spans.values():
        _OP_LOCS[op] = (span, filename)
    if verify:
        verify_module(module, fallback=Loc(filename, 1, 1))
    return module


def print_module(module: ModuleOp, generic: bool = False) -> str:
    """MLIR text of a module (custom format unless ``generic``), ending in a newline: deterministic, so caches
    key on it (``Lowered.te_digest``)."""
    out = io.StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    return out.getvalue() + "\n"


def module_digest(module: ModuleOp) -> str:
    """The sha256 (hex) of a module's text and of its ops' source locations, which the text leaves out.

    Kernels are cached under it: two programs of the same structure share code, but their run-time error tables
    carry each program's own locations, so the locations are part of the key.
    """
    digest = hashlib.sha256(print_module(module).encode())
    for op in module.walk():
        loc = source_loc(op)
        if loc is not None:
            digest.update(f"\n{loc.encode()}".encode())
    return digest.hexdigest()
