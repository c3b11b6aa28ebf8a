"""Compile-time errors: each names file:line:col, shows the line with a caret, and says what was expected."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fuse_mlir import FuseError, FuseRuntimeError, Program


def compile_error(src: str, **inputs) -> FuseError:
    with pytest.raises(FuseError) as e:
        p = Program(src, "prog.fuse")
        p.compile()(**inputs) if inputs else p.lower()
    return e.value


ERRORS = [
    # (source, message fragment, line, col)
    ("Y[i] = frobnicate(X[i])", "unknown function 'frobnicate'", 1, 8),
    ("Y[i] = lib::f(X[i])", "unknown function 'lib::f'", 1, 8),
    ("Y[i] = relu(X[i], X[i])", "relu() takes 1 argument, got 2", 1, 8),
    ("Y[i] = softmax(X[i], temperature=2)", "no keyword 'temperature'", 1, 34),
    ("A[i] = B[i]\nB[i] = A[i]", "dependency cycle: A -> B -> A", 1, 1),
    ("A[i] = A[i] + X[i]", "dependency cycle: A -> A", 1, 1),
    ("K[i] = const([1,2,3])\nY[i] = K[i] L[i]\nL[i] = const([1,2])", "i is 2 in L[i] but 3 in K[i]", 2, 15),
    ("export Q\nY[i] = X[i]", "cannot export 'Q'", 1, 8),
    ("Y[i] = X[i]\nZ[i] = X[i,j]", "X is used with 2 indices here but 1 elsewhere", 2, 8),
    ("Y[i,k] = X[i,j]", "cannot infer the extent of index k", 1, 5),
    ("Y[i,i] = X[i]", "index name may appear only once", 1, 1),
    ("Y[k] = const([1, 2])\nZ[k] = const([1, 2, 3])\nW[i, k] = C[i]", "extent of index k is ambiguous", 3, 6),
    ("param D: int = 1.5", "declared int", 1, 16),
    ("Y[i] = X[i] +", "expected", 1, 14),
    ("Y[i] = X[i", "to close '['", 1, 11),
    ('Y[i] = "unterminated', "unterminated string", 1, 8),
    ("Y[i] = 1e", "invalid number literal", 1, 8),
    ("fn f(a[x]) -> s { s = a[x] }\nY = f(X[i], X[i])", "takes 1 argument, got 2", 2, 5),
    ("fn f(a[x]) -> t { s = a[x] }\nY = f(X[i])", "never defines its result", 1, 1),
    ("Y[i] = reduce(median, j) X[i,j]", "reduction operator", 1, 15),
    ("Y[i] = topk(X[i,j], k=2)", "only allowed as the value of a sink", 1, 8),
    ("Y[i] = X[i] + [1, 2]", "const(...)", 1, 15),
    ("C[i,j] = const([[1,2],[3]])", "ragged", 1, 16),
    ("C[i] = const([[1,2],[3,4]])", "rank 2 but the left-hand side has 1", 1, 8),
    ('import "nope.fuse" as lib', "cannot import 'nope.fuse'", 1, 1),
    # literals folded while lowering: the error an integer tensor's run raises, located (was an internal ValueError)
    ("Y = pow(2, -1)", "negative integer power (exponent -1)", 1, 5),
    ("Y[i] = X[i] pow(abs(0) + 1, -1)", "negative integer power", 1, 13),
    ("Y[i, j] = tucker_dense(X[i, j], rank=0)", "tucker_dense: rank must be positive, got 0", 1, 11),
    ("Y[i, j] = tucker_dense(X[i, j], rank=[2])", "1 ranks given for a tensor of rank 2", 1, 11),
    ("Y[i, j] = tucker_dense(X[i, j], rank=1.5)", "rank must be a positive integer or one per axis", 1, 11),
]


@pytest.mark.parametrize("src,fragment,line,col", ERRORS, ids=[e[1] for e in ERRORS])
def test_error_is_located(src, fragment, line, col):
    err = compile_error(src)
    assert fragment in err.message, err.message
    assert err.loc is not None and (err.loc.line, err.loc.col) == (line, col), (err.loc, str(err))
    text = str(err)
    assert text.startswith(f"prog.fuse:{line}:{col}: error:")
    assert "^" in text and src.splitlines()[line - 1].strip() in text


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_broadcast_index_sized_by_several_inputs_takes_their_shared_extent(backend):
    """A left-only index sized by inputs of several other equations is not ambiguous when they agree (the
    extents are known only at run time, so the runner checks that they do); different sizes are an error."""
    src = "Y[k] = A[k]\nZ[k] = B[k]\nW[i, k] = C[i]\nexport Y, Z, W"
    run = Program(src, "prog.fuse").compile(backend)
    out = run(A=np.ones(3), B=np.ones(3), C=np.arange(2.0))
    np.testing.assert_array_equal(out["W"], np.repeat(np.arange(2.0)[:, None], 3, axis=1))
    with pytest.raises(FuseRuntimeError) as e:
        run(A=np.ones(3), B=np.ones(4), C=np.arange(2.0))
    assert "k is" in str(e.value) and "prog.fuse:" in str(e.value)
    # one constant and one input: the input must match the constant
    run = Program("Y[k] = const([1.0, 2.0])\nZ[k] = B[k]\nW[k] = 1.5\nexport W", "prog.fuse").compile(backend)
    np.testing.assert_array_equal(run(B=np.ones(2))["W"], [1.5, 1.5])


def test_conflicting_constant_extents_name_both_places():
    """Reported at the equation that joins the two constants, in its names; notes at both definitions."""
    err = compile_error("W[i,j] = const([[1,2,3]])\nX[k] = const([1,2,3,4])\nY[a] = W[a,b] X[b]")
    assert err.message == "b is 4 in X[b] but 3 in W[a, b]"
    assert err.loc is not None and (err.loc.line, err.loc.col) == (3, 17)
    notes = [(msg, loc.line) for msg, loc in err.notes]
    assert notes == [("3 comes from const(...) here", 1), ("4 comes from const(...) here", 2)]
    text = str(err)
    assert text.count("^") == 3


EXTENT_JOINS = [
    # (program, files, message, line, col): two sized tensors joined by a later equation
    (
        "X[b,i] = const([[1,2,3,4,5],[1,2,3,4,5]])\nZ[b,j] = const([[1,2,3,4],[1,2,3,4]])\nY[b,k] = X[b,k] Z[b,k]",
        {},
        "k is 4 in Z[b, k] but 5 in X[b, k]",
        3,
        21,
    ),
    (
        'X[b,i] = "x.npy"\nZ[b,j] = "z.npy"\nY[b,k] = X[b,k] + Z[b,k]',
        {"x.npy": (2, 5), "z.npy": (2, 4)},
        "k is 4 in Z[b, k] but 5 in X[b, k]",
        3,
        23,
    ),
    (  # through an intermediate: reported where the two meet
        "X[i] = const([1,2,3])\nA[k] = X[k]\nZ[j] = const([1,2])\nY[n] = A[n] Z[n]",
        {},
        "n is 2 in Z[n] but 3 in A[n]",
        4,
        15,
    ),
    (  # a declared axis against a file
        'axis t = 3\nX[t] = "x.npy"\nY[t] = X[t]',
        {"x.npy": (4,)},
        "t is 3 in axis t = 3 but 4 in X[t]",
        3,
        10,
    ),
]


@pytest.mark.parametrize("src,files,message,line,col", EXTENT_JOINS, ids=[e[2] for e in EXTENT_JOINS])
def test_extent_conflict_at_the_joining_equation(tmp_path, src, files, message, line, col):
    for name, shape in files.items():
        np.save(tmp_path / name, np.ones(shape))
    (tmp_path / "prog.fuse").write_text(src)
    with pytest.raises(FuseError) as info:
        Program.from_file(tmp_path / "prog.fuse").compile("reference")()
    err = info.value
    assert message in err.message, err.message
    assert err.loc is not None
    if line is not None:
        assert (err.loc.line, err.loc.col) == (line, col), str(err)
    # The index names in the message are the ones the reported line uses.
    shown = src.splitlines()[err.loc.line - 1]
    for word in err.message.split(" in ")[1:]:
        ref = word.split(" but ")[0]
        assert ref.replace(" ", "") in shown.replace(" ", "") or ref.startswith("axis "), (ref, shown)


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_runtime_extent_conflict_names_the_joining_equation(backend):
    """An input used in two equations: the check that fails is reported in the equation that joins it."""
    src = "A[i] = V[i]\nY[i] = W[i,j] V[j]\nexport A, Y"
    with pytest.raises(FuseRuntimeError) as info:
        Program(src, filename="prog.fuse").compile(backend)(W=np.ones((2, 3)), V=np.ones(4))
    err = info.value
    assert err.loc is not None and err.loc.line == 2, str(err)
    assert "in W[i, j]" in err.message and "in V[j]" in err.message, err.message


BLOCK_SHAPES = [
    # (source, inputs, message): a model block's shape precondition, checked ahead of the block (a te.check_dim
    # at the call) with one located message on every backend; the block's own checks were unlocated and worded
    # differently per backend, and numba's called topk's "an array of this program is too large"
    (
        '"top.json" = topk(S[q, n], k=2)\nY[q] = S[q, n]',
        {"S": np.ones((3, 1))},
        "topk: k = 2 is more than the extent of its axis n, 1",
    ),
    ("Y[p, e] = rope(X[p, e])", {"X": np.ones((2, 3))}, "rope needs an even feature extent: e is 3"),
]


@pytest.mark.parametrize("src, inputs, message", BLOCK_SHAPES, ids=["topk", "rope"])
@pytest.mark.parametrize("backend", ["reference", "llvm", "torch", "jax", "numba"])
def test_a_blocks_shape_precondition_is_one_located_error(
    src: str, inputs: dict, message: str, backend: str, tmp_path: Any
) -> None:
    if backend in ("torch", "jax", "numba"):
        pytest.importorskip(backend)
    runner = Program(src + "\nexport Y\n", filename="prog.fuse").compile(backend, out_root=tmp_path)
    with pytest.raises(FuseRuntimeError) as info:
        runner(**inputs)
    err = info.value
    assert err.message == message
    assert err.loc is not None and (err.loc.line, err.loc.col) == (1, src.index(src.split("= ")[1].split("(")[0]) + 1)
    # at the limit it runs: k equal to the extent, an even feature axis
    fine = {k: np.ones(v.shape[:-1] + (2,)) for k, v in inputs.items()}
    assert runner(**fine)["Y"].shape[0] == next(iter(fine.values())).shape[0]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("backend", ["reference", "llvm", "torch", "jax", "numba"])
def test_tucker_dense_of_a_non_finite_value_is_one_located_error(bad: float, backend: str) -> None:
    # The SVDs are undefined there: NumPy raised "SVD did not converge" (numba called it "an array of this
    # program is too large", llvm left it unlocated), torch an internal LinAlgError, jax returned zeros.
    if backend in ("torch", "jax", "numba"):
        pytest.importorskip(backend)
    x = np.ones((3, 4))
    runner = Program("Y[i, j] = tucker_dense(X[i, j], rank=1)\nexport Y\n", filename="prog.fuse").compile(backend)
    x[1, 2] = bad
    with pytest.raises(FuseRuntimeError) as info:
        runner(X=x)
    assert info.value.message == "tucker_dense: its argument holds a NaN or an infinity (it needs finite values)"
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == (1, 11)
    x[1, 2] = 0.5  # and the runner still serves finite values
    assert runner(X=x)["Y"].sum() == 12


def test_runtime_extent_conflict_message_matches_spec_wording():
    err = compile_error("Y[i] = W[i,j] X[j]", W=np.ones((2, 3)), X=np.ones(4))
    assert err.message == "j is 4 in X[j] but 3 in W[i, j]"


def test_boolean_reference_with_non_index_argument_is_unknown_function():
    err = compile_error("Y(x) = Friend(x, 1.5)")
    assert "unknown function 'Friend'" in err.message


def test_rank_of_bare_input_is_unknown():
    err = compile_error("Y = X")
    assert "input X is used without indices, so its rank is unknown: write X[] for a scalar input" in err.message


@pytest.mark.parametrize(
    "src, col, message",
    [
        ("Y[i,j] = X[i] (i != j)", 16, "index i is used as a value: an index names an axis"),
        ("Y[i,j] = X[i] + j", 17, "index j is used as a value"),
        ("Y[i] = X[i+a]", 10, "index i is used as a value inside an index position"),
        ("Y[i] = X[i] s", 13, "input s is used without indices, so its rank is unknown: write s[] for a scalar"),
    ],
)
def test_index_used_as_value_and_bare_scalar_input_say_what_they_are(src: str, col: int, message: str):
    """Issue 18: these used to say "the rank of input i is unknown ... (e.g. i[i])" for an index."""
    err = compile_error(src)
    assert message in err.message
    assert err.loc is not None and (err.loc.line, err.loc.col) == (1, col)


def test_topk_outside_a_sink_and_call_syntax_on_a_boolean_tensor():
    err = compile_error("Y[i] = topk(X[i,j], k=2)")
    assert err.message.startswith("topk(...) is only allowed as the value of a sink")
    err = compile_error("Parent(x,y) = E(x,y)\nY(y) = Parent(0.5, y)")
    assert "unknown function 'Parent'" in err.message and "boolean tensor reference takes index names" in err.message


# --- the front door: programs with nothing to do, deep expressions, huge literals, odd paths -----------------

EMPTY_PROGRAMS = ["", "# only a comment\n", "axis i = 3\nparam p: int = 2\n", "fn f(a) -> r { r = a * 2 }\n"]


@pytest.mark.parametrize("backend", ["reference", "llvm"])
@pytest.mark.parametrize("opt_level", ["O0", "O2"])
@pytest.mark.parametrize("src", EMPTY_PROGRAMS + ["examples/lib/act.fuse"])
def test_a_program_without_equations_returns_nothing_on_every_backend(src: str, backend: str, opt_level: str):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    program = Program.from_file(root / src) if src.endswith(".fuse") else Program(src)
    if backend == "reference" and opt_level == "O0":
        pytest.skip("the reference backend has no optimisation levels")
    assert program.compile(backend, opt_level=opt_level)() == {}


@pytest.mark.parametrize("op", ["+", "*", "-", " "])
def test_long_operator_chains_compile(op: str):
    """A chain of n operators is a tree n deep: every recursive walker copes up to parser.MAX_OPERATORS."""
    from fuse_mlir.frontend.parser import MAX_OPERATORS

    n = MAX_OPERATORS + 1  # operands: exactly MAX_OPERATORS operators
    src = "Y[i] = " + f" {op} ".join(["X[i]"] * n) if op != " " else "Y[i] = " + " ".join(["X[i]"] * n)
    program = Program(src)
    program.lower()
    if op in "+-":  # (a product of 5,000 factors is one contraction, which NumPy's einsum cannot run)
        got = program.compile("reference")(X=np.ones(2))["Y"]
        np.testing.assert_allclose(got, np.full(2, n if op == "+" else 2 - n))


@pytest.mark.parametrize(
    ("mode", "src", "inputs", "want"),
    [
        ("streaming", "S[i, *t] = S[i, *t-1] + {chain}", {"X": np.ones(2)}, lambda n: np.full(2, n)),
        ("fixpoint", "R[i] = 0.5 R[i] + {chain}", {"X": np.ones(2)}, lambda n: np.full(2, 2 * n)),
    ],
)
def test_long_operator_chains_compile_in_every_mode(mode: str, src: str, inputs: dict, want: Any):
    """The modes' own plans walk expressions too (streaming's time analysis): a chain of MAX_OPERATORS operators
    compiles and runs in streaming and fixpoint mode as in single mode (it was a RecursionError in streaming)."""
    from fuse_mlir.frontend.parser import MAX_OPERATORS

    n = MAX_OPERATORS - 1  # operands: with the recurrence's own term (and 0.5's product) at most MAX_OPERATORS
    runner = Program(src.format(chain=" + ".join(["X[i]"] * n))).compile("reference", mode=mode)
    if mode == "streaming":
        runner.reset(S=np.zeros(2))
    got = next(iter(runner(**inputs).values()))
    np.testing.assert_allclose(got, want(n), rtol=1e-4)  # the fixpoint stops at its default tolerance


@pytest.mark.parametrize("fn", ["lnorm", "softmax", "logsumexp"])
def test_a_long_chain_inside_a_row_reduction_on_llvm(fn: str):
    """A row function whose operand is a long sum: the llvm lowering's walk of a reduction accumulator's chain
    (which ops may reassociate) recursed once per operator, a RecursionError at run time past about 1,000
    operators in lnorm's mean (found by running text mutants). It is iterative now; 1,500 operators keep the
    test quick."""
    src = f"S[p] = {fn}(W[p] X[i] + " + " + ".join(["X[i]"] * 1500) + ", axis=p)"
    ins = {"X": np.array([1.0, 2.0]), "W": np.array([0.5, -1.0, 2.0])}
    want = Program(src).compile("reference")(**ins)["S"]
    np.testing.assert_allclose(Program(src).compile("llvm")(**ins)["S"], want, rtol=1e-9)


def test_long_sum_on_llvm():
    src = "Y[i] = " + " + ".join(f"X[i] * {k}" for k in range(300))
    got = Program(src).compile("llvm")(X=np.ones(3))["Y"]
    np.testing.assert_allclose(got, np.full(3, sum(range(300))))


def test_too_many_operators_is_a_located_error():
    from fuse_mlir.frontend.parser import MAX_OPERATORS

    src = "A[i] = X[i]\nY[i] = " + " + ".join(["X[i]"] * (MAX_OPERATORS + 2))
    err = compile_error(src)
    assert "expression too long" in err.message and err.loc is not None and err.loc.line == 2


def test_a_long_line_is_shown_as_a_window_around_the_caret():
    # A generated 5,000-term sum or a 5,000-digit literal: the error shows at most SHOWN_WIDTH columns of the
    # line (marked "..." where cut), with the caret under the same token.
    from fuse_mlir.diagnostics import SHOWN_WIDTH
    from fuse_mlir.frontend.parser import MAX_OPERATORS

    terms = [f"{k % 7 + 1} X{k % 5}[i]" for k in range(MAX_OPERATORS)]
    for src, token in [
        ("Y[i] = " + " + ".join(terms) + "\n", "+"),  # the caret in the middle of the line
        ("Y[i] = X[i] * " + "9" * 5000, "9" * 20),  # at the start, with a long token
        ("Y[i] = " + " + ".join(terms[:200]) + " + )", ")"),  # at the end
    ]:
        err = compile_error(src)
        text, caret = err.loc.render().splitlines()
        assert len(text) <= SHOWN_WIDTH + 10 and len(caret) <= len(text)
        col = caret.index("^")
        assert text[col:].startswith(token[: len(caret) - col]), (text, caret)
        assert text.startswith("    ...") == (err.loc.col > SHOWN_WIDTH // 2)
        width = len(caret) - col
        line = src.splitlines()[err.loc.line - 1]
        assert text[col : col + width] == line[err.loc.col - 1 : err.loc.col - 1 + width]
    short = compile_error("Y[i] = X[i] + )")
    assert short.loc.render() == "    Y[i] = X[i] + )\n                  ^"


def test_integer_literal_too_large_is_located():
    err = compile_error("Y[i] = X[i] * " + "9" * 5000)
    assert "integer literal too large" in err.message
    assert err.loc is not None and (err.loc.line, err.loc.col) == (1, 15)
    # as many digits as a float64 can mean are accepted
    got = Program("Y[i] = X[i] * 1" + "0" * 300).compile("reference")(X=np.ones(1))["Y"]
    assert got[0] == 1e300


@pytest.mark.parametrize(
    "src, col",
    [
        ("Y = X[9223372036854775808]", 7),
        ("Y[i] = X[i+9223372036854775808]", 12),
        ("Y[i] = X[i-9223372036854775809]", 12),
        ("Y[i] = X[0:9223372036854775808]", 12),
        ("axis i = 9223372036854775808\nY[i] = 1.5", 10),
        ("axis i = 2 ** 64\nY[i] = 1.5", 10),
    ],
)
@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_index_at_or_above_2_63_is_out_of_range(src: str, col: int, backend: str):
    with pytest.raises(FuseError) as e:
        Program(src, "prog.fuse").compile(backend)(X=np.ones(2))
    assert "index out of range" in e.value.message
    assert e.value.loc is not None and (e.value.loc.line, e.value.loc.col) == (1, col)


@pytest.mark.parametrize(
    "path, fragment",
    [
        ("/proc/self/mem", "Input/output error"),
        ("a" * 5000 + ".fuse", "File name too long"),
        ("a\0b.fuse", "NUL character"),
        ("/dev/zero", "not a regular file"),
        ("/", "it is a folder"),
        ("no/such/prog.fuse", "no such file"),
    ],
)
def test_odd_program_paths_are_fuse_errors(path: str, fragment: str):
    with pytest.raises(FuseError, match="cannot read program") as e:
        Program.from_file(path)
    assert fragment in e.value.message
    assert len(e.value.message) < 300  # a long name is shown shortened


@pytest.mark.parametrize(
    "stmt, fragment",
    [
        ('import "/proc/self/mem" as m', "Input/output error"),
        ('import "/dev/zero" as m', "not a regular file"),
        ('import "a\\0b.fuse" as m', "NUL character"),
        (f'import "{"a" * 5000}.fuse" as m', "no such file"),
        ('X[i] = "a\\0b.npy"', "NUL character"),
        (f'X[i] = "{"a" * 5000}.npy"', "File name too long"),
        ('X[i] = "/proc/self/mem.npy"', "no such file"),
        ('"o\\0ut.npy" = X[i]', "NUL character"),
        (f'"{"a" * 5000}.npy" = X[i]', "File name too long"),
    ],
)
def test_odd_paths_in_programs_are_located_fuse_errors(stmt: str, fragment: str, tmp_path):
    src = f"{stmt}\nY[i] = X[i] * 2\n"
    with pytest.raises(FuseError) as e:
        p = Program(src, "prog.fuse")
        p.compile("reference", out_root=tmp_path)(**({} if stmt.startswith("X[i] =") else {"X": np.ones(2)}))
    assert fragment in e.value.message, e.value.message
    assert e.value.loc is not None and e.value.loc.line == 1


def test_remembered_source_texts_are_bounded():
    """A service compiling many programs under distinct names keeps only the most recent texts for quoting."""
    from fuse_mlir import diagnostics

    for k in range(diagnostics.MAX_SOURCES + 50):
        Program(f"Y[i] = X[i] * {k}", f"prog{k}.fuse")
    assert len(diagnostics._SOURCES) <= diagnostics.MAX_SOURCES
    err = compile_error("Y[i] = nope(X[i])")  # the newest is still quoted
    assert "nope(X[i])" in str(err)


SHAPE_CHECKS = "S[i, j] = X0[i, j] + X1[i, j] + X2[j, i] + X3[i, j]\nexport S\n"
GOOD = {"X0": (2, 3), "X1": (2, 3), "X2": (3, 2), "X3": (2, 3)}
BAD = {"X1": (2, 4), "X2": (3, 5), "X3": (6, 3)}  # each breaks a check of its own (j, i, i)


@pytest.mark.parametrize("opt_level", [0, 2])
@pytest.mark.parametrize("bad", [("X1",), ("X2",), ("X3",), ("X1", "X3"), ("X2", "X3"), ("X1", "X2", "X3")])
def test_of_several_failing_shape_checks_the_first_is_reported(bad: tuple[str, ...], opt_level: int) -> None:
    # Of several failing shape checks, every build reports the first, as the reference does (llvm at O2 and
    # O0, and the large-entry rule's O0 entry: test_compile_cache.test_a_large_entry_is_compiled_at_o0).
    shapes = GOOD | {name: BAD[name] for name in bad}
    inputs = {name: np.ones(shape) for name, shape in shapes.items()}
    errors = []
    for backend, options in (("reference", {}), ("llvm", {"opt_level": opt_level, "cache": False})):
        with pytest.raises(FuseRuntimeError) as info:
            Program(SHAPE_CHECKS, filename="prog.fuse").compile(backend, **options)(**inputs)
        errors.append((info.value.message, info.value.loc))
    assert errors[0] == errors[1]
    assert any(f"in {name}[" in errors[1][0] for name in bad)
