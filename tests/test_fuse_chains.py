"""Long chains of fusable kernels: the ``fuse`` pass builds each fused body in the larger kernel's block.

Fusing a chain of n kernels used to move the growing body at every step (O(n^2) ops moved; a 1500-term sum
took 38 s in ``fuse``). The larger body now hosts the smaller one (fuse_mlir.passes.transforms.kernel_merge),
and the fuser keeps what each body reads and whether it gathers instead of walking every new body. These
tests run chains that take each path (the consumer hosting, the producer hosting, both moved: a broadcast,
a kept second output, gathers, tables) against the reference interpreter, and count the ops moved.
"""

from __future__ import annotations

import numpy as np
import pytest

from fuse_mlir import Program
from fuse_mlir.passes.transforms import kernel_merge

N = 90  # terms: past HOST_PRODUCER_OPS, so the producer-hosted path runs too

rng = np.random.default_rng(7)
X = rng.uniform(-1, 1, 5)
Z = rng.uniform(-1, 1, 3)
IDX = np.array([4, 0, 2, 2, 1], dtype=np.int64)


def _terms(make: str, n: int = N) -> str:
    return " + ".join(make.format(k=k % 7 + 1) for k in range(n))


CHAINS = {
    # left-associated sum: each step inlines the accumulated sum (large) into one more add (small)
    "left-sum": (f"Y[i] = {_terms('X[i] * {k}')}\nexport Y", {"X": X}),
    # right-associated (as deep as the parser's bracket limit allows): the innermost pair first
    "right-sum": ("Y[i] = " + "(X[i] + " * 60 + "X[i]" + ")" * 60 + "\nexport Y", {"X": X}),
    # a chain of equations, each reading the one before: the accumulated kernel is the producer every time
    "equations": (
        "T0[i] = X[i]\n"
        + "".join(f"T{k}[i] = sig(T{k - 1}[i]) * 0.5 + X[i] * {k % 5}\n" for k in range(1, N))
        + f"export T{N - 1}",
        {"X": X},
    ),
    # many small producers (sig, exp) feeding one growing consumer
    "small-producers": (f"Y[i] = {_terms('sig(X[i] * {k}) * exp(X[i] / {k})', 40)}\nexport Y", {"X": X}),
    # the chain is broadcast into a 2-d consumer: its dims are renamed, so both bodies move
    "broadcast": (f"S[i] = {_terms('X[i] * {k}')}\nY[i, j] = S[i] * Z[j]\nexport Y", {"X": X, "Z": Z}),
    # the large producer stays a result too (a kept output of the fused kernel)
    "kept-output": (f"S[i] = {_terms('X[i] * {k}')}\nY[i] = S[i] * 2 + 1\nexport S, Y", {"X": X}),
    # gathers through an index tensor in every term (tables, checked positions)
    "gathers": (f"Y[i] = {_terms('X[Idx[i]] * {k}')}\nexport Y", {"X": X, "Idx": IDX}),
    # a reduction at the end of the chain
    "reduced": (f"S = {_terms('X[i] * {k}')}\nexport S", {"X": X}),
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_long_chains_agree_with_the_reference(name: str) -> None:
    src, inputs = CHAINS[name]
    want = Program(src).compile("reference")(**inputs)
    got = Program(src).compile("llvm")(**inputs)
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-12, err_msg=f"{name}: {k}")


def _moved(monkeypatch: pytest.MonkeyPatch, n: int) -> int:
    moved = 0
    inner = kernel_merge._copy_body

    def counting(src, dst, args, dims, before=None):  # noqa: ANN001, ANN202
        nonlocal moved
        moved += sum(1 for _ in src.ops)
        return inner(src, dst, args, dims, before)

    monkeypatch.setattr(kernel_merge, "_copy_body", counting)
    Program(f"Y[i] = {_terms('X[i] * {k}', n)}\nexport Y").compile("llvm", cache=False)(X=X)
    monkeypatch.setattr(kernel_merge, "_copy_body", inner)
    return moved


def test_fusing_a_chain_moves_each_op_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """Doubling the chain doubles the ops moved (it quadrupled when every step moved the whole fused body)."""
    small, large = _moved(monkeypatch, 200), _moved(monkeypatch, 400)
    assert small > 0
    assert large <= 2.2 * small, (small, large)
