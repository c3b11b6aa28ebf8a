"""Parse, resolve and lower a generated 400-equation program and print the time of each step.

Run from the repository root: ``python -m benchmarks.frontend_speed``.
"""

from __future__ import annotations

import time

import numpy as np

from fuse_mlir.frontend.parser import parse
from fuse_mlir.program import Program


def program(n: int = 400) -> str:
    """A chain of n equations mixing contractions, softmax, elementwise terms and max projections."""
    lines = ["H0[b,i] = X[b,i]"]
    for k in range(1, n):
        if k % 4 == 0:
            lines.append(f"H{k}[b,i] = relu(W{k % 7}[i,j] H{k - 1}[b,j] + B{k % 5}[i])")
        elif k % 4 == 1:
            lines.append(f"H{k}[b,i.] = softmax(H{k - 1}[b,i])")
        elif k % 4 == 2:
            lines.append(f"H{k}[b,i] = H{k - 1}[b,i] * 0.5 + H{k - 2}[b,i]")
        else:
            lines.append(f"H{k}[b,i] max= H{k - 1}[b,j] W{k % 7}[j,i]")
    lines.append(f"export H{n - 1}")
    return "\n".join(lines)


def main() -> None:
    src = program()
    t0 = time.perf_counter()
    parse(src, "big.fuse")
    t1 = time.perf_counter()
    prog = Program(src, "big.fuse")
    t2 = time.perf_counter()
    low = prog.lower()
    t3 = time.perf_counter()
    ops = len(list(low.module.body.block.ops))
    print(f"400 equations: parse {1e3 * (t1 - t0):.1f} ms; parse+resolve {1e3 * (t2 - t1):.1f} ms; ")
    print(f"extent/dtype inference and lowering to tensor_eq (verified) {1e3 * (t3 - t2):.1f} ms, {ops} ops")
    rng = np.random.default_rng(0)
    inputs = {"X": rng.standard_normal((8, 16))}
    inputs |= {f"W{k}": rng.standard_normal((16, 16)) * 0.1 for k in range(7)}
    inputs |= {f"B{k}": rng.standard_normal(16) for k in range(5)}
    # The llvm backend compiles one native function for the whole program, and LLVM's time grows
    # faster than linearly with its size, so it is measured on shorter prefixes of the chain.
    for n, backend in ((400, "reference"), (25, "llvm"), (50, "llvm"), (100, "llvm")):
        part = Program(program(n), "big.fuse") if n != 400 else prog
        used = {k: v for k, v in inputs.items() if f"{k}[" in part.source}
        run = part.compile(backend)
        t4 = time.perf_counter()
        run(**used)
        t5 = time.perf_counter()
        run(**used)
        t6 = time.perf_counter()
        print(
            f"{backend}, {n} equations: first call {1e3 * (t5 - t4):.0f} ms (compile included), second {1e3 * (t6 - t5):.1f} ms"
        )


if __name__ == "__main__":
    main()
