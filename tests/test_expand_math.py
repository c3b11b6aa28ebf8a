"""The vectorised math (expand-math, fuse_mlir.mathlib) against higher-precision references.

Each function is compiled once per dtype into a native kernel and run over
about a million points (uniform over the typical range, log-uniform over the
whole float range, and edge values); the error is measured in ulps of the
correctly rounded result, against x87 long double (float64) or float64
(float32) evaluations. Special values (inf, NaN, signed zeros, subnormals,
overflow, underflow) must match NumPy exactly.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pytest

from benchmarks import math_probe as probe
from fuse_mlir import Program
from fuse_mlir.passes.lowering import lower_to_loop

EXTENDED = np.finfo(np.longdouble).nmant >= 63  # x86 long double: a reference for float64
N = 400_000

# Largest error in ulps asserted per function. Measured in float64: exp 0.79, expm1 0.82, log 0.81,
# log1p 0.81, tanh 1.39, sin/cos 0.77, pow 0.61. float32: exp 0.85, expm1 0.84, tanh 1.41, log 0.79
# (native float32 code), the others computed in float64 and correctly rounded on every point tried (0.5).
BOUND64 = {"exp": 1.0, "expm1": 1.0, "log": 1.0, "log1p": 1.0, "tanh": 1.5, "sin": 1.0, "cos": 1.0, "pow": 1.0}
BOUND32 = {"exp": 1.0, "expm1": 1.0, "log": 1.0, "log1p": 0.51, "tanh": 1.5, "sin": 0.51, "cos": 0.51, "pow": 0.51}

NUMPY = {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "tanh": np.tanh}
NUMPY |= {"sin": np.sin, "cos": np.cos, "pow": np.power}
RANGES = {
    "exp": (-750.0, 710.0),
    "expm1": (-60.0, 710.0),
    "log": (0.0, 10.0),
    "log1p": (-1.0, 3.0),
    "tanh": (-25.0, 25.0),
    "sin": (-2e6, 2e6),
    "cos": (-2e6, 2e6),
    "pow": (0.0, 5.0),
}
EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, 5e-324, -5e-324, 1e-310, -1e-310]
EDGES += [2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308, 1e-300, -1e-300]
EDGES += [709.78, 709.79, 710.0, -745.13, -745.14, -708.4, 88.72, 88.73, -87.3, -103.97, -104.0, 22.0, 20.0]
EDGES += [1.5707963267948966, 3.141592653589793, 1647099.3291652855, 1647100.0, 1e22, 1e300, 0.55, -0.55]
EDGES += [3.4028234663852886e38, 1.1754943508222875e-38, 1e-45, -0.9999999999999999, -1.0000000000000002]
EDGES += [6381956970095103.0 * 2.0**797, -6381956970095103.0 * 2.0**797]  # the double closest to k·π/2


@cache
def math_kernel(fn: str, dtype: type, strict: bool = False):
    """One compiled kernel per function and dtype for the whole module."""
    return probe.math_kernel(fn, dtype, strict)


def points(fn: str, dtype: type, n: int = N) -> np.ndarray:
    """Uniform points over the function's typical range, log-uniform ones of both signs, the edges."""
    rng = np.random.default_rng(len(fn))
    lo, hi = RANGES[fn]
    fi = np.finfo(dtype)
    logs = rng.uniform(np.log2(float(fi.smallest_subnormal)), np.log2(float(fi.max)), n // 2)
    wide = np.exp2(logs) * rng.choice([-1.0, 1.0], n // 2)
    with np.errstate(over="ignore"):
        return np.concatenate([rng.uniform(lo, hi, n // 2), wide, EDGES]).astype(dtype)


def reference(fn: str, dtype: type, *args: np.ndarray) -> np.ndarray:
    """The exact value in a wider type: long double for float64, float64 for float32."""
    wide = np.longdouble if dtype == np.float64 else np.float64
    with np.errstate(all="ignore"):
        return NUMPY[fn](*(a.astype(wide) for a in args))


def check(fn: str, dtype: type, got: np.ndarray, exact: np.ndarray) -> float:
    """Asserts the non-finite results equal NumPy's exactly and returns the largest ulp error."""
    with np.errstate(over="ignore"):
        rounded = exact.astype(dtype)
    assert np.array_equal(np.isnan(got), np.isnan(rounded)), f"{fn}: NaN where none is due (or none where due)"
    inf = np.isinf(rounded)
    np.testing.assert_array_equal(got[inf], rounded[inf], err_msg=f"{fn}: infinities")
    zero = rounded == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(rounded[zero]), err_msg=f"{fn}: signed zeros")
    fin = np.isfinite(rounded)
    assert np.isfinite(got[fin]).all(), f"{fn}: overflow where the result is finite"
    spacing = np.spacing(np.abs(rounded[fin])).astype(exact.dtype)  # a subnormal's ulp: the smallest subnormal
    err = np.abs(got[fin].astype(exact.dtype) - exact[fin]) / spacing
    return float(err.max())


FUNCTIONS = ["exp", "expm1", "log", "log1p", "tanh", "sin", "cos"]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fn", FUNCTIONS)
def test_unary_accuracy(fn, dtype):
    if dtype == np.float64 and not EXTENDED:
        pytest.skip("no extended-precision long double to measure float64 ulps against")
    x = points(fn, dtype)
    got = math_kernel(fn, dtype)(x)
    err = check(fn, dtype, got, reference(fn, dtype, x))
    assert err <= (BOUND64 if dtype == np.float64 else BOUND32)[fn], f"{fn} {np.dtype(dtype)}: {err} ulp"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pow_accuracy(dtype):
    if dtype == np.float64 and not EXTENDED:
        pytest.skip("no extended-precision long double to measure float64 ulps against")
    rng = np.random.default_rng(7)
    x = points("pow", dtype)
    y = np.concatenate([rng.uniform(-50, 50, N // 2), rng.uniform(-2, 2, x.size - N // 2)]).astype(dtype)
    y[::7] = np.round(y[::7])  # integer exponents: negative bases keep their sign
    got = math_kernel("pow", dtype)(x, y)
    err = check("pow", dtype, got, reference("pow", dtype, x, y))
    assert err <= (BOUND64 if dtype == np.float64 else BOUND32)["pow"], f"pow {np.dtype(dtype)}: {err} ulp"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pow_special_cases(dtype):
    """Every pair of special operands gives what NumPy gives (C99 Annex F), signed zeros included."""
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, np.inf, -np.inf, np.nan, 1e-310, 1e300, -1e300]
    vals += [2.5, -2.5, 1e20, -1e20, 9007199254740993.0, 1075.0, -1075.0]
    with np.errstate(over="ignore"):
        x, y = (a.ravel().astype(dtype) for a in np.meshgrid(vals, vals))
    got = math_kernel("pow", dtype)(x, y)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))
    np.testing.assert_allclose(got[ok], want[ok], rtol=4 * np.finfo(dtype).eps, atol=0)


def test_special_values():
    cases = {
        "log": [(0.0, -np.inf), (-0.0, -np.inf), (-1.0, np.nan), (np.inf, np.inf), (-np.inf, np.nan), (1.0, 0.0)],
        "log1p": [(-1.0, -np.inf), (-2.0, np.nan), (np.inf, np.inf), (-0.0, -0.0), (5e-324, 5e-324)],
        "expm1": [(-0.0, -0.0), (-np.inf, -1.0), (np.inf, np.inf), (1000.0, np.inf), (5e-324, 5e-324)],
        "exp": [(-np.inf, 0.0), (np.inf, np.inf), (-0.0, 1.0), (1000.0, np.inf), (-1000.0, 0.0)],
        "tanh": [(-0.0, -0.0), (np.inf, 1.0), (-np.inf, -1.0), (1e300, 1.0), (5e-324, 5e-324)],
        "sin": [(-0.0, -0.0), (np.inf, np.nan), (-np.inf, np.nan), (5e-324, 5e-324)],
        "cos": [(-0.0, 1.0), (np.inf, np.nan), (0.0, 1.0)],
    }
    for fn, pairs in cases.items():
        x = np.array([p[0] for p in pairs] + [np.nan])
        want = np.array([p[1] for p in pairs] + [np.nan])
        got = math_kernel(fn, np.float64)(x)
        np.testing.assert_array_equal(got, want, err_msg=fn)
        signed = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]), err_msg=fn)


LIBM = re.compile(r"call [^@]*@(exp|expm1|log|log1p|tanh|sin|cos|pow)f?\b|@llvm\.(exp|log|sin|cos|pow)\.")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_expanded_loops_vectorise_without_libm(dtype):
    """After LLVM's optimisation the loop over each function has vector operations and calls no libm."""
    for fn in [*FUNCTIONS, "pow", "sqrt"]:
        ir = math_kernel(fn, dtype).kernel.optimized_ir()  # type: ignore[attr-defined]
        assert not LIBM.search(ir), f"{fn} {np.dtype(dtype)} still calls libm"
        elem = "double" if dtype == np.float64 else "float"
        assert re.search(rf"<\d+ x {elem}>", ir), f"{fn} {np.dtype(dtype)} was not vectorised"
        if fn == "sqrt":
            assert re.search(rf"@llvm\.sqrt\.v\d+f{64 if dtype == np.float64 else 32}", ir)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_composite_builtins_match_reference(dtype):
    """sig and gelu (compositions of exp and tanh) agree with the reference interpreter: to a few ulps, or
    where the formula cancels (gelu's 1 + tanh near -1) to a few ulps of the tanh term, eps·|x|."""
    x = np.concatenate([np.linspace(-30, 30, 20001), [0.0, -0.0, np.inf, -np.inf, np.nan]]).astype(dtype)
    eps = np.finfo(dtype).eps
    for src in ["Z[i] = sig(X[i], T=1.0)", "Z[i] = gelu(X[i])", "Z[i] = gelu_grad(X[i])", "Z[i] = pow(X[i], 2.5)"]:
        prog = Program(src)
        got = prog.compile("llvm")(X=x)["Z"]
        want = prog.compile("reference")(X=x)["Z"]
        assert np.array_equal(np.isnan(got), np.isnan(want)), src
        fin = np.isfinite(want)
        np.testing.assert_array_equal(got[~fin], want[~fin], err_msg=src)
        bound = 8 * eps * np.abs(want[fin]) + 4 * eps * np.abs(x[fin]) + np.finfo(dtype).tiny
        assert (np.abs(got[fin] - want[fin]) <= bound).all(), src


def test_integer_pow_stays_exact():
    """Integer pow goes through float64 and keeps libm's pow, exact for representable results."""
    x = np.arange(-20, 21, dtype=np.int64)
    for e in (5, 7, 11):  # every |x|^e below 2^53, where float64 is exact
        got = Program("Z[i] = pow(X[i], Y[i])").compile("llvm")(X=x, Y=np.full_like(x, e))["Z"]
        np.testing.assert_array_equal(got, x**e)


def test_strict_mode_keeps_libm():
    src = "Y[i] = exp(X[i]) + log(X[i]) + tanh(X[i]) + sin(X[i]) + cos(X[i]) + pow(X[i], X[i])"
    names = {"math.exp", "math.log", "math.tanh", "math.sin", "math.cos", "math.powf"}
    strict = lower_to_loop(Program(src).lower().module, strict=True)
    assert names <= {op.name for op in strict.walk()}
    loop = lower_to_loop(Program(src).lower().module)
    assert not names & {op.name for op in loop.walk()}


@pytest.mark.parametrize(
    ("coeffs", "bound"), [("EXP_POLY", 2.0**-61), ("EXP_POLY_F", 2.0**-26.5)], ids=["float64", "float32"]
)
def test_exp_polynomials_keep_their_stated_error(coeffs, bound):
    """exp's fitted polynomials (mathlib/exp.py) against e^r in 40-digit arithmetic over |r| ≤ ln2/2."""
    mp = pytest.importorskip("mpmath")
    from fuse_mlir.mathlib import exp as mexp

    cs = getattr(mexp, coeffs)
    with mp.workdps(40):
        a = mp.log(2) / 2 * (1 + mp.mpf(2) ** -20)
        worst = mp.mpf(0)
        for k in range(801):
            r = -a + 2 * a * k / 800
            p = sum(mp.mpf(c) * r**j for j, c in enumerate(cs))
            worst = max(worst, abs(1 + r + r * r * p - mp.exp(r)) / mp.exp(r))
    assert worst < bound, f"{coeffs}: 2^{float(mp.log(worst, 2)):.1f}"
