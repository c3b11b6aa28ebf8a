"""LANGUAGE.md §4 semantics on the reference interpreter, each case against a hand-written NumPy formula."""

from __future__ import annotations

import numpy as np
import pytest

from fuse_mlir import FuseError, FuseRuntimeError, Program

rng = np.random.default_rng(1234)
A = rng.standard_normal((3, 3))
X = rng.standard_normal((3, 4))  # non-square on purpose
B = rng.standard_normal(4)
C = rng.standard_normal(3)


def run(src: str, **inputs):
    return Program(src).compile()(**inputs)


def one(src: str, **inputs) -> np.ndarray:
    out = run(src, **inputs)
    return out[list(out)[-1]]


CASES = [
    # join, projection
    ("matmul", "C2[i,k] = X[i,j] W[j,k]", dict(X=X, W=X.T), lambda: X @ X.T),
    ("transpose", "Y[j,i] = X[i,j]", dict(X=X), lambda: X.T),
    ("diagonal", "D[i] = A[i,i]", dict(A=A), lambda: np.diag(A)),
    ("trace", "T = A[i,i]", dict(A=A), lambda: np.trace(A)),
    ("row sum (single-occurrence projection)", "S[i] = X[i,j]", dict(X=X), lambda: X.sum(1)),
    ("column sum", "S[j] = X[i,j]", dict(X=X), lambda: X.sum(0)),
    ("total", "S = X[i,j]", dict(X=X), lambda: X.sum()),
    ("scalar []", "S[] = B[i] B[i]", dict(B=B), lambda: B @ B),
    # broadcast by name, both term orders, non-square
    ("broadcast row bias", "H[b,h] = X[b,h] + B[h]", dict(X=X, B=B), lambda: X + B),
    ("broadcast, other order", "H[b,h] = B[h] + X[b,h]", dict(X=X, B=B), lambda: X + B),
    ("broadcast column", "H[b,h] = X[b,h] + C[b]", dict(X=X, C=C), lambda: X + C[:, None]),
    (
        "broadcast-only index from elsewhere",
        "Z[b,h] = C[b]\nW[h] = B[h]\nexport W, Z",
        dict(C=C, B=B),
        lambda: np.tile(C[:, None], 4),
    ),
    ("outer product", "O[i,j] = C[i] B[j]", dict(C=C, B=B), lambda: np.outer(C, B)),
    # duplicates and groups
    ("duplicate terms count twice", "A2[i] = X[i,j] + X[i,j]", dict(X=X), lambda: 2 * X.sum(1)),
    ("duplicate equations count twice", "Y[i] = C[i]\nY[i] = C[i]", dict(C=C), lambda: 2 * C),
    ("+= contribution", "Y[i] = C[i]\nY[i] += X[i,j]", dict(C=C, X=X), lambda: C + X.sum(1)),
    ("group with different names", "Y[i,j] = X[i,j]\nY[a,b] += X[a,b]", dict(X=X), lambda: 2 * X),
    ("term-wise projection", "Y[i] = X[i,j] + C[i]", dict(X=X, C=C), lambda: X.sum(1) + C),
    ("parenthesised sum projected as one factor", "Y[i] = (X[i,j] + C[i])", dict(X=X, C=C), lambda: X.sum(1) + 4 * C),
    ("subtraction", "Y[i] = C[i] - X[i,j]", dict(C=C, X=X), lambda: C - X.sum(1)),
    # projection operators
    ("max=", "Y[i] max= X[i,j]", dict(X=X), lambda: X.max(1)),
    ("avg=", "Y[i] avg= X[i,j]", dict(X=X), lambda: X.mean(1)),
    ("min=", "Y[i] min= X[i,j]", dict(X=X), lambda: X.min(1)),
    ("max= of a product", "Y[i] max= X[i,j] B[j]", dict(X=X, B=B), lambda: (X * B).max(1)),
    ("avg= over two indices", "Y avg= X[i,j]", dict(X=X), lambda: X.mean()),
    # call-argument projection
    ("relu projects inside", "Y[i] = relu(W[i,j] V[j])", dict(W=X, V=B), lambda: np.maximum(X @ B, 0)),
    ("relu of sum of terms", "Y[i] = relu(W[i,j] V[j] + C[i])", dict(W=X, V=B, C=C), lambda: np.maximum(X @ B + C, 0)),
    ("call keeps sibling factor index", "Y[i] = exp(X[i,j]) B[j]", dict(X=X, B=B), lambda: np.exp(X) @ B),
    ("logsumexp along last", "L[r] = logsumexp(X[r,c])", dict(X=X), lambda: np.log(np.exp(X).sum(1))),
    ("logsumexp axis=", "L[c] = logsumexp(X[r,c], axis=r)", dict(X=X), lambda: np.log(np.exp(X).sum(0))),
    (
        "softmax dotted axis",
        "Y[p, q.] = softmax(X[p,q])",
        dict(X=X),
        lambda: np.exp(X) / np.exp(X).sum(1, keepdims=True),
    ),
    ("softmax dotted first axis", "Y[p., q] = softmax(X[p,q])", dict(X=X), lambda: np.exp(X) / np.exp(X).sum(0)),
    ("softmax integer axis", "Y[p, q] = softmax(X[p,q], axis=0)", dict(X=X), lambda: np.exp(X) / np.exp(X).sum(0)),
    # numeric index, offsets, slices
    ("numeric select", "Y[d] = X[0, d]", dict(X=X), lambda: X[0]),
    ("numeric select last", "Y[b] = X[b, 3]", dict(X=X), lambda: X[:, 3]),
    ("numeric write", "W[1, h] = B[h]", dict(B=B), lambda: np.stack([np.zeros(4), B])),
    (
        "numeric writes in a group",
        "W[0, h] = B[h]\nW[2, h] = B[h] B[h]",
        dict(B=B),
        lambda: np.stack([B, 0 * B, B * B]),
    ),
    ("offset +1 zero-fills the end", "Y[i,j] = X[i, j+1]", dict(X=X), lambda: np.pad(X[:, 1:], ((0, 0), (0, 1)))),
    ("offset -1 zero-fills the start", "Y[i,j] = X[i, j-1]", dict(X=X), lambda: np.pad(X[:, :-1], ((0, 0), (1, 0)))),
    ("difference with offset", "D[j] = B[j+1] - B[j]", dict(B=B), lambda: np.append(B[1:], 0) - B),
    ("slice kept on the left", "Y[i, 0:2] = X[i, 0:2]", dict(X=X), lambda: X[:, 0:2]),
    ("slice projected", "Y[i] = X[i, ::2]", dict(X=X), lambda: X[:, ::2].sum(1)),
    ("slices join by text", "Y[i] = X[i, 1:3] X[i, 1:3]", dict(X=X), lambda: (X[:, 1:3] ** 2).sum(1)),
    ("different slice texts do not join", "Y = B[0:2] B[2:4]", dict(B=B), lambda: B[0:2].sum() * B[2:4].sum()),
    # index functions, guards
    ("even mask", "E[i] = even(i) C[i]", dict(C=C), lambda: C * (np.arange(3) % 2 == 0)),
    ("odd mask", "E[j] = odd(j) B[j]", dict(B=B), lambda: B * (np.arange(4) % 2 == 1)),
    ("when guard", "Y[i] when M[i] = V[i]", dict(M=np.array([1.0, 0, 1]), V=C), lambda: C * [1, 0, 1]),
    (
        "when guard per term",
        "Y[i] when M[i] = X[i,j] + C[i]",
        dict(M=np.array([1.0, 0, 1]), X=X, C=C),
        lambda: (X.sum(1) + C) * [1, 0, 1],
    ),
    # structured operators
    ("division and power", "Y[i] = X[i,j] / 2 ** 2", dict(X=X), lambda: X.sum(1) / 4),
    ("power right-assoc", "Y = 2 ** 3 ** 2", {}, lambda: 2.0**9),
    ("unary minus", "Y[i] = -C[i]", dict(C=C), lambda: -C),
    ("ternary", "Y[i,j] = X[i,j] > 0 ? X[i,j] : -X[i,j]", dict(X=X), lambda: np.abs(X)),
    ("select", "Y[i,j] = select(X[i,j] > 0, X[i,j], 0)", dict(X=X), lambda: np.maximum(X, 0)),
    (
        "case",
        "Y[i] = case { C[i] > 0.5 -> 1.0; C[i] < -0.5 -> -1.0; default -> 0.0 }",
        dict(C=C),
        lambda: np.where(C > 0.5, 1.0, np.where(C < -0.5, -1.0, 0.0)),
    ),
    ("logic", "Y[i] = (C[i] > 0) && !(C[i] > 1) || C[i] == 0", dict(C=C), lambda: ((C > 0) & ~(C > 1)) | (C == 0)),
    ("reduce max", "Y[i] = reduce(max, j) X[i,j]", dict(X=X), lambda: X.max(1)),
    ("reduce sum inside a max projection", "Y max= reduce(sum, j) X[i,j]", dict(X=X), lambda: X.sum(1).max()),
    ("reduce prod", "Y[i] = reduce(prod, j) X[i,j]", dict(X=X), lambda: X.prod(1)),
    ("reduce mean of a sum", "Y[i] = reduce(mean, j) (X[i,j] + 1)", dict(X=X), lambda: (X + 1).mean(1)),
    # declarations, fn
    ("param as position", "param D: int = 2\nY[i] = X[i, D]", dict(X=X), lambda: X[:, 2]),
    ("const factor", "const c = 3.0\nY[i,j] = c X[i,j]", dict(X=X), lambda: 3 * X),
    ("axis declaration", "axis k = 5\nY[k] = 1", {}, lambda: np.ones(5)),
    ("let", "let T[i] = C[i] C[i]\nY = T[i]", dict(C=C), lambda: C @ C),
    ("block", "{ T[i] = C[i]\nU[i] = T[i] T[i] }", dict(C=C), lambda: C * C),
    (
        "fn dot with batch index",
        "fn dot(a[x], b[x]) -> s { s = a[x] b[x] }\nY[i] = dot(X[i,k], B[k])",
        dict(X=X, B=B),
        lambda: X @ B,
    ),
    (
        "fn with two body equations",
        "fn sq(a[x]) -> s { t[x] = a[x] a[x]\ns = t[x] }\nY = sq(B[k])",
        dict(B=B),
        lambda: B @ B,
    ),
    (
        "fn matvec",
        "fn mv(W[i,j], v[j]) -> y { y[i] = W[i,j] v[j] }\nZ[r] = mv(X[r,c], B[c])",
        dict(X=X, B=B),
        lambda: X @ B,
    ),
    # boolean tensors
    (
        "boolean join",
        "Aunt(x,z) = Sister(x,y) Parent(y,z)",
        dict(Sister=np.eye(3), Parent=np.ones((3, 3))),
        lambda: np.ones((3, 3)),
    ),
    (
        "boolean OR across rules",
        "R(x,y) = E(x,y)\nR(x,z) = E(x,y) E(y,z)",
        dict(E=np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=np.int8)),
        lambda: np.array([[0, 1, 1], [0, 0, 1], [0, 0, 0]]),
    ),
    (
        "boolean join counts do not overflow",
        "R(x,z) = E(x,y) E(y,z)",
        dict(E=np.ones((300, 300), dtype=np.int8)),
        lambda: np.ones((300, 300)),
    ),
    ("step", "Y[i] = step(C[i])", dict(C=C), lambda: (C > 0).astype(np.int8)),
    # gathers
    (
        "embedding gather",
        "E[t,d] = Table[Tok[t], d]",
        dict(Table=X, Tok=np.array([2, 0, 1, 1])),
        lambda: X[[2, 0, 1, 1]],
    ),
    ("gather sum", "S = B[Idx[n]]", dict(B=B, Idx=np.array([3, 3, 0])), lambda: B[[3, 3, 0]].sum()),
    ("gather of expression", "S[n] = B[Idx[n] + 1]", dict(B=B, Idx=np.array([0, 2])), lambda: B[[1, 3]]),
    # constructors
    ("causal mask", "M[p,q] = causal_mask(3)", {}, lambda: np.tril(np.ones((3, 3)))),
    ("causal mask sized by use", "M[p,q] = causal_mask()\nS[p,q] = A[p,q] M[p,q]", dict(A=A), lambda: np.tril(A)),
    ("const literal", "K[i,j] = const([[1,2],[3,4]])", {}, lambda: np.array([[1, 2], [3, 4]])),
    ("concat", "Y[i,j] = concat(X[i,j], X[i,j], axis=j)", dict(X=X), lambda: np.concatenate([X, X], 1)),
    (
        "concat of different extents",
        "Y[j] = concat(B[j], C[j], axis=j)",
        dict(B=B, C=C),
        lambda: np.concatenate([B, C]),
    ),
    (
        "flatten",
        "Y[b,k] = concat(Z[b,i,j])",
        dict(Z=np.arange(24.0).reshape(2, 3, 4)),
        lambda: np.arange(24.0).reshape(2, 12),
    ),
    # functions (non-axis)
    ("max of two", "Y[i,j] = max(X[i,j], 0)", dict(X=X), lambda: np.maximum(X, 0)),
    ("min of two", "Y[i,j] = min(X[i,j], C[i])", dict(X=X, C=C), lambda: np.minimum(X, C[:, None])),
    ("max along axis", "Y[i] = max(X[i,j], axis=j)", dict(X=X), lambda: X.max(1)),
    ("sum along axis", "Y[i] = sum(X[i,j], axis=j)", dict(X=X), lambda: X.sum(1)),
    ("mean along axis", "Y[j] = mean(X[i,j], axis=i)", dict(X=X), lambda: X.mean(0)),
    ("sig with T", "Y[i,j] = sig(X[i,j], T=0.5)", dict(X=X), lambda: 1 / (1 + np.exp(-X / 0.5))),
    ("sig positional T", "Y[i,j] = sig(X[i,j], 2)", dict(X=X), lambda: 1 / (1 + np.exp(-X / 2))),
    ("sig hard step", "Y[i] = sig(C[i], T=0)", dict(C=C), lambda: (C > 0).astype(float)),
    ("pow", "Y[i] = pow(abs(C[i]), 0.5)", dict(C=C), lambda: np.abs(C) ** 0.5),
    ("use before definition", "Y[i] = T[i] + 1\nT[i] = C[i]\nexport Y", dict(C=C), lambda: C + 1),
    ("builtin names are case-insensitive", "Y[i] = RELU(C[i])", dict(C=C), lambda: np.maximum(C, 0)),
]


