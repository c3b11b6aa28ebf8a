"""The NumPy reference builtins against independent formulas, dtype rules and stability cases."""

from __future__ import annotations

import contextlib
import itertools
import math
import warnings
from collections.abc import Iterator

import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fuse_mlir.interp import numpy_builtins as nb

RNG = np.random.default_rng(1234)


@contextlib.contextmanager
def no_fp_warnings() -> Iterator[None]:
    """Any floating-point error flag or Python warning inside the block fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            yield


def rand(*shape: int, dtype: type = np.float64) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


# --------------------------------------------------------------------------- elementwise


def test_relu_and_step() -> None:
    x = np.array([-2.0, -0.0, 0.0, 0.5, 3.0, np.nan])
    r = nb.relu(x)
    np.testing.assert_array_equal(r[:5], [0.0, 0.0, 0.0, 0.5, 3.0])
    assert np.isnan(r[5])
    s = nb.step(x)
    assert s.dtype == np.int8
    np.testing.assert_array_equal(s, [0, 0, 0, 1, 1, 0])
    assert nb.relu(np.array([-3, 4], dtype=np.int32)).dtype == np.int32


def test_sig_matches_logistic_formula() -> None:
    x = np.linspace(-20, 20, 101)
    for T in (1.0, 0.5, 3, -2.0):
        np.testing.assert_allclose(nb.sig(x, T), 1.0 / (1.0 + np.exp(-x / T)), rtol=1e-13, atol=1e-300)
    np.testing.assert_array_equal(nb.sig(x, 1.0), nb.sig(x, 1))


def test_sig_hard_step() -> None:
    x = np.array([-1.0, 0.0, 2.0], dtype=np.float32)
    for T in (None, 0, 0.0):
        y = nb.sig(x, T)
        assert y.dtype == np.float32
        np.testing.assert_array_equal(y, [0.0, 0.0, 1.0])
    assert nb.sig(np.array([1, -1]), None).dtype == np.float64


def test_sig_array_temperature_with_zeros() -> None:
    x = np.array([[-1.0, 0.0, 2.0], [3.0, -4.0, 0.5]])
    T = np.array([0.0, 2.0, 0.0])
    with no_fp_warnings():
        y = nb.sig(x, T)
    expect = np.empty_like(x)
    for i, j in itertools.product(range(2), range(3)):
        expect[i, j] = float(x[i, j] > 0) if T[j] == 0 else 1.0 / (1.0 + math.exp(-x[i, j] / T[j]))
    np.testing.assert_allclose(y, expect, rtol=1e-14)


def test_sig_extreme_without_warnings() -> None:
    for dt in (np.float32, np.float64):
        x = np.array([-1000.0, -100.0, 0.0, 100.0, 1000.0], dtype=dt)
        with no_fp_warnings():
            y = nb.sig(x, 1.0)
            y_small_t = nb.sig(np.array([1.0, -1.0], dtype=dt), 1e-30)
        assert y.dtype == dt
        np.testing.assert_array_equal(y[[0, 2, 4]], [0.0, 0.5, 1.0])
        assert 0 < y[1] < 1e-40 or y[1] == 0.0
        np.testing.assert_array_equal(y_small_t, [1.0, 0.0])


def gelu_formula(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def test_gelu_formula_and_large_inputs() -> None:
    x = np.linspace(-60, 60, 2401)
    with np.errstate(over="ignore"):
        expect = gelu_formula(x)
    with no_fp_warnings():
        got = nb.gelu(x)
        got32 = nb.gelu(x.astype(np.float32))
        big = nb.gelu(np.array([-1e30, 1e30, -3e38, 3e38], dtype=np.float32))
        infs = nb.gelu(np.array([-np.inf, np.inf]))
        infs_grad = nb.gelu_grad(np.array([-np.inf, np.inf]))
    np.testing.assert_array_equal(infs, [0.0, np.inf])
    np.testing.assert_array_equal(infs_grad, [0.0, 1.0])
    np.testing.assert_allclose(got, expect, rtol=1e-14, atol=1e-300)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, expect, rtol=2e-6, atol=1e-6)
    np.testing.assert_array_equal(big, np.array([0.0, 1e30, 0.0, 3e38], dtype=np.float32))


def test_gelu_grad_vs_central_difference() -> None:
    x = np.linspace(-8, 8, 801)
    h = 1e-5
    fd = (gelu_formula(x + h) - gelu_formula(x - h)) / (2 * h)
    np.testing.assert_allclose(nb.gelu_grad(x), fd, rtol=1e-8, atol=1e-9)
    with no_fp_warnings():
        far = nb.gelu_grad(np.array([-1e200, -50.0, 50.0, 1e200]))
        far32 = nb.gelu_grad(np.array([-3e38, 3e38], dtype=np.float32))
    np.testing.assert_array_equal(far, [0.0, 0.0, 1.0, 1.0])
    assert far32.dtype == np.float32
    np.testing.assert_array_equal(far32, [0.0, 1.0])


@pytest.mark.parametrize(
    ("fn", "ref", "domain"),
    [
        (nb.exp, math.exp, (-5, 5)),
        (nb.log, math.log, (0.1, 10)),
        (nb.sqrt, math.sqrt, (0, 10)),
        (nb.abs, lambda v: -v if v < 0 else v, (-5, 5)),
        (nb.tanh, math.tanh, (-5, 5)),
        (nb.sin, math.sin, (-7, 7)),
        (nb.cos, math.cos, (-7, 7)),
    ],
)
def test_unary_against_math(fn, ref, domain) -> None:
    x = np.linspace(*domain, 57)
    expect = np.array([ref(float(v)) for v in x])
    np.testing.assert_allclose(fn(x), expect, rtol=1e-14, atol=1e-15)
    y32 = fn(x.astype(np.float32))
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, expect, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("fn", [nb.exp, nb.log, nb.sqrt, nb.tanh, nb.sin, nb.cos])
@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int64, np.uint8, np.bool_])
def test_transcendental_of_integers_is_float64(fn, dt) -> None:
    x = np.array([1, 2, 1], dtype=dt) if dt is not np.bool_ else np.array([True, True])
    y = fn(x)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, [getattr(math, fn.__name__)(float(v)) for v in x])


def test_abs_keeps_integers() -> None:
    assert nb.abs(np.array([-3, 4], dtype=np.int16)).dtype == np.int16


def test_pow() -> None:
    a = np.array([1.5, 2.0, 4.0])
    b = np.array([2.0, -1.0, 0.5])
    np.testing.assert_allclose(nb.pow(a, b), [2.25, 0.5, 2.0])
    assert nb.pow(a.astype(np.float32), 2).dtype == np.float32
    np.testing.assert_array_equal(nb.pow(np.array([2, 3]), 3), [8, 27])


def test_maximum_minimum_nan_propagation() -> None:
    a = np.array([1.0, np.nan, 3.0, np.nan])
    b = np.array([2.0, 0.0, np.nan, np.nan])
    mx, mn = nb.maximum(a, b), nb.minimum(a, b)
    assert mx[0] == 2.0 and mn[0] == 1.0
    assert np.isnan(mx[1:]).all() and np.isnan(mn[1:]).all()
    assert nb.maximum(a.astype(np.float32), 0.5).dtype == np.float32


def test_select() -> None:
    c = np.array([0, 1, -2, 0], dtype=np.int8)
    a = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    b = np.array([-1.0, -2.0, -3.0, -4.0], dtype=np.float32)
    y = nb.select(c, a, b)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, [-1.0, 2.0, 3.0, -4.0])
    np.testing.assert_array_equal(nb.select(np.array([0.0, np.nan]), 1.0, 2.0), [2.0, 1.0])


# --------------------------------------------------------------------------- softmax family


def softmax_formula(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_formula(axis) -> None:
    x = rand(4, 5, 3)
    np.testing.assert_allclose(nb.softmax(x, axis), softmax_formula(x, axis), rtol=1e-13)


def test_softmax_stability() -> None:
    with no_fp_warnings():
        y = nb.softmax(np.array([1000.0, 1000.0]), 0)
        z = nb.softmax(np.array([0.0, -1000.0, 1000.0]), 0)
        w = nb.softmax(np.array([1000.0, 1000.0], dtype=np.float32), 0)
    np.testing.assert_array_equal(y, [0.5, 0.5])
    np.testing.assert_array_equal(z, [0.0, 0.0, 1.0])
    assert w.dtype == np.float32
    np.testing.assert_array_equal(w, [0.5, 0.5])
    assert np.isnan(nb.softmax(np.array([1.0, np.nan]), 0)).all()


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=3, min_side=1, max_side=6),
        elements=st.floats(-700, 700, allow_nan=False),
    ),
    st.integers(0, 1),
)
def test_softmax_invariants(x, axis) -> None:
    with no_fp_warnings():
        y = nb.softmax(x, axis)
        shifted = nb.softmax(x + 123.0, axis)
    assert y.shape == x.shape
    assert (y >= 0).all() and (y <= 1).all()
    np.testing.assert_allclose(y.sum(axis=axis), 1.0, rtol=1e-12)
    np.testing.assert_allclose(shifted, y, rtol=1e-9, atol=1e-300)
    # The argmax of each slice gets the largest probability.
    np.testing.assert_array_equal(
        np.take_along_axis(y, x.argmax(axis, keepdims=True), axis), y.max(axis, keepdims=True)
    )


def test_masked_softmax_formula() -> None:
    x = rand(3, 6)
    mask = (RNG.random((3, 6)) > 0.4).astype(np.int8)
    mask[:, 0] = 1
    y = nb.masked_softmax(x, mask, 1)
    expect = np.zeros_like(x)
    for i in range(3):
        keep = mask[i] != 0
        e = np.exp(x[i, keep])
        expect[i, keep] = e / e.sum()
    np.testing.assert_allclose(y, expect, rtol=1e-13)
    assert (y[mask == 0] == 0).all()


def test_masked_softmax_fully_masked_and_fills() -> None:
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    mask = np.array([[0, 0, 0], [1, 0, 1]])
    for fill in (None, -np.inf, -1e4, 0.0):
        with no_fp_warnings():
            y = nb.masked_softmax(x, mask, -1, fill=fill)
        assert y.dtype == np.float32
        np.testing.assert_array_equal(y[0], [0.0, 0.0, 0.0])
        assert y[1, 1] == 0.0
    # A finite fill takes part in the normalisation before being zeroed (literal "fill, softmax, zero").
    y = nb.masked_softmax(np.array([0.0, 0.0]), np.array([1, 0]), 0, fill=0.0)
    np.testing.assert_allclose(y, [0.5, 0.0])
    # Broadcast mask (a causal mask over a batch) and huge unmasked values.
    big = np.full((2, 3, 3), 1e308)
    with no_fp_warnings():
        z = nb.masked_softmax(big, nb.causal_mask(3), -1)
    np.testing.assert_allclose(z[0], [[1, 0, 0], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]])


def test_softmax_grad_vs_jacobian_and_finite_difference() -> None:
    x = rand(3, 5)
    g = rand(3, 5)
    y = softmax_formula(x, 1)
    got = nb.softmax_grad(y, g, 1)
    for i in range(3):
        jac = np.diag(y[i]) - np.outer(y[i], y[i])
        np.testing.assert_allclose(got[i], jac.T @ g[i], rtol=1e-12, atol=1e-14)
    h = 1e-6
    fd = np.zeros_like(x)
    for i, j in itertools.product(range(3), range(5)):
        xp, xm = x.copy(), x.copy()
        xp[i, j] += h
        xm[i, j] -= h
        fd[i, j] = ((softmax_formula(xp, 1) * g).sum() - (softmax_formula(xm, 1) * g).sum()) / (2 * h)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)
    assert nb.softmax_grad(y.astype(np.float32), g.astype(np.float32), 1).dtype == np.float32


@pytest.mark.parametrize("axis", [0, -1])
def test_lnorm_formula(axis) -> None:
    x = rand(4, 7) * 3 + 1
    mu = x.mean(axis=axis, keepdims=True)
    var = ((x - mu) ** 2).sum(axis=axis, keepdims=True) / x.shape[axis]
    np.testing.assert_allclose(nb.lnorm(x, axis), (x - mu) / np.sqrt(var + 1e-5), rtol=1e-12)
    np.testing.assert_allclose(nb.lnorm(x, axis, eps=0.5), (x - mu) / np.sqrt(var + 0.5), rtol=1e-12)
    assert nb.lnorm(x.astype(np.float32), axis).dtype == np.float32
    np.testing.assert_array_equal(nb.lnorm(np.full((2, 3), 7.0), 1), 0.0)


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 4), st.integers(2, 32)),
        elements=st.floats(-1e3, 1e3, allow_nan=False),
    ),
    st.sampled_from([1e-5, 1e-3, 1.0]),
)
def test_lnorm_invariants(x, eps) -> None:
    y = nb.lnorm(x, 1, eps=eps)
    var = x.var(axis=1)
    np.testing.assert_allclose(y.mean(axis=1), 0.0, atol=1e-8)
    np.testing.assert_allclose(y.var(axis=1), var / (var + eps), rtol=1e-8, atol=1e-12)


def test_logsumexp_vs_scipy_and_edges() -> None:
    x = rand(3, 4, 5) * 10
    for axis in (0, 1, 2, -1):
        got = nb.logsumexp(x, axis)
        np.testing.assert_allclose(got, scipy.special.logsumexp(x, axis=axis), rtol=1e-13)
        assert got.shape == tuple(n for i, n in enumerate(x.shape) if i != axis % 3)
    with no_fp_warnings():
        a = nb.logsumexp(np.array([-np.inf, -np.inf]), 0)
        b = nb.logsumexp(np.array([1000.0, 1000.0]), 0)
        c = nb.logsumexp(np.array([[-np.inf, 0.0], [-np.inf, -np.inf]], dtype=np.float32), 1)
        e = nb.logsumexp(np.zeros((3, 0)), 1)
    assert a == -np.inf
    np.testing.assert_allclose(b, 1000.0 + math.log(2.0), rtol=1e-15)
    assert c.dtype == np.float32
    np.testing.assert_array_equal(c, [0.0, -np.inf])
    np.testing.assert_array_equal(e, [-np.inf] * 3)
    assert nb.logsumexp(np.array([np.inf, 1.0]), 0) == np.inf
    assert np.isnan(nb.logsumexp(np.array([np.nan, 1.0]), 0))


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6),
        elements=st.floats(-1e4, 1e4, allow_nan=False),
    ),
    st.data(),
)
def test_logsumexp_invariants(x, data) -> None:
    axis = data.draw(st.integers(0, x.ndim - 1))
    with no_fp_warnings():
        got = nb.logsumexp(x, axis)
    np.testing.assert_allclose(got, scipy.special.logsumexp(x, axis=axis), rtol=1e-12, atol=1e-12)
    mx = x.max(axis=axis)
    assert (got >= mx - 1e-9).all()
    assert (got <= mx + math.log(x.shape[axis]) + 1e-9).all()


# --------------------------------------------------------------------------- reductions


def test_reduce_kinds_vs_loops() -> None:
    x = rand(3, 4, 2)
    axes = (0, 2)
    for kind, fn in [
        ("sum", sum),
        ("max", max),
        ("min", min),
        ("mean", lambda v: sum(v) / len(v)),
        ("avg", lambda v: sum(v) / len(v)),
        ("prod", math.prod),
    ]:
        expect = [fn([x[i, j, k] for i in range(3) for k in range(2)]) for j in range(4)]
        np.testing.assert_allclose(nb.reduce(x, axes, kind), expect, rtol=1e-13)
    b = np.array([[0, 0, 3], [0, 0, 0]], dtype=np.int8)
    got = nb.reduce(b, (1,), "any")
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, [1, 0])
    for kind in ("sum", "max", "min", "mean", "prod"):
        assert nb.reduce(x.astype(np.float32), (1,), kind).dtype == np.float32
    with pytest.raises(ValueError, match="unknown reduction kind"):
        nb.reduce(x, (0,), "median")


def test_reduce_empty_axes() -> None:
    x = np.zeros((3, 0))
    np.testing.assert_array_equal(nb.reduce(x, (1,), "sum"), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(nb.reduce(x, (1,), "prod"), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(nb.reduce(x, (1,), "any"), [0, 0, 0])
    assert np.isnan(nb.reduce(x, (1,), "mean")).all()
    # max/min over an empty axis give their identity (what native accumulators start from), not an error.
    np.testing.assert_array_equal(nb.reduce(x, (1,), "max"), [-np.inf] * 3)
    np.testing.assert_array_equal(nb.reduce(x, (1,), "min"), [np.inf] * 3)
    xi = np.zeros((2, 0), dtype=np.int16)
    assert nb.reduce(xi, (1,), "max").tolist() == [-32768, -32768]
    assert nb.reduce(xi, (1,), "min").dtype == np.int16
    assert nb.reduce(xi, (1,), "min").tolist() == [32767, 32767]
    for kind in ("max", "min"):
        assert nb.reduce(x, (0,), kind).shape == (0,)


def test_reduce_nan_propagation() -> None:
    x = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]])
    for kind in ("max", "min"):
        got = nb.reduce(x, (1,), kind)
        assert np.isnan(got[0]) and not np.isnan(got[1])


# --------------------------------------------------------------------------- constructors and shapes


def test_causal_mask_and_parity() -> None:
    n = 5
    m = nb.causal_mask(n)
    assert m.dtype == np.float64
    for p, q in itertools.product(range(n), range(n)):
        assert m[p, q] == (1.0 if q <= p else 0.0)
    assert nb.causal_mask(3, np.float32).dtype == np.float32
    assert nb.causal_mask(0).shape == (0, 0)
    even, odd = nb.index_parity(7, "even"), nb.index_parity(7, "odd")
    assert even.dtype == odd.dtype == np.int8
    np.testing.assert_array_equal(even, [1 if i % 2 == 0 else 0 for i in range(7)])
    np.testing.assert_array_equal(odd, [1 if i % 2 == 1 else 0 for i in range(7)])
    with pytest.raises(ValueError):
        nb.index_parity(3, "prime")


def test_concat_and_flatten_last2() -> None:
    a, b = rand(2, 3), rand(2, 1)
    c = nb.concat([a, b], 1)
    assert c.shape == (2, 4)
    np.testing.assert_array_equal(c[:, :3], a)
    np.testing.assert_array_equal(c[:, 3:], b)
    np.testing.assert_array_equal(nb.concat([a, a], -2), np.vstack([a, a]))
    x = rand(2, 3, 4)
    f = nb.flatten_last2(x)
    assert f.shape == (2, 12)
    for i, j, k in itertools.product(range(2), range(3), range(4)):
        assert f[i, j * 4 + k] == x[i, j, k]
    assert np.shares_memory(f, x)
    with pytest.raises(ValueError):
        nb.flatten_last2(np.zeros(3))


# --------------------------------------------------------------------------- model blocks


def attention_loops(q, k, v, keep=None, scale=None):
    """Attention for 2-D q (Lq, d), k (Lk, d), v (Lk, dv) by explicit loops; keep[i][j] False masks."""
    lq, d = q.shape
    lk = k.shape[0]
    s = 1.0 / math.sqrt(d) if scale is None else scale
    out = np.zeros((lq, v.shape[1]))
    for i in range(lq):
        js = [j for j in range(lk) if keep is None or keep[i][j]]
        if not js:
            continue
        sc = [s * sum(q[i, t] * k[j, t] for t in range(d)) for j in js]
        mx = max(sc)
        w = [math.exp(c - mx) for c in sc]
        z = sum(w)
        for wj, j in zip(w, js):
            out[i] += (wj / z) * v[j]
    return out


def test_attention_plain_mask_and_scale() -> None:
    q, k, v = rand(2, 4, 3), rand(2, 6, 3), rand(2, 6, 5)
    got = nb.attention(q, k, v)
    assert got.shape == (2, 4, 5)
    for b in range(2):
        np.testing.assert_allclose(got[b], attention_loops(q[b], k[b], v[b]), rtol=1e-12)
    mask = RNG.random((4, 6)) > 0.5
    mask[2] = False  # a fully masked query row gives zeros
    got = nb.attention(q, k, v, mask=mask.astype(np.int8), scale=0.3)
    for b in range(2):
        np.testing.assert_allclose(got[b], attention_loops(q[b], k[b], v[b], mask, 0.3), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(got[:, 2], 0.0)


def test_attention_causal() -> None:
    q, k, v = rand(5, 3), rand(5, 3), rand(5, 2)
    keep = [[j <= i for j in range(5)] for i in range(5)]
    np.testing.assert_allclose(nb.attention(q, k, v, causal=True), attention_loops(q, k, v, keep), rtol=1e-12)
    # Lq < Lk: queries aligned to the end of the keys (query i sits at absolute position i + Lk - Lq).
    q2, k2, v2 = rand(2, 3), rand(5, 3), rand(5, 2)
    keep2 = [[j <= i + 3 for j in range(5)] for i in range(2)]
    np.testing.assert_allclose(nb.attention(q2, k2, v2, causal=True), attention_loops(q2, k2, v2, keep2), rtol=1e-12)
    # Lq > Lk: the first Lq - Lk queries see no key at all and give zeros.
    q3, k3, v3 = rand(4, 3), rand(2, 3), rand(2, 2)
    keep3 = [[j <= i - 2 for j in range(2)] for i in range(4)]
    got3 = nb.attention(q3, k3, v3, causal=True)
    np.testing.assert_allclose(got3, attention_loops(q3, k3, v3, keep3), rtol=1e-12)
    np.testing.assert_array_equal(got3[:2], 0.0)
    # causal and an explicit mask combine.
    m = np.ones((5, 5), dtype=np.int8)
    m[:, 0] = 0
    keep4 = [[j <= i and j != 0 for j in range(5)] for i in range(5)]
    np.testing.assert_allclose(
        nb.attention(q, k, v, mask=m, causal=True), attention_loops(q, k, v, keep4), rtol=1e-12, atol=1e-15
    )


def test_attention_batch_broadcast_and_dtype() -> None:
    q, k, v = rand(2, 1, 3, 4), rand(1, 3, 5, 4), rand(1, 3, 5, 2)
    got = nb.attention(q, k, v)
    assert got.shape == (2, 3, 3, 2)
    for a, b in itertools.product(range(2), range(3)):
        np.testing.assert_allclose(got[a, b], attention_loops(q[a, 0], k[0, b], v[0, b]), rtol=1e-12)
    g32 = nb.attention(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), scale=0.5)
    assert g32.dtype == np.float32
    with pytest.raises(ValueError):
        nb.attention(rand(3, 4), rand(5, 3), rand(5, 2))


def rope_loops(x2d: np.ndarray, base: float) -> np.ndarray:
    """RoPE on (L, d) by an explicit per-position, per-pair rotation."""
    n, d = x2d.shape
    out = np.zeros_like(x2d, dtype=np.float64)
    for p in range(n):
        for m in range(d // 2):
            th = p * base ** (-2.0 * m / d)
            a, b = float(x2d[p, 2 * m]), float(x2d[p, 2 * m + 1])
            out[p, 2 * m] = a * math.cos(th) - b * math.sin(th)
            out[p, 2 * m + 1] = a * math.sin(th) + b * math.cos(th)
    return out


def test_rope_vs_loops() -> None:
    x = rand(7, 8)
    np.testing.assert_allclose(nb.rope(x, 0, 1), rope_loops(x, 10000.0), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(nb.rope(x, 0, 1, base=100.0), rope_loops(x, 100.0), rtol=1e-12, atol=1e-14)
    # Axes in other positions: (d, batch, L) with the feature axis first.
    y = rand(6, 2, 5)
    got = nb.rope(y, seq_axis=2, feature_axis=0)
    assert got.shape == y.shape
    for b in range(2):
        np.testing.assert_allclose(got[:, b, :].T, rope_loops(y[:, b, :].T, 10000.0), rtol=1e-12, atol=1e-14)
    # Position 0 is unchanged and every pair keeps its norm.
    np.testing.assert_array_equal(nb.rope(x, 0, 1)[0], x[0])
    r = nb.rope(x, 0, 1)
    np.testing.assert_allclose(r[:, 0::2] ** 2 + r[:, 1::2] ** 2, x[:, 0::2] ** 2 + x[:, 1::2] ** 2, rtol=1e-12)
    r32 = nb.rope(x.astype(np.float32), 0, 1)
    assert r32.dtype == np.float32
    np.testing.assert_allclose(r32, rope_loops(x, 10000.0), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="even"):
        nb.rope(rand(4, 5), 0, 1)


def hosvd_projection(x: np.ndarray, ranks: list[int]) -> np.ndarray:
    """Independent truncated HOSVD of a 3-tensor: subspaces from eigenvectors of each unfolding's Gram matrix."""
    projs = []
    for mode, r in enumerate(ranks):
        unf = np.moveaxis(x, mode, 0).reshape(x.shape[mode], -1)
        w, vecs = np.linalg.eigh(unf @ unf.T)
        u = vecs[:, np.argsort(w)[::-1][:r]]
        projs.append(u @ u.T)
    return np.einsum("ia,jb,kc,abc->ijk", *projs, x)


