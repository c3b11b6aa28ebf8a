"""The pipeline text syntax, read with locations so every mistake is a caret diagnostic.

    pipeline := element ((',' | newline) element)*
    element  := NAME options? | '@' PATH
    options  := '{' (KEY ('=' VALUE (',' VALUE)*)?)* '}'      keys separated by spaces
    VALUE    := '"string"' | true | false | number | bare-word

This is xDSL's flat ``a,b{opt=1 other=x}`` syntax (values convert the same way:
numbers, ``true``/``false``, anything else a string), plus newlines as
separators and ``#`` comments for pipeline files, ``@file`` to include a
pipeline file, and an optional mlir-opt style ``builtin.module(...)`` wrapper.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fuse_mlir.diagnostics import FuseError, Loc, register_source

ParamValue = str | int | bool | float

_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_KEY = re.compile(r"[A-Za-z0-9_\-]+")
_BARE = re.compile(r'[^\s,{}"#]+')
_INT = re.compile(r"[-+]?[0-9]+\Z")
_FLOAT = re.compile(r"[-+]?[0-9]+\.[0-9]*([eE][-+]?[0-9]+)?\Z")
_WRAPPER = re.compile(r"\s*builtin\.module\((.*)\)\s*\Z", re.DOTALL)


@dataclass(frozen=True)
class Element:
    """One pass (or named pipeline) with its options, or an ``@file`` include."""

    name: str
    params: dict[str, tuple[ParamValue, ...]]
    loc: Loc
    include: bool = False


class _Scanner:
    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.pos = 0

    def loc(self, pos: int | None = None, length: int = 1) -> Loc:
        pos = self.pos if pos is None else pos
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return Loc(self.source, line, col, max(1, length))

    def error(self, message: str, pos: int | None = None, length: int = 1) -> FuseError:
        return FuseError(message, self.loc(pos, length))

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip(self, newlines: bool) -> None:
        """Skip spaces (and newlines if asked) and ``#`` comments."""
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            elif c in " \t\r" or (newlines and c == "\n"):
                self.pos += 1
            else:
                return

    def match(self, pattern: re.Pattern[str]) -> str | None:
        m = pattern.match(self.text, self.pos)
        if m is None or not m.group(0):
            return None
        self.pos = m.end()
        return m.group(0)


def parse_spec(text: str, source: str = "<pass-pipeline>") -> list[Element]:
    """The elements of pipeline ``text``; syntax errors are located in ``source`` (registered for carets)."""
    register_source(source, text)
    m = _WRAPPER.match(text)
    if m is not None:  # keep offsets: blank out the wrapper instead of cutting it
        text = " " * m.start(1) + m.group(1) + " " * (len(text) - m.end(1))
    s = _Scanner(text, source)
    out: list[Element] = []
    while True:
        s.skip(newlines=True)
        if not s.peek():
            return out
        out.append(_element(s))
        s.skip(newlines=False)
        c = s.peek()
        if c in (",", "\n"):
            s.pos += 1
            if c == ",":
                s.skip(newlines=True)
                if not s.peek():
                    raise s.error("expected a pass name after ','")
        elif c:
            raise s.error(f"expected ',' or a new line between passes, found '{c}'")


def _element(s: _Scanner) -> Element:
    start = s.pos
    if s.peek() == "@":
        s.pos += 1
        path = s.match(re.compile(r"[^\s,#]+"))
        if path is None:
            raise s.error("expected a file name after '@'")
        return Element(path, {}, s.loc(start, s.pos - start), include=True)
    name = s.match(_NAME)
    if name is None:
        raise s.error("expected a pass name")
    loc = s.loc(start, len(name))
    params: dict[str, tuple[ParamValue, ...]] = {}
    if s.peek() == "{":
        s.pos += 1
        _options(s, name, params)
    return Element(name, params, loc)


def _options(s: _Scanner, pass_name: str, params: dict[str, tuple[ParamValue, ...]]) -> None:
    while True:
        s.skip(newlines=True)
        c = s.peek()
        if c == "}":
            s.pos += 1
            return
        if not c:
            raise s.error(f"missing '}}' after the options of '{pass_name}'")
        key_pos = s.pos
        key = s.match(_KEY)
        if key is None:
            raise s.error(f"expected an option name or '}}' in the options of '{pass_name}', found '{c}'")
        if key in params:
            raise s.error(f"option '{key}' is given twice", key_pos, len(key))
        values: list[ParamValue] = []
        if s.peek() == "=":
            s.pos += 1
            values.append(_value(s, key))
            while s.peek() == ",":
                s.pos += 1
                values.append(_value(s, key))
        params[key] = tuple(values)
        if s.peek() not in (" ", "\t", "\n", "\r", "}", "#", ""):
            raise s.error(f"expected a space or '}}' after option '{key}', found '{s.peek()}'")


def _value(s: _Scanner, key: str) -> ParamValue:
    if s.peek() == '"':
        start = s.pos
        s.pos += 1
        chars: list[str] = []
        while True:
            c = s.peek()
            if not c or c == "\n":
                raise s.error("unterminated string", start, s.pos - start)
            s.pos += 1
            if c == '"':
                return "".join(chars)
            if c == "\\":
                esc = s.peek()
                s.pos += 1
                chars.append({"n": "\n", "t": "\t", "r": "\r"}.get(esc, esc))
            else:
                chars.append(c)
    word = s.match(_BARE)
    if word is None:
        raise s.error(f"expected a value for option '{key}'")
    if word in ("true", "false"):
        return word == "true"
    if _INT.match(word):
        return int(word)
    if _FLOAT.match(word):
        return float(word)
    return word
