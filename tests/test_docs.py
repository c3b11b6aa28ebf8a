"""The documentation's examples are executed and their printed results checked, so the docs cannot drift.

A fenced ```fuse block is a whole program; the ```output block right after it
is what ``fuse run prog.fuse`` prints for it (the exports as
:func:`fuse_mlir.program.format_exports` writes them), and an ```error block
is the first line of the error it reports (the file is called ``prog.fuse``).
A comment line ``# fuse run prog.fuse --mode M [--steps N]`` in the program
picks the run mode (and the number of streaming steps). Programs resolve their source files against the repository root and
write their sinks under a temporary folder.

A ```python block is run as a script (from the repository root); an
```output block right after it is its expected standard output.

An example that fails only because of a known, tracked bug is preceded by a
``<!-- known-bug: reason -->`` line: its check is a strict xfail, so it is
reported while the bug lasts and fails (XPASS) once the bug is fixed, when
the marker must go.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from fuse_mlir import Program
from fuse_mlir.diagnostics import FuseError
from fuse_mlir.program import format_exports

ROOT = Path(__file__).resolve().parent.parent
# Documents whose fuse and python examples are all complete programs.
CHECKED_DOCS = ("docs/language.md", "README.md", "docs/autodiff.md")

_FENCE = re.compile(r"^```(\w[\w-]*)?\s*$")
_MODE = re.compile(r"^#\s*fuse run prog\.fuse\b.*--mode\s+(\w+)", re.M)
_STEPS = re.compile(r"^#\s*fuse run prog\.fuse\b.*--steps\s+(\d+)", re.M)
_KNOWN_BUG = re.compile(r"<!--\s*known-bug:\s*(.*?)\s*-->")


@dataclass
class Block:
    """One fenced code block: its language, text, 1-based first line, and a known-bug note when marked."""

    lang: str
    text: str
    line: int
    known_bug: str | None = None


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, in order."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    k = 0
    while k < len(lines):
        m = _FENCE.match(lines[k])
        if m is None:
            k += 1
            continue
        start = k
        k += 1
        body: list[str] = []
        while k < len(lines) and lines[k].rstrip() != "```":
            body.append(lines[k])
            k += 1
        k += 1
        note = None
        prev = start - 1
        while prev >= 0 and not lines[prev].strip():
            prev -= 1
        if prev >= 0 and (bug := _KNOWN_BUG.search(lines[prev])):
            note = bug.group(1)
        out.append(Block(m.group(1) or "", "\n".join(body) + "\n", start + 1, note))
    return out


@dataclass
class Example:
    """A runnable block and the block stating its result (None: it only has to run)."""

    doc: str
    code: Block
    expected: Block | None

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.code.line}"


def examples(doc: str, lang: str) -> list[Example]:
    found = blocks(ROOT / doc)
    out = []
    for k, b in enumerate(found):
        if b.lang != lang:
            continue
        nxt = found[k + 1] if k + 1 < len(found) and found[k + 1].lang in ("output", "error") else None
        out.append(Example(doc, b, nxt))
    return out


def run_fuse(text: str, out_root: Path, backend: str) -> str:
    """What ``fuse run prog.fuse`` prints for ``text`` (or the first line of its error)."""
    mode = _MODE.search(text)
    try:
        prog = Program(text, "prog.fuse", ROOT)
        runner = prog.compile(backend, out_root=out_root, mode=mode.group(1) if mode else "single")
        steps = _STEPS.search(text)
        for _ in range(int(steps.group(1)) if steps else 1):
            exports = runner.run({})
        return format_exports(exports) + "\n"
    except FuseError as err:
        return str(err).splitlines()[0] + "\n"


def _params(lang: str) -> list:
    out = []
    for doc in CHECKED_DOCS:
        for ex in examples(doc, lang):
            marks = [pytest.mark.xfail(strict=True, reason=f"known bug: {ex.code.known_bug}")] * bool(ex.code.known_bug)
            out.append(pytest.param(ex, id=ex.id, marks=marks))
    return out


def _check(ex: Example, got: str) -> None:
    if ex.expected is None:
        return
    want = ex.expected.text
    assert got.rstrip() == want.rstrip(), (
        f"{ex.id}: the example prints something else than {ex.doc}:{ex.expected.line} says.\n"
        f"--- documented\n{want}--- printed\n{got}"
    )


@pytest.mark.parametrize("ex", _params("fuse"))
def test_fuse_example_reference(ex: Example, tmp_path: Path) -> None:
    """Every .fuse example prints what the guide says, on the reference interpreter."""
    _check(ex, run_fuse(ex.code.text, tmp_path, "reference"))


@pytest.mark.slow
@pytest.mark.parametrize("ex", _params("fuse"))
def test_fuse_example_llvm(ex: Example, tmp_path: Path) -> None:
    """... and on the default (llvm, native) backend, as `fuse run` runs it."""
    _check(ex, run_fuse(ex.code.text, tmp_path, "llvm"))


@pytest.mark.parametrize("ex", _params("python"))
def test_python_example(ex: Example, tmp_path: Path) -> None:
    """Every python example runs from the repository root and prints what follows it."""
    stdout = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(stdout):
            exec(compile(ex.code.text, ex.id, "exec"), {"__name__": "__docs__"})
    finally:
        os.chdir(cwd)
    _check(ex, stdout.getvalue())


def test_every_example_is_checked() -> None:
    """Each fuse example of the guide states its result (an output or error block follows it)."""
    unchecked = [ex.id for ex in examples("docs/language.md", "fuse") if ex.expected is None]
    assert not unchecked, f"examples without an output block: {unchecked}"
    assert len(examples("docs/language.md", "fuse")) >= 30


def test_readme_excerpt_matches_example() -> None:
    """The README's MLP excerpt is lines of examples/mlp.fuse, character for character."""
    readme = blocks(ROOT / "README.md")
    excerpt = next(b for b in readme if b.text.startswith("# examples/mlp.fuse"))
    source = (ROOT / "examples/mlp.fuse").read_text(encoding="utf-8").splitlines()
    for line in excerpt.text.splitlines()[1:]:
        if line.strip() and line.strip() != "...":
            assert line in source, f"README excerpt line not in examples/mlp.fuse: {line!r}"


def test_readme_links_the_guide_early() -> None:
    """The README's first screen (40 lines) links docs/language.md; it cites no unshipped documents."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/language.md" in "\n".join(text.splitlines()[:40])
    for doc in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "examples/README.md"):
        body = doc.read_text(encoding="utf-8")
        for name in ("LANGUAGE.md", "DESIGN.md"):
            assert name not in body, f"{doc.relative_to(ROOT)} cites {name}, which the repository does not ship"


def test_examples_readme_lists_every_example() -> None:
    """examples/README.md says what each example program shows."""
    text = (ROOT / "examples/README.md").read_text(encoding="utf-8")
    for path in sorted((ROOT / "examples").glob("*.fuse")):
        assert f"`{path.name}`" in text, f"examples/README.md does not describe {path.name}"