def test_tucker_dense_full_rank_is_threshold() -> None:
    x = RNG.random((3, 4, 5))
    for rank in ([3, 4, 5], 10, 5):
        got = nb.tucker_dense(x, rank=rank, threshold=0.5)
        np.testing.assert_array_equal(got, (x > 0.5).astype(np.float64))
    x32 = x.astype(np.float32)
    got32 = nb.tucker_dense(x32, rank=[3, 4, 5], threshold=0.3)
    assert got32.dtype == np.float32
    np.testing.assert_array_equal(got32, (x32 > 0.3).astype(np.float32))


def test_tucker_dense_rank1_reproduces_rank1_tensor() -> None:
    a, b, c = RNG.random(6) + 0.1, RNG.random(5) + 0.1, RNG.random(4) + 0.1
    x = np.einsum("i,j,k->ijk", a, b, c)
    thr = float(np.median(x))
    gap = np.abs(x - thr).min()
    assert gap > 1e-9
    np.testing.assert_array_equal(nb.tucker_dense(x, rank=1, threshold=thr), (x > thr).astype(np.float64))
    # The default rank (ceil(sqrt(dim))) also contains the rank-1 subspace.
    np.testing.assert_array_equal(nb.tucker_dense(x, threshold=thr), (x > thr).astype(np.float64))


