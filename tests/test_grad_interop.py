"""Programs inside JAX and PyTorch: jax_function / torch_function under jax.jit, jax.grad, jax.vmap,
torch.autograd and torch.compile, and llvm kernels as custom_vjp / autograd.Function, all equal to
Program.grad."""

from __future__ import annotations

import numpy as np
import pytest

from fuse_mlir.program import Program

jax = pytest.importorskip("jax")
torch = pytest.importorskip("torch")
jnp = jax.numpy

SRC = "H[b,h] = tanh(X[b,d] W[d,h] + B[h])\nP[b,c.] = softmax(H[b,h] V[h,c])\nL = -avg(Y[b,c] log(P[b,c]))\n"
RNG = np.random.default_rng(7)
X, W, B, V = RNG.normal(size=(5, 3)), RNG.normal(size=(3, 4)), RNG.normal(size=4), RNG.normal(size=(4, 2))
Y = np.eye(2)[RNG.integers(0, 2, 5)]


@pytest.fixture(scope="module")
def want() -> dict[str, np.ndarray]:
    return Program(SRC).grad("L", ["W", "B", "V"]).compile("llvm")(X=X, W=W, B=B, V=V, Y=Y)


@pytest.fixture(autouse=True, scope="module")
def x64():
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", old)


def test_jax_jit_grad_equals_program_grad(want) -> None:
    f = Program(SRC).jax_function()

    def loss(w, b, v):
        return f(X=jnp.asarray(X), W=w, B=b, V=v, Y=jnp.asarray(Y))["L"]

    gw, gb, gv = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(jnp.asarray(W), jnp.asarray(B), jnp.asarray(V))
    np.testing.assert_allclose(np.asarray(gw), want["dL_dW"], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(np.asarray(gb), want["dL_dB"], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(np.asarray(gv), want["dL_dV"], rtol=1e-10, atol=1e-14)


def test_jax_vmap_and_device_arrays(want) -> None:
    f = Program(SRC).jax_function()
    ws = jax.device_put(jnp.stack([jnp.asarray(W), 2 * jnp.asarray(W)]))
    losses = jax.vmap(lambda w: f(X=jnp.asarray(X), W=w, B=jnp.asarray(B), V=jnp.asarray(V), Y=jnp.asarray(Y))["L"])(ws)
    assert losses.shape == (2,)
    np.testing.assert_allclose(float(losses[0]), float(want["L"]), rtol=1e-12)


def test_jax_function_on_sharded_arrays(want) -> None:
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
    xs = jax.device_put(jnp.asarray(X), NamedSharding(mesh, PartitionSpec("data", None)))
    f = Program(SRC).jax_function()
    out = jax.jit(lambda x: f(X=x, W=jnp.asarray(W), B=jnp.asarray(B), V=jnp.asarray(V), Y=jnp.asarray(Y))["L"])(xs)
    np.testing.assert_allclose(float(out), float(want["L"]), rtol=1e-12)


@pytest.mark.parametrize("compiled", [False, True])
def test_torch_autograd_equals_program_grad(want, compiled: bool) -> None:
    f = Program(SRC).torch_function()
    w = torch.tensor(W, requires_grad=True)
    b = torch.tensor(B, requires_grad=True)
    v = torch.tensor(V, requires_grad=True)

    def loss(x, w, b, v, y):
        return f(X=x, W=w, B=b, V=v, Y=y)["L"]

    if compiled:
        loss = torch.compile(loss, fullgraph=True)  # fullgraph: a graph break is an error
    loss(torch.tensor(X), w, b, v, torch.tensor(Y)).backward()
    np.testing.assert_allclose(w.grad.numpy(), want["dL_dW"], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(b.grad.numpy(), want["dL_dB"], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(v.grad.numpy(), want["dL_dV"], rtol=1e-10, atol=1e-14)


def test_llvm_kernels_as_jax_custom_vjp(want) -> None:
    from fuse_mlir.interop import jax_native

    f = jax_native(Program(SRC), "L", ["W", "B", "V"])
    grads = jax.jit(jax.grad(lambda w, b, v: 3 * f(w, b, v, X=jnp.asarray(X), Y=jnp.asarray(Y)), argnums=(0, 1, 2)))(
        jnp.asarray(W), jnp.asarray(B), jnp.asarray(V)
    )
    for g, name in zip(grads, ["W", "B", "V"]):
        np.testing.assert_allclose(np.asarray(g), 3 * want[f"dL_d{name}"], rtol=1e-12)


def test_llvm_kernels_as_torch_autograd_function(want) -> None:
    from fuse_mlir.interop import torch_native

    f = torch_native(Program(SRC), "L", ["W", "B", "V"])
    w = torch.tensor(W, requires_grad=True)
    b = torch.tensor(B, requires_grad=True)
    v = torch.tensor(V, requires_grad=True)
    out = f(w, b, v, X=torch.tensor(X), Y=torch.tensor(Y))
    (2 * out).backward()
    assert float(out.detach()) == pytest.approx(float(want["L"]), rel=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), 2 * want["dL_dW"], rtol=1e-12)
    np.testing.assert_allclose(v.grad.numpy(), 2 * want["dL_dV"], rtol=1e-12)
