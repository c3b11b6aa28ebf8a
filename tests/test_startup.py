"""Start-up: lazy imports, BLAS without SciPy, and the warm start that builds no IR (docs/runtime.md, start-up)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fuse_mlir import Program, lowering_cache
from fuse_mlir.backends.llvm import blas, executor
from fuse_mlir.backends.memcache import BoundedCache

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("xdsl", "scipy", "torch", "jax", "numba", "llvmlite")

PROGRAM = """
X[b,d] = "x.npy"
W[h,d] = "w.npy"
H[b,h] = relu(W[h,d] X[b,d] + B[h])
P[b,h.] = softmax(H[b,h])
export H, P
"""

RUN = """
import json, sys, numpy as np
from fuse_mlir import Program, lowering_cache
from fuse_mlir.backends.llvm import executor
p = Program.from_file(sys.argv[1])
r = p.compile("llvm")(B=np.linspace(-1, 1, 6))
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2].split(",")))
print(json.dumps({"H": r["H"].tolist(), "P": r["P"].tolist(), "heavy": heavy,
                  "index": dict(lowering_cache.STATS), "kernels": dict(executor.STATS)}))
"""


def _env(folder: Path) -> dict[str, str]:
    env = {**os.environ, "FUSE_CACHE_DIR": str(folder), "PYTHONPATH": str(ROOT)}
    env.pop("FUSE_BLAS", None)
    return env


def _python(code: str, *args: str, folder: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], env=_env(folder), capture_output=True, text=True, check=True, cwd=ROOT
    )
    return out.stdout.strip().splitlines()[-1]


def _program(folder: Path, w_rows: int = 6) -> Path:
    rng = np.random.default_rng(0)
    np.save(folder / "x.npy", rng.standard_normal((4, 5)))
    np.save(folder / "w.npy", rng.standard_normal((w_rows, 5)))
    path = folder / "layer.fuse"
    path.write_text(PROGRAM)
    return path


def _want(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.load(folder / "x.npy"), np.load(folder / "w.npy")
    h = np.maximum(x @ w.T + np.linspace(-1, 1, w.shape[0]), 0)
    e = np.exp(h - h.max(axis=1, keepdims=True))
    return h, e / e.sum(axis=1, keepdims=True)


def test_import_fuse_mlir_is_light(tmp_path: Path) -> None:
    """``import fuse_mlir`` loads no xDSL, no LLVM, no SciPy and none of the peer frameworks."""
    code = f"import json, sys, fuse_mlir; print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    assert json.loads(_python(code, folder=tmp_path)) == []
    # The names stay reachable: Program and the pass API load on first use.
    code = "import fuse_mlir; print(fuse_mlir.Program.__name__, fuse_mlir.Pipeline.__name__)"
    assert _python(code, folder=tmp_path) == "Program Pipeline"


def test_warm_start_builds_no_ir(tmp_path: Path) -> None:
    """A second process finds the lowering in the index and the kernel on disk: xDSL (hence any IR) and SciPy
    are never imported, nothing is compiled, and the results are the cold run's."""
    path = _program(tmp_path)
    cold = json.loads(_python(RUN, str(path), ",".join(HEAVY), folder=tmp_path))
    assert cold["kernels"] == {"compiled": 1}
    assert cold["index"] == {"misses": 1, "stored": 2}  # under () and under the full signature (B: float64)
    warm = json.loads(_python(RUN, str(path), ",".join(HEAVY), folder=tmp_path))
    assert warm["kernels"] == {"loaded": 1}
    assert warm["index"] == {"hits": 1}
    assert warm["heavy"] == ["llvmlite"]  # no xdsl: no op was constructed; no scipy: BLAS came from NumPy
    h, p = _want(tmp_path)
    for r in (cold, warm):
        np.testing.assert_allclose(r["H"], h, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(r["P"], p, rtol=1e-12)


def test_warm_key_follows_source_shapes_and_program(tmp_path: Path) -> None:
    """A source file of another shape, or an edited program, is another lowering (never a stale hit)."""
    path = _program(tmp_path)
    json.loads(_python(RUN, str(path), ",".join(HEAVY), folder=tmp_path))
    _program(tmp_path, w_rows=3)  # W (hence H, P, B) now has 3 rows
    r = json.loads(_python(RUN.replace("linspace(-1, 1, 6)", "linspace(-1, 1, 3)"), str(path), "", folder=tmp_path))
    assert r["index"] == {"misses": 1, "stored": 2}
    h, p = _want(tmp_path)
    np.testing.assert_allclose(r["H"], h, rtol=1e-12, atol=1e-12)
    path.write_text(PROGRAM.replace("relu(", "abs("))
    r = json.loads(_python(RUN.replace("linspace(-1, 1, 6)", "linspace(-1, 1, 3)"), str(path), "", folder=tmp_path))
    assert r["index"] == {"misses": 1, "stored": 2} and r["kernels"] == {"compiled": 1}


GEMM_RUN = """
import json, sys, numpy as np
from fuse_mlir import Program, lowering_cache
from fuse_mlir.backends.llvm import executor
rng = np.random.default_rng(0)
r = Program("Y[i, b] = relu(W[i, j] X[j, b] + B[i])\\nexport Y").compile("llvm")
out, ins = {}, {}
for i, j, b in ((2048, 2048, 32), (32, 2048, 2048)):
    W, X, B = rng.standard_normal((i, j)), rng.standard_normal((j, b)), rng.standard_normal(i)
    y = r(W=W, X=X, B=B)["Y"]
    ins[f"{i}x{b}"] = dict(W=W, X=X, B=B)
    out[f"{i}x{b}"] = [bool(np.allclose(y, np.maximum(W @ X + B[:, None], 0), rtol=1e-12, atol=1e-12))]
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1].split(",")))
for name, x in ins.items():  # explain() builds IR: only after the heavy modules are listed
    r(**x)
    out[name].append([c["copies"] for c in r.explain("json")["contractions"]])
print(json.dumps({"out": out, "heavy": heavy, "index": dict(lowering_cache.STATS), "kernels": dict(executor.STATS)}))
"""


def test_warm_start_plans_gemm_sides_without_ir(tmp_path: Path) -> None:
    """A float64 product's result side is planned per shape (one shape writes its result transposed, the other
    not): the warm process decides both from the index alone and finds both kernels on disk, so it imports no
    xDSL (explain() is asked only after the heavy modules are listed)."""
    cold = json.loads(_python(GEMM_RUN, ",".join(HEAVY), folder=tmp_path))
    warm = json.loads(_python(GEMM_RUN, ",".join(HEAVY), folder=tmp_path))
    assert cold["kernels"] == {"compiled": 2}
    assert warm["kernels"] == {"loaded": 2} and warm["index"] == {"hits": 1}
    assert warm["heavy"] == ["llvmlite"]
    for r in (cold, warm):
        assert r["out"] == {"2048x32": [True, [["result"]]], "32x2048": [True, [[]]]}


@pytest.fixture
def private_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(executor, "_CACHE", BoundedCache())
    monkeypatch.setattr(executor, "STATS", type(executor.STATS)())
    monkeypatch.setattr(lowering_cache, "STATS", type(lowering_cache.STATS)())
    monkeypatch.setenv("FUSE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def test_warm_lowering_builds_its_module_on_demand(private_cache: Path) -> None:
    path = _program(private_cache)
    cold = Program.from_file(path).lower({"B": np.float32}, warm=True)
    warm = Program.from_file(path).lower({"B": np.float32}, warm=True)
    assert lowering_cache.STATS["hits"] == 1 and not warm.has_module
    assert [(s.name, s.rank, s.dtype, s.loc) for s in warm.inputs] == [
        (s.name, s.rank, s.dtype, s.loc) for s in cold.inputs
    ]
    assert (warm.exports, warm.group_order) == (cold.exports, cold.group_order)
    digest = warm.te_digest()
    assert not warm.has_module  # the digest was stored: still no IR
    assert warm.module is not None and warm.has_module
    warm.digest = None
    assert warm.te_digest() == digest == cold.te_digest()  # the built module is the one the index describes


def test_corrupt_index_entry_is_rebuilt(private_cache: Path) -> None:
    path = _program(private_cache)
    b = np.linspace(-1, 1, 6)
    Program.from_file(path).compile("llvm")(B=b)
    entries = sorted((private_cache / "cache" / "lowerings").glob("*.bin"))
    assert len(entries) == 2  # under () and under the full signature
    for entry in entries:
        data = bytearray(entry.read_bytes())
        data[-3] ^= 0xFF  # inside the JSON header: the checksum no longer matches
        entry.write_bytes(bytes(data))
    executor._CACHE.clear()
    lowering_cache.STATS.clear()
    r = Program.from_file(path).compile("llvm")(B=b)
    assert lowering_cache.STATS == {"misses": 1, "stored": 2}
    np.testing.assert_allclose(r["H"], _want(private_cache)[0], rtol=1e-12, atol=1e-12)
    lowering_cache.STATS.clear()
    Program.from_file(path).lower({"B": np.float64}, warm=True)
    assert lowering_cache.STATS == {"hits": 1}


def test_blas_comes_from_numpy(tmp_path: Path) -> None:
    found = blas.find_library()
    if found is None:
        pytest.skip("this NumPy has no BLAS library of its own")
    _, dgemm, sgemm, width = found
    assert width in (32, 64) and dgemm.endswith("_") and sgemm.endswith("_")
    code = (
        "import sys, numpy as np; from fuse_mlir import compile\n"
        "r = compile('C[i,j] = A[i,k] B[k,j]\\nexport C', cache=False)\n"
        "for dt in (np.float64, np.float32):\n"
        "    a = np.arange(35, dtype=dt).reshape(7, 5) / 7; b = np.arange(15, dtype=dt).reshape(5, 3) / 5\n"
        "    assert np.allclose(r(A=a, B=b)['C'], a @ b, rtol=1e-5)\n"
        "print('scipy' in sys.modules)"
    )
    assert _python(code, folder=tmp_path) == "False"


def test_warm_fuse_run_builds_no_ir(tmp_path: Path) -> None:
    """The same through ``fuse run`` with an ``--input`` file (whose rank the command reads from the lowering)."""
    path = _program(tmp_path)
    np.save(tmp_path / "b.npy", np.linspace(-1, 1, 6))
    code = (
        "import json, sys; from fuse_mlir.cli.fuse import main\n"
        f"rc = main(['run', {str(path)!r}, '--input', 'B={tmp_path / 'b.npy'}', '--out', {str(tmp_path / 'o.npz')!r}])\n"
        "print(json.dumps([rc, 'xdsl' in sys.modules]))"
    )
    assert json.loads(_python(code, folder=tmp_path)) == [0, True]  # cold: lowered and compiled
    assert json.loads(_python(code, folder=tmp_path)) == [0, False]  # warm: no IR
    h, p = _want(tmp_path)
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["P"], p, rtol=1e-12)


def test_the_warm_key_reads_the_resolved_program_as_its_repr() -> None:
    """``lowering_cache.structure`` is ``repr(resolved)`` in pieces, built without recursion (repr copies each
    subtree's text into its parent's: quadratic in an expression's depth, 1.4 s for a 4,000-term sum)."""
    from fuse_mlir.frontend.parser import recursion_room

    programs = [(p.read_text(), str(p)) for p in sorted((ROOT / "examples").glob("*.fuse"))]
    programs.append(("S[i] = " + " + ".join(f"X{k}[i] * {k}.5" for k in range(300)) + "\nexport S\n", "wide.fuse"))
    programs.append((PROGRAM.replace('"x.npy"', "const([[1.0, 2.0]])"), "one.fuse"))
    checked = 0
    for src, name in programs:
        resolved = Program(src, filename=name).resolved
        with recursion_room():
            assert "".join(lowering_cache.structure(resolved)) == repr(resolved), name
        checked += 1
    assert checked >= 10
    odd = [(1,), (), {}, [], {"a": (2.5, None)}, ((), [()]), "x", Path("p")]
    assert "".join(lowering_cache.structure(odd)) == repr(odd)