def test_tucker_dense_vs_independent_hosvd() -> None:
    x = RNG.standard_normal((6, 5, 7))
    ranks = [2, 3, 2]
    approx = hosvd_projection(x, ranks)
    got = nb.tucker_dense(x, rank=ranks, threshold=0.1)
    safe = np.abs(approx - 0.1) > 1e-8
    np.testing.assert_array_equal(got[safe], (approx[safe] > 0.1).astype(np.float64))
    # Default ranks: ceil(sqrt(6)) = 3, ceil(sqrt(5)) = 3, ceil(sqrt(7)) = 3.
    approx_d = hosvd_projection(x, [3, 3, 3])
    got_d = nb.tucker_dense(x, threshold=0.0)
    safe = np.abs(approx_d) > 1e-8
    np.testing.assert_array_equal(got_d[safe], (approx_d[safe] > 0).astype(np.float64))


def test_tucker_dense_edges() -> None:
    assert nb.tucker_dense(np.float64(0.7)) == 1.0
    assert nb.tucker_dense(np.array(0.2)) == 0.0
    xi = np.array([[1, 0], [0, 1]])
    assert nb.tucker_dense(xi, rank=2).dtype == np.float64
    with pytest.raises(ValueError):
        nb.tucker_dense(np.ones((2, 3)), rank=[1])
    with pytest.raises(ValueError):
        nb.tucker_dense(np.ones((2, 3)), rank=[1, 0])
    with pytest.raises(ValueError):
        nb.tucker_dense(np.ones((2, 3)), rank=0)


