"""The ``fuse`` command: run a `.fuse` program, or explain its equations.

    fuse run prog.fuse --input W=w.npy --input X=x.json [--out y.npz] [--json] [--explain] [--timing]
    fuse run prog.fuse --input W=w.npy --query 'Y[i=3]' --query 'Z[::-1, 0]'   # demand queries
    fuse explain prog.fuse [--json]
    fuse --version

Errors in the program, its inputs or the command line print a located
diagnostic and exit with status 1 (see :mod:`fuse_mlir.cli.common`). A
compile that takes more than about a second prints progress lines on stderr
(``fuse: compiling prog.fuse: llvm-optimize (1.2 s so far)``).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fuse_mlir.backends import BACKENDS
from fuse_mlir.cli.common import ArgumentParser, read_text, run_main, version_string, write_text
from fuse_mlir.diagnostics import FuseError
from fuse_mlir.io.sources import SOURCE_EXTENSIONS, load_source
from fuse_mlir.program import Program, Runner, exports_to_json, format_exports

OUT_EXTENSIONS = (".npy", ".npz", ".json")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def build_parser() -> ArgumentParser:
    """The ``fuse`` argument parser (exposed for documentation and tests)."""
    parser = ArgumentParser(prog="fuse", description="Run and inspect .fuse tensor-equation programs.")
    parser.add_argument("--version", action="version", version=version_string("fuse"))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    sub.required = True

    run = sub.add_parser("run", help="run a program and print or save its exports")
    run.add_argument("program", help="the .fuse file ('-' reads stdin)")
    run.add_argument(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help=f"an input tensor from a file ({', '.join(SOURCE_EXTENSIONS)}), or a replacement for a tensor the "
        "program loads from a file; repeatable",
    )
    run.add_argument(
        "--backend",
        default="llvm",
        help=f"the backend to run on (default: llvm; known: {', '.join(BACKENDS)})",
    )
    run.add_argument(
        "-O",
        dest="opt_level",
        default="2",
        choices=["0", "1", "2", "3"],
        help="optimisation level: 0 = no fusion or inplace, 2 = the default (1 and 3 mean 2)",
    )
    run.add_argument(
        "--check-bounds",
        action="store_true",
        help="the checked build: every native load and store tests its position (slower; FUSE_CHECK_BOUNDS=1)",
    )
    shown = run.add_mutually_exclusive_group()
    shown.add_argument(
        "--out", "-o", metavar="PATH", help="save the exports to PATH (.npy for one export, .npz, or .json)"
    )
    shown.add_argument("--json", action="store_true", help="print the exports as JSON")
    run.add_argument(
        "--out-root", metavar="DIR", help="the folder that the program's sinks write under (default: current folder)"
    )
    run.add_argument(
        "--mode",
        default="single",
        choices=["single", "fixpoint", "streaming"],
        help="single: one pass, a cycle is an error; fixpoint: iterate recursive groups; streaming: *t virtual "
        "time, --steps steps (docs/modes.md)",
    )
    run.add_argument(
        "--steps",
        type=int,
        default=1,
        metavar="N",
        help="streaming mode: run N time steps with the same inputs and print the last step's exports (default: 1)",
    )
    run.add_argument("--max-iters", type=int, default=32, metavar="N", help="fixpoint mode's run limit (default: 32)")
    run.add_argument(
        "--query",
        "-q",
        action="append",
        default=[],
        metavar="NAME[SEL,...]",
        help="instead of the exports, evaluate only what tensor NAME depends on and print it, selected: each SEL "
        "is an int (the axis goes), a slice start:stop:step, or AXIS=int|slice with AXIS an index name or a "
        "position (e.g. 'Y[i=3]', 'Y[::-1, 0]', 'Y[j=1:4]'); the inputs NAME does not depend on may be left out; "
        "repeatable (docs/modes.md, demand)",
    )
    run.add_argument(
        "--explain",
        action="store_true",
        help="after the run, print its trace (per group: time, kernels, FLOPs, bytes) to stderr",
    )
    run.add_argument(
        "--timing",
        action="store_true",
        help="print the compile time of each stage (parse, passes, LLVM, ...) and the run time to stderr",
    )

    explain = sub.add_parser("explain", help="show each equation's joined, projected and broadcast indices")
    explain.add_argument("program", help="the .fuse file ('-' reads stdin)")
    explain.add_argument("--json", action="store_true", help="print the table as JSON")
    grad = sub.add_parser("grad", help="print the gradient program of a scalar as .fuse text (docs/autodiff.md)")
    grad.add_argument("program", help="the .fuse file ('-' reads stdin)")
    grad.add_argument("--of", required=True, help="the float scalar tensor to differentiate")
    grad.add_argument("--wrt", required=True, help="comma-separated tensors to differentiate by (W1,B1)")
    return parser


def load_program(path: str) -> Program:
    """Parse and resolve the program in ``path`` (``-``: stdin, resolved against the current folder)."""
    text, name = read_text(path)
    base_dir = Path.cwd() if path == "-" else Path(path).parent
    return Program(text, name, base_dir)


def parse_input_args(specs: Sequence[str]) -> dict[str, str]:
    """``["W=w.npy", ...]`` as ``{"W": "w.npy"}``; bad syntax or a repeated name is an error."""
    out: dict[str, str] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not _NAME_RE.match(name) or not path:
            raise FuseError(f"bad --input '{spec}': expected NAME=PATH, e.g. --input W=weights.npy")
        if name in out:
            raise FuseError(f"--input {name} is given twice ('{out[name]}' and '{path}')")
        out[name] = path
    return out


def _source_ranks(program: Program) -> dict[str, int | None]:
    return {s.lhs.name: len(s.lhs.indices) if s.lhs.indices is not None else None for s in program.resolved.sources}


def load_inputs(
    program: Program,
    paths: Mapping[str, str],
    runner: Runner | None = None,
    ranks: Mapping[str, int | None] | None = None,
) -> dict[str, np.ndarray]:
    """Read each ``--input`` file, relative to the current folder.

    The rank is passed only for coordinate files (``.csv``/``.tsv``), where it
    decides whether the last column holds values; for other formats a wrong
    rank is left to the runner, whose error points into the program. The
    ranks are ``ranks`` when given (replaced file sources), else those of the
    inputs of ``runner``'s lowering (its mode).
    """
    if not paths:
        return {}  # nothing to read: no need for the ranks (nor for a lowering, on a warm start)
    if ranks is None:
        target = getattr(runner, "step_runner", None) or runner  # a streaming runner's inputs are its step's
        # The runner's own lowering (from the warm start index when its backend allows: no IR on a warm run).
        lowered = target.program.lower(None, target.options, warm=target._warm()) if target else program.lower()
        ranks = {s.name: s.rank for s in lowered.inputs}
    arrays: dict[str, np.ndarray] = {}
    for name, path in paths.items():
        coords = Path(path).suffix.lower() in (".csv", ".tsv")
        rank = ranks.get(name) if coords else None
        try:
            arrays[name] = load_source(path, Path.cwd(), rank=rank, name=name)
        except FuseError as err:
            raise FuseError(f"--input {name}: {err.message}", err.loc, err.notes) from None
    return arrays


def save_exports(exports: Mapping[str, np.ndarray], path: str) -> None:
    """Write the exports to ``path``, the format chosen by its extension."""
    ext = Path(path).suffix.lower()
    if ext not in OUT_EXTENSIONS:
        shown = f"'{ext}'" if ext else "no extension"
        raise FuseError(f"cannot save exports to '{path}': unsupported file type ({shown}); use .npy, .npz or .json")
    if not exports:
        raise FuseError(f"cannot save exports to '{path}': the program exports nothing (add `export NAME`)")
    if ext == ".npy" and len(exports) != 1:
        raise FuseError(
            f"cannot save exports to '{path}': .npy holds one array but the program exports "
            f"{len(exports)} ({', '.join(exports)}); use .npz or .json"
        )
    target = Path(path)
    try:
        if target.parent != Path():
            target.parent.mkdir(parents=True, exist_ok=True)
        if ext == ".npy":
            with open(target, "wb") as f:
                np.save(f, next(iter(exports.values())), allow_pickle=False)
        elif ext == ".npz":
            with open(target, "wb") as f:
                np.savez(f, **dict(exports))  # type: ignore[arg-type]  # numpy's stub types **kwds as allow_pickle
        else:
            target.write_text(exports_to_json(exports) + "\n", encoding="utf-8")
    except OSError as exc:
        raise FuseError(f"cannot save exports to '{path}': {exc.strerror or exc}") from None


_QUERY_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_']*)\s*(?:\[(.*)\])?\s*\Z", re.S)
_AXIS_RE = re.compile(r"\s*(-?\d+|[A-Za-z_][A-Za-z0-9_']*)\s*\Z")
_QUERY_SYNTAX = (
    "expected NAME or NAME[SEL, ...], each SEL an int, a slice start:stop:step or AXIS=int|slice "
    "(AXIS an index name or a position), e.g. 'Y[i=3]' or 'Y[::-1, 0]'"
)


def _pick(text: str, query: str) -> int | slice | None:
    """One selection: an int, a slice (``a:b``, ``a:b:c``, parts optional), or None for a bare ``:``."""
    parts = [p.strip() for p in text.split(":")]
    try:
        if len(parts) == 1 and parts[0]:
            return int(parts[0])
        if 2 <= len(parts) <= 3:
            start, stop, step = (int(p) if p else None for p in (*parts, "")[:3])
            if step == 0:
                raise FuseError(f"bad --query '{query}': slice step cannot be zero")
            return None if (start, stop, step) == (None, None, None) else slice(start, stop, step)
    except ValueError:
        pass
    raise FuseError(f"bad --query '{query}': '{text.strip()}' is not an int or a slice; {_QUERY_SYNTAX}")


def parse_query(text: str) -> tuple[str, dict[str | int, int | slice]]:
    """``--query`` text (``Y[i=3, ::-1]``) as the tensor's name and ``runner.query``'s selection: an item
    ``AXIS=SEL`` selects that axis (an index name or a position), a bare item the axis at its own position."""
    m = _QUERY_RE.match(text)
    if m is None:
        raise FuseError(f"bad --query '{text}': {_QUERY_SYNTAX}")
    name, body = m.group(1), m.group(2)
    select: dict[str | int, int | slice] = {}
    if body is None or not body.strip():
        return name, select
    for k, item in enumerate(body.split(",")):
        axis_text, eq, sel_text = item.partition("=")
        if not eq:
            axis: str | int = k
            sel_text = axis_text
        else:
            a = _AXIS_RE.match(axis_text)
            if a is None:
                raise FuseError(f"bad --query '{text}': '{axis_text.strip()}' is not an axis; {_QUERY_SYNTAX}")
            axis = int(a.group(1)) if a.group(1).lstrip("-").isdigit() else a.group(1)
        sel = _pick(sel_text, text)
        if axis in select:
            raise FuseError(f"bad --query '{text}': axis {axis} is selected twice")
        if sel is not None:
            select[axis] = sel
    return name, select


def cmd_run(args: argparse.Namespace) -> int:
    """``fuse run``: load, run, then print or save the exports (or, with ``--query``, the queried tensors)."""
    program = load_program(args.program)
    if args.steps < 1:
        raise FuseError(f"--steps must be at least 1 (got {args.steps})")
    if args.steps != 1 and args.mode != "streaming":
        raise FuseError("--steps applies to --mode streaming only")
    queries = {q.strip(): parse_query(q) for q in args.query}
    if queries and args.mode == "streaming":
        raise FuseError("--query is not available in streaming mode: a step depends on the steps before it")
    paths = parse_input_args(args.input)
    file_sources = {s.lhs.name for s in program.resolved.sources}
    replaced = {n: p for n, p in paths.items() if n in file_sources}
    if replaced:
        program.replace_sources(load_inputs(program, replaced, ranks=_source_ranks(program)))
    checked: dict[str, Any] = {"check_bounds": True} if args.check_bounds else {}
    runner = program.compile(
        args.backend,
        out_root=args.out_root,
        opt_level=int(args.opt_level),
        mode=args.mode,
        max_iters=args.max_iters,
        profile=args.explain,
        **checked,
    )
    inputs = load_inputs(program, {n: p for n, p in paths.items() if n not in replaced}, runner=runner)
    compiled_before = sum(runner.compile_stats.values())
    start = time.perf_counter()
    if queries:
        exports = {label: runner.query(name, select, **inputs) for label, (name, select) in queries.items()}
    else:
        for _ in range(args.steps):
            exports = runner.run(inputs)
    wall = time.perf_counter() - start
    if args.explain:
        sys.stderr.write(f"{runner.explain('text')}\n")
    if args.timing:
        sys.stderr.write(
            timing_report(runner.compile_stats, wall - (sum(runner.compile_stats.values()) - compiled_before))
        )
    if args.out is not None:
        save_exports(exports, args.out)
    elif args.json:
        write_text(None, exports_to_json(exports) + "\n")
    elif exports:
        write_text(None, format_exports(exports) + "\n")
    return 0


def timing_report(stages: Mapping[str, float], run_seconds: float) -> str:
    """``fuse run --timing``: compile seconds per stage (in the order they ran), their total, and the run time."""
    compile_total = sum(stages.values())
    lines = ["compile time by stage:"]
    for name, secs in stages.items():
        share = 100.0 * secs / compile_total if compile_total > 0 else 0.0
        lines.append(f"  {secs * 1e3:10.2f} ms {share:5.1f}%  {name}")
    lines.append(f"  {compile_total * 1e3:10.2f} ms         compile total")
    lines.append(f"run time: {max(run_seconds, 0.0) * 1e3:.2f} ms")
    return "\n".join(lines) + "\n"


class _StderrHandler(logging.StreamHandler):
    """A handler writing to whatever ``sys.stderr`` is when a record comes (redirections made later apply)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def show_progress() -> None:
    """Show the compiler's progress lines (``fuse_mlir.compile`` at INFO) on stderr, as ``fuse: ...``."""
    from fuse_mlir.stages import LOG

    if not any(isinstance(h, _StderrHandler) for h in LOG.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("fuse: %(message)s"))
        LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)


def cmd_explain(args: argparse.Namespace) -> int:
    """``fuse explain``: print the per-equation index table."""
    program = load_program(args.program)
    if args.json:
        write_text(None, json.dumps(program.explain("json"), indent=1) + "\n")
    else:
        write_text(None, f"{program.explain('text')}\n")
    return 0


def cmd_grad(args: argparse.Namespace) -> int:
    """``fuse grad``: print the program exporting ``of`` and ``d<of>_d<name>`` for each ``--wrt`` name."""
    program = load_program(args.program)
    wrt = [w.strip() for w in args.wrt.split(",") if w.strip()]
    write_text(None, program.grad(args.of, wrt).to_fuse())  # type: ignore[attr-defined]
    return 0


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        show_progress()
    return {"run": cmd_run, "explain": cmd_explain, "grad": cmd_grad}[args.command](args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fuse`` console script; returns the exit status."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
