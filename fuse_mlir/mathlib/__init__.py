"""Vectorisable implementations of the transcendental functions, emitted as arith/math IR.

Each function is straight-line float64 code (polynomials after a range
reduction, ``arith.select`` instead of branches, bit manipulation through
``arith.bitcast``) that LLVM's loop vectoriser turns into SIMD code, where a
libm call would keep a loop scalar. float32 operands are widened to float64,
computed (with shorter polynomials where the family allows) and rounded once,
which leaves them within an ulp (almost always correctly rounded); exp, expm1,
tanh and log have native float32 forms (:data:`NATIVE32`), twice the lanes per vector.

One module per family: :mod:`.exp` (exp, expm1), :mod:`.log` (log, log1p),
:mod:`.tanh`, :mod:`.trig` (sin, cos), :mod:`.pow`; :mod:`.emitter` holds the
op builder. :data:`EXPANSIONS` maps a ``math`` op name to its builder; the
``expand-math`` pass (:mod:`fuse_mlir.passes.transforms.expand_math`) does the rewrite.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import SSAValue

from fuse_mlir.mathlib import exp, log, pow, tanh, trig
from fuse_mlir.mathlib.emitter import Emitter

# A builder: (emitter, float64 operands, single) -> float64 result; ``single`` says the result will be
# rounded to float32, so cheaper polynomials may be used.
Builder = Callable[[Emitter, list[SSAValue], bool], SSAValue]

EXPANSIONS: dict[str, Builder] = {
    "math.exp": lambda em, xs, single: exp.exp(em, xs[0], single),
    "math.expm1": lambda em, xs, single: exp.expm1(em, xs[0], single),
    "math.log": lambda em, xs, single: log.log(em, xs[0]),
    "math.log1p": lambda em, xs, single: log.log1p(em, xs[0]),
    "math.tanh": lambda em, xs, single: tanh.tanh(em, xs[0], single),
    "math.sin": lambda em, xs, single: trig.sincos(em, xs[0], cosine=False, single=single),
    "math.cos": lambda em, xs, single: trig.sincos(em, xs[0], cosine=True, single=single),
    "math.powf": lambda em, xs, single: pow.pow(em, xs[0], xs[1], single),
}

# Builders with a native float32 form (a float32 emitter, float32 operands, no widening): twice the
# SIMD lanes where the accuracy allows it.
NATIVE32: dict[str, Callable[[Emitter, list[SSAValue]], SSAValue]] = {
    "math.exp": lambda em, xs: exp.exp_single(em, xs[0]),
    "math.expm1": lambda em, xs: exp.expm1(em, xs[0]),
    "math.tanh": lambda em, xs: tanh.tanh(em, xs[0]),
    "math.log": lambda em, xs: log.log(em, xs[0]),
}

__all__ = ["EXPANSIONS", "NATIVE32", "Builder", "Emitter"]