def test_topk_vs_sort() -> None:
    x = RNG.integers(0, 4, size=(5, 9)).astype(np.float32)  # many ties
    for k in (0, 1, 4, 9):
        idx, val = nb.topk(x, k)
        assert idx.dtype == np.int64 and val.dtype == np.float32
        assert idx.shape == val.shape == (5, k)
        for r in range(5):
            expect = sorted(range(9), key=lambda i, r=r: (-x[r, i], i))[:k]
            np.testing.assert_array_equal(idx[r], expect)
            np.testing.assert_array_equal(val[r], x[r, expect])
    # Along axis 0, matches a stable argsort of -x for distinct floats.
    y = rand(7, 3)
    idx, val = nb.topk(y, 3, axis=0)
    np.testing.assert_array_equal(idx, np.argsort(-y, axis=0, kind="stable")[:3])
    np.testing.assert_array_equal(val, np.take_along_axis(y, idx, axis=0))
    # Unsigned input (where negation would wrap) and NaN ranked first.
    u = np.array([3, 255, 0, 255], dtype=np.uint8)
    np.testing.assert_array_equal(nb.topk(u, 3)[0], [1, 3, 0])
    np.testing.assert_array_equal(nb.topk(np.array([1.0, np.nan, 2.0]), 2)[0], [1, 2])
    with pytest.raises(ValueError):
        nb.topk(x, 10)


