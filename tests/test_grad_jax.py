"""Program.grad against jax.grad of the same formula written by hand in jax (10 programs), and against
central differences on hypothesis-generated programs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings

from fuse_mlir.program import Program
from tests.strategies import programs

jax = pytest.importorskip("jax")
jnp = jax.numpy

RNG = np.random.default_rng(3)


def r(*shape: int) -> np.ndarray:
    return RNG.normal(size=shape)


def _ce(x, w1, b1, w2, y):
    h = jax.nn.relu(x @ w1 + b1)
    p = jax.nn.softmax(h @ w2, axis=1)
    return -jnp.mean(jnp.sum(y * jnp.log(p), axis=1))


def _lnorm(x, w):
    mu = x.mean(1, keepdims=True)
    s = jnp.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + 1e-5)
    return jnp.sum(((x - mu) / s) ** 2 * w)


def _attn(q, k, v, w):
    p = jax.nn.softmax(q @ k.T / jnp.sqrt(q.shape[1]), axis=1)
    return jnp.sum((p @ v) * w)


def _gelu_tanh(x):
    return 0.5 * x * (1 + jnp.tanh(jnp.sqrt(2 / jnp.pi) * (x + 0.044715 * x**3)))


TOK = np.array([1, 3, 1, 0, 1])
CASES = {
    "mlp_ce": (
        "H[b,h] = relu(X[b,d] W1[d,h] + B1[h])\nP[b,c.] = softmax(H[b,h] W2[h,c])\nL = -avg(Y[b,c] log(P[b,c]))\n",
        dict(X=r(4, 3), W1=r(3, 5), B1=r(5), W2=r(5, 2), Y=np.eye(2)[[0, 1, 1, 0]]),
        lambda a: (
            -jnp.mean(
                jnp.sum(
                    a["Y"] * jnp.log(jax.nn.softmax(jax.nn.relu(a["X"] @ a["W1"] + a["B1"]) @ a["W2"], axis=1)), axis=0
                )
            )
        ),
    ),
    "logsumexp": (
        "Q[r] = logsumexp(S[r,c])\nL = Q[r] W[r]\n",
        dict(S=r(3, 4), W=r(3)),
        lambda a: jnp.sum(jax.nn.logsumexp(a["S"], axis=1) * a["W"]),
    ),
    "layernorm": (
        "N[r,c.] = lnorm(X[r,c])\nL = N[r,c] N[r,c] W[r,c]\n",
        dict(X=r(3, 5), W=r(3, 5)),
        lambda a: _lnorm(a["X"], a["W"]),
    ),
    "attention": (
        "O[q,e] = attention(Q[q,d], K[k,d], V[k,e])\nL = O[q,e] W[q,e]\n",
        dict(Q=r(3, 2), K=r(4, 2), V=r(4, 3), W=r(3, 3)),
        lambda a: _attn(a["Q"], a["K"], a["V"], a["W"]),
    ),
    "embedding": (
        "E[t,d] = T[Tok[t], d]\nL = E[t,d] E[t,d] W[t,d]\n",
        dict(T=r(4, 2), Tok=TOK, W=r(5, 2)),
        lambda a: jnp.sum(a["T"][TOK] ** 2 * a["W"]),
    ),
    "max_pool": (
        "M[r] max= S[r,c] S[r,c]\nL = M[r] W[r]\n",
        dict(S=r(3, 4), W=r(3)),
        lambda a: jnp.sum(jnp.max(a["S"] ** 2, axis=1) * a["W"]),
    ),
    "conv1d": (
        "Y[t] = 0.5 X[t-1] + X[t] - 2 X[t+1]\nL = Y[t] Y[t]\n",
        dict(X=r(6)),
        lambda a: jnp.sum((0.5 * jnp.pad(a["X"], (1, 0))[:-1] + a["X"] - 2 * jnp.pad(a["X"], (0, 1))[1:]) ** 2),
    ),
    "bce_sig": (
        "P[n] = sig(X[n,d] W[d], 2.0)\nL = -avg(Y[n] log(P[n]) + (1 - Y[n]) log(1 - P[n]))\n",
        dict(X=r(5, 3), W=r(3), Y=np.array([1.0, 0, 1, 1, 0])),
        lambda a: (
            -jnp.mean(
                a["Y"] * jnp.log(jax.nn.sigmoid(a["X"] @ a["W"] / 2))
                + (1 - a["Y"]) * jnp.log(1 - jax.nn.sigmoid(a["X"] @ a["W"] / 2))
            )
        ),
    ),
    "gelu_mlp": (
        "H[b,h] = gelu(X[b,d] W[d,h])\nL = H[b,h] H[b,h]\n",
        dict(X=r(3, 2), W=r(2, 4)),
        lambda a: jnp.sum(_gelu_tanh(a["X"] @ a["W"]) ** 2),
    ),
    "concat_tanh": (
        "J[r,c] = concat(A[r,c], B[r,c], axis=c)\nL = tanh(J[r,c]) W[r,c]\n",
        dict(A=r(2, 3), B=r(2, 1), W=r(2, 4)),
        lambda a: jnp.sum(jnp.tanh(jnp.concatenate([a["A"], a["B"]], axis=1)) * a["W"]),
    ),
}


@pytest.fixture(autouse=True, scope="module")
def x64():
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", old)


@pytest.mark.parametrize("case", sorted(CASES))
def test_program_grad_equals_jax_grad(case: str) -> None:
    src, inputs, formula = CASES[case]
    wrt = [n for n, v in inputs.items() if v.dtype.kind == "f" and n not in ("Y",)]
    got = Program(src).grad("L", wrt).compile("llvm")(**inputs)
    arrays = {k: jnp.asarray(v) for k, v in inputs.items()}
    want_l = formula(arrays)
    np.testing.assert_allclose(got["L"], float(want_l), rtol=1e-10)
    grads = jax.grad(lambda sub: formula({**arrays, **sub}))({n: arrays[n] for n in wrt})
    for n in wrt:
        np.testing.assert_allclose(got[f"dL_d{n}"], np.asarray(grads[n]), rtol=1e-9, atol=1e-12, err_msg=n)


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
@given(programs(max_equations=3, allow_empty=False))
def test_generated_programs_match_directional_differences(prog) -> None:
    arrays = prog.arrays(seed=0)
    assume(arrays)
    last = prog.equations[-1]
    idx = ", ".join(last.lhs_indices)
    ref = f"{last.lhs}[{idx}]" if idx else last.lhs
    src = prog.source() + f"\nGradLoss = {ref} {ref}\nexport GradLoss\n"
    p = Program(src)
    wrt = sorted(arrays)
    g = p.grad("GradLoss", wrt)
    out = g.compile("reference")(**arrays)
    llvm = g.compile("llvm")(**arrays)
    run = p.compile("reference")
    rng = np.random.default_rng(1)
    h = 1e-6
    for n in wrt:
        np.testing.assert_allclose(llvm[f"dGradLoss_d{n}"], out[f"dGradLoss_d{n}"], rtol=1e-9, atol=1e-9)
        v = rng.normal(size=arrays[n].shape)
        up = float(run(**{**arrays, n: arrays[n] + h * v})["GradLoss"])
        down = float(run(**{**arrays, n: arrays[n] - h * v})["GradLoss"])
        numeric = (up - down) / (2 * h)
        analytic = float(np.sum(out[f"dGradLoss_d{n}"] * v))
        scale = max(1.0, abs(numeric), float(np.sum(np.abs(out[f"dGradLoss_d{n}"] * v))))
        assert abs(numeric - analytic) <= 2e-5 * scale, (src, n, numeric, analytic)
