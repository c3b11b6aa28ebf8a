"""The ``fuse-opt`` command: the mlir-opt of fuse_mlir.

    fuse-opt prog.fuse                      # the program lowered to tensor_eq MLIR
    fuse-opt prog.mlir --print-op-generic   # parse, verify and re-print MLIR text
    fuse-opt - < prog.mlir -o out.mlir

Input is a `.fuse` program or MLIR text (chosen by ``--input-format``, else
by the file extension, else by sniffing the text). MLIR text is parsed in
:func:`fuse_mlir.ir.make_context`'s context and verified; any parse or
verify error is a located diagnostic and exit status 1. Passes and further
``--emit`` levels plug in at :func:`transform`.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from fuse_mlir.cli.common import ArgumentParser, read_text, run_main, version_string, write_text
from fuse_mlir.diagnostics import FuseError
from fuse_mlir.dialects.tensor_eq import element_type
from fuse_mlir.ir import parse_mlir
from fuse_mlir.program import Program, print_module

EMIT_LEVELS = ("tensor_eq",)
INPUT_FORMATS = ("auto", "fuse", "mlir")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# The start of MLIR text (after comments): a module in custom or generic form, or an op result.
_MLIR_START = re.compile(r'(?:builtin\.module|module)(?![\w.]|\s*[\[(=])|"builtin\.module"\s*\(|%')


def build_parser() -> ArgumentParser:
    """The ``fuse-opt`` argument parser."""
    parser = ArgumentParser(
        prog="fuse-opt", description="Lower .fuse programs to MLIR, or parse, verify and re-print MLIR text."
    )
    parser.add_argument("input", nargs="?", default="-", help="a .fuse or .mlir file ('-' or absent: stdin)")
    parser.add_argument("-o", "--output", metavar="PATH", help="write the result to PATH instead of stdout")
    parser.add_argument(
        "--emit", choices=EMIT_LEVELS, default="tensor_eq", help="the IR level to print (default: tensor_eq)"
    )
    parser.add_argument("--print-op-generic", action="store_true", help="print ops in the generic MLIR form")
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


def load_module(args: argparse.Namespace) -> ModuleOp:
    """The input as a verified module, whichever format it is in."""
    text, filename = read_text(args.input)
    fmt = input_format(args.input, text, args.input_format)
    dtypes = parse_dtype_args(args.input_dtype)
    if fmt == "fuse":
        return lower_fuse(text, filename, dtypes)
    if dtypes:
        raise FuseError("--input-dtype applies only to .fuse input; MLIR text already fixes its types")
    return parse_mlir(text, filename)


def transform(module: ModuleOp, args: argparse.Namespace) -> ModuleOp:
    """Bring ``module`` to the ``--emit`` level (tensor_eq is where lowering and parsing leave it)."""
    assert args.emit == "tensor_eq"
    return module


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    module = transform(load_module(args), args)
    write_text(args.output, print_module(module, generic=args.print_op_generic))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fuse-opt`` console script; returns the exit status."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
