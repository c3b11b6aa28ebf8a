"""Every builtin called from the language, against a NumPy formula written out here."""

from __future__ import annotations

import numpy as np
import pytest

from fuse_mlir import Program

rng = np.random.default_rng(7)
X = rng.standard_normal((3, 5))
P = np.abs(X) + 0.1
M = (rng.random((3, 5)) > 0.3).astype(np.int8)
M[:, 0] = 1


def one(src: str, **inputs) -> np.ndarray:
    out = Program(src).compile()(**inputs)
    return out[list(out)[-1]]


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


c = np.sqrt(2 / np.pi)
ELEMENTWISE = [
    ("relu", "relu(X[i,j])", X, lambda x: np.maximum(x, 0)),
    ("step", "step(X[i,j])", X, lambda x: (x > 0).astype(np.int8)),
    ("sig", "sig(X[i,j])", X, lambda x: (x > 0).astype(float)),
    ("sig T", "sig(X[i,j], T=1)", X, lambda x: 1 / (1 + np.exp(-x))),
    ("gelu", "gelu(X[i,j])", X, lambda x: 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x**3)))),
    (
        "gelu_grad",
        "gelu_grad(X[i,j])",
        X,
        lambda x: (
            0.5 * (1 + np.tanh(c * (x + 0.044715 * x**3)))
            + 0.5 * x * (1 - np.tanh(c * (x + 0.044715 * x**3)) ** 2) * c * (1 + 3 * 0.044715 * x**2)
        ),
    ),
    ("exp", "exp(X[i,j])", X, np.exp),
    ("log", "log(X[i,j])", P, np.log),
    ("sqrt", "sqrt(X[i,j])", P, np.sqrt),
    ("abs", "abs(X[i,j])", X, np.abs),
    ("tanh", "tanh(X[i,j])", X, np.tanh),
    ("sin", "sin(X[i,j])", X, np.sin),
    ("cos", "cos(X[i,j])", X, np.cos),
    ("pow", "pow(X[i,j], 2)", X, lambda x: x**2),
    ("max2", "max(X[i,j], 0.5)", X, lambda x: np.maximum(x, 0.5)),
    ("min2", "min(X[i,j], 0.5)", X, lambda x: np.minimum(x, 0.5)),
]


@pytest.mark.parametrize("name,expr,x,f", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_elementwise(name, expr, x, f, dtype):
    got = one(f"Y[i,j] = {expr}", X=x.astype(dtype))
    want = f(x.astype(np.float64))
    tol = 1e-12 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    if name not in ("step",):
        assert got.dtype == dtype


def test_integer_inputs_to_float_builtins_give_float64():
    got = one("Y[i] = exp(V[i])", V=np.arange(3))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.exp(np.arange(3)))


AXIS = [
    ("softmax", "Y[i,j.] = softmax(X[i,j])", lambda: softmax(X, 1)),
    ("softmax axis=i", "Y[i,j] = softmax(X[i,j], axis=i)", lambda: softmax(X, 0)),
    (
        "masked_softmax",
        "Y[i,j.] = masked_softmax(X[i,j], M[i,j])",
        lambda: np.where(M, softmax(np.where(M, X, -np.inf), 1), 0),
    ),
    ("softmax_grad", "Y[i,j.] = softmax_grad(S[i,j], G[i,j])", None),
    (
        "lnorm",
        "Y[i,j.] = lnorm(X[i,j])",
        lambda: (X - X.mean(1, keepdims=True)) / np.sqrt(X.var(1, keepdims=True) + 1e-5),
    ),
    (
        "layernorm eps",
        "Y[i,j.] = layernorm(X[i,j], eps=0.1)",
        lambda: (X - X.mean(1, keepdims=True)) / np.sqrt(X.var(1, keepdims=True) + 0.1),
    ),
    (
        "layer_norm",
        "Y[i,j.] = layer_norm(X[i,j])",
        lambda: (X - X.mean(1, keepdims=True)) / np.sqrt(X.var(1, keepdims=True) + 1e-5),
    ),
    ("logsumexp", "Y[i] = logsumexp(X[i,j])", lambda: np.log(np.exp(X).sum(1))),
    ("max axis", "Y[j] = max(X[i,j], axis=i)", lambda: X.max(0)),
    ("min axis", "Y[i] = min(X[i,j], axis=j)", lambda: X.min(1)),
    ("avg", "Y[i] = avg(X[i,j], axis=j)", lambda: X.mean(1)),
    ("mean", "Y[i] = mean(X[i,j])", lambda: X.mean(1)),
    ("sum", "Y[j] = sum(X[i,j], axis=i)", lambda: X.sum(0)),
    ("concat", "Y[i,j] = concat(X[i,j], P[i,j], axis=j)", lambda: np.concatenate([X, P], 1)),
    ("concat flatten", "Y[k] = concat(X[i,j])", lambda: X.reshape(-1)),
    ("causal_mask", "Y[p,q] = causal_mask(4)", lambda: np.tril(np.ones((4, 4)))),
    ("const", "Y[i] = const([1.5, 2.5])", lambda: np.array([1.5, 2.5])),
    (
        "case builtin",
        "Y[i,j] = case(X[i,j] > 1, 1, X[i,j] < -1, -1, 0)",
        lambda: np.where(X > 1, 1, np.where(X < -1, -1, 0)),
    ),
    ("select", "Y[i,j] = select(M[i,j], X[i,j], -X[i,j])", lambda: np.where(M, X, -X)),
    ("even", "Y[j] = even(j) sum(X[i,j], axis=i)", lambda: X.sum(0) * (np.arange(5) % 2 == 0)),
    ("odd", "Y[i,j] = odd(i) X[i,j]", lambda: X * (np.arange(3) % 2 == 1)[:, None]),
]


