"""Generate the small data files that the example programs in ``examples/`` read.

Deterministic: run ``python examples/data/make_data.py`` and the files are
rewritten byte for byte the same (seeded NumPy, fixed text). Every file is
small (well under 10 KB) and is committed next to this script, so that
``fuse run examples/<name>.fuse`` needs no ``--input``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def npy(name: str, arr: np.ndarray) -> None:
    np.save(HERE / name, np.ascontiguousarray(arr), allow_pickle=False)


def js(name: str, value: object) -> None:
    (HERE / name).write_text(json.dumps(value) + "\n")


def facts(name: str, rows: list[tuple[int, ...]], shape: tuple[int, ...], header: str | None = None) -> None:
    """Coordinate facts, one row each, tab-separated; ``# shape:`` fixes the extents."""
    sep = "\t" if name.endswith(".tsv") else ","
    lines = [f"# shape: {','.join(map(str, shape))}"]
    if header:
        lines.append(header)
    lines += [sep.join(str(v) for v in row) for row in rows]
    (HERE / name).write_text("\n".join(lines) + "\n")


def rounded(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    """Normal samples rounded to 4 decimals (readable in JSON, exact in float64 round trips)."""
    return np.round(rng.normal(size=shape) * scale, 4)


def main() -> None:
    rng = np.random.default_rng(20240611)

    # mlp.fuse: batch 4, input 5, hidden 6, classes 3
    npy("mlp_x.npy", rounded(rng, 4, 5))
    npy("mlp_w1.npy", rounded(rng, 6, 5, scale=0.5))
    js("mlp_b1.json", rounded(rng, 6, scale=0.1).tolist())
    npy("mlp_w2.npy", rounded(rng, 3, 6, scale=0.5))
    js("mlp_b2.json", rounded(rng, 3, scale=0.1).tolist())

    # attention.fuse: sequence 5, model width 4
    npy("attn_x.npy", rounded(rng, 5, 4))
    for w in ("wq", "wk", "wv"):
        npy(f"attn_{w}.npy", rounded(rng, 4, 4, scale=0.5))

    # logreg.fuse: 6 samples, 3 features; weights as a valued .csv, bias as a JSON scalar
    npy("logreg_x.npy", rounded(rng, 6, 3))
    w = rounded(rng, 3)
    (HERE / "logreg_w.csv").write_text("d,value\n" + "".join(f"{d},{v!r}\n" for d, v in enumerate(w.tolist())))
    js("logreg_b.json", 0.25)

    # gnn.fuse: 5 nodes (undirected edges, both directions listed), 3 input features, 4 output features
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (1, 3), (3, 4)]
    both = sorted(set(edges) | {(b, a) for a, b in edges})
    facts("gnn_edges.tsv", both, (5, 5))
    npy("gnn_h.npy", rounded(rng, 5, 3))
    npy("gnn_w.npy", rounded(rng, 3, 4, scale=0.7))

    # hmm.fuse: 3 hidden states, 4 observation symbols, observations [2, 0, 3]
    pi = rng.dirichlet(np.ones(3))
    a = rng.dirichlet(np.ones(3), size=3)
    b = rng.dirichlet(np.ones(4), size=3)
    js("hmm_pi.json", np.round(pi, 4).tolist())
    npy("hmm_a.npy", a)
    npy("hmm_b.npy", b)
    js("hmm_obs.json", [2, 0, 3])

    # datalog.fuse: 7 people.  Parent(x, y): x is a parent of y.  Sister(x, y): x is a sister of y.
    #   0 and 1 are the parents of 2, 3 and 4; 2 is the parent of 5, 4 the parent of 6.
    parent = [(0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4), (2, 5), (4, 6)]
    sister = [(3, 2), (3, 4), (4, 2), (4, 3)]
    facts("datalog_parent.tsv", parent, (7, 7))
    facts("datalog_sister.tsv", sister, (7, 7))

    # layernorm.fuse: 3 rows of width 6
    npy("ln_x.npy", rounded(rng, 3, 6, scale=2.0) + 1.0)
    js("ln_gamma.json", (1.0 + rounded(rng, 6, scale=0.1)).tolist())
    js("ln_beta.json", rounded(rng, 6, scale=0.1).tolist())

    # rnn.fuse: hidden 4, input 3, 3 time steps, 2 outputs
    npy("rnn_x.npy", rounded(rng, 3, 3))
    npy("rnn_w.npy", rounded(rng, 4, 4, scale=0.4))
    npy("rnn_u.npy", rounded(rng, 4, 3, scale=0.6))
    js("rnn_b.json", rounded(rng, 4, scale=0.1).tolist())
    npy("rnn_v.npy", rounded(rng, 2, 4))

    # svm.fuse: 5 support vectors in 3-D, 4 query points; dual coefficients alpha_n * y_n
    npy("svm_sv.npy", rounded(rng, 5, 3))
    js("svm_coef.json", [0.8, -0.5, 1.2, -0.9, -0.6])
    npy("svm_x.npy", rounded(rng, 4, 3))
    js("svm_b.json", 0.3)

    # fn_reduce.fuse: a 4x5 matrix and a 5-vector
    npy("fr_a.npy", rounded(rng, 4, 5))
    npy("fr_v.npy", rounded(rng, 5))

    # embedding.fuse: vocabulary 10, width 4; token 0 is padding
    npy("emb_table.npy", rounded(rng, 10, 4))
    js("emb_tok.json", [3, 1, 4, 1, 5, 9, 0, 0])

    # conv1d.fuse: a signal of 8 and a 3-tap kernel as a typed JSON object
    npy("conv_x.npy", rounded(rng, 8))
    (HERE / "conv_k.json").write_text(json.dumps({"data": [0.25, 0.5, -0.25], "dtype": "float64"}) + "\n")

    # retrieval.fuse: 3 queries and 6 documents embedded in 4 dimensions
    npy("ret_q.npy", rounded(rng, 3, 4))
    npy("ret_doc.npy", rounded(rng, 6, 4))

    # activations.fuse: 7 points spread over [-3, 3]
    npy("act_x.npy", np.linspace(-3.0, 3.0, 7))


if __name__ == "__main__":
    main()
