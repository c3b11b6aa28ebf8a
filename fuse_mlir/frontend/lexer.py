"""Tokenizer of the `.fuse` language (LANGUAGE.md §1).

One compiled master regex does the scanning; the few context-dependent rules
are applied around it:

* Newlines separate statements, except inside ``(...)`` or ``[...]``, where
  they are dropped so that argument and index lists may span lines. Inside
  ``{...}`` (blocks, ``fn`` bodies, ``case`` branches, dict literals) they are
  kept, because there they separate statements or branches. A bracket stack
  tracks which of these applies. A backslash at the end of a line joins the
  next line (the original Fuse examples use it).
* Primes belong to the identifier they follow (``p'``, ``s''``); a ``'``
  anywhere else is an error.
* ``max=`` / ``avg=`` / ``min=`` are single assignment tokens when the word is
  followed immediately by ``=`` (but not ``==``); ``max(a, b)`` stays a name
  and a call. The parser turns such a token back into a keyword argument
  (``f(x, max=3)``) where one is expected.

Line breaks are exactly those of :meth:`str.splitlines`, so that a token's line
number always matches the line that :mod:`fuse_mlir.diagnostics` quotes.
"""

from __future__ import annotations

import re
from typing import NoReturn

from fuse_mlir.diagnostics import FuseError, Loc

# Token kinds that are not operators. Operators use their own text as kind.
NAME = "NAME"
NUMBER = "NUMBER"
STRING = "STRING"
NEWLINE = "NEWLINE"
EOF = "EOF"

#: Most significant digits of an integer literal: 10**309 already exceeds the largest float64, so no longer
#: literal can mean a value (and Python refuses to convert more than 4,300 digits).
MAX_INT_DIGITS = 309

#: Assignment operators of an equation.
ASSIGN_OPS = frozenset({"=", "+=", "max=", "avg=", "min="})

#: Every operator / punctuation token (longest first where prefixes overlap).
OPERATORS = (
    "**",
    "+=",
    "==",
    "!=",
    "<=",
    ">=",
    "&&",
    "||",
    "->",
    "::",
    "=",
    "+",
    "-",
    "*",
    "/",
    "<",
    ">",
    "!",
    "?",
    ":",
    ",",
    ";",
    ".",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
)

_LINE_BREAK_CHARS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_OP_PATTERN = "|".join(re.escape(op) for op in OPERATORS)

_MASTER = re.compile(
    rf"""
    (?P<ws>[ \t]+)
  | (?P<nl>\r\n|[{_LINE_BREAK_CHARS}])
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*'*)
  | (?P<number>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<op>{_OP_PATTERN})
  | (?P<string>"[^"\\{_LINE_BREAK_CHARS}]*")
  | (?P<comment>\#[^{_LINE_BREAK_CHARS}]*)
  | (?P<hardstring>")
  | (?P<cont>\\(?:\r\n|[{_LINE_BREAK_CHARS}]))
  | (?P<bad>.)
    """,
    re.VERBOSE | re.DOTALL,
)

# Characters that may not directly follow a number literal (``1e``, ``2x``, ``1.2.3``).
_NUMBER_TAIL = re.compile(r"[A-Za-z0-9_.']")
# The whole malformed literal, for the message: word characters and dots, and a
# sign directly after an exponent letter.
_BAD_NUMBER = re.compile(r"(?:[A-Za-z0-9_.']|(?<=[eE])[+-])+")
# A run of ordinary string characters (no quote, backslash or line break).
_STRING_RUN = re.compile(rf'[^"\\{_LINE_BREAK_CHARS}]+')
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "0": "\0", "'": "'"}

_OPENERS = frozenset("([{")
_CLOSERS = {")": "(", "]": "[", "}": "{"}
_AUGMENTED_WORDS = frozenset({"max", "avg", "min"})


class Token:
    """One token: ``kind`` (NAME, NUMBER, STRING, NEWLINE, EOF or the operator text),
    the source ``text``, the literal ``value`` (numbers, strings) and where it starts.

    A plain slotted class (not a frozen dataclass) and a :class:`Loc` built on
    demand keep tokenizing cheap; only tokens that end up in the AST or in a
    diagnostic need a ``Loc``.
    """

    __slots__ = ("kind", "text", "file", "line", "col", "value")

    def __init__(self, kind: str, text: str, file: str, line: int, col: int, value: object = None) -> None:
        self.kind = kind
        self.text = text
        self.file = file
        self.line = line
        self.col = col
        self.value = value

    @property
    def loc(self) -> Loc:
        """The token's location; its length is the length of its text (at least 1)."""
        return Loc(self.file, self.line, self.col, max(1, len(self.text)))

    def __repr__(self) -> str:
        return f"Token({self.kind!r}, {self.text!r}, {self.line}:{self.col})"


def describe(tok: Token) -> str:
    """How a token is named in a diagnostic (``name 'X'``, ``end of line``, ``'+'``)."""
    if tok.kind == NAME:
        return f"name '{tok.text}'"
    if tok.kind == NUMBER:
        return f"number '{tok.text}'"
    if tok.kind == STRING:
        text = tok.text if len(tok.text) <= 40 else tok.text[:37] + '..."'
        return f"string {text}"
    if tok.kind == NEWLINE:
        return "end of line"
    if tok.kind == EOF:
        return "end of file"
    return f"'{tok.text}'"


