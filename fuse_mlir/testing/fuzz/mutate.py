"""Mutation fuzzing of program text: every mutant must compile or fail with a located FuseError.

Mutants start from the shipped ``examples/*.fuse`` and from generated
programs, and apply one to three edits. Half the mutants get edits that
mostly keep the text a program (a name, builtin, operator or number replaced
by another), so they reach the passes and run; the other half get edits
that mostly break it: delete, duplicate or swap tokens, truncate, insert
random characters, huge literals (``1e400``, a 5,000-digit integer),
unicode, deep nesting and long sums.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

_TOKEN = re.compile(r"\s+|[A-Za-z_][A-Za-z0-9_']*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\*\*|[<>=!]=|&&|\|\||->|::|.", re.S)
_CHARS = "[](){},;:=+-*/<>!?&|.#\"'\\ \n\t0123456789abcijXY_é∑\u00a0\u200b\U0001f600"
_SNIPPETS = [
    "1e400",
    "1" * 5000,
    "-1e-400",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    "softmax(",
    "axis=",
    "reduce(sum, i)",
    "concat(",
    "?",
    ":",
    "case {",
    "->",
    "fn f(a[x]) -> y { y = a[x] }",
    'import "nowhere.fuse" as q',
    "export",
    "\u00e9\u0301",
    "∑",
    "\x00",
    "axis i = 4611686018427387904",
    "X[9223372036854775808]",
    "param D: int = ",
    "const(",
    "'",
    "p''''",
    "i+99999999999999999999",
    "::0",
    "0:0:0",
    '"/proc/self/mem"',
    'W[h,d] = "w.npy"',
]


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
"""The shipped examples' folder: mutants start from its programs and resolve their source files against it, so
mutants of the examples read their data (in an installed package it is missing: no example seeds, and a
mutant's source read is a located error)."""


def seeds_from_examples(root: Path | None = None) -> list[str]:
    """The text of every shipped example program (``examples/*.fuse`` and ``examples/lib``)."""
    base = root or EXAMPLES
    return [p.read_text() for p in sorted(base.rglob("*.fuse"))] if base.is_dir() else []


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_']*")
_NUMBER = re.compile(r"\d")
_OPERATORS = ["+", "-", "*", "/", "**", "<", ">", "<=", ">=", "==", "!=", "&&", "||"]
_FUNCTIONS = ["exp", "log", "relu", "sigmoid", "tanh", "abs", "sqrt", "sin", "max", "min", "sum", "softmax"]
_NUMBERS = ["0", "1", "2", "0.5", "-1", "3", "1e30", "1e-30", "0.0"]


def _semantic(toks: list[str], rng: random.Random) -> None:
    """One edit that keeps the text a program more often than not: a name replaced by another of the text's
    names or by a builtin, an operator by another, a number by another, so the mutant reaches the passes and
    runs (the edits of :func:`mutate` that insert characters mostly stop at the parser)."""
    names = [i for i, t in enumerate(toks) if _NAME.fullmatch(t)]
    ops = [i for i, t in enumerate(toks) if t in _OPERATORS]
    numbers = [i for i, t in enumerate(toks) if _NUMBER.match(t)]
    kind = rng.choice(["name", "function", "operator", "number"])
    if kind in ("name", "function") and names:
        k = rng.choice(names)
        toks[k] = rng.choice(_FUNCTIONS) if kind == "function" else toks[rng.choice(names)]
    elif kind == "operator" and ops:
        toks[rng.choice(ops)] = rng.choice(_OPERATORS)
    elif numbers:
        toks[rng.choice(numbers)] = rng.choice(_NUMBERS)


def mutate(text: str, rng: random.Random) -> str:
    """One to three random edits of ``text``; half the mutants get only edits that keep its syntax likely."""
    toks = _TOKEN.findall(text) or [""]
    semantic = rng.random() < 0.5
    for _ in range(rng.randint(1, 3)):
        if semantic:
            _semantic(toks, rng)
            continue
        op = rng.choice(["delete", "duplicate", "swap", "truncate", "insert", "snippet", "nest", "replace", "sum"])
        k = rng.randrange(len(toks)) if toks else 0
        if op == "delete" and toks:
            del toks[k]
        elif op == "duplicate" and toks:
            toks.insert(k, toks[k])
        elif op == "swap" and len(toks) > 1:
            j = rng.randrange(len(toks))
            toks[k], toks[j] = toks[j], toks[k]
        elif op == "truncate":
            toks = toks[:k]
        elif op == "insert":
            toks.insert(k, "".join(rng.choice(_CHARS) for _ in range(rng.randint(1, 4))))
        elif op == "snippet":
            toks.insert(k, rng.choice(_SNIPPETS))
        elif op == "nest":
            depth = rng.choice([10, 200, 3000])
            toks.insert(k, "(" * depth + "1" + ")" * depth if rng.random() < 0.7 else "-" * depth + "1")
        elif op == "sum":
            toks.insert(k, " + ".join(["X[i]"] * rng.choice([50, 2000])))
        elif op == "replace" and toks:
            toks[k] = rng.choice(["0", "-1", "1e400", "i", "X", "=", "max=", "\n", ";", "true", "[1,[2]]", "{a: 1}"])
        if not toks:
            toks = [""]
    return "".join(toks)


def mutants(seeds: list[str], n: int, seed: int) -> list[str]:
    """``n`` mutants of ``seeds`` drawn with ``seed``."""
    rng = random.Random(seed)
    return [mutate(rng.choice(seeds), rng) for _ in range(n)]