@pytest.mark.parametrize("name,src,f", AXIS, ids=[a[0] for a in AXIS])
def test_axis_and_constructors(name, src, f):
    S = softmax(X, 1)
    G = rng.standard_normal(X.shape)
    got = one(src, **{k: v for k, v in dict(X=X, M=M, P=P, S=S, G=G).items() if f"{k}[" in src})
    want = S * (G - (S * G).sum(1, keepdims=True)) if f is None else f()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def attention_ref(q, k, v, mask=None, causal=False, scale=None):
    d = q.shape[-1]
    s = (q @ k.T) * (1 / np.sqrt(d) if scale is None else scale)
    keep = np.ones(s.shape, bool)
    if causal:
        keep &= np.tril(np.ones(s.shape, bool))
    if mask is not None:
        keep &= mask.astype(bool)
    s = np.where(keep, s, -np.inf)
    w = np.exp(s - s.max(1, keepdims=True))
    w = np.where(keep, w, 0)
    return (w / w.sum(1, keepdims=True)) @ v


class TestBlocks:
    q, k, v = rng.standard_normal((4, 3)), rng.standard_normal((4, 3)), rng.standard_normal((4, 2))

    def test_attention(self):
        got = one("Y[p,e] = attention(Q[p,d], K[p',d], V[p',e])", Q=self.q, K=self.k, V=self.v)
        np.testing.assert_allclose(got, attention_ref(self.q, self.k, self.v), rtol=1e-12)

    def test_attention_causal_and_scale(self):
        got = one("Y[p,e] = attention(Q[p,d], K[p',d], V[p',e], causal=true, scale=0.5)", Q=self.q, K=self.k, V=self.v)
        np.testing.assert_allclose(got, attention_ref(self.q, self.k, self.v, causal=True, scale=0.5), rtol=1e-12)

    def test_attention_mask(self):
        mask = np.tril(np.ones((4, 4)))
        got = one("Y[p,e] = attention(Q[p,d], K[p',d], V[p',e], M[p,p'])", Q=self.q, K=self.k, V=self.v, M=mask)
        np.testing.assert_allclose(got, attention_ref(self.q, self.k, self.v, mask=mask), rtol=1e-12)

    def test_attention_batched_matches_explicit_equations(self):
        q, k, v = (rng.standard_normal((2, 4, 3)) for _ in range(3))
        got = one("Y[b,p,d] = attention(Q[b,p,d], K[b,p',d], V[b,p',d])", Q=q, K=k, V=v)
        explicit = one(
            "S[b,p,p'] = Q[b,p,d] K[b,p',d] / sqrt(3)\nA[b,p,p'.] = softmax(S[b,p,p'])\n"
            "Y[b,p,d] = A[b,p,p'] V[b,p',d]\nexport Y",
            Q=q,
            K=k,
            V=v,
        )
        np.testing.assert_allclose(got, explicit, rtol=1e-12)

    def test_rope(self):
        x = rng.standard_normal((5, 4))
        got = one("Y[p,d] = rope(X[p,d])", X=x)
        want = np.empty_like(x)
        for pos in range(5):
            for m in range(2):
                th = pos * 10000.0 ** (-2 * m / 4)
                a, b = x[pos, 2 * m], x[pos, 2 * m + 1]
                want[pos, 2 * m] = a * np.cos(th) - b * np.sin(th)
                want[pos, 2 * m + 1] = a * np.sin(th) + b * np.cos(th)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)

    def test_tucker_dense_full_rank_is_threshold(self):
        x = rng.random((3, 4))
        got = one("Y[i,j] = tucker_dense(X[i,j], rank=[3,4], threshold=0.5)", X=x)
        np.testing.assert_array_equal(got, (x > 0.5).astype(float))

    def test_tucker_dense_rank_one(self):
        x = np.outer([1.0, 2.0, 0.1], [0.5, 1.0, 0.2, 0.9])
        got = one("Y[i,j] = tucker_dense(X[i,j], rank=1, threshold=0.4)", X=x)
        np.testing.assert_array_equal(got, (x > 0.4).astype(float))

    def test_topk_sink(self, tmp_path):
        x = np.array([[1.0, 5.0, 3.0, 4.0], [9.0, 2.0, 8.0, 7.0]])
        Program('"top.npz" = topk(X[i,j], k=2)\nY[i] = X[i,j]').compile(out_root=tmp_path)(X=x)
        data = np.load(tmp_path / "top.npz")
        np.testing.assert_array_equal(data["indices"], [[1, 3], [0, 2]])
        np.testing.assert_array_equal(data["values"], [[5, 4], [9, 8]])