# --------------------------------------------------------------------------- dtype preservation


FLOAT_VALUED = [
    ("relu", lambda x: nb.relu(x)),
    ("sig", lambda x: nb.sig(x)),
    ("sig_T", lambda x: nb.sig(x, 2.0)),
    ("sig_T_array", lambda x: nb.sig(x, np.array([0.0, 1.0, 2.0], dtype=np.float32))),
    ("gelu", nb.gelu),
    ("gelu_grad", nb.gelu_grad),
    ("exp", nb.exp),
    ("log", lambda x: nb.log(np.abs(x) + 1)),
    ("sqrt", lambda x: nb.sqrt(np.abs(x))),
    ("abs", nb.abs),
    ("tanh", nb.tanh),
    ("sin", nb.sin),
    ("cos", nb.cos),
    ("pow", lambda x: nb.pow(np.abs(x), 1.5)),
    ("pow_arr", lambda x: nb.pow(np.abs(x), x)),
    ("maximum", lambda x: nb.maximum(x, 0.25)),
    ("minimum", lambda x: nb.minimum(x, x[::-1])),
    ("select", lambda x: nb.select(x > 0, x, 1.0)),
    ("softmax", lambda x: nb.softmax(x, 1)),
    ("masked_softmax", lambda x: nb.masked_softmax(x, x > 0, 1)),
    ("softmax_grad", lambda x: nb.softmax_grad(nb.softmax(x, 1), x, 1)),
    ("lnorm", lambda x: nb.lnorm(x, 1)),
    ("logsumexp", lambda x: nb.logsumexp(x, 1)),
    ("reduce_sum", lambda x: nb.reduce(x, (0,), "sum")),
    ("reduce_mean", lambda x: nb.reduce(x, (0, 1), "mean")),
    ("reduce_max", lambda x: nb.reduce(x, (1,), "max")),
    ("reduce_prod", lambda x: nb.reduce(x, (1,), "prod")),
    ("concat", lambda x: nb.concat([x, x], 0)),
    ("flatten_last2", nb.flatten_last2),
    ("attention", lambda x: nb.attention(x, x, x)),
    ("attention_mask", lambda x: nb.attention(x, x, x, mask=x > 0, causal=True)),
    ("rope", lambda x: nb.rope(x[:, :2], 0, 1)),
    ("tucker_dense", lambda x: nb.tucker_dense(x, rank=1)),
    ("topk_values", lambda x: nb.topk(x, 2)[1]),
]


