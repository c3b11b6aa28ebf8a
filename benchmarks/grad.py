"""One training step (forward + backward) of a 2-layer MLP and of an attention block, side by side.

fuse_mlir (``Program.grad`` compiled by llvm) against ``jax.jit(jax.grad(...))``, torch eager and
``torch.compile`` on the CPU, in float32 and float64, all measured in this process; ratios are against
the best peer. The compile time of the gradient program (lowering, grad, passes, LLVM) is reported too.

    python benchmarks/grad.py            # MLP batch 256, 1024 -> 1024 -> 10; attention 128 x 64
    python benchmarks/grad.py --quick    # small sizes, few repeats: a smoke check

A second table times the gradient of an embedding lookup ``E[b, d] = T[Idx[b], d]`` (V = 50000 rows,
D = 128, B = 4096 lookups; ``--quick``: 2000 x 32 x 256) with respect to the table: fuse's native
``te.scatter_add``, the one-hot contraction it replaced (the same gradient program printed by ``fuse grad``,
which spells the scatter as ``(iota(v) == Idx[b])`` factors, read back and compiled; skipped at full size
unless ``--one-hot``: it makes a V x B selection), ``jax.jit(jax.grad)`` and torch eager.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from fuse_mlir import Program

MLP = """
H[b,h] = relu(X[b,d] W1[d,h] + B1[h])
Z[b,c] = H[b,h] W2[h,c] + B2[c]
L = avg(logsumexp(Z[b,c]) - reduce(sum, c) Y[b,c] Z[b,c])
"""
ATTN = """
Q[q,f] = Xq[q,d] Wq[d,f]
K[k,f] = Xq[k,d] Wk[d,f]
V[k,e] = Xq[k,d] Wv[d,e]
O[q,e] = attention(Q[q,f], K[k,f], V[k,e])
L = avg(O[q,e] O[q,e])
"""

EMBED = """
E[b,d] = T[Idx[b], d]
H[b] = E[b,d] W[d]
L = avg((H[b] - Y[b]) ** 2)
"""


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` calls of ``fn`` after one warm-up call, in seconds."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def workloads(quick: bool, dtype: np.dtype) -> dict[str, tuple[str, list[str], dict[str, np.ndarray]]]:
    rng = np.random.default_rng(0)
    b, d, h, c = (32, 64, 64, 10) if quick else (256, 1024, 1024, 10)
    n, e = (16, 16) if quick else (128, 64)

    def a(*shape: int, scale: float = 1.0) -> np.ndarray:
        return (rng.normal(size=shape) * scale).astype(dtype)

    mlp = dict(X=a(b, d), W1=a(d, h, scale=d**-0.5), B1=a(h), W2=a(h, c, scale=h**-0.5), B2=a(c))
    mlp["Y"] = np.eye(c, dtype=dtype)[rng.integers(0, c, b)]
    attn = dict(Xq=a(n, e), Wq=a(e, e, scale=e**-0.5), Wk=a(e, e, scale=e**-0.5), Wv=a(e, e, scale=e**-0.5))
    return {"mlp": (MLP, ["W1", "B1", "W2", "B2"], mlp), "attention": (ATTN, ["Wq", "Wk", "Wv"], attn)}


def jax_step(name: str, wrt: list[str], inputs: dict[str, np.ndarray]) -> Callable[[], object]:
    import jax
    import jax.numpy as jnp

    arrays = {k: jnp.asarray(v) for k, v in inputs.items()}

    def mlp(p, x):
        hid = jax.nn.relu(x["X"] @ p["W1"] + p["B1"])
        z = hid @ p["W2"] + p["B2"]
        return jnp.mean(jax.nn.logsumexp(z, axis=1) - jnp.sum(x["Y"] * z, axis=1))

    def attn(p, x):
        q, k, v = x["Xq"] @ p["Wq"], x["Xq"] @ p["Wk"], x["Xq"] @ p["Wv"]
        o = jax.nn.softmax(q @ k.T / jnp.sqrt(q.shape[1]), axis=1) @ v
        return jnp.mean(jnp.sum(o * o, axis=0))

    f = jax.jit(jax.value_and_grad(mlp if name == "mlp" else attn))
    params = {k: arrays[k] for k in wrt}
    rest = {k: v for k, v in arrays.items() if k not in wrt}
    return lambda: jax.block_until_ready(f(params, rest))


def check_against_jax(name: str, wrt: list[str], inputs: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> None:
    """The timed fuse step must compute what jax computes (a benchmark of a wrong answer means nothing)."""
    loss, grads = jax_step(name, wrt, inputs)()
    tol = 2e-3 if next(iter(inputs.values())).dtype == np.float32 else 1e-8
    np.testing.assert_allclose(got["L"], np.asarray(loss), rtol=tol)
    for k in wrt:
        want = np.asarray(grads[k])
        np.testing.assert_allclose(got[f"dL_d{k}"], want, rtol=tol, atol=tol * float(np.abs(want).max()))


def torch_step(name: str, wrt: list[str], inputs: dict[str, np.ndarray], compiled: bool) -> Callable[[], object]:
    import torch

    t = {k: torch.from_numpy(v.copy()).requires_grad_(k in wrt) for k, v in inputs.items()}

    def mlp(x):
        hid = torch.relu(x["X"] @ x["W1"] + x["B1"])
        z = hid @ x["W2"] + x["B2"]
        return torch.mean(torch.logsumexp(z, 1) - torch.sum(x["Y"] * z, 1))

    def attn(x):
        q, k, v = x["Xq"] @ x["Wq"], x["Xq"] @ x["Wk"], x["Xq"] @ x["Wv"]
        o = torch.softmax(q @ k.T / q.shape[1] ** 0.5, 1) @ v
        return torch.mean(torch.sum(o * o, 0))

    loss = mlp if name == "mlp" else attn
    if compiled:
        loss = torch.compile(loss)
    params = [t[k] for k in wrt]

    def step() -> object:
        return torch.autograd.grad(loss(t), params)

    return step


def embedding_inputs(quick: bool, dtype: np.dtype) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    v, d, b = (2000, 32, 256) if quick else (50000, 128, 4096)
    return dict(
        T=rng.normal(size=(v, d)).astype(dtype),
        Idx=rng.integers(0, v, b),
        W=rng.normal(size=d).astype(dtype),
        Y=rng.normal(size=b).astype(dtype),
    )


def embedding_peers(inputs: dict[str, np.ndarray]) -> tuple[Callable[[], object], Callable[[], object]]:
    """``jax.jit(jax.value_and_grad)`` and a torch eager step of the embedding loss, with respect to ``T``."""
    import jax
    import jax.numpy as jnp
    import torch

    j = {k: jnp.asarray(v) for k, v in inputs.items()}
    f = jax.jit(jax.value_and_grad(lambda t, x: jnp.mean((t[x["Idx"]] @ x["W"] - x["Y"]) ** 2)))
    rest = {k: j[k] for k in ("Idx", "W", "Y")}
    t = {k: torch.from_numpy(v.copy()) for k, v in inputs.items()}
    table = t["T"].requires_grad_(True)

    def torch_step() -> object:
        loss = torch.mean((table[t["Idx"]] @ t["W"] - t["Y"]) ** 2)
        return torch.autograd.grad(loss, [table])

    return (lambda: jax.block_until_ready(f(j["T"], rest))), torch_step


def embedding_table(quick: bool, one_hot: bool, repeats: int) -> None:
    """The embedding-gradient table (see the module docstring)."""
    print()
    print(
        "| embedding V x D, B | dtype | fuse scatter ms | fuse one-hot ms | jax.jit(grad) ms | torch eager ms "
        "| scatter / best peer | one-hot / scatter |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        inputs = embedding_inputs(quick, dtype)
        grad = Program(EMBED).grad("L", ["T"])
        runner = grad.compile("llvm")
        got = runner(**inputs)
        jax_step, torch_step = embedding_peers(inputs)
        loss, want = jax_step()  # type: ignore[misc]
        tol = 2e-3 if dtype == np.float32 else 1e-8
        np.testing.assert_allclose(got["dL_dT"], np.asarray(want), rtol=tol, atol=tol * float(np.abs(want).max()))
        fuse = best_of(lambda runner=runner, inputs=inputs: runner(**inputs), repeats)
        hot_text = "skipped"
        ratio = ""
        if quick or one_hot:
            dtypes = {k: v.dtype for k, v in inputs.items()}
            dense = Program(grad.to_fuse(dtypes)).compile("llvm")
            np.testing.assert_allclose(
                dense(**inputs)["dL_dT"], got["dL_dT"], rtol=tol, atol=tol * float(np.abs(want).max())
            )
            hot = best_of(lambda dense=dense, inputs=inputs: dense(**inputs), max(1, repeats // 3))
            hot_text, ratio = f"{hot * 1e3:.2f}", f"{hot / fuse:.1f}"
        peers = {"jax": best_of(jax_step, repeats), "torch": best_of(torch_step, repeats)}
        v, d = inputs["T"].shape
        print(
            f"| {v} x {d}, {len(inputs['Idx'])} | {dtype.name} | {fuse * 1e3:.2f} | {hot_text} "
            f"| {peers['jax'] * 1e3:.2f} | {peers['torch'] * 1e3:.2f} | {fuse / min(peers.values()):.2f} | {ratio} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--one-hot", action="store_true", help="time the one-hot embedding gradient at full size")
    args = parser.parse_args()
    import jax

    jax.config.update("jax_enable_x64", True)
    repeats = 3 if args.quick else 10
    print(
        "| workload | dtype | fuse llvm ms | jax.jit(grad) ms | torch eager ms | torch.compile ms | fuse / best peer | grad compile s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        for name, (src, wrt, inputs) in workloads(args.quick, dtype).items():
            t0 = time.perf_counter()
            runner = Program(src).grad("L", wrt).compile("llvm")
            got = runner(**inputs)
            compile_s = time.perf_counter() - t0
            check_against_jax(name, wrt, inputs, got)
            fuse = best_of(lambda runner=runner, inputs=inputs: runner(**inputs), repeats)
            peers = {
                "jax": best_of(jax_step(name, wrt, inputs), repeats),
                "eager": best_of(torch_step(name, wrt, inputs, False), repeats),
                "compile": best_of(torch_step(name, wrt, inputs, True), repeats),
            }
            best = min(peers.values())
            print(
                f"| {name} | {dtype.name} | {fuse * 1e3:.2f} | {peers['jax'] * 1e3:.2f} | {peers['eager'] * 1e3:.2f} "
                f"| {peers['compile'] * 1e3:.2f} | {fuse / best:.2f} | {compile_s:.2f} |"
            )
    embedding_table(args.quick, args.one_hot, repeats)


if __name__ == "__main__":
    main()
