"""Recursive-descent parser of the `.fuse` language (LANGUAGE.md §2-§3).

:func:`parse` turns program text into an :class:`~fuse_mlir.frontend.ast.Module`.
Statements are recognised by their first one or two tokens; expressions are
parsed by precedence climbing, lowest first::

    ternary  c ? a : b                 (right-associative)
    ||
    &&
    < <= > >= == !=                    (not chainable)
    + -
    * /  and juxtaposition (W[i,j] X[j])
    unary - + !
    **                                 (right-associative; -x**2 is -(x**2))
    primary: X[i,j]  X  f(a, k=v)  lib::f(...)  2.5  "s"  true  [..]  {k: v}
             (e)  case {c -> v; default -> d}  reduce(op, i, j) term

A new juxtaposed factor starts when, after a complete factor, the next token
is a name, a number or ``(``; ``-`` there is always binary minus. A name
directly followed by ``(`` is always a call (the resolver later decides
between builtin, ``fn`` and boolean tensor) and one followed by ``[`` always a
tensor reference. The parser never backtracks: every decision looks at most
three tokens ahead, so the time is linear in the program length.

Every syntax error is a :class:`FuseError` at the offending token, saying
what was expected.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

from fuse_mlir.diagnostics import FuseError, Loc, register_source
from fuse_mlir.frontend import ast
from fuse_mlir.frontend.lexer import ASSIGN_OPS, EOF, NAME, NEWLINE, NUMBER, STRING, Token, describe, tokenize

__all__ = ["parse", "parse_expression", "recursion_room", "MAX_NESTING", "MAX_OPERATORS"]

#: Deepest nesting of brackets / blocks / unary operators that is accepted.
MAX_NESTING = 64

#: Largest index, position, offset or extent (indices are signed 64-bit in every backend).
MAX_INDEX = 2**63 - 1

#: Most binary operators (``+``, ``*``, juxtaposition, ...) in one expression. A chain ``a + b + c + ...``
#: is a left-nested tree as deep as it is long, and the resolver, the lowering and the printers walk
#: expressions recursively; :func:`recursion_room` gives them the Python frames this many levels need
#: (a few per level, measured; C stack use per level is small), so any accepted expression compiles and a
#: longer one is a located error rather than a RecursionError.
MAX_OPERATORS = 5000

_FRAMES_PER_LEVEL = 8  # measured: about 3 frames per level in the deepest walker (resolve, then lower); margin
_ROOM = _FRAMES_PER_LEVEL * (MAX_OPERATORS + 3 * MAX_NESTING) + 2000
_room_lock = threading.Lock()
_room_users = 0
_room_saved: int | None = None


@contextmanager
def recursion_room() -> Iterator[None]:
    """Run the block with a Python recursion limit high enough for the deepest expression the parser accepts.

    The limit is raised (never lowered) while any thread is inside such a block
    and put back when the last one leaves, unless someone else changed it meanwhile.
    """
    global _room_users, _room_saved
    with _room_lock:
        if _room_users == 0:
            _room_saved = sys.getrecursionlimit()
            if _room_saved < _ROOM:
                sys.setrecursionlimit(_ROOM)
        _room_users += 1
    try:
        yield
    finally:
        with _room_lock:
            _room_users -= 1
            if _room_users == 0 and _room_saved is not None and sys.getrecursionlimit() == max(_room_saved, _ROOM):
                sys.setrecursionlimit(_room_saved)


_BINARY_PREC = {
    "||": 1,
    "&&": 2,
    "<": 3,
    "<=": 3,
    ">": 3,
    ">=": 3,
    "==": 3,
    "!=": 3,
    "+": 4,
    "-": 4,
    "*": 5,
    "/": 5,
}
_CMP_PREC = 3
_MUL_PREC = 5
_JUXTAPOSITION_START = frozenset({NAME, NUMBER, "("})
_EXPR_START = frozenset({NAME, NUMBER, STRING, "(", "[", "{", "-", "+", "!"})
_STMT_END = frozenset({NEWLINE, ";", EOF, "}"})
_AUGMENTED = frozenset({"max=", "avg=", "min="})
_REDUCE_OPS = {"sum": "sum", "max": "max", "min": "min", "mean": "mean", "avg": "mean", "prod": "prod"}
_ASSIGN_WORDS = "'=', '+=', 'max=', 'avg=' or 'min='"


def parse(text: str, filename: str = "<string>") -> ast.Module:
    """Parse a whole `.fuse` program; raise :class:`FuseError` on the first syntax error."""
    register_source(filename, text)
    parser = _Parser(tokenize(text, filename))
    try:
        statements = parser.parse_statements(None)
    except RecursionError:
        raise FuseError("program is nested too deeply to parse", parser.tok.loc) from None
    return ast.Module(statements, filename, text)


def parse_expression(text: str, filename: str = "<expr>") -> ast.Expr:
    """Parse a single expression (e.g. a command-line value); the whole text must be consumed."""
    register_source(filename, text)
    parser = _Parser(tokenize(text, filename))
    try:
        parser.skip_newlines()
        expr = parser.parse_expr()
        parser.skip_newlines()
    except RecursionError:
        raise FuseError("expression is nested too deeply to parse", parser.tok.loc) from None
    if parser.tok.kind != EOF:
        parser.error(f"expected the end of the expression, found {describe(parser.tok)}")
    return expr


def _span(first: Token, last: Token) -> Loc:
    """A location from ``first`` through ``last`` (just ``first`` if they are on different lines)."""
    a, b = first.loc, last.loc
    if a.line != b.line or b.col < a.col:
        return a
    return Loc(a.file, a.line, a.col, b.col + b.length - a.col)


def _at(tok: Token) -> str:
    """``line:col`` of a token, for "opened at" notes."""
    return f"{tok.loc.line}:{tok.loc.col}"


class _Parser:
    """Parser state: the token list and the index of the current token."""

    __slots__ = ("toks", "pos", "tok", "depth", "operators", "expr_level")

    def __init__(self, tokens: list[Token]) -> None:
        self.toks = tokens
        self.pos = 0
        self.tok = tokens[0]
        self.depth = 0
        self.operators = 0
        self.expr_level = 0

    # ------------------------------------------------------------------
    # Token helpers
    # ------------------------------------------------------------------

    def advance(self) -> Token:
        """Consume and return the current token (EOF is never consumed)."""
        tok = self.tok
        if tok.kind != EOF:
            self.pos += 1
            self.tok = self.toks[self.pos]
        return tok

    def peek(self, k: int = 1) -> Token:
        """The token ``k`` places ahead (EOF past the end)."""
        i = self.pos + k
        return self.toks[i] if i < len(self.toks) else self.toks[-1]

    def error(self, message: str, tok: Token | None = None) -> NoReturn:
        """Raise a syntax error at ``tok`` (default: the current token)."""
        raise FuseError(message, (tok or self.tok).loc)

    def expect_name(self, what: str) -> Token:
        """Consume a NAME token or fail saying ``what`` was expected."""
        if self.tok.kind != NAME:
            self.error(f"expected {what}, found {describe(self.tok)}")
        return self.advance()

    def close_error(self, opener: Token, closer: str, alternatives: str = "") -> NoReturn:
        """Fail because the bracket ``opener`` is not closed where it should be."""
        prefix = f"{alternatives} or " if alternatives else ""
        self.error(
            f"expected {prefix}'{closer}' to close '{opener.text}' opened at {_at(opener)}, found {describe(self.tok)}"
        )

    def enter(self) -> None:
        """Count one level of nesting; refuse absurdly deep programs before Python's stack does."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.error(f"nested too deeply (more than {MAX_NESTING} levels of brackets, blocks or unary operators)")

    def count_operator(self, tok: Token) -> None:
        """Count one binary operator of the current top-level expression; refuse more than MAX_OPERATORS."""
        self.operators += 1
        if self.operators > MAX_OPERATORS:
            raise FuseError(
                f"expression too long: more than {MAX_OPERATORS} binary operators in one expression "
                "(split it over several equations)",
                tok.loc,
            )

    def skip_newlines(self) -> None:
        while self.tok.kind == NEWLINE:
            self.advance()

    def skip_separators(self) -> None:
        while self.tok.kind == NEWLINE or self.tok.kind == ";":
            self.advance()

    # ------------------------------------------------------------------
    # Statements
    # ------------------------------------------------------------------

    def parse_statements(self, opener: Token | None) -> list[ast.Stmt]:
        """Statements up to EOF (``opener`` None) or up to the ``}`` matching ``opener`` (not consumed)."""
        statements: list[ast.Stmt] = []
        while True:
            self.skip_separators()
            tok = self.tok
            if tok.kind == EOF:
                if opener is not None:
                    self.close_error(opener, "}")
                return statements
            if tok.kind == "}":
                if opener is None:
                    self.error("unexpected '}' with no matching '{'")
                return statements
            statements.append(self.parse_statement())
            end = self.tok.kind
            if end == NEWLINE or end == ";" or end == EOF or (end == "}" and opener is not None):
                continue
            where = "a newline, ';' or '}'" if opener is not None else "a newline or ';'"
            self.error(f"expected the end of the statement ({where}), found {describe(self.tok)}")

    def parse_statement(self) -> ast.Stmt:
        tok = self.tok
        kind = tok.kind
        if kind == NAME:
            word = tok.text
            nxt = self.peek()
            if word in _KEYWORD_STATEMENTS:
                if nxt.kind == NAME and word != "import":
                    return _KEYWORD_STATEMENTS[word](self)
                if nxt.kind == STRING and word == "import":
                    return self.parse_import()
                if nxt.kind in _STMT_END or (word == "import" and nxt.kind == NAME):
                    self.error(f"expected {_KEYWORD_EXPECTS[word]} after '{word}', found {describe(nxt)}", nxt)
            return self.parse_equation(None)
        if kind == STRING:
            return self.parse_sink()
        if kind == "{":
            return self.parse_block()
        if kind in _AUGMENTED:
            # `max=3`: a scalar named max/avg/min (the lexer fused the word and '=').
            return self.parse_equation(None)
        self.error(
            f'expected a statement (an equation, a sink "path" = ..., a block or a declaration), found {describe(tok)}'
        )

    def parse_equation(self, let_tok: Token | None) -> ast.Stmt:
        """``lhs [when guard] op rhs``, or a source ``lhs = "path"``."""
        first = let_tok or self.tok
        if self.tok.kind in _AUGMENTED:
            word_tok = self.advance()
            name = word_tok.text[:-1]
            lhs = ast.TensorRef(name, None, Loc(word_tok.loc.file, word_tok.loc.line, word_tok.loc.col, len(name)))
            return self.finish_equation(first, lhs, "=", None, let_tok)
        lhs = self.parse_lhs()
        guard: ast.Expr | None = None
        if self.tok.kind == NAME and self.tok.text == "when":
            self.advance()
            guard = self.parse_expr()
        op_tok = self.tok
        if op_tok.kind not in ASSIGN_OPS:
            if op_tok.kind == NAME and op_tok.text in ("max", "avg", "min") and self.peek().kind == "=":
                self.error(f"write '{op_tok.text}=' without a space before '='")
            self.error(f"expected {_ASSIGN_WORDS} after the left-hand side '{lhs.name}', found {describe(op_tok)}")
        self.advance()
        return self.finish_equation(first, lhs, op_tok.kind, guard, let_tok)

    def finish_equation(
        self, first: Token, lhs: ast.TensorRef, op: str, guard: ast.Expr | None, let_tok: Token | None
    ) -> ast.Stmt:
        tok = self.tok
        if tok.kind == STRING and self.peek().kind in _STMT_END:
            if op != "=":
                self.error(f"a file source must use '=', not '{op}'", tok)
            if guard is not None:
                self.error("a file source cannot have a 'when' guard", tok)
            if let_tok is not None:
                self.error("a file source cannot be declared with 'let'", let_tok)
            self.advance()
            assert isinstance(tok.value, str)
            return ast.Source(lhs, tok.value, first.loc)
        rhs = self.parse_expr()
        return ast.Equation(lhs, op, rhs, first.loc, guard, let_tok is not None)

    def parse_lhs(self) -> ast.TensorRef:
        """``X``, ``X[...]`` or the boolean form ``X(...)``."""
        name_tok = self.expect_name("a tensor name")
        if self.tok.kind == "[":
            indices = self.parse_lhs_indices(self.advance(), "]")
            return ast.TensorRef(name_tok.text, indices, name_tok.loc)
        if self.tok.kind == "(":
            indices = self.parse_lhs_indices(self.advance(), ")")
            return ast.TensorRef(name_tok.text, indices, name_tok.loc, boolean=True)
        return ast.TensorRef(name_tok.text, None, name_tok.loc)

    def parse_lhs_indices(self, opener: Token, closer: str) -> tuple[ast.IndexItem, ...]:
        items: list[ast.IndexItem] = []
        if self.tok.kind == closer:
            self.advance()
            return ()
        while True:
            items.append(self.parse_lhs_index())
            kind = self.tok.kind
            if kind == ",":
                self.advance()
            elif kind == closer:
                self.advance()
                return tuple(items)
            else:
                self.close_error(opener, closer, "','")

    def parse_lhs_index(self) -> ast.IndexItem:
        """A left-hand index: ``i``, ``p'``, dotted ``q.``, a position ``1``, ``*t`` or ``*t+1``."""
        tok = self.tok
        if tok.kind == NAME:
            self.advance()
            if self.tok.kind == ".":
                dot = self.advance()
                return ast.IndexName(tok.text, _span(tok, dot), dotted=True)
            if self.tok.kind in ("+", "-") and self.peek().kind == NUMBER:
                self.error(
                    f"an index offset ('{tok.text}{self.tok.kind}{self.peek().text}') is not allowed on the "
                    "left-hand side; only virtual time may be shifted there ('*t+1')",
                    tok,
                )
            return ast.IndexName(tok.text, tok.loc)
        if tok.kind == NUMBER and self.peek().kind in (":", "::"):
            return self.parse_slice()  # names the sliced axis of the right-hand side
        if tok.kind in (":", "::"):
            return self.parse_slice()
        if tok.kind == NUMBER:
            return ast.IndexNumber(self.int_literal("a position"), tok.loc)
        if tok.kind == "*":
            return self.parse_time_index()
        self.error(f"expected an index name, a position or '*t' on the left-hand side, found {describe(tok)}")

    def parse_time_index(self) -> ast.IndexName | ast.IndexOffset:
        """``*t`` or ``*t+k`` / ``*t-k`` (virtual time)."""
        star = self.advance()
        name_tok = self.tok
        if name_tok.kind != NAME:
            self.error(f"expected a virtual-time index name after '*', found {describe(name_tok)}")
        self.advance()
        if self.tok.kind in ("+", "-"):
            sign = self.advance()
            if self.tok.kind != NUMBER:
                self.error(
                    f"expected an integer offset after '*{name_tok.text}{sign.text}', found {describe(self.tok)}"
                )
            last = self.tok
            value = self.int_literal("an integer offset")
            offset = value if sign.kind == "+" else -value
            return ast.IndexOffset(name_tok.text, offset, _span(star, last), time=True)
        return ast.IndexName(name_tok.text, _span(star, name_tok), time=True)

    def int_literal(self, what: str) -> int:
        """Consume an integer NUMBER token (``what`` names it in the error for a float)."""
        tok = self.tok
        if tok.kind != NUMBER or not isinstance(tok.value, int):
            self.error(f"expected {what} (an integer literal), found {describe(tok)}")
        if tok.value > MAX_INDEX:
            self.error(f"index out of range: {what} {tok.text} is above 2^63-1, the largest index")
        self.advance()
        return tok.value

    def parse_sink(self) -> ast.Sink:
        path = self.advance()
        tok = self.tok
        if tok.kind != "=":
            if tok.kind in ASSIGN_OPS:
                self.error(f"a file sink must use '=', not '{tok.kind}'")
            self.error(f"expected '=' after the sink path {path.text}, found {describe(tok)}")
        self.advance()
        rhs = self.parse_expr()
        assert isinstance(path.value, str)
        return ast.Sink(path.value, rhs, path.loc)

    def parse_block(self) -> ast.Block:
        opener = self.advance()
        self.enter()
        body = self.parse_statements(opener)
        self.advance()  # '}'
        self.depth -= 1
        return ast.Block(tuple(body), opener.loc)

    def parse_export(self) -> ast.Export:
        kw = self.advance()
        names: list[tuple[str, Loc]] = []
        while True:
            tok = self.expect_name("a tensor name to export")
            names.append((tok.text, tok.loc))
            if self.tok.kind != ",":
                return ast.Export(tuple(names), kw.loc)
            self.advance()

    def parse_param(self) -> ast.ParamDecl:
        kw = self.advance()
        name = self.advance()
        type_name: str | None = None
        if self.tok.kind == ":":
            self.advance()
            type_name = self.expect_name("a type name after ':'").text
        value = self.decl_value("param", name)
        return ast.ParamDecl(name.text, type_name, value, kw.loc)

    def parse_const(self) -> ast.ConstDecl:
        kw = self.advance()
        name = self.advance()
        return ast.ConstDecl(name.text, self.decl_value("const", name), kw.loc)

    def parse_axis(self) -> ast.AxisDecl:
        kw = self.advance()
        name = self.advance()
        return ast.AxisDecl(name.text, self.decl_value("axis", name), kw.loc)

    def decl_value(self, keyword: str, name: Token) -> ast.Expr:
        """``= expr`` after a declared name."""
        if self.tok.kind != "=":
            self.error(f"expected '=' and a value after {keyword} '{name.text}', found {describe(self.tok)}")
        self.advance()
        return self.parse_expr()

    def parse_let(self) -> ast.Stmt:
        let_tok = self.advance()
        return self.parse_equation(let_tok)

    def parse_import(self) -> ast.Import:
        kw = self.advance()
        path = self.advance()
        if not (self.tok.kind == NAME and self.tok.text == "as"):
            self.error(f"expected 'as' and a name after the import path {path.text}, found {describe(self.tok)}")
        self.advance()
        alias = self.expect_name("a name after 'as'")
        assert isinstance(path.value, str)
        return ast.Import(path.value, alias.text, kw.loc)

    def parse_fn(self) -> ast.FnDef:
        """``fn name(a[x], b) -> result[i] { body }``."""
        kw = self.advance()
        name = self.advance()
        if self.tok.kind != "(":
            self.error(f"expected '(' and the parameters of fn '{name.text}', found {describe(self.tok)}")
        opener = self.advance()
        params: list[ast.FnParam] = []
        seen: set[str] = set()
        if self.tok.kind == ")":
            self.advance()
        else:
            while True:
                ptok = self.expect_name("a parameter name")
                if ptok.text in seen:
                    self.error(f"duplicate parameter '{ptok.text}' in fn '{name.text}'", ptok)
                seen.add(ptok.text)
                indices: tuple[ast.IndexName, ...] = ()
                if self.tok.kind == "[":
                    indices = self.parse_name_list(self.advance())
                params.append(ast.FnParam(ptok.text, indices, ptok.loc))
                if self.tok.kind == ",":
                    self.advance()
                elif self.tok.kind == ")":
                    self.advance()
                    break
                else:
                    self.close_error(opener, ")", "','")
        if self.tok.kind != "->":
            self.error(
                f"expected '->' and the result name after the parameters of fn '{name.text}', found {describe(self.tok)}"
            )
        self.advance()
        result = self.expect_name("the name of the result tensor after '->'")
        result_indices: tuple[ast.IndexName, ...] = ()
        if self.tok.kind == "[":
            result_indices = self.parse_name_list(self.advance())
        self.skip_newlines()
        if self.tok.kind != "{":
            self.error(f"expected '{{' to start the body of fn '{name.text}', found {describe(self.tok)}")
        body_open = self.advance()
        self.enter()
        body = self.parse_statements(body_open)
        self.advance()  # '}'
        self.depth -= 1
        return ast.FnDef(name.text, tuple(params), result.text, result_indices, tuple(body), kw.loc)

    def parse_name_list(self, opener: Token) -> tuple[ast.IndexName, ...]:
        """``[x, y']`` of plain index names (``fn`` parameters and results)."""
        names: list[ast.IndexName] = []
        if self.tok.kind == "]":
            self.advance()
            return ()
        while True:
            tok = self.expect_name("an index name")
            names.append(ast.IndexName(tok.text, tok.loc))
            if self.tok.kind == ",":
                self.advance()
            elif self.tok.kind == "]":
                self.advance()
                return tuple(names)
            else:
                self.close_error(opener, "]", "','")

    # ------------------------------------------------------------------
    # Expressions
    # ------------------------------------------------------------------

    def parse_expr(self) -> ast.Expr:
        """A full expression, conditional ``c ? a : b`` included."""
        if self.expr_level == 0:
            self.operators = 0  # the limit is per top-level expression
        self.expr_level += 1
        self.enter()
        cond = self.parse_binary(1)
        if self.tok.kind == "?":
            question = self.advance()
            then = self.parse_expr()
            if self.tok.kind != ":":
                self.error(
                    f"expected ':' of the conditional expression whose '?' is at {_at(question)}, "
                    f"found {describe(self.tok)}"
                )
            self.advance()
            orelse = self.parse_expr()
            cond = ast.Ternary(cond, then, orelse, cond.loc)
        self.depth -= 1
        self.expr_level -= 1
        return cond

    def parse_binary(self, min_prec: int) -> ast.Expr:
        """Binary operators and juxtaposition whose precedence is at least ``min_prec``."""
        lhs = self.parse_unary()
        compared = False
        while True:
            tok = self.tok
            kind = tok.kind
            prec = _BINARY_PREC.get(kind)
            if prec is None:
                if kind in _JUXTAPOSITION_START and min_prec <= _MUL_PREC:
                    rhs = self.parse_binary(_MUL_PREC + 1)
                    lhs = ast.BinOp("*", lhs, rhs, lhs.loc, juxtaposed=True)
                    self.count_operator(tok)
                    continue
                return lhs
            if prec < min_prec:
                return lhs
            if prec == _CMP_PREC:
                if compared:
                    self.error(f"comparisons cannot be chained; combine them with '&&' (found a second '{kind}')")
                compared = True
            self.advance()
            if self.tok.kind not in _EXPR_START:
                self.error(f"expected an expression after '{kind}', found {describe(self.tok)}")
            rhs = self.parse_binary(prec + 1)
            lhs = ast.BinOp(kind, lhs, rhs, lhs.loc)
            self.count_operator(tok)

    def parse_unary(self) -> ast.Expr:
        tok = self.tok
        if tok.kind == "-" or tok.kind == "+" or tok.kind == "!":
            self.advance()
            self.enter()
            operand = self.parse_unary()
            self.depth -= 1
            return ast.UnaryOp(tok.kind, operand, tok.loc)
        base = self.parse_primary()
        if self.tok.kind == "**":
            self.advance()
            self.enter()
            exponent = self.parse_unary()
            self.depth -= 1
            return ast.BinOp("**", base, exponent, base.loc)
        return base

    def parse_primary(self) -> ast.Expr:
        tok = self.tok
        kind = tok.kind
        if kind == NAME:
            nxt = self.peek().kind
            text = tok.text
            if nxt == "(":
                if text == "reduce":
                    return self.parse_reduce()
                return self.parse_call()
            if nxt == "[":
                self.advance()
                opener = self.advance()
                return ast.TensorRef(text, self.parse_rhs_indices(opener), tok.loc)
            if nxt == "::":
                return self.parse_call()
            if nxt == "{" and text == "case":
                return self.parse_case()
            self.advance()
            if text == "true" or text == "false":
                return ast.Bool(text == "true", tok.loc)
            return ast.TensorRef(text, None, tok.loc)
        if kind == NUMBER:
            self.advance()
            value = tok.value
            assert isinstance(value, int | float)
            return ast.Number(value, isinstance(value, int), tok.loc)
        if kind == STRING:
            self.advance()
            assert isinstance(tok.value, str)
            return ast.String(tok.value, tok.loc)
        if kind == "(":
            opener = self.advance()
            if self.tok.kind == ")":
                self.error("expected an expression inside '( )', found ')'")
            inner = self.parse_expr()
            if self.tok.kind != ")":
                self.close_error(opener, ")")
            self.advance()
            return ast.Paren(inner, opener.loc)
        if kind == "[":
            return self.parse_list()
        if kind == "{":
            return self.parse_dict()
        self.error(f"expected an expression, found {describe(tok)}")

    def parse_call(self) -> ast.Call:
        """``f(args, key=value)`` or ``lib::f(...)``."""
        first = self.advance()
        last = first
        name = first.text
        while self.tok.kind == "::":
            self.advance()
            last = self.expect_name("a function name after '::'")
            name = f"{name}::{last.text}"
        if self.tok.kind != "(":
            self.error(
                f"expected '(' after '{name}' (only functions can be used from an import), found {describe(self.tok)}"
            )
        opener = self.advance()
        args: list[ast.Expr] = []
        kwargs: list[tuple[str, ast.Expr]] = []
        seen: set[str] = set()
        while self.tok.kind != ")":
            tok = self.tok
            key: str | None = None
            if tok.kind == NAME and self.peek().kind == "=":
                key = tok.text
                self.advance()
                self.advance()
            elif tok.kind in _AUGMENTED:  # `max=3` as an argument: keyword `max`
                key = tok.kind[:-1]
                self.advance()
            if key is not None:
                if key in seen:
                    self.error(f"duplicate keyword argument '{key}' in call to '{name}'", tok)
                seen.add(key)
                kwargs.append((key, self.parse_expr()))
            else:
                if kwargs:
                    self.error(f"positional argument after keyword arguments in call to '{name}'")
                args.append(self.parse_expr())
            if self.tok.kind == ",":
                self.advance()
            elif self.tok.kind != ")":
                self.close_error(opener, ")", "','")
        self.advance()
        return ast.Call(name, tuple(args), tuple(kwargs), _span(first, last))

    def parse_rhs_indices(self, opener: Token) -> tuple[ast.IndexItem, ...]:
        """The items of ``X[...]`` on the right-hand side (``opener`` is the consumed ``[``)."""
        if self.tok.kind == "]":
            self.advance()
            return ()
        self.enter()
        items: list[ast.IndexItem] = []
        while True:
            items.append(self.parse_rhs_index())
            kind = self.tok.kind
            if kind == ",":
                self.advance()
            elif kind == "]":
                self.advance()
                self.depth -= 1
                return tuple(items)
            else:
                self.close_error(opener, "]", "','")

    def parse_rhs_index(self) -> ast.IndexItem:
        """One right-hand index item: name, offset, position, slice, ``*t``, or a gather expression."""
        tok = self.tok
        kind = tok.kind
        nxt = self.peek()
        if kind == NAME:
            if nxt.kind == "," or nxt.kind == "]":
                self.advance()
                return ast.IndexName(tok.text, tok.loc)
            if (nxt.kind == "+" or nxt.kind == "-") and self.peek(2).kind == NUMBER and self.peek(3).kind in (",", "]"):
                self.advance()
                sign = self.advance()
                num = self.tok
                value = self.int_literal("an integer offset")
                return ast.IndexOffset(tok.text, value if sign.kind == "+" else -value, _span(tok, num))
            if nxt.kind == "." and self.peek(2).kind in (",", "]"):
                self.error(f"a dotted axis '{tok.text}.' is only allowed on the left-hand side", tok)
        elif kind == NUMBER:
            if nxt.kind == "," or nxt.kind == "]":
                return ast.IndexNumber(self.int_literal("an integer position"), tok.loc)
            if nxt.kind == ":" or nxt.kind == "::":
                return self.parse_slice()
        elif kind == ":" or kind == "::":
            return self.parse_slice()
        elif kind == "-" and nxt.kind == NUMBER and self.peek(2).kind in (":", "::"):
            return self.parse_slice()
        elif kind == "*":
            return self.parse_time_index()
        expr = self.parse_expr()
        return ast.IndexTensor(expr, expr.loc)

    def parse_slice(self) -> ast.IndexSlice:
        """``start:stop:step`` with optional integer-literal parts (``0:2``, ``::2``, ``1:``, ``-2:``)."""
        first = self.tok
        parts: list[str] = []
        start = self.slice_bound(parts)
        stop: int | None = None
        step: int | None = None
        if self.tok.kind == "::":
            parts.append("::")
            self.advance()
            step = self.slice_bound(parts)
        else:  # ':' (the caller saw it)
            parts.append(":")
            self.advance()
            stop = self.slice_bound(parts)
            if self.tok.kind == ":":
                parts.append(":")
                self.advance()
                step = self.slice_bound(parts)
        last = self.toks[self.pos - 1]
        if self.tok.kind not in (",", "]"):
            self.error(f"expected an integer literal, ',' or ']' in the slice, found {describe(self.tok)}")
        if step == 0:
            self.error("a slice step cannot be 0", first)
        return ast.IndexSlice(start, stop, step, "".join(parts), _span(first, last))

    def slice_bound(self, parts: list[str]) -> int | None:
        """An optional (signed) integer literal inside a slice."""
        negative = False
        if self.tok.kind == "-" and self.peek().kind == NUMBER:
            negative = True
            parts.append("-")
            self.advance()
        if self.tok.kind != NUMBER:
            return None
        parts.append(self.tok.text)
        value = self.int_literal("an integer slice bound")
        return -value if negative else value

    def parse_list(self) -> ast.ListLit:
        opener = self.advance()
        self.enter()
        items: list[ast.Expr] = []
        while self.tok.kind != "]":
            items.append(self.parse_expr())
            if self.tok.kind == ",":
                self.advance()
            elif self.tok.kind != "]":
                self.close_error(opener, "]", "','")
        self.advance()
        self.depth -= 1
        return ast.ListLit(tuple(items), opener.loc)

    def parse_dict(self) -> ast.DictLit:
        opener = self.advance()
        self.enter()
        items: list[tuple[str, ast.Expr]] = []
        seen: set[str] = set()
        self.skip_newlines()
        while self.tok.kind != "}":
            key_tok = self.tok
            if key_tok.kind == NAME:
                key = key_tok.text
            elif key_tok.kind == STRING:
                assert isinstance(key_tok.value, str)
                key = key_tok.value
            elif key_tok.kind == EOF:
                self.close_error(opener, "}")
            else:
                self.error(f"expected a key (a name or a string) in the dict literal, found {describe(key_tok)}")
            if key in seen:
                self.error(f"duplicate key '{key}' in dict literal", key_tok)
            seen.add(key)
            self.advance()
            if self.tok.kind != ":":
                self.error(f"expected ':' after the dict key '{key}', found {describe(self.tok)}")
            self.advance()
            items.append((key, self.parse_expr()))
            self.skip_newlines()
            if self.tok.kind == ",":
                self.advance()
                self.skip_newlines()
            elif self.tok.kind != "}":
                self.close_error(opener, "}", "','")
        self.advance()
        self.depth -= 1
        return ast.DictLit(tuple(items), opener.loc)

    def parse_case(self) -> ast.Case:
        """``case { c1 -> v1; c2 -> v2; default -> d }`` (branches split by ';' or newlines)."""
        case_tok = self.advance()
        opener = self.advance()
        self.enter()
        branches: list[tuple[ast.Expr, ast.Expr]] = []
        default: ast.Expr | None = None
        while True:
            self.skip_separators()
            tok = self.tok
            if tok.kind == "}":
                self.advance()
                break
            if tok.kind == EOF:
                self.close_error(opener, "}")
            if default is not None:
                self.error("'default' must be the last branch of a case")
            if tok.kind == NAME and tok.text == "default" and self.peek().kind == "->":
                self.advance()
                self.advance()
                default = self.parse_expr()
            else:
                cond = self.parse_expr()
                if self.tok.kind != "->":
                    self.error(f"expected '->' after the case condition, found {describe(self.tok)}")
                self.advance()
                branches.append((cond, self.parse_expr()))
            if self.tok.kind == EOF:
                self.close_error(opener, "}")
            if self.tok.kind not in (NEWLINE, ";", "}"):
                self.error(f"expected ';', a newline or '}}' after a case branch, found {describe(self.tok)}")
        self.depth -= 1
        if not branches and default is None:
            self.error("a case needs at least one branch", case_tok)
        return ast.Case(tuple(branches), default, case_tok.loc)

    def parse_reduce(self) -> ast.Reduce:
        """``reduce(op, i, j) term``: the body is the product (term) that follows."""
        red = self.advance()
        opener = self.advance()
        op_tok = self.tok
        if op_tok.kind != NAME or op_tok.text.lower() not in _REDUCE_OPS:
            self.error(
                f"expected a reduction operator (sum, max, min, mean or prod) in reduce(...), found {describe(op_tok)}"
            )
        op = _REDUCE_OPS[op_tok.text.lower()]
        self.advance()
        indices: list[ast.IndexName] = []
        while self.tok.kind == ",":
            self.advance()
            idx = self.expect_name("an index name to reduce")
            indices.append(ast.IndexName(idx.text, idx.loc))
        if self.tok.kind != ")":
            self.close_error(opener, ")", "','")
        if not indices:
            self.error(f"reduce({op_tok.text}) names no index to reduce; write reduce({op_tok.text}, i) expr")
        self.advance()
        if self.tok.kind not in _EXPR_START:
            self.error(f"expected the expression to reduce after 'reduce(...)', found {describe(self.tok)}")
        self.enter()
        body = self.parse_binary(_MUL_PREC)
        self.depth -= 1
        return ast.Reduce(op, tuple(indices), body, red.loc)


_KEYWORD_STATEMENTS: dict[str, Callable[[_Parser], ast.Stmt]] = {
    "export": _Parser.parse_export,
    "param": _Parser.parse_param,
    "const": _Parser.parse_const,
    "axis": _Parser.parse_axis,
    "fn": _Parser.parse_fn,
    "let": _Parser.parse_let,
    "import": _Parser.parse_import,
}
_KEYWORD_EXPECTS = {
    "export": "a tensor name",
    "param": "a parameter name",
    "const": "a constant name",
    "axis": "an index name",
    "fn": "a function name",
    "let": "an equation",
    "import": 'a quoted path ("lib.fuse")',
}