@pytest.mark.parametrize(("name", "fn"), FLOAT_VALUED, ids=[n for n, _ in FLOAT_VALUED])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_float_dtype_preserved(name, fn, dt) -> None:
    x = rand(3, 3, dtype=dt)
    assert fn(x).dtype == dt, name


def test_int_input_to_float_functions_gives_float64() -> None:
    x = np.array([[1, -2, 3], [0, 1, 2]], dtype=np.int32)
    for fn in (
        lambda a: nb.sig(a),
        lambda a: nb.sig(a, 2),
        nb.gelu,
        nb.gelu_grad,
        lambda a: nb.softmax(a, 1),
        lambda a: nb.masked_softmax(a, a, 1),
        lambda a: nb.lnorm(a, 1),
        lambda a: nb.logsumexp(a, 1),
        lambda a: nb.rope(a[:, :2], 0, 1),
        lambda a: nb.tucker_dense(a),
        lambda a: nb.attention(a, a, a),
    ):
        assert fn(x).dtype == np.float64


def test_max_and_min_reductions_order_negative_zero_below_positive_zero():
    # The reference's max/min (elementwise and reductions) are IEEE 754-2019's whatever the order of the zeros:
    # NumPy's np.max([-0.0, 0.0]) is 0.0 but np.max([0.0, -0.0]) is -0.0.
    rows = np.array([[-0.0, 0.0, -1.0], [0.0, -0.0, -2.0], [-0.0, -0.0, -1.0], [1.0, -0.0, 0.0]])
    inv = lambda x: 1 / np.asarray(x)  # noqa: E731 - the sign of a zero, as an infinity
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(inv(nb.reduce(rows, (1,), "max")), [np.inf, np.inf, -np.inf, 1.0])
        np.testing.assert_array_equal(inv(nb.reduce(rows, (1,), "min")), [-1.0, -0.5, -1.0, -np.inf])
        np.testing.assert_array_equal(inv(nb.reduce(rows[:3, :2], (0, 1), "max")), np.inf)
        np.testing.assert_array_equal(inv(nb.maximum(rows[:, 1], rows[:, 0])), [np.inf, np.inf, -np.inf, 1.0])
    assert nb.maximum(np.array([3, -1]), 0).tolist() == [3, 0]  # integers: unchanged
    assert np.isnan(nb.reduce(np.array([np.nan, 0.0]), (0,), "max"))  # NaN still propagates
