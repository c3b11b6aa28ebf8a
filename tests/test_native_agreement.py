"""Semantics the spec left open, decided once and held by every backend; memory safety from program text alone.

Each case runs on the reference interpreter, llvm at O2 and O0, numba, torch
and jax: the same values, or the same located error. Decisions (README
"Semantics notes"): max=/min= over an empty axis give the reduction's
identity; an integer raised to a negative integer power is a located error; a
numeric position outside its axis is an error even when the loop space is
empty; softmax/logsumexp shift by 0 when the max is not finite. Sizes that
overflow, huge outputs, unaligned and ragged inputs give FuseRuntimeErrors.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fuse_mlir import FuseError, FuseRuntimeError, Program
from tests.frameworks import missing_framework

BACKENDS = [
    ("reference", {}),
    ("llvm", {}),
    ("llvm", {"opt_level": 0}),
    ("numba", {}),
    ("torch", {}),
    ("jax", {}),
]
IDS = ["reference", "llvm-O2", "llvm-O0", "numba", "torch", "jax"]
# The native builds that loop tests compare with the reference (numba only where it is installed).
NATIVE = [(b, o) for b, o in BACKENDS[1:4] if missing_framework(b) is None]


def run(src: str, backend: str, options: dict, **inputs) -> dict:
    return Program(src).compile(backend, **options)(**inputs)


VALUE_CASES = [
    ("max-empty-float", "Y[i] max= X[i, j]", {"X": np.zeros((3, 0))}, np.full(3, -np.inf)),
    ("min-empty-float32", "Y[i] min= X[i, j]", {"X": np.zeros((2, 0), np.float32)}, np.full(2, np.inf, np.float32)),
    ("max-empty-int", "Y[i] max= X[i, j]", {"X": np.zeros((2, 0), np.int64)}, np.full(2, np.iinfo(np.int64).min)),
    ("min-empty-int32", "Y[i] min= X[i, j]", {"X": np.zeros((2, 0), np.int32)}, np.full(2, 2**31 - 1, np.int32)),
    ("max-empty-0d", "Y max= X[j]", {"X": np.zeros(0)}, np.array(-np.inf)),
    ("pow-empty-base", "Y[i] = X[i] ** -1", {"X": np.zeros(0, np.int64)}, np.zeros(0, np.int64)),
    ("pow-int-positive", "Y[i] = X[i] ** E[i]", {"X": np.array([2, 3]), "E": np.array([3, 0])}, np.array([8, 1])),
    ("softmax-inf", "Y[i.] = softmax(X[i])", {"X": np.array([np.inf, 1.0, -np.inf])}, np.array([np.nan, 0, 0])),
    ("softmax-all-neg-inf", "Y[i.] = softmax(X[i])", {"X": np.array([-np.inf, -np.inf])}, np.array([np.nan] * 2)),
    ("logsumexp-inf", "Y = logsumexp(X[i])", {"X": np.array([np.inf, 1.0])}, np.array(np.inf)),
    ("logsumexp-neg-inf", "Y = logsumexp(X[i])", {"X": np.array([-np.inf, -np.inf])}, np.array(-np.inf)),
    ("softmax-huge", "Y[i.] = softmax(X[i])", {"X": np.array([1e308, -1e308, 0.0])}, np.array([1.0, 0, 0])),
    # A sum over an empty index is 0 whatever the other factors are, NaN and infinities included, also where the
    # product is factored (a factor summed over its own indices first, or pairs contracted in turn).
    *(
        (f"empty-sum-{name}", src, inputs, expected)
        for name, src, inputs, expected in [
            ("presum", "Y[j] = A[j] X[j, l]", {"A": np.array([np.nan, np.inf]), "X": np.zeros((2, 0))}, np.zeros(2)),
            ("presum-0d", "Y = A[j] X[j, l]", {"A": np.array([np.nan, -np.inf]), "X": np.zeros((2, 0))}, np.zeros(())),
            (
                "presum-computed",
                "Y[j, p] = A[j] ** 0.5 X[j, l, p]",
                {"A": np.array([-2.0, 4.0]), "X": np.zeros((2, 0, 3))},
                np.zeros((2, 3)),
            ),
            (
                "chain",
                "Y[i, l] = A[i, j] B[j, k] C[k, l]",
                {"A": np.full((2, 3), np.nan), "B": np.ones((3, 0)), "C": np.ones((0, 2))},
                np.zeros((2, 2)),
            ),
            (
                "chain-first",
                "Y[i, l] = A[i, j] B[j, k] C[k, l]",
                {"A": np.ones((2, 0)), "B": np.ones((0, 3)), "C": np.full((3, 2), np.inf)},
                np.zeros((2, 2)),
            ),
            (
                "float32",
                "Y[j] = A[j] X[j, l]",
                {"A": np.array([np.nan], np.float32), "X": np.zeros((1, 0), np.float32)},
                np.zeros(1, np.float32),
            ),
        ]
    ),
]


@pytest.mark.parametrize("backend,options", BACKENDS, ids=IDS)
@pytest.mark.parametrize("name,src,inputs,expected", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_decided_values(name, src, inputs, expected, backend, options):
    got = run(src + "\nexport Y", backend, options, **inputs)["Y"]
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


ERROR_CASES = [
    ("pow-int-negative", "Y[i] = X[i] ** E[i]", {"X": np.array([2, 3]), "E": np.array([1, -2])}, "exponent -2", 8),
    ("pow-int-literal", "Y[i] = pow(X[i], -1)", {"X": np.array([2], np.int32)}, "exponent -1", 8),
    ("position-empty-loop", "Y[i] = X[i, 5]", {"X": np.zeros((0, 2))}, "position 5 is out of range", 8),
    ("position", "Y[i] = X[i, 2]", {"X": np.zeros((3, 2))}, "position 2 is out of range for axis 1", 8),
    ("position-0d", "Y = X[7]", {"X": np.zeros(2)}, "position 7 is out of range for axis 0", 5),
    # The consumer's loop space is empty (j has extent 0): the gather and the power are still checked.
    (
        "gather-empty-consumer",
        "Y[i, j] = T[G[i]] X[j]",
        {"T": np.zeros(3), "G": np.array([7]), "X": np.zeros(0)},
        r"gathered index 7 is out of range for axis 0 \(extent 3\)",
        11,
    ),
    (
        "gather-empty-reduction",
        "Y = T[G[i]] X[j]",
        {"T": np.zeros(3), "G": np.array([7]), "X": np.zeros(0)},
        r"gathered index 7 is out of range for axis 0 \(extent 3\)",
        5,
    ),
    (
        "pow-empty-consumer",
        "Y[i, j] = (B[i] ** E[i]) X[j]",
        {"B": np.array([2]), "E": np.array([-3]), "X": np.zeros(0, np.int64)},
        "exponent -3",
        12,
    ),
]


@pytest.mark.parametrize("backend,options", BACKENDS, ids=IDS)
@pytest.mark.parametrize("name,src,inputs,message,col", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_decided_errors_are_located(name, src, inputs, message, col, backend, options):
    with pytest.raises(FuseRuntimeError, match=message) as info:
        run(src + "\nexport Y", backend, options, **inputs)
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == (1, col)


def _pattern(a: np.ndarray) -> np.ndarray:
    """Per element: 2 for NaN, ±1 for ±inf, 0 for a finite value."""
    return np.where(np.isnan(a), 2, np.where(np.isinf(a), np.sign(a), 0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", ["exp", "tanh", "sig", "gelu", "gelu_grad", "log", "sqrt", "sin", "cos"])
def test_overflow_and_non_finite_inputs_agree(fn, dtype):
    """Huge, infinite and NaN arguments give the reference's inf/nan/0 pattern on native code (vector math)."""
    x = np.array([1e3, -1e3, 1e30, -1e30, np.inf, -np.inf, np.nan, 89.0, -89.0, 710.0, 0.0], dtype=dtype)
    src = f"Y[i] = {fn}(X[i])\nexport Y"
    ref = run(src, "reference", {}, X=x)["Y"]
    for backend, options in NATIVE:
        got = run(src, backend, options, X=x)["Y"]
        assert np.array_equal(_pattern(got), _pattern(ref)), (backend, options, got, ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pow_overflow_agrees(dtype):
    x = np.array([1e3, 2.0, -2.0, 1e30, 0.0, -1.5, np.inf, 0.0], dtype=dtype)
    p = np.array([1e3, -2000.0, 0.5, 30.0, -1.0, 2.5, -1.0, 0.0], dtype=dtype)
    src = "Y[i] = pow(X[i], P[i])\nexport Y"
    ref = run(src, "reference", {}, X=x, P=p)["Y"]
    for backend, options in NATIVE:
        got = run(src, backend, options, X=x, P=p)["Y"]
        assert np.array_equal(_pattern(got), _pattern(ref)), (backend, options, got, ref)


# --------------------------------------------------------------------------- sizes that pass 2^63 bytes

OVERFLOWING = [
    ("axis", "axis i = 4611686018427387904\nY[i] = 1.5\nexport Y", {}),
    ("lhs-position", "Y[4611686018427387904] = 1.5\nexport Y", {}),
    ("outer-products", "Y[a, b, c, d] = A[a] B[b] C[c] D[d]\nexport Y", dict.fromkeys("ABCD", 65536)),
]


@pytest.mark.parametrize("name,src,extents", OVERFLOWING, ids=[o[0] for o in OVERFLOWING])
@pytest.mark.parametrize("opt_level", [0, 2])
def test_wrapping_sizes_are_errors_not_writes(name, src, extents, opt_level):
    """Each case once segfaulted (the byte size wrapped, a short buffer was written past): in a child process."""
    code = textwrap.dedent(f"""
        import numpy as np
        from fuse_mlir import FuseError, Program
        inputs = {{n: np.ones(k) for n, k in {extents!r}.items()}}
        try:
            Program({src!r}).compile("llvm", opt_level={opt_level})(**inputs)
        except FuseError as e:  # static sizes: at compile time, located; sizes from inputs: at run time
            print("ERROR", e)
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    # O0 splits the four-way product pairwise: its first temporary (32 GiB) may already be refused.
    assert "ERROR" in out.stdout and ("2^63 bytes" in out.stdout or "out of memory" in out.stdout), out.stdout


@pytest.mark.parametrize("backend,options", BACKENDS, ids=IDS)
def test_static_sizes_past_2_63_bytes_are_located_compile_errors(backend, options):
    with pytest.raises(FuseError, match=r"Y has 4611686018427387905 elements of 8 bytes") as info:
        run("Y[4611686018427387904] = 1.5\nexport Y", backend, options)
    assert info.value.loc is not None and info.value.loc.line == 1


def test_huge_output_is_a_clear_error():
    with pytest.raises(FuseRuntimeError, match=r"out of memory: result 'Y' needs 7\.45e\+06 GiB"):
        run("axis i = 1000000000000000\nY[i] = 1.5\nexport Y", "llvm", {})
    with pytest.raises(FuseRuntimeError, match="out of memory"):
        run("axis i = 1000000000000000\nY[i] = 1.5\nexport Y", "reference", {})


# --------------------------------------------------------------------------- inputs the runtime must take


@pytest.mark.parametrize("backend,options", BACKENDS[:4], ids=IDS[:4])
def test_unaligned_input_is_computed(backend, options):
    raw = np.zeros(8 * 6 + 1, dtype=np.uint8)
    x = np.frombuffer(raw.data, dtype=np.float64, count=6, offset=1)
    assert not x.flags.aligned
    x_ok = np.arange(6.0)
    raw[1:] = x_ok.view(np.uint8)
    runner = Program("Y[i] = X[i] 2\nexport Y").compile(backend, **options)
    for _ in range(2):  # the first call and the direct path after it
        np.testing.assert_array_equal(runner(X=x)["Y"], 2 * x_ok)


@pytest.mark.parametrize("backend,options", BACKENDS[:3], ids=IDS[:3])
def test_ragged_input_is_a_fuse_error(backend, options):
    with pytest.raises(FuseRuntimeError, match="input X is not a rectangular array") as info:
        run("Y[i] = X[i] 2\nexport Y", backend, options, X=[[1, 2], [3]])
    assert info.value.loc is not None


@pytest.mark.parametrize("backend,options", BACKENDS[:4], ids=IDS[:4])
def test_uint64_index_prints_unsigned(backend, options):
    g = np.array([2**63 + 5], dtype=np.uint64)
    with pytest.raises(FuseRuntimeError, match="index 9223372036854775813 is out of range"):
        run("Y[i] = T[G[i]]\nexport Y", backend, options, T=np.arange(3.0), G=g)
