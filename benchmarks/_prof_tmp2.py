import time, numpy as np, sys
from fuse_mlir import Program
from benchmarks.workloads import BY_NAME
from benchmarks.peers import numba_kernels
src = BY_NAME["call_overhead"].source
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
dt = np.dtype(np.float32 if len(sys.argv) > 2 else np.float64)
r = Program(src).compile("llvm")
rng = np.random.default_rng(0)
X, Y2, Z = (rng.standard_normal(n).astype(dt) for _ in range(3))
print(r(X=X, Y2=Y2, Z=Z), (np.exp(X)*Y2+Z).sum()); print(r(X=X, Y2=Y2, Z=Z))
nb = numba_kernels(dt, parallel=False)["call_overhead"]
nb(X, Y2, Z)
def t(f, calls=20000, rep=7):
    best = 1e9
    for _ in range(rep):
        t0 = time.perf_counter_ns()
        for _ in range(calls): f()
        best = min(best, (time.perf_counter_ns() - t0) / calls)
    return round(best / 1000, 3)
nat = r._native[0]
inp = {"X": X, "Y2": Y2, "Z": Z}
for _ in range(2):
    print("runner", t(lambda: r(X=X, Y2=Y2, Z=Z)), "native", t(lambda: nat(inp)), "numba", t(lambda: nb(X, Y2, Z)), "lambda", t(lambda: None))