def tokenize(text: str, filename: str = "<string>") -> list[Token]:
    """Split ``text`` into tokens, ending with one EOF token.

    Raises :class:`FuseError` (with the location) for an unexpected character,
    a malformed number literal, an unterminated string or a bad escape.
    """
    tokens: list[Token] = []
    append = tokens.append
    match = _MASTER.match
    pos = 0
    end = len(text)
    line = 1
    line_start = 0  # offset of the first character of the current line
    stack: list[str] = []  # open brackets
    last_kind = NEWLINE  # no NEWLINE token before the first real token

    while pos < end:
        m = match(text, pos)
        assert m is not None  # the last alternative matches any character
        kind = m.lastgroup
        stop = m.end()
        if kind == "ws" or kind == "comment":
            pos = stop
            continue
        if kind == "name":
            word = m.group()
            if word in _AUGMENTED_WORDS and text.startswith("=", stop) and not text.startswith("==", stop):
                last_kind = word + "="
                append(Token(last_kind, last_kind, filename, line, pos - line_start + 1))
                stop += 1
            else:
                last_kind = NAME
                append(Token(NAME, word, filename, line, pos - line_start + 1))
        elif kind == "op":
            op = m.group()
            if op in _OPENERS:
                stack.append(op)
            elif op in _CLOSERS and stack and stack[-1] == _CLOSERS[op]:
                # A mismatched closer is left on the stack; the parser reports it.
                stack.pop()
            last_kind = op
            append(Token(op, op, filename, line, pos - line_start + 1))
        elif kind == "nl":
            if last_kind != NEWLINE and (not stack or stack[-1] == "{"):
                last_kind = NEWLINE
                append(Token(NEWLINE, "\n", filename, line, pos - line_start + 1))
            line += 1
            line_start = stop
        elif kind == "number":
            literal = m.group()
            col = pos - line_start + 1
            if _NUMBER_TAIL.match(text, stop):
                bad = _BAD_NUMBER.match(text, pos)
                bad_text = bad.group() if bad else literal
                raise FuseError(f"invalid number literal '{bad_text}'", Loc(filename, line, col, len(bad_text)))
            value: int | float
            if "." in literal or "e" in literal or "E" in literal:
                value = float(literal)
                if value == float("inf"):
                    raise FuseError(
                        f"number literal '{literal}' is too large for a float", Loc(filename, line, col, len(literal))
                    )
            else:
                # More digits than any float64 holds (and Python refuses to convert over 4,300): refused here,
                # where the literal is, like a float literal that overflows.
                if len(literal.lstrip("0")) > MAX_INT_DIGITS:
                    raise FuseError(
                        f"integer literal too large: {len(literal)} digits (at most {MAX_INT_DIGITS})",
                        Loc(filename, line, col, len(literal)),
                    )
                value = int(literal)
            last_kind = NUMBER
            append(Token(NUMBER, literal, filename, line, col, value))
        elif kind == "string":
            literal = m.group()
            last_kind = STRING
            append(Token(STRING, literal, filename, line, pos - line_start + 1, literal[1:-1]))
        elif kind == "hardstring":
            # A string with escapes, or an unterminated one: scan it by hand.
            col = pos - line_start + 1
            stop, decoded = _scan_string(text, pos, filename, line, col, line_start)
            last_kind = STRING
            append(Token(STRING, text[pos:stop], filename, line, col, decoded))
        elif kind == "cont":
            line += 1
            line_start = stop
        else:
            _bad_character(text, pos, filename, line, pos - line_start + 1)
        pos = stop

    # End of file: just after the last real token, so that an "end of file"
    # diagnostic points at a line that can be shown.
    last = next((t for t in reversed(tokens) if t.kind != NEWLINE), None)
    if last is None:
        append(Token(EOF, "", filename, 1, 1))
    else:
        append(Token(EOF, "", filename, last.line, last.col + len(last.text)))
    return tokens


def _scan_string(text: str, start: int, filename: str, line: int, col: int, line_start: int) -> tuple[int, str]:
    """Scan the string literal opening at ``start``; return (end offset, decoded value)."""
    pos = start + 1
    end = len(text)
    parts: list[str] = []
    while True:
        m = _STRING_RUN.match(text, pos)
        if m is not None:
            parts.append(m.group())
            pos = m.end()
        if pos >= end or text[pos] in _LINE_BREAK_CHARS:
            raise FuseError(
                "unterminated string literal (missing closing '\"' before the end of the line)",
                Loc(filename, line, col, 1),
            )
        ch = text[pos]
        if ch == '"':
            return pos + 1, "".join(parts)
        # Backslash escape.
        nxt = text[pos + 1] if pos + 1 < end else ""
        if nxt in _ESCAPES:
            parts.append(_ESCAPES[nxt])
            pos += 2
            continue
        if nxt == "" or nxt in _LINE_BREAK_CHARS:
            raise FuseError(
                "unterminated string literal (missing closing '\"' before the end of the line)",
                Loc(filename, line, col, 1),
            )
        raise FuseError(
            f"invalid escape sequence '\\{nxt}' in string literal (allowed: \\\" \\\\ \\n \\t \\r \\0 \\')",
            Loc(filename, line, pos - line_start + 1, 2),
        )


def _bad_character(text: str, pos: int, filename: str, line: int, col: int) -> NoReturn:
    """Raise the diagnostic for a character that starts no token."""
    ch = text[pos]
    loc = Loc(filename, line, col, 1)
    if ch == "'":
        raise FuseError("unexpected character \"'\": a prime may only follow an index name; strings use '\"'", loc)
    if ch == "&":
        raise FuseError("unexpected character '&' (did you mean '&&'?)", loc)
    if ch == "|":
        raise FuseError("unexpected character '|' (did you mean '||'?)", loc)
    if ch == "\\":
        raise FuseError("unexpected character '\\' (a line continuation must be the last character of its line)", loc)
    shown = ch if ch.isprintable() else f"U+{ord(ch):04X}"
    raise FuseError(f"unexpected character '{shown}'", loc)
