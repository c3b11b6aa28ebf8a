"""The ``fuse-opt`` command: the mlir-opt of fuse_mlir.

    fuse-opt prog.fuse                              # the program lowered to tensor_eq MLIR
    fuse-opt prog.mlir -p canonicalize,cse          # run passes on MLIR text
    fuse-opt prog.fuse -p O2 --emit=dot             # the optimised kernels as a graph (O2: what `fuse run` runs)
    fuse-opt prog.mlir --load-pass-plugin=my_pass.py -p my-pass
    fuse-opt bad.mlir --verify-diagnostics --split-input-file
    fuse-opt --list-passes

Input is a `.fuse` program or MLIR text at any level (chosen by
``--input-format``, else by the file extension, else by sniffing the text).
MLIR text is parsed in :func:`fuse_mlir.ir.make_context`'s context and
verified. The ``-p`` pipeline runs next (with the requested instruments),
then the lowering to the ``--emit`` level if one is asked for, then the
module is printed. The pass registry (and its plug-ins) loads only when a
flag needs it, so plain parse-and-print stays as fast as before. Every
user error is a located diagnostic and exit status 1 (see docs/fuse-opt.md).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from fuse_mlir.cli.common import ArgumentParser, read_text, run_main, version_string, write_text
from fuse_mlir.cli.expected_diagnostics import check_diagnostics, parse_expected
from fuse_mlir.diagnostics import Diagnostic, FuseError, diagnostic_handler, error_diagnostics
from fuse_mlir.dialects.tensor_eq import element_type
from fuse_mlir.ir import parse_mlir, print_module, verify_module
from fuse_mlir.passes.graph import DOT_DETAILS, to_dot, to_kernel_dot
from fuse_mlir.passes.instruments import PrintIR, Timing, VerifyEach
from fuse_mlir.passes.levels import DOT, all_levels, lowering_spec, module_level
from fuse_mlir.passes.pipeline import Pipeline
from fuse_mlir.passes.registry import all_passes, all_pipelines, find_pass, load_pass_plugin, unknown_pass_message
from fuse_mlir.passes.statistics import Statistics
from fuse_mlir.program import Program

INPUT_FORMATS = ("auto", "fuse", "mlir")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# The start of MLIR text (after comments): a module in custom or generic form, an op result, a generic op
# ("te.input"(...), unlike a .fuse sink "out.npy" = ...), or a dialect op in custom form at the top level of an
# implicit module (func.func @f, te.export ...; a .fuse statement never starts with a dotted name).
_MLIR_START = re.compile(
    r'(?:builtin\.module|module)(?![\w.]|\s*[\[(=])|"[\w.$-]+"\s*\(|%|[A-Za-z_]\w*\.[\w.]+(?:\s|@|$)'
)


def build_parser() -> ArgumentParser:
    """The ``fuse-opt`` argument parser."""
    parser = ArgumentParser(
        prog="fuse-opt",
        description="Lower .fuse programs to MLIR, run pass pipelines on any level, print, verify and draw the IR.",
    )
    parser.add_argument("input", nargs="?", default="-", help="a .fuse or .mlir file ('-' or absent: stdin)")
    parser.add_argument("-o", "--output", metavar="PATH", help="write the result to PATH instead of stdout")
    parser.add_argument(
        "-p",
        "--pass-pipeline",
        metavar="PIPELINE",
        default="",
        help="passes to run, e.g. 'canonicalize,cse' or 'my-pass{opt=1}'; a named pipeline (O2); @FILE reads a file",
    )
    parser.add_argument(
        "--emit",
        metavar="LEVEL",
        help="lower to LEVEL (tensor_eq, or a level --list-passes shows) before printing, or 'dot' for the "
        "dataflow graph (default: print the module at the level it is at)",
    )
    parser.add_argument(
        "--view-op-graph", action="store_true", help="print the dataflow graph as Graphviz (same as --emit=dot)"
    )
    parser.add_argument(
        "--dot-detail",
        choices=("auto", *DOT_DETAILS),
        default="auto",
        help="--emit=dot: one node per kernel (loop nest, ew.generic), or per op; auto (default): kernels below "
        "the tensor_eq level, ops at it",
    )
    parser.add_argument("--print-op-generic", action="store_true", help="print ops in the generic MLIR form")
    parser.add_argument(
        "--mlir-print-debuginfo",
        action="store_true",
        help="print each op's source location as a trailing loc(...) where the IR knows it (ops parsed from MLIR "
        "text; sources, sinks and checks lowered from .fuse)",
    )
    parser.add_argument(
        "--load-pass-plugin",
        action="append",
        default=[],
        metavar="FILE.py",
        help="import a Python file that registers passes (@register_pass) before the pipeline is read; repeatable",
    )
    parser.add_argument(
        "--allow-unregistered-dialect",
        action="store_true",
        help="accept ops of dialects fuse-opt does not know in MLIR input (kept as opaque generic ops)",
    )
    parser.add_argument(
        "--dump-pass-pipeline",
        action="store_true",
        help="print the pass pipeline, named pipelines expanded, to stderr before running it",
    )
    parser.add_argument("--print-ir-after-all", action="store_true", help="print the IR to stderr after every pass")
    parser.add_argument("--print-ir-before-all", action="store_true", help="print the IR to stderr before every pass")
    parser.add_argument(
        "--print-ir-after",
        action="append",
        default=[],
        metavar="PASS",
        help="print the IR to stderr after each run of PASS (repeatable, or comma-separated)",
    )
    parser.add_argument(
        "--print-ir-before",
        action="append",
        default=[],
        metavar="PASS",
        help="print the IR to stderr before each run of PASS (repeatable, or comma-separated)",
    )
    parser.add_argument("--timing", action="store_true", help="report the wall time of each pass on stderr")
    parser.add_argument(
        "--pass-statistics",
        action="store_true",
        help="report the passes' counters on stderr (ops merged, kernels fused, allocations saved, ...)",
    )
    parser.add_argument("--verify-each", action="store_true", help="verify the IR after every pass")
    parser.add_argument(
        "--split-input-file",
        action="store_true",
        help="process each chunk between '// -----' (MLIR) or '# -----' (.fuse) lines on its own",
    )
    parser.add_argument(
        "--verify-diagnostics",
        action="store_true",
        help="check diagnostics against expected-error/warning/note/remark annotations in comments",
    )
    parser.add_argument(
        "--list-passes", action="store_true", help="list the passes, their options, named pipelines and levels"
    )
    parser.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        default="auto",
        help="how to read the input (default: by extension, else by looking at the text)",
    )
    parser.add_argument(
        "--input-dtype",
        action="append",
        default=[],
        metavar="NAME=DTYPE",
        help="the dtype of a .fuse program input, e.g. X=float32 (default float64); repeatable",
    )
    parser.add_argument("--version", action="version", version=version_string("fuse-opt"))
    return parser


def looks_like_mlir(text: str) -> bool:
    """Whether ``text`` starts (after blank and ``//`` comment lines) like MLIR rather than .fuse."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        return _MLIR_START.match(stripped) is not None
    return False


def input_format(path: str, text: str, requested: str) -> str:
    """``fuse`` or ``mlir``: as requested, else by extension, else by sniffing the text."""
    if requested != "auto":
        return requested
    ext = Path(path).suffix.lower() if path != "-" else ""
    if ext == ".mlir":
        return "mlir"
    if ext == ".fuse":
        return "fuse"
    return "mlir" if looks_like_mlir(text) else "fuse"


def parse_dtype_args(specs: Sequence[str]) -> dict[str, np.dtype]:
    """``["X=float32"]`` as ``{"X": dtype('float32')}``; bad syntax or an unsupported dtype is an error."""
    out: dict[str, np.dtype] = {}
    for spec in specs:
        name, sep, dtype_name = (part.strip() for part in spec.partition("="))
        if not sep or not _NAME_RE.match(name) or not dtype_name:
            raise FuseError(f"bad --input-dtype '{spec}': expected NAME=DTYPE, e.g. --input-dtype X=float32")
        try:
            dtype = np.dtype(dtype_name)
            element_type(dtype)
        except TypeError:
            raise FuseError(
                f"bad --input-dtype '{spec}': '{dtype_name}' is not a supported dtype "
                "(float64, float32, float16, int64, int32, int16, int8, uint8..uint64)"
            ) from None
        out[name] = dtype
    return out


def lower_fuse(text: str, filename: str, dtypes: Mapping[str, np.dtype]) -> ModuleOp:
    """Parse, resolve and lower a .fuse program to a tensor_eq module."""
    base_dir = Path.cwd() if filename == "<stdin>" else Path(filename).parent
    program = Program(text, filename, base_dir)
    names = [s.name for s in program.lower().inputs]
    unknown = sorted(set(dtypes) - set(names))
    if unknown:
        raise FuseError(
            f"--input-dtype names unknown input{'s' * (len(unknown) > 1)} {', '.join(unknown)}; "
            f"the program's inputs are: {', '.join(names) or 'none'}"
        )
    module = program.lower(dtypes).module
    module.verify()  # a failure here is a lowering bug: an internal error, not the user's
    return module


def load_module(
    text: str, filename: str, fmt: str, dtypes: Mapping[str, np.dtype], allow_unregistered: bool = False
) -> ModuleOp:
    """The input as a verified module, whichever format it is in."""
    if fmt == "fuse":
        return lower_fuse(text, filename, dtypes)
    if dtypes:
        raise FuseError("--input-dtype applies only to .fuse input; MLIR text already fixes its types")
    return parse_mlir(text, filename, allow_unregistered=allow_unregistered)


def check_pass_names(flag: str, names: set[str]) -> None:
    """Every name given to a pass-naming flag (``--print-ir-after``) is a registered pass: a typo is an error."""
    for name in sorted(names):
        if find_pass(name) is None:
            raise FuseError(f"{flag}: {unknown_pass_message(name)}")


def print_with_locations(module: ModuleOp, generic: bool) -> str:
    """The module's text with a trailing ``loc(...)`` after each op whose source location is known.

    An op's location (``op.location``: set by the .fuse lowering on sources,
    sinks, run-time checks and the kernels holding them, or read from a
    trailing ``loc(...)`` in parsed MLIR) comes first, else its place in the
    MLIR text fuse-opt parsed (:func:`fuse_mlir.ir.op_loc`). Ops without one
    print as usual: the IR does not carry a location for every op.
    """
    import io

    from xdsl.printer import Printer

    from fuse_mlir.diagnostics import Loc
    from fuse_mlir.dialects.locations import location_attr, source_loc
    from fuse_mlir.ir import op_loc

    ends: list[tuple[int, Operation]] = []
    out = io.StringIO()

    class _Locating(Printer):
        def print_op(self, op: Operation) -> None:
            super().print_op(op)
            if op is not module:
                ends.append((out.tell(), op))

    _Locating(stream=out, print_generic_format=generic).print_op(module)
    text = out.getvalue()
    for at, op in reversed(ends):
        loc = source_loc(op)
        if loc is None and (at_text := op_loc(op)) is not None:
            loc = Loc(at_text.file, at_text.line, at_text.col)  # a parse position: its first column only
        if loc is not None:
            shown = io.StringIO()
            Printer(stream=shown).print_attribute(location_attr(loc))
            text = text[:at] + " " + shown.getvalue() + text[at:]
    return text + "\n"


def split_chunks(text: str, comment: str) -> list[tuple[int, str]]:
    """``text`` cut at lines ``<comment> -----``: (number of lines before the chunk, chunk text) per chunk."""
    separator = re.compile(rf"\s*{re.escape(comment)} -----\s*\Z")
    chunks: list[tuple[int, str]] = []
    start, current = 0, list[str]()
    for number, line in enumerate(text.splitlines(keepends=True)):
        if separator.match(line):
            chunks.append((start, "".join(current)))
            start, current = number + 1, []
        else:
            current.append(line)
    chunks.append((start, "".join(current)))
    return chunks


def _names(values: Sequence[str]) -> set[str]:
    return {n.strip() for v in values for n in v.split(",") if n.strip()}


class Driver:
    """One ``fuse-opt`` run: the pipeline and instruments built from the flags, applied to each input chunk."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.emit = DOT if args.view_op_graph else args.emit
        self.timing = Timing() if args.timing else None
        self.statistics = Statistics() if args.pass_statistics else None
        spec = args.pass_pipeline.strip()
        with self._measure("pipeline parsing"):
            for path in args.load_pass_plugin:
                load_pass_plugin(path)
            self.pipeline = Pipeline.parse(spec) if spec else Pipeline()
        if args.dump_pass_pipeline:
            sys.stderr.write(f"Pass pipeline ({len(self.pipeline)} passes): {self.pipeline.spec() or '(empty)'}\n")
        if args.verify_each:
            self.pipeline.instrument(VerifyEach())
        before, after = _names(args.print_ir_before), _names(args.print_ir_after)
        check_pass_names("--print-ir-before", before)
        check_pass_names("--print-ir-after", after)
        if args.print_ir_after_all or args.print_ir_before_all or before or after:
            self.pipeline.instrument(
                PrintIR(
                    after_all=args.print_ir_after_all,
                    before_all=args.print_ir_before_all,
                    after=after,
                    before=before,
                    generic=args.print_op_generic,
                )
            )
        if self.timing is not None:
            self.pipeline.instrument(self.timing)  # last: closest to the pass, so it times the pass alone

    def _measure(self, label: str) -> AbstractContextManager[None]:
        return self.timing.measure(label) if self.timing is not None else nullcontext()

    def process(self, text: str, filename: str, fmt: str, dtypes: Mapping[str, np.dtype]) -> str:
        """Parse, transform and print one chunk."""
        with self._measure("parsing"):
            module = load_module(text, filename, fmt, dtypes, self.args.allow_unregistered_dialect)
        if self.pipeline.passes:
            with self.statistics if self.statistics is not None else nullcontext():
                self.pipeline.run(module)
            if not self.args.verify_each:
                verify_module(module, "IR does not verify after the pass pipeline (--verify-each finds the pass): ")
        target = "llvm-dialect" if self.emit in TEXT_LEVELS else self.emit
        if target not in (None, DOT):
            level = module_level(module)
            spec = lowering_spec(level, target)
            if spec and self.emit in HOST_TEXT_LEVELS:
                spec = host_lowering_spec(level)
            if spec:
                lowering = Pipeline.parse(spec, source=f"<lowering to {self.emit}>", hooks=self.pipeline.hooks)
                lowering.run(module)
                verify_module(module, f"IR does not verify after lowering to {self.emit}: ")
        with self._measure("output"):
            if self.emit == DOT:
                detail = self.args.dot_detail
                if detail == "auto":
                    detail = "ops" if module_level(module) == "tensor_eq" else "kernels"
                return to_kernel_dot(module) if detail == "kernels" else to_dot(module)
            if self.emit in TEXT_LEVELS:
                return TEXT_LEVELS[self.emit][1](module)
            if self.args.mlir_print_debuginfo:
                return print_with_locations(module, self.args.print_op_generic)
            return print_module(module, generic=self.args.print_op_generic)

    def run(self) -> int:
        args = self.args
        text, filename = read_text(args.input)
        fmt = input_format(args.input, text, args.input_format)
        dtypes = parse_dtype_args(args.input_dtype)
        comment = "#" if fmt == "fuse" else "//"
        chunks = split_chunks(text, comment) if args.split_input_file else [(0, text)]
        outputs: list[str] = []
        failed = False
        for lines_before, chunk in chunks:
            chunk = "\n" * lines_before + chunk  # line numbers stay those of the whole file
            if args.verify_diagnostics:
                output, ok = self._verify_chunk(chunk, filename, fmt, dtypes, comment)
            else:
                output, ok = self._run_chunk(chunk, filename, fmt, dtypes)
            failed |= not ok
            if output is not None:
                outputs.append(output)
        if outputs:
            write_text(args.output, "// -----\n".join(outputs))
        if self.timing is not None:
            sys.stderr.write(self.timing.report())
        if self.statistics is not None:
            sys.stderr.write(self.statistics.report() + "\n")
        return 1 if failed else 0

    def _run_chunk(self, text: str, filename: str, fmt: str, dtypes: Mapping[str, np.dtype]) -> tuple[str | None, bool]:
        try:
            return self.process(text, filename, fmt, dtypes), True
        except FuseError as err:
            print(str(err), file=sys.stderr)
            return None, False

    def _verify_chunk(
        self, text: str, filename: str, fmt: str, dtypes: Mapping[str, np.dtype], comment: str
    ) -> tuple[str | None, bool]:
        produced: list[Diagnostic] = []
        output = None
        with diagnostic_handler(produced.append):
            try:
                output = self.process(text, filename, fmt, dtypes)
            except FuseError as err:
                produced.extend(error_diagnostics(err))
        problems = check_diagnostics(parse_expected(text, filename, comment), produced, filename)
        for problem in problems:
            print(problem.render(), file=sys.stderr)
        return output, not problems


def list_passes_text() -> str:
    """``--list-passes``: every pass with its level, description and options; named pipelines; levels."""
    lines = ["Passes:"]
    for info in all_passes():
        origin = "" if info.origin == "fuse_mlir" else f" (from {info.origin})"
        lines.append(f"  {info.name}  [level: {info.level}]{origin}")
        lines.extend(f"      {row}" if row else "" for row in info.description.splitlines())
        for opt in info.options:
            default = "required" if opt.required else f"default {opt.default_text()}"
            help_text = f"  {opt.help}" if opt.help else ""
            lines.append(f"      --{opt.name}=<{opt.type}>  ({default}){help_text}")
    lines += ["", "Named pipelines (-p NAME):"]
    for named in all_pipelines():
        lines.append(f"  {named.name}  [level: {named.level}]  {named.spec}")
        lines.append(f"      {named.description}")
    lines += ["", "Levels (--emit=LEVEL):"]
    for level in all_levels():
        lowering = level.lowering or "(none: the input level)"
        lines.append(f"  {level.name}  lowering: {lowering}")
        if level.description:
            lines.append(f"      {level.description}")
    for name, (description, _) in TEXT_LEVELS.items():
        lines.append(f"  {name}  {description}")
    lines.append(f"  {DOT}  the dataflow graph of the module after the pipeline, as Graphviz text")
    return "\n".join(lines) + "\n"


def _llvm_ir(module: ModuleOp) -> str:
    from fuse_mlir.backends.llvm.emit import emit_llvm_ir

    return emit_llvm_ir(module)


def _llvm_ir_opt(module: ModuleOp) -> str:
    from fuse_mlir.backends.llvm.runtime import compiled_listing

    return compiled_listing(module)


def _asm(module: ModuleOp) -> str:
    from fuse_mlir.backends.llvm.runtime import compiled_listing

    return compiled_listing(module, assembly=True)


# Text outputs past the llvm dialect (not MLIR, so they cannot be read back).
TEXT_LEVELS = {
    "llvm-ir": ("LLVM IR text as emitted from the llvm dialect (deterministic)", _llvm_ir),
    "llvm-ir-opt": (
        "the optimised LLVM IR of each kernel as the JIT compiles it on this host (host lowering, per-kernel level)",
        _llvm_ir_opt,
    ),
    "asm": ("host assembly of each kernel as the JIT generates it (host lowering, per-kernel level, code model)", _asm),
}

HOST_TEXT_LEVELS = ("llvm-ir-opt", "asm")
"""Outputs that show what the JIT runs on this host: an implicit lowering to the llvm dialect takes the JIT's
host settings (threads, ldexp, streaming stores: :func:`host_lowering_spec`)."""


def host_lowering_spec(level: str) -> str:
    """The pipeline text lowering a module at ``level`` (below the llvm dialect) as the JIT lowers it on this
    host: the level lowerings to the loop level, then ``lower-loop-to-llvm`` with the host's options."""
    from fuse_mlir.backends.llvm.runtime import host_lowering_options

    options = " ".join(
        f"{name.replace('_', '-')}={str(value).lower()}" for name, value in host_lowering_options().items()
    )
    return ",".join(s for s in (lowering_spec(level, "loop"), f"lower-loop-to-llvm{{{options}}}") if s)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.emit is not None:
        choices = [lv.name for lv in all_levels()] + list(TEXT_LEVELS) + [DOT]
        if args.emit not in choices:
            parser.error(f"argument --emit: invalid choice: '{args.emit}' (choose from {', '.join(choices)})")
    if args.list_passes:
        write_text(args.output, list_passes_text())
        return 0
    return Driver(args).run()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fuse-opt`` console script; returns the exit status."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
