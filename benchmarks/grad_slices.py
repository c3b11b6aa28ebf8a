"""The gradient of a strided-slice read, ``L = sum(X[1::2] X[1::2] W[1::2])``, with respect to ``X``: before/after.

After: ``Program.grad`` sends the slice's adjoint back through one ``te.scatter_add`` whose index tensor is an
iota read through the same slice (linear in ``n``). Before: the one-hot contraction the grad pass used to emit,
``dX[s] = g[c] (iota(s) == pos[c])`` over an ``n x n/2`` selection; here it is the same gradient program printed
by ``fuse grad`` (which spells the scatter-add as exactly that one-hot sum), read back and compiled. Both on
llvm, with ``jax.jit(jax.grad)`` and torch eager as peers, all measured in this process. The one-hot version is
quadratic, so it runs only up to ``--one-hot-max`` elements; the scatter-add one goes on to 1M.

    python -m benchmarks.grad_slices            # n = 4096 .. 65536 (both), 1M (scatter and peers)
    python -m benchmarks.grad_slices --quick    # n = 1024, 4096 and 65536: a smoke check
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from benchmarks.grad import best_of
from fuse_mlir import Program

LOSS = "L = X[1::2] X[1::2] W[1::2]\n"


def peers(x: np.ndarray, w: np.ndarray) -> tuple[Callable[[], object], Callable[[], object], np.ndarray]:
    """``jax.jit(jax.grad)`` and torch-eager steps of the same loss, and jax's gradient (the check)."""
    import jax
    import jax.numpy as jnp
    import torch

    f = jax.jit(jax.grad(lambda x, w: jnp.sum(x[1::2] * x[1::2] * w[1::2])))
    jx, jw = jnp.asarray(x), jnp.asarray(w)
    tx, tw = torch.from_numpy(x).requires_grad_(True), torch.from_numpy(w)

    def torch_step() -> object:
        return torch.autograd.grad(torch.sum(tx[1::2] * tx[1::2] * tw[1::2]), [tx])

    want = np.asarray(f(jx, jw))
    return (lambda: jax.block_until_ready(f(jx, jw))), torch_step, want


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--one-hot-max", type=int, default=65536, help="largest n the one-hot version runs at")
    args = parser.parse_args()
    import jax

    jax.config.update("jax_enable_x64", True)
    sizes = [1024, 4096, 65536] if args.quick else [4096, 16384, 65536, 1 << 20]
    repeats = 3 if args.quick else 10
    grad = Program(LOSS).grad("L", ["X"])
    scatter = grad.compile("llvm")
    dense = Program(grad.to_fuse({"X": np.dtype(np.float64), "W": np.dtype(np.float64)})).compile("llvm")
    rng = np.random.default_rng(0)
    print(
        "| n | fuse scatter ms | fuse one-hot (before) ms | jax.jit(grad) ms | torch eager ms | one-hot / scatter "
        "| scatter / best peer |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        x, w = rng.standard_normal(n), rng.standard_normal(n)
        got = scatter(X=x, W=w)["dL_dX"]
        jax_step, torch_step, want = peers(x, w)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        fuse = best_of(lambda x=x, w=w: scatter(X=x, W=w), repeats)
        hot_text = ratio = "skipped"
        if n <= args.one_hot_max:
            np.testing.assert_allclose(dense(X=x, W=w)["dL_dX"], got, rtol=1e-12, atol=1e-12)
            hot = best_of(lambda x=x, w=w: dense(X=x, W=w), max(1, repeats // 3))
            hot_text, ratio = f"{hot * 1e3:.2f}", f"{hot / fuse:.0f}"
        peer = {"jax": best_of(jax_step, repeats), "torch": best_of(torch_step, repeats)}
        print(
            f"| {n} | {fuse * 1e3:.3f} | {hot_text} | {peer['jax'] * 1e3:.3f} | {peer['torch'] * 1e3:.3f} "
            f"| {ratio} | {fuse / min(peer.values()):.2f} |"
        )


if __name__ == "__main__":
    main()