T3 = rng.standard_normal((2, 3, 4))  # [a, b, c], every extent different
U3 = rng.standard_normal((2, 5, 4))
V4 = rng.standard_normal(4)
U2 = rng.standard_normal((2, 3))
MASK = np.array([[1, 1, 0], [0, 1, 1]], dtype=np.int8)
W2 = rng.standard_normal((3, 5))  # [o, h]
H2 = rng.standard_normal((2, 5))  # [b, h]
B2 = rng.standard_normal(3)  # [o]
HEADS = rng.standard_normal((2, 3, 4))  # [h, t, d]


def np_softmax(z: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(z - z.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def np_lnorm(z: np.ndarray, axis: int, eps: float = 1e-5) -> np.ndarray:
    d = z - z.mean(axis, keepdims=True)
    return d / np.sqrt((d * d).mean(axis, keepdims=True) + eps)


_CX = np.array([1.0, -2.0, 3.0])
_CY = np.array([10.0, 0.0, 20.0])
_CW = np.arange(12.0).reshape(2, 3, 2) - 5
_FW = np.array([[-1.875, 1.375], [0.625, 1.5], [1.875, -1.25]])
_FV = np.array([-1.875, 1.125])

CALL_PROJECTION_CASES = [
    # LANGUAGE.md §4 "Function calls": an argument's indices that neither the rest of the equation nor the
    # builtin's axis uses are projected inside the call, with the equation's operator.
    (
        "case(...) arguments project inside, as select's",
        "T[j] = case(X[m], Y[j], 1.5)",
        dict(X=_CX, Y=_CY),
        lambda: np.where(_CX.sum() != 0, _CY, 1.5),
    ),
    (
        "a call in one branch of c ? a : b projects the indices only it has",
        "T[k] = Y[k] ? sum(W[0, i, j], axis=j) : 1.0",
        dict(W=_CW, Y=_CY),
        lambda: np.where(_CY != 0, _CW[0].sum(), 1.0),
    ),
    (
        "a call in a case { } branch projects the indices only it has",
        "T[k] = case { Y[k] > 5 -> relu(W[0, i, j]); default -> 2.0 }",
        dict(W=_CW, Y=_CY),
        lambda: np.where(_CY > 5, max(_CW[0].sum(), 0), 2.0),
    ),
    (
        "a fn's contracted index bound to an index the caller keeps is still contracted inside",
        "fn layer(w[o, x], v[x]) -> y[o] { y[o] = relu(w[o, x] v[x]) }\nT[j, m] = layer(W[j, m], V[m])",
        dict(W=_FW, V=_FV),
        lambda: np.repeat(np.maximum(_FW @ _FV, 0)[:, None], 2, axis=1),
    ),
    (
        "softmax of an MLP layer sums h before normalising",
        "Y[b, o.] = softmax(W2[o, h] H[b, h] + B2[o])",
        dict(W2=W2, H=H2, B2=B2),
        lambda: np_softmax(H2 @ W2.T + B2, 1),
    ),
    ("softmax rows sum to one", "P[a, b.] = softmax(T[a,b,c])", dict(T=T3), lambda: np_softmax(T3.sum(2), 1)),
    (
        "softmax axis= projects inside",
        "P[a, b] = softmax(T[a,b,c], axis=b)",
        dict(T=T3),
        lambda: np_softmax(T3.sum(2), 1),
    ),
    ("softmax under max=", "P[a, b.] max= softmax(T[a,b,c])", dict(T=T3), lambda: np_softmax(T3.max(2), 1)),
    ("softmax under avg=", "P[a, b.] avg= softmax(T[a,b,c])", dict(T=T3), lambda: np_softmax(T3.mean(2), 1)),
    (
        "softmax keeps an index a sibling factor shares",
        "P[a, b.] = softmax(T[a,b,c]) V[c]",
        dict(T=T3, V=V4),
        lambda: np.einsum("abc,c->ab", np_softmax(T3, 1), V4),
    ),
    (
        "softmax along the last axis as written",
        "P[a] = softmax(T[a,b,c]) V[c]",
        dict(T=T3, V=V4),
        lambda: np_softmax(T3.sum(1), 1) @ V4,
    ),
    (
        "masked_softmax",
        "P[a, b.] = masked_softmax(T[a,b,c], M[a,b])",
        dict(T=T3, M=MASK),
        lambda: np.where(MASK, np_softmax(np.where(MASK, T3.sum(2), -np.inf), 1), 0),
    ),
    (
        "softmax_grad",
        "G[a, b.] = softmax_grad(S[a,b], D[a,b,c])",
        dict(S=np_softmax(U2, 1), D=T3),
        lambda: np_softmax(U2, 1) * (T3.sum(2) - (np_softmax(U2, 1) * T3.sum(2)).sum(1, keepdims=True)),
    ),
    ("lnorm", "P[a, b.] = lnorm(T[a,b,c])", dict(T=T3), lambda: np_lnorm(T3.sum(2), 1)),
    (
        "layer_norm of a contraction",
        "P[a, o.] = layer_norm(W[o,h] H[a,h], eps=0.1)",
        dict(W=W2, H=H2),
        lambda: np_lnorm(H2 @ W2.T, 1, 0.1),
    ),
    ("layernorm alias", "P[a, b.] = layernorm(T[a,b,c])", dict(T=T3), lambda: np_lnorm(T3.sum(2), 1)),
    (
        "logsumexp axis=",
        "L[a] = logsumexp(T[a,b,c], axis=b)",
        dict(T=T3),
        lambda: np.log(np.exp(T3.sum(2)).sum(1)),
    ),
    ("max axis=", "M[a] = max(T[a,b,c], axis=b)", dict(T=T3), lambda: T3.sum(2).max(1)),
    ("min axis=", "M[c] = min(T[a,b,c], axis=a)", dict(T=T3), lambda: T3.sum(1).min(0)),
    ("mean axis=", "M[a] = mean(T[a,b,c], axis=c)", dict(T=T3), lambda: T3.sum(1).mean(1)),
    ("avg axis= under max=", "M[a] max= avg(T[a,b,c], axis=c)", dict(T=T3), lambda: T3.max(1).mean(1)),
    ("sum axis=", "M[c] = sum(T[a,b,c], axis=a)", dict(T=T3), lambda: T3.sum((0, 1))),
    ("elementwise call", "Y[a] = exp(T[a,b,c]) V[c]", dict(T=T3, V=V4), lambda: np.exp(T3.sum(1)) @ V4),
    (
        "two-argument call keeps the indices its arguments share",
        "Y[a] = max(T[a,b,c], U[a,b])",
        dict(T=T3, U=U2),
        lambda: np.maximum(T3.sum(2), U2).sum(1),
    ),
    (
        "select projects an index only one argument has",
        "Y[i] = select(C[i] > 0, X[i,j], 1)",
        dict(C=C, X=X),
        lambda: np.where(C > 0, X.sum(1), 1),
    ),
    (
        "case(...) projects like select",
        "Y[i] = case(C[i] > 0, X[i,j], C[i] < -1, 2, 1)",
        dict(C=C, X=X),
        lambda: np.where(C > 0, X.sum(1), np.where(C < -1, 2, 1)),
    ),
    (
        "nested calls project at each level",
        "Y[a, b.] = softmax(relu(T[a,b,c]))",
        dict(T=T3),
        lambda: np_softmax(np.maximum(T3.sum(2), 0), 1),
    ),
    (
        "sum of terms inside a call",
        "Y[a, b.] = softmax(T[a,b,c] + U[a,b])",
        dict(T=T3, U=U2),
        lambda: np_softmax(T3.sum(2) + U2, 1),
    ),
]

CONCAT_CASES = [
    # every axis position, two and three arguments, different extents along the joined axis
    (
        "concat first of two axes",
        "Y[i,j] = concat(X[i,j], P[i,j], axis=i)",
        dict(X=X, P=X[:2] + 1),
        lambda: np.concatenate([X, X[:2] + 1], 0),
    ),
    (
        "concat first axis, result transposed",
        "Y[j,i] = concat(X[i,j], P[i,j], axis=i)",
        dict(X=X, P=X[:2] + 1),
        lambda: np.concatenate([X, X[:2] + 1], 0).T,
    ),
    (
        "concat middle of three axes",
        "Y[a,b,c] = concat(T[a,b,c], U[a,b,c], axis=b)",
        dict(T=T3, U=U3),
        lambda: np.concatenate([T3, U3], 1),
    ),
    (
        "concat first of three axes, three arguments",
        "Y[a,b,c] = concat(T[a,b,c], U[a,b,c], T[a,b,c], axis=a)",
        dict(T=T3, U=T3[:1] * 2),
        lambda: np.concatenate([T3, T3[:1] * 2, T3], 0),
    ),
    (
        "concat last of three axes, three arguments",
        "Y[a,b,c] = concat(T[a,b,c], U[a,b,c], T[a,b,c], axis=c)",
        dict(T=T3, U=T3[:, :, :1] * 2),
        lambda: np.concatenate([T3, T3[:, :, :1] * 2, T3], 2),
    ),
    (
        "concat broadcasts an argument that lacks an index",
        "Y[i,j] = concat(X[i,j], C[i], axis=i)",
        dict(X=X, C=C),
        lambda: np.concatenate([X, np.repeat(C[:, None], 4, 1)], 0),
    ),
    (
        "concat projects an argument's own index inside",
        "Y[i,j] = concat(T[a,i,j], X[i,j], axis=i)",
        dict(T=T3[:, :, :4], X=X),
        lambda: np.concatenate([T3.sum(0), X], 0),
    ),
    (
        "concat of 1-d vectors of different extents",
        "Y[k] = concat(B[k], C[k], B[k], axis=k)",
        dict(B=B, C=C),
        lambda: np.concatenate([B, C, B]),
    ),
    (
        "flatten concat: heads side by side",
        "Y[t, x] = concat(O[h,t,d])",
        dict(O=HEADS),
        lambda: HEADS.transpose(1, 0, 2).reshape(3, 8),
    ),
    ("flatten concat: last two axes", "Y[h, x] = concat(O[h,t,d])", dict(O=HEADS), lambda: HEADS.reshape(2, 12)),
    ("flatten concat projects the rest", "Y[x] = concat(O[h,t,d])", dict(O=HEADS), lambda: HEADS.sum(0).reshape(12)),
]

CONST_CASES = [
    # a 0-d constant has no axes: it is accepted anywhere a literal is (LANGUAGE.md §6 constructors)
    (
        "0-d const as a factor",
        "Penalty[p,q] = Mask[p,q] const(-10000.0)",
        dict(Mask=MASK.astype(np.float64)),
        lambda: MASK * -10000.0,
    ),
    ("0-d const in a sum", "Y[i] = C[i] + const(2)", dict(C=C), lambda: C + 2),
    ("0-d const inside a call", "Y[i] = relu(C[i] - const(0.5))", dict(C=C), lambda: np.maximum(C - 0.5, 0)),
    ("0-d const alone", "S = const(1.5)", {}, lambda: np.array(1.5)),
    ("0-d const on a vector", "Y[i] = const(3) C[i]", dict(C=C), lambda: 3 * C),
]


@pytest.mark.parametrize("name,src,inputs,expected", CASES, ids=[c[0] for c in CASES])
def test_semantics(name, src, inputs, expected):
    got = one(src, **inputs)
    np.testing.assert_allclose(got, expected(), rtol=1e-12, atol=1e-12)


def test_shape_changes_reuse_the_program():
    prog = Program("Y[i] = W[i,j] V[j]").compile()
    for n, m in [(2, 3), (5, 1), (0, 4), (4, 0)]:
        w, v = rng.standard_normal((n, m)), rng.standard_normal(m)
        np.testing.assert_allclose(prog(W=w, V=v)["Y"], w @ v)


def test_zero_and_one_extents():
    np.testing.assert_allclose(one("S[i] = X[i,j]", X=np.zeros((0, 3))), np.zeros(0))
    np.testing.assert_allclose(one("S[i] = X[i,j]", X=np.ones((2, 0))), np.zeros(2))
    np.testing.assert_allclose(one("Y[i] max= X[i,j]", X=np.ones((1, 1))), [1.0])


class TestTypes:
    def test_float32_stays_float32(self):
        x = X.astype(np.float32)
        for src in [
            "Y[i,j] = 2 X[i,j]",
            "Y[i] = X[i,j]",
            "Y[i,j] = exp(X[i,j])",
            "Y[p,q.] = softmax(X[p,q])",
            "Y[i] avg= X[i,j]",
            "Y[i,j] = X[i,j] / 3",
        ]:
            assert one(src, X=x).dtype == np.float32, src

    def test_int_inputs(self):
        x = np.arange(12).reshape(3, 4)
        y = one("Y[i] = X[i,j]", X=x)
        assert y.dtype == np.int64 and (y == x.sum(1)).all()
        assert one("Y[i,j] = X[i,j] / 2", X=x).dtype == np.float64
        assert one("Y[i,j] = 2 X[i,j]", X=x).dtype == np.int64
        assert one("Y[i,j] = 2.5 X[i,j]", X=x).dtype == np.float64
        assert one("Y[i] avg= X[i,j]", X=x).dtype == np.float64

    def test_mixed_promote_as_numpy(self):
        y = one("Y[i] = A[i] + B[i]", A=np.ones(2, np.float32), B=np.ones(2, np.float64))
        assert y.dtype == np.float64

    def test_literals_default(self):
        assert one("S = 0.5").dtype == np.float64
        assert one("S = 2").dtype == np.int64

    def test_boolean_is_int8(self):
        assert one("R(x,y) = E(x,y)", E=np.eye(2)).dtype == np.int8
        assert one("Y[i] = C[i] > 0", C=C).dtype == np.int8
        assert one("Y[i] = step(C[i])", C=C).dtype == np.int8

    def test_bool_input_becomes_int8(self):
        y = one("R(x,z) = E(x,y) E(y,z)", E=np.eye(2, dtype=bool))
        assert y.dtype == np.int8 and (y == np.eye(2)).all()


class TestRunErrors:
    def test_extent_conflict_names_both_places(self):
        with pytest.raises(FuseRuntimeError) as e:
            run("Y[i] = W[i,j] V[j]", W=np.ones((2, 3)), V=np.ones(4))
        msg = str(e.value)
        assert "j is" in msg and "W[i, j]" in msg and "V[j]" in msg and "1:" in msg and "^" in msg

    def test_wrong_rank(self):
        with pytest.raises(FuseRuntimeError, match="rank 2"):
            run("Y[i] = W[i,j] V[j]", W=np.ones(2), V=np.ones(2))

    def test_missing_and_unknown_inputs(self):
        with pytest.raises(FuseRuntimeError, match="missing input V"):
            run("Y[i] = W[i,j] V[j]", W=np.ones((2, 2)))
        with pytest.raises(FuseRuntimeError, match="unknown input Q"):
            run("Y[i] = V[i]", V=np.ones(2), Q=np.ones(2))

    def test_unsupported_dtype(self):
        with pytest.raises(FuseRuntimeError, match="dtype"):
            run("Y[i] = V[i]", V=np.array(["a", "b"]))
        with pytest.raises(FuseRuntimeError, match="dtype"):
            run("Y[i] = V[i]", V=np.ones(2, dtype=complex))

    def test_gather_out_of_range(self):
        with pytest.raises(FuseRuntimeError, match="out of range") as e:
            run("E[t,d] = T[I[t], d]", T=np.ones((3, 2)), I=np.array([0, 3]))
        assert "1:" in str(e.value)
        with pytest.raises(FuseRuntimeError, match="out of range"):
            run("E[t,d] = T[I[t], d]", T=np.ones((3, 2)), I=np.array([-1]))

    def test_numeric_index_out_of_range(self):
        with pytest.raises(FuseRuntimeError, match="out of range"):
            run("Y[d] = X[5, d]", X=np.ones((3, 2)))

    def test_float_index_tensor_is_an_error(self):
        with pytest.raises(FuseError, match="integers"):
            run("E[t,d] = T[I[t], d]", T=np.ones((3, 2)), I=np.array([0.0, 1.0]))

    def test_non_contiguous_input_is_copied(self):
        x = np.arange(12.0).reshape(3, 4)[:, ::2]
        np.testing.assert_allclose(one("Y[i] = X[i,j]", X=x), x.sum(1))


def test_exports_default_to_every_tensor():
    out = run("T[i] = C[i]\nU[i] = T[i]", C=C)
    assert list(out) == ["T", "U"]
    out = run("T[i] = C[i]\nU[i] = T[i]\nexport U", C=C)
    assert list(out) == ["U"]


def test_inputs_are_not_modified():
    c = C.copy()
    run("Y[i] = C[i] + 1", C=c)
    assert (c == C).all()


def test_explain_tables():
    p = Program("Y[i] = W[i,j] V[j] + B[i]\nZ[i,k] = Y[i]")
    rows = p.explain("json")
    assert rows[0]["joined"] == ["j"] and rows[0]["projected"] == ["j"] and rows[0]["broadcast"] == []
    assert rows[2]["broadcast"] == ["k"]
    text = p.explain()
    assert "Y" in text and "j" in text


# ---------------------------------------------------------------------------
# Every backend, every pipeline: the constructs above against hand-written NumPy
# ---------------------------------------------------------------------------

EVERY_BACKEND = {
    "reference": ("reference", {}),
    "llvm-O0": ("llvm", {"opt_level": 0}),
    "llvm-O2": ("llvm", {}),
    "torch": ("torch", {}),
    "jax": ("jax", {}),
    "numba": ("numba", {"parallel": False}),
}


@pytest.fixture(params=list(EVERY_BACKEND))
def every_backend(request) -> tuple[str, dict]:
    backend, options = EVERY_BACKEND[request.param]
    if backend in ("torch", "jax", "numba"):
        pytest.importorskip(backend)
    return backend, options


@pytest.mark.parametrize(
    "name,src,inputs,expected",
    CALL_PROJECTION_CASES + CONCAT_CASES + CONST_CASES,
    ids=[c[0] for c in CALL_PROJECTION_CASES + CONCAT_CASES + CONST_CASES],
)
def test_on_every_backend(every_backend, name, src, inputs, expected):
    backend, options = every_backend
    out = Program(src).compile(backend, **options)(**inputs)
    got, want = out[list(out)[-1]], np.asarray(expected())
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


INT_VALUES = np.array([1, -2, 100, 7])  # 100 * 100 wraps in int8 and int16 products


def sum_dtype(d) -> np.dtype:
    """What ``np.sum`` accumulates ``d`` in (small integers widen to int64): a projected sum's dtype."""
    return np.sum(np.ones(1, d)).dtype


def widened(i: np.ndarray) -> np.ndarray:
    """A projected sum multiplies its factors in the accumulator's dtype already."""
    return i.astype(sum_dtype(i.dtype))


DTYPES = [np.int8, np.int16, np.int32, np.int64, np.float32]

DTYPE_CASES = [
    # (program, result dtype for input dtype d, NumPy value): LANGUAGE.md §8, literals weak (NEP 50) on either
    # side of a product as in a sum; a product with nothing projected keeps its dtype; a projected sum of small
    # integers accumulates as np.sum does (int64)
    ("Y[j] = 3 I[j]", lambda d: d, lambda i: 3 * i),
    ("Y[j] = I[j] 2", lambda d: d, lambda i: i * 2),
    ("Y[j] = 2 I[j] 3", lambda d: d, lambda i: 2 * i * 3),
    ("Y[j] = I[j] + 1", lambda d: d, lambda i: i + 1),
    ("Y[j] = 1 - I[j]", lambda d: d, lambda i: 1 - i),
    ("Y[j] = I[j] I[j]", lambda d: d, lambda i: i * i),
    ("Y[i,j] = I[i] I[j]", lambda d: d, lambda i: np.multiply.outer(i, i)),
    ("Y[j] max= I[j] I[j]", lambda d: d, lambda i: i * i),
    ("Y[j] = (I[j] 2) 3", lambda d: d, lambda i: i * 2 * 3),
    # np.where: a literal branch is typed by the other branch, not by the (here projected, int64) condition
    ("Y[j] = select(I[k], I[j], 2)", lambda d: d, lambda i: np.where(i.astype(np.int64).sum() != 0, i, 2)),
    ("Y[j] = case(I[k], I[j], 2)", lambda d: d, lambda i: np.where(i.astype(np.int64).sum() != 0, i, 2)),
    ("Y[j] = 2.5 I[j]", lambda d: np.float32 if d == np.float32 else np.float64, lambda i: 2.5 * i),
    ("Y = I[j] I[j]", lambda d: sum_dtype(d), lambda i: np.sum(widened(i) * widened(i))),
    ("Y = 2 I[j]", lambda d: sum_dtype(d), lambda i: np.sum(2 * widened(i))),
    ("Y max= I[j] I[j]", lambda d: d, lambda i: np.max(i * i)),
    ("Y[j] = I[j] J[j]", lambda d: np.result_type(d, np.int16), lambda i: i * i.astype(np.int16)),
]


@pytest.mark.parametrize("src,dtype_of,value", DTYPE_CASES, ids=[c[0] for c in DTYPE_CASES])
def test_dtypes_on_every_backend(every_backend, src, dtype_of, value):
    backend, options = every_backend
    runner = Program(src).compile(backend, **options)
    for d in DTYPES:
        i = INT_VALUES.astype(d)
        inputs = {"I": i, "J": i.astype(np.int16)} if "J[" in src else {"I": i}
        got = runner(**inputs)["Y"]
        with np.errstate(over="ignore"):
            want = np.asarray(value(i))
        assert got.dtype == np.dtype(dtype_of(d)), (d, got.dtype)
        np.testing.assert_allclose(got, want.astype(got.dtype), rtol=1e-6, err_msg=str(d))


def test_sixty_distinct_indices(every_backend):
    """One equation with 60 distinct indices (more than einsum's 52 letters): every backend contracts it."""
    backend, options = every_backend
    names = [f"i{k}" for k in range(60)]
    wide = {"i0", "i29", "i59"}

    def shape(ns: list[str]) -> tuple[int, ...]:
        return tuple(2 if n in wide else 1 for n in ns)

    a = rng.standard_normal(shape(names[:30]))
    b = rng.standard_normal(shape(names[29:]))
    a3, b3 = a.reshape(2, 2), b.reshape(2, 2)
    cases = [
        (f"Y[i0, i59] = A[{', '.join(names[:30])}] B[{', '.join(names[29:])}]", a3 @ b3),
        (f"S = A[{', '.join(names[:30])}] B[{', '.join(names[29:])}]", np.sum(a3 @ b3)),
        (f"S max= A[{', '.join(names[:30])}] B[{', '.join(names[29:])}]", np.max(a3[:, :, None] * b3[None])),
        (
            f"Y[{', '.join(names)}] = A[{', '.join(names[:30])}] B[{', '.join(names[29:])}]",
            (a3[:, :, None] * b3[None]).reshape(shape(names)),
        ),
    ]
    for src, want in cases:
        out = Program(src).compile(backend, **options)(A=a, B=b)
        got = out[list(out)[-1]]
        assert got.shape == np.shape(want), src[:20]
        np.testing.assert_allclose(got, want, rtol=1e-10, err_msg=src[:20])


def test_explicit_reduce_works_along_its_indices(every_backend):
    """`reduce(op, j) f(A[i,j])` applies f before reducing j (as sum(f, axis=j)); an fn body projects inside."""
    backend, options = every_backend
    a = np.array([[1.0, -2.0, 3.0], [-1.0, -1.0, 4.0]])
    cases = [
        ("Y[i] = reduce(sum, j) relu(A[i,j])", np.maximum(a, 0).sum(axis=1)),
        ("Y[i] = reduce(max, j) relu(A[i,j] - 3) + 1", np.maximum(a - 3, 0).max(axis=1) + 1),
        ("Y[i] = reduce(sum, j) relu(A[i,j]) A[i,j]", (np.maximum(a, 0) * a).sum(axis=1)),
        ("Y = reduce(mean, i, j) exp(A[i,j])", np.exp(a).mean()),
        ("Y[i] = sum(relu(A[i,j]), axis=j)", np.maximum(a, 0).sum(axis=1)),
        (
            "fn layer(w[o,x], v[x]) -> y[o] { y[o] = relu(w[o,x] v[x]) }\nY[i] = layer(A[i,j], A[0,j])",
            np.maximum(a @ a[0], 0),
        ),
    ]
    for src, want in cases:
        got = Program(src).compile(backend, **options)(A=a)["Y"]
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=src)


@pytest.mark.parametrize("src", ["T[i] = 1.0 X[i]", "T[i] = X[i] 1.0", "T[i] = exp(0) X[i]", "T[i] = (1.0 + 0) X[i]"])
def test_a_literal_one_still_promotes(every_backend, src):
    """Multiplying by a float literal equal to 1 skips the multiply, not the promotion (NEP 50: int32 -> float64)."""
    backend, options = every_backend
    run = Program(src).compile(backend, **options)
    for dtype, want in [(np.int32, np.float64), (np.int8, np.float64), (np.float32, np.float32)]:
        got = run(X=np.array([2, 3], dtype=dtype))["T"]
        assert got.dtype == want, (src, dtype, got.dtype)
        np.testing.assert_array_equal(got, [2.0, 3.0])
    got = Program("T[i] = 1 X[i]").compile(backend, **options)(X=np.array([2, 3], dtype=np.int32))["T"]
    assert got.dtype == np.int32


def test_products_of_many_factors(every_backend):
    """A term of 100 factors (more operands than one einsum call takes): every backend multiplies them all."""
    backend, options = every_backend
    x = np.linspace(0.9, 1.1, 3)
    a = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    cases = [
        ("Y[i] = " + " * ".join(["X[i]"] * 100), x**100),
        ("Y[i] max= " + " ".join(["A[j, i]"] * 41), (a**41).max(axis=0)),
        ("S = " + " ".join(["A[j, i]"] * 40), np.sum(a**40)),
        ("S = " + " ".join(f"A[j{k}, i]" for k in range(36)), np.sum(a.sum(axis=0) ** 36)),
    ]
    for src, want in cases:
        inputs = {"X": x} if "X[" in src else {"A": a}
        out = Program(src).compile(backend, **options)(**inputs)
        np.testing.assert_allclose(out[list(out)[-1]], want, rtol=1e-9, err_msg=src[:20])


@pytest.mark.parametrize("zero", [False, True], ids=["extents 1-3", "an extent 0"])
def test_deep_loop_nests(every_backend, zero):
    """24 indices in one equation: deeper than Python's 20 nested loops (the numba backend collapses the nest)."""
    backend, options = every_backend
    shape = [2, 3] + [1] * 20 + [3, 2]
    if zero:
        shape[5] = 0
    a = rng.standard_normal(shape)
    names = ", ".join(f"i{k}" for k in range(24))
    out = Program(f"Y[i0, i23] = A[{names}]\nZ[i23, i1] = A[{names}] A[{names}]").compile(backend, **options)(A=a)
    np.testing.assert_allclose(out["Y"], a.sum(axis=tuple(range(1, 23))), rtol=1e-10, atol=1e-12)
    want = (a * a).sum(axis=(0, *range(2, 23))).T
    np.testing.assert_allclose(out["Z"], want, rtol=1e-10, atol=1e-12)


SIGN_X = np.array([-1.5, -2.0, 3.0])
SIGN_MASK = np.array([[-1.0, 1.0, -1.0], [-1.0, -1.0, 1.0], [1.0, -1.0, -1.0]])


@pytest.mark.parametrize(
    "src,expected",
    [
        # nothing projected: the product itself, whose zero keeps IEEE's sign (-1.5 * 0 is -0.0, so 1 / it is -inf)
        ("P[i] = X[i] (X[i] > 0)\nY[i] = 1 / P[i]", lambda: 1 / (SIGN_X * (SIGN_X > 0))),
        ("Y[i] = 1 / (X[i] (X[i] > 0))", lambda: 1 / (SIGN_X * (SIGN_X > 0))),
        ("Y[i] = 1 / min(X[i] (X[i] > 0), 1)", lambda: 1 / np.minimum(SIGN_X * (SIGN_X > 0), 1)),
        ("P[j,i] = X[i] (M[j,i] > 0)\nY[j,i] = 1 / P[j,i]", lambda: 1 / (SIGN_X[None, :] * (SIGN_MASK > 0))),
        ("P[i,j] = (M[j,i] > 0) X[i] 2\nY[i,j] = 1 / P[i,j]", lambda: 1 / ((SIGN_MASK.T > 0) * SIGN_X[:, None] * 2)),
    ],
)
def test_a_product_keeps_the_sign_of_its_zero(every_backend, src, expected):
    # The reference computed unprojected products with einsum, which adds each product to +0 and so lost
    # the sign (found by the text-mutant fuzzer as +inf against llvm's -inf); every backend now agrees with NumPy.
    backend, options = every_backend
    with np.errstate(divide="ignore"):
        want = expected()
    got = Program(src + "\nexport Y\n").compile(backend, **options)(
        X=SIGN_X, **({"M": SIGN_MASK} if "M[" in src else {})
    )["Y"]
    np.testing.assert_array_equal(got, want)


ZA = np.array([-0.0, 0.0, -0.0, 0.0, -1.0, 0.0, np.nan])
ZB = np.array([0.0, -0.0, -0.0, 0.0, -0.0, 1.0, -0.0])


@pytest.mark.parametrize(
    "src,expected",
    [
        # -0 < +0 (IEEE 754-2019's maximum and minimum, llvm.maximum): 1 / max(-0, +0) is +inf in either order
        ("Y[i] = 1 / max(A[i], B[i])", lambda: np.array([np.inf, np.inf, -np.inf, np.inf, -np.inf, 1, np.nan])),
        ("Y[i] = 1 / min(A[i], B[i])", lambda: np.array([-np.inf, -np.inf, -np.inf, np.inf, -1, np.inf, np.nan])),
        ("Y[i] = 1 / relu(A[i])", lambda: np.array([np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, np.nan])),
    ],
)
def test_max_and_min_order_negative_zero_below_positive_zero(every_backend, src, expected):
    # NumPy's and torch's maximum return their first argument for two zeros; every backend orders them.
    backend, options = every_backend
    runner = Program(src + "\nexport Y\n").compile(backend, **options)
    got = runner(**{k: v for k, v in {"A": ZA, "B": ZB}.items() if k in runner.input_specs()})["Y"]
    np.testing.assert_array_equal(got, expected())


@pytest.mark.parametrize("src", ["M[i] max= Z[i,j]", "M[i] min= Z[i,j]", "M[i] = reduce(max, j) Z[i,j]"])
def test_strict_reductions_order_zeros_as_the_reference(src):
    # A max/min reduction may return either zero on llvm (nsz, as NumPy); strict=True keeps IEEE 754-2019's order,
    # which the reference interpreter computes too.
    z = np.array([[-0.0, 0.0, -1.0], [0.0, -0.0, -2.0], [-0.0, -0.0, -1.0]])
    prog = Program(src + "\nY[i] = 1 / M[i]\nexport Y\n")
    want = prog.compile("reference")(Z=z)["Y"]
    assert np.isinf(want[:2]).all() or "min" in src
    np.testing.assert_array_equal(prog.compile("llvm", strict=True)(Z=z)["Y"], want)
