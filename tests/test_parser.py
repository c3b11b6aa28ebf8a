"""Tests of the `.fuse` lexer and parser (fuse_mlir.frontend.lexer / .parser).

Expressions are compared through :func:`sx`, a compact location-free rendering
of the AST (``(+ a (* b c))``; ``j*`` is juxtaposition), so that precedence
and grouping are readable; locations are checked separately.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuse_mlir.diagnostics import SHOWN_WIDTH, FuseError, Loc
from fuse_mlir.frontend import ast as A
from fuse_mlir.frontend.lexer import NEWLINE, tokenize
from fuse_mlir.frontend.parser import MAX_NESTING, parse, parse_expression

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def sx(node: object) -> str:
    """Location-free rendering of an AST node."""
    match node:
        case A.Number(value=v):
            return repr(v)
        case A.String(value=v):
            return '"' + v + '"'
        case A.Bool(value=v):
            return "true" if v else "false"
        case A.ListLit(items=items):
            return "[" + ", ".join(sx(i) for i in items) + "]"
        case A.DictLit(items=items):
            return "{" + ", ".join(f"{k}: {sx(v)}" for k, v in items) + "}"
        case A.TensorRef(name=name, indices=None):
            return name
        case A.TensorRef(name=name, indices=idx, boolean=boolean):
            inner = ",".join(sx(i) for i in idx)
            return f"{name}({inner})" if boolean else f"{name}[{inner}]"
        case A.IndexName(name=name, dotted=dotted, time=t):
            return ("*" if t else "") + name + ("." if dotted else "")
        case A.IndexOffset(name=name, offset=off, time=t):
            return ("*" if t else "") + f"{name}{off:+d}"
        case A.IndexNumber(value=v):
            return f"#{v}"
        case A.IndexSlice(text=text):
            return f"slice({text})"
        case A.IndexTensor(expr=e):
            return f"@{sx(e)}"
        case A.Call(name=name, args=args, kwargs=kwargs):
            parts = [sx(a) for a in args] + [f"{k}={sx(v)}" for k, v in kwargs]
            return f"{name}(" + ", ".join(parts) + ")"
        case A.BinOp(op=op, lhs=lhs, rhs=rhs, juxtaposed=j):
            return f"({'j*' if j else op} {sx(lhs)} {sx(rhs)})"
        case A.UnaryOp(op=op, operand=e):
            return f"(u{op} {sx(e)})"
        case A.Ternary(cond=c, then=t, orelse=o):
            return f"(? {sx(c)} {sx(t)} {sx(o)})"
        case A.Case(branches=branches, default=d):
            parts = [f"({sx(c)} -> {sx(v)})" for c, v in branches]
            if d is not None:
                parts.append(f"(default -> {sx(d)})")
            return "(case " + " ".join(parts) + ")"
        case A.Reduce(op=op, indices=idx, body=body):
            return f"(reduce {op} [{','.join(sx(i) for i in idx)}] {sx(body)})"
        case A.Paren(expr=e):
            return f"(paren {sx(e)})"
    raise AssertionError(f"not an expression: {node!r}")


def stmts(text: str) -> list[A.Stmt]:
    return parse(text, "t.fuse").statements


def one(text: str) -> A.Stmt:
    body = stmts(text)
    assert len(body) == 1, body
    return body[0]


def rhs(expr_text: str) -> str:
    """Render the right-hand side of ``Y = <expr_text>``."""
    stmt = one(f"Y = {expr_text}")
    assert isinstance(stmt, A.Equation), stmt
    return sx(stmt.rhs)


def lhs_sx(text: str) -> str:
    stmt = one(text)
    assert isinstance(stmt, A.Equation | A.Source)
    return sx(stmt.lhs)


def err(text: str, filename: str = "e.fuse") -> FuseError:
    with pytest.raises(FuseError) as info:
        parse(text, filename)
    return info.value


def check_error(text: str, line: int, col: int, fragment: str) -> FuseError:
    """The error is at line:col, mentions ``fragment`` and renders the source line with a caret."""
    e = err(text)
    assert e.loc is not None
    assert (e.loc.line, e.loc.col) == (line, col), (e.loc, e.message)
    assert fragment in e.message, e.message
    rendered = str(e)
    assert f"e.fuse:{line}:{col}: error:" in rendered
    source_line = (text.splitlines()[line - 1] if text.splitlines() else "").replace("\t", " ")
    shown, caret_line = rendered.splitlines()[1:3]
    assert caret_line.strip().startswith("^")
    if len(source_line) <= SHOWN_WIDTH:
        assert shown == "    " + source_line
        assert caret_line.index("^") == 4 + col - 1  # "    " indent, then column
    else:  # a window of the line around the caret, "..." where it is cut
        cut = 3 if shown.startswith("    ...") else 0
        window = shown[4 + cut :].removesuffix("...")
        assert window in source_line and len(window) == SHOWN_WIDTH
        assert shown[caret_line.index("^")] == source_line[col - 1]  # the caret under the error's character
    return e


# ---------------------------------------------------------------------------
# Statements
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["=", "+=", "max=", "avg=", "min="])
def test_equation_operators(op: str) -> None:
    stmt = one(f"Y[i] {op} A[i,j] B[j]")
    assert isinstance(stmt, A.Equation)
    assert stmt.op == op
    assert sx(stmt.lhs) == "Y[i]"
    assert sx(stmt.rhs) == "(j* A[i,j] B[j])"
    assert stmt.guard is None and not stmt.is_let


def test_equation_projection_property() -> None:
    assert [s.projection for s in stmts("Y[i] = X[i]\nY[i] max= X[i]\nY[i] avg= X[i]")] == ["sum", "max", "mean"]


def test_max_assign_without_spaces_and_max_call() -> None:
    stmt = one("Y[i]max=A[i,j]")
    assert isinstance(stmt, A.Equation) and stmt.op == "max="
    stmt = one("Y[i] = max(A[i], B[i])")
    assert isinstance(stmt, A.Equation) and stmt.op == "="
    assert sx(stmt.rhs) == "max(A[i], B[i])"
    # `max==` is the name max and '=='.
    assert rhs("max==1") == "(== max 1)"
    # a keyword argument named like a projection
    assert rhs("f(x, max=3, min=1, avg=2)") == "f(x, max=3, min=1, avg=2)"
    # a scalar named max
    stmt = one("max=3")
    assert isinstance(stmt, A.Equation) and stmt.op == "=" and sx(stmt.lhs) == "max"


def test_boolean_lhs() -> None:
    stmt = one("Aunt(x,z) = Sister(x,y) Parent(y,z)")
    assert isinstance(stmt, A.Equation)
    assert stmt.lhs.boolean and stmt.lhs.name == "Aunt"
    assert sx(stmt.lhs) == "Aunt(x,z)"
    # on the right a parenthesised form is always a Call (the resolver decides)
    assert sx(stmt.rhs) == "(j* Sister(x, y) Parent(y, z))"


def test_scalar_lhs() -> None:
    s1, s2 = stmts("S = 0.5\nS[] = X[i] X[i]")
    assert isinstance(s1, A.Equation) and s1.lhs.indices is None
    assert sx(s1.rhs) == "0.5"
    assert isinstance(s2, A.Equation) and s2.lhs.indices == ()
    assert sx(s2.rhs) == "(j* X[i] X[i])"


def test_source() -> None:
    stmt = one('W[h,d] = "weights/w.npy"   # a comment')
    assert isinstance(stmt, A.Source)
    assert stmt.path == "weights/w.npy"
    assert sx(stmt.lhs) == "W[h,d]"
    assert stmt.loc == Loc("t.fuse", 1, 1, 1)
    b = one('Sister(x, y) = "data/sister.tsv"')
    assert isinstance(b, A.Source) and b.lhs.boolean


def test_string_in_a_larger_expression_is_not_a_source() -> None:
    stmt = one('Y = f("a.npy")')
    assert isinstance(stmt, A.Equation)
    assert sx(stmt.rhs) == 'f("a.npy")'


def test_sink() -> None:
    s1, s2 = stmts('"out/y.npz" = Y[i,j]\n"runs/top.jsonl" = topk(Score[a, b], k=3)')
    assert isinstance(s1, A.Sink) and s1.path == "out/y.npz" and sx(s1.rhs) == "Y[i,j]"
    assert s1.loc == Loc("t.fuse", 1, 1, 11)
    assert isinstance(s2, A.Sink) and sx(s2.rhs) == "topk(Score[a,b], k=3)"


def test_export() -> None:
    s1, s2 = stmts("export Y\nexport Y, Z")
    assert isinstance(s1, A.Export) and [n for n, _ in s1.names] == ["Y"]
    assert isinstance(s2, A.Export) and [n for n, _ in s2.names] == ["Y", "Z"]
    assert s2.names[1][1] == Loc("t.fuse", 2, 11, 1)


def test_declarations() -> None:
    p1, p2, c, ax = stmts("param D: int = 16\nparam lr = 1e-3\nconst c = 3.0\naxis i = 128")
    assert isinstance(p1, A.ParamDecl) and (p1.name, p1.type, sx(p1.value)) == ("D", "int", "16")
    assert isinstance(p2, A.ParamDecl) and (p2.name, p2.type, sx(p2.value)) == ("lr", None, "0.001")
    assert isinstance(c, A.ConstDecl) and (c.name, sx(c.value)) == ("c", "3.0")
    assert isinstance(ax, A.AxisDecl) and (ax.name, sx(ax.value)) == ("i", "128")
    assert ax.loc == Loc("t.fuse", 4, 1, 4)


def test_keywords_are_contextual() -> None:
    # `const(...)` is the builtin; `axis=` a keyword argument; names may be keywords elsewhere
    assert rhs("const([[1,2],[3,4]])") == "const([[1, 2], [3, 4]])"
    assert rhs("softmax(X[i,j], axis=j)") == "softmax(X[i,j], axis=j)"
    stmt = one("axis[i] = X[i]")
    assert isinstance(stmt, A.Equation) and stmt.lhs.name == "axis"
    stmt = one("export = 1")
    assert isinstance(stmt, A.Equation) and stmt.lhs.name == "export"
    assert rhs("case(c1, v1, d)") == "case(c1, v1, d)"


def test_let() -> None:
    s1, s2 = stmts("let T[i] = X[i] + 1\nlet t = 1 + 2")
    assert isinstance(s1, A.Equation) and s1.is_let and sx(s1.lhs) == "T[i]"
    assert s1.loc == Loc("t.fuse", 1, 1, 3)
    assert isinstance(s2, A.Equation) and s2.is_let and s2.lhs.indices is None


def test_guarded() -> None:
    stmt = one("Y[i] when M[i] > 0 = X[i]")
    assert isinstance(stmt, A.Equation)
    assert sx(stmt.guard) == "(> M[i] 0)"
    assert sx(stmt.rhs) == "X[i]"
    assert stmt.op == "="
    stmt = one("Aunt(x,z) when Ok(x) max= Sister(x,y) Parent(y,z)")
    assert isinstance(stmt, A.Equation) and stmt.op == "max=" and stmt.lhs.boolean
    assert sx(stmt.guard) == "Ok(x)"


def test_block_multiline_and_one_line() -> None:
    stmt = one("{\n  A[i] = X[i]\n\n  B[i] = A[i]   # comment\n}")
    assert isinstance(stmt, A.Block)
    assert [sx(s.lhs) for s in stmt.body if isinstance(s, A.Equation)] == ["A[i]", "B[i]"]
    stmt = one("{ let t = 1 + 2; A[i] = t * x[i]; }")
    assert isinstance(stmt, A.Block) and len(stmt.body) == 2
    stmt = one("{ { A = 1 }\n B = 2 }")
    assert isinstance(stmt, A.Block) and isinstance(stmt.body[0], A.Block)
    assert one("{}") == A.Block((), Loc("t.fuse", 1, 1, 1))


def test_fn_one_line() -> None:
    stmt = one("fn dot(a[x], b[x]) -> s { s = a[x] b[x] }")
    assert isinstance(stmt, A.FnDef)
    assert stmt.name == "dot"
    assert [(p.name, [i.name for i in p.indices]) for p in stmt.params] == [("a", ["x"]), ("b", ["x"])]
    assert stmt.result == "s" and stmt.result_indices == ()
    assert len(stmt.body) == 1 and sx(stmt.body[0].rhs) == "(j* a[x] b[x])"  # type: ignore[union-attr]


def test_fn_multi_line_with_result_indices() -> None:
    text = """fn mlp(x[i], w[o, i], b) -> y[o]
{
  let h[o] = w[o, i] x[i]; y[o] = relu(h[o] + b)
  y[o] += 0
}"""
    stmt = one(text)
    assert isinstance(stmt, A.FnDef)
    assert [p.name for p in stmt.params] == ["x", "w", "b"]
    assert stmt.params[2].indices == ()
    assert stmt.result == "y" and [i.name for i in stmt.result_indices] == ["o"]
    assert len(stmt.body) == 3
    stmt = one("fn dot(a[x], b[x]) -> s[] { s[] = a[x] * b[x]; }")
    assert isinstance(stmt, A.FnDef) and stmt.result_indices == ()
    stmt = one("fn k() -> s { s = 1 }")
    assert isinstance(stmt, A.FnDef) and stmt.params == ()


def test_import() -> None:
    stmt = one('import "lib.fuse" as lib')
    assert stmt == A.Import("lib.fuse", "lib", Loc("t.fuse", 1, 1, 6))
    assert rhs("lib::dot(a[x], b[x])") == "lib::dot(a[x], b[x])"


def test_lhs_index_forms() -> None:
    assert lhs_sx("Y[p, q.] = softmax(S[p,q])") == "Y[p,q.]"
    assert lhs_sx("A[p, p'.] = X[p, p']") == "A[p,p'.]"
    assert lhs_sx("A[s'', p'] = X[s'', p']") == "A[s'',p']"
    assert lhs_sx("W[1, h] = B[h]") == "W[#1,h]"
    assert lhs_sx("H[i,*t+1] = relu(W[i,j] H[j,*t])") == "H[i,*t+1]"
    assert lhs_sx("H[i,*t] = X[i]") == "H[i,*t]"
    assert lhs_sx("H[i, *t-2] = X[i]") == "H[i,*t-2]"
    stmt = one("Y[p, q.] = S[p, q]")
    assert isinstance(stmt, A.Equation) and stmt.lhs.indices is not None
    q = stmt.lhs.indices[1]
    assert q == A.IndexName("q", Loc("t.fuse", 1, 6, 2), dotted=True)


def test_statement_separators_comments_and_blank_lines() -> None:
    text = "# header\n\nA = 1; B = 2 ;; C = 3  # trailing\n   \n# only comment\nD = 4\n"
    assert [s.lhs.name for s in stmts(text) if isinstance(s, A.Equation)] == ["A", "B", "C", "D"]
    assert stmts("") == [] and stmts("# nothing\n\n") == []


def test_crlf_and_line_continuation() -> None:
    s = stmts("A = 1\r\nB = X[i]\r\n")
    assert [x.loc.line for x in s] == [1, 2]
    s = stmts("\\\n# comment after a continuation\nA = a \\\n  + b")
    assert len(s) == 1 and sx(s[0].rhs) == "(+ a b)"  # type: ignore[union-attr]


def test_newlines_inside_brackets() -> None:
    stmt = one("Y[i,\n  j] = f(A[i,\n        j],\n      k=2\n   ) + const([[1, 2],\n  [3, 4]])")
    assert isinstance(stmt, A.Equation)
    assert sx(stmt.lhs) == "Y[i,j]"
    assert sx(stmt.rhs) == "(+ f(A[i,j], k=2) const([[1, 2], [3, 4]]))"
    # a newline inside {} still separates statements (blocks) and branches (case)
    stmt = one("Y = case {\n  a -> 1\n  default -> 2\n}")
    assert isinstance(stmt, A.Equation) and sx(stmt.rhs) == "(case (a -> 1) (default -> 2))"


def test_statement_locations() -> None:
    s = stmts("A = 1\n  B[i] = X[i] + Y[i]")
    assert s[1].loc == Loc("t.fuse", 2, 3, 1)
    eq = s[1]
    assert isinstance(eq, A.Equation)
    assert isinstance(eq.rhs, A.BinOp) and eq.rhs.loc == Loc("t.fuse", 2, 10, 1)
    assert isinstance(eq.rhs.rhs, A.TensorRef) and eq.rhs.rhs.loc == Loc("t.fuse", 2, 17, 1)


def test_module_fields_and_determinism() -> None:
    text = "A[i] = X[i]\nexport A\n"
    m1 = parse(text, "d.fuse")
    m2 = parse(text, "d.fuse")
    assert m1 == m2
    assert m1.filename == "d.fuse" and m1.text == text and m1.imports == {}


# ---------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # juxtaposition and '*'
        ("W[i,j] X[j]", "(j* W[i,j] X[j])"),
        ("W[i,j] * X[j]", "(* W[i,j] X[j])"),
        ("a b c", "(j* (j* a b) c)"),
        ("2 X[i]", "(j* 2 X[i])"),
        ("(a + b) c", "(j* (paren (+ a b)) c)"),
        ("X[i] (a + b)", "(j* X[i] (paren (+ a b)))"),
        ("f(x) g(y)", "(j* f(x) g(y))"),
        # '-' after a factor is binary minus, never a new negative factor
        ("a - b", "(- a b)"),
        ("a -b", "(- a b)"),
        ("a b - c d", "(- (j* a b) (j* c d))"),
        ("a * -b", "(* a (u- b))"),
        ("-a b", "(j* (u- a) b)"),
        ("+a", "(u+ a)"),
        # precedence
        ("a + b * c", "(+ a (* b c))"),
        ("a * b + c", "(+ (* a b) c)"),
        ("a - b - c", "(- (- a b) c)"),
        ("a / b c", "(j* (/ a b) c)"),
        ("a b / c", "(/ (j* a b) c)"),
        ("-x**2", "(u- (** x 2))"),
        ("2**-1", "(** 2 (u- 1))"),
        ("a**b**c", "(** a (** b c))"),
        ("a X[i]**2", "(j* a (** X[i] 2))"),
        ("a < b + c", "(< a (+ b c))"),
        ("a + b >= c d", "(>= (+ a b) (j* c d))"),
        ("a == b && c != d", "(&& (== a b) (!= c d))"),
        ("a && b || c && d", "(|| (&& a b) (&& c d))"),
        ("!a && b", "(&& (u! a) b)"),
        ("!!a", "(u! (u! a))"),
        ("c ? a : b", "(? c a b)"),
        ("c ? a : d ? e : f", "(? c a (? d e f))"),
        ("a || b ? x + 1 : y", "(? (|| a b) (+ x 1) y)"),
        ("(a < b) < c", "(< (paren (< a b)) c)"),
        # literals
        ("1", "1"),
        ("2.5", "2.5"),
        (".5", "0.5"),
        ("2.", "2.0"),
        ("1e-3", "0.001"),
        ("1E+2", "100.0"),
        ("true", "true"),
        ("false", "false"),
        ('f("a\\"b\\n")', 'f("a"b\n")'),
        ("[[1,2],[3,4]]", "[[1, 2], [3, 4]]"),
        ("[]", "[]"),
        ("[1, 2,]", "[1, 2]"),
        ('f({k: 1, "s": [1]})', "f({k: 1, s: [1]})"),
        ("f({\n  a: 1,\n  b: 2\n})", "f({a: 1, b: 2})"),
        ("f({})", "f({})"),
        # calls
        ("f()", "f()"),
        ("f(a, b,)", "f(a, b)"),
        ("sig(x, T=0.5)", "sig(x, T=0.5)"),
        ("select(c, a, b)", "select(c, a, b)"),
        ('softmax(X[i,j], axis="j")', 'softmax(X[i,j], axis="j")'),
        ("lib::f(x)", "lib::f(x)"),
        ("a::b::c(x)", "a::b::c(x)"),
        ("relu(W[i,j] X[j] + B[i])", "relu((+ (j* W[i,j] X[j]) B[i]))"),
        ("S", "S"),
        ("S[]", "S[]"),
        # case
        ("case { c1 -> v1; c2 -> v2; default -> d }", "(case (c1 -> v1) (c2 -> v2) (default -> d))"),
        ("case { X[i] > 0 -> 1; }", "(case ((> X[i] 0) -> 1))"),
        ("case { default -> 0 }", "(case (default -> 0))"),
        ("2 case { a -> b }", "(j* 2 (case (a -> b)))"),
        # reduce: the body is the term that follows
        ("reduce(sum, j) A[i,j] B[j]", "(reduce sum [j] (j* A[i,j] B[j]))"),
        ("reduce(sum, j) A[i,j] B[j] + C[i]", "(+ (reduce sum [j] (j* A[i,j] B[j])) C[i])"),
        ("reduce(max, i, j) A[i,j] / 2", "(reduce max [i,j] (/ A[i,j] 2))"),
        ("reduce(mean, d) x[i,d]*x[i,d]", "(reduce mean [d] (* x[i,d] x[i,d]))"),
        ("reduce(prod, k) -A[k]", "(reduce prod [k] (u- A[k]))"),
        ("reduce(avg, k) A[k]", "(reduce mean [k] A[k])"),
        ("reduce(min, p') A[p']", "(reduce min [p'] A[p'])"),
        ("2 reduce(sum, j) A[j]", "(j* 2 (reduce sum [j] A[j]))"),
    ],
)
def test_expressions(text: str, expected: str) -> None:
    assert rhs(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("X[i, j]", "X[i,j]"),
        ("X[p', s'']", "X[p',s'']"),
        ("X[i, j+1]", "X[i,j+1]"),
        ("X[i, j - 1]", "X[i,j-1]"),
        ("X[i, j+0]", "X[i,j+0]"),
        ("H[j, *t]", "H[j,*t]"),
        ("H[j, *t-1]", "H[j,*t-1]"),
        ("X[0, d]", "X[#0,d]"),
        ("X[p, 0:2]", "X[p,slice(0:2)]"),
        ("X[i, ::2]", "X[i,slice(::2)]"),
        ("X[i, : : 2]", "X[i,slice(::2)]"),
        ("X[1:]", "X[slice(1:)]"),
        ("X[:3]", "X[slice(:3)]"),
        ("X[:]", "X[slice(:)]"),
        ("X[1:5:2]", "X[slice(1:5:2)]"),
        ("X[1::2]", "X[slice(1::2)]"),
        ("X[-2:]", "X[slice(-2:)]"),
        ("X[0 : -1]", "X[slice(0:-1)]"),
        ("Table[Tok[t], d]", "Table[@Tok[t],d]"),
        ("X[Idx[n]]", "X[@Idx[n]]"),
        ("X[i + k]", "X[@(+ i k)]"),
        ("X[j+1 k]", "X[@(+ j (j* 1 k))]"),
        ("X[f(i)]", "X[@f(i)]"),
        ("X[c ? 1 : 2]", "X[@(? c 1 2)]"),
        ("X[-1]", "X[@(u- 1)]"),
    ],
)
def test_rhs_index_forms(text: str, expected: str) -> None:
    assert rhs(text) == expected


def test_index_item_values() -> None:
    stmt = one("Y = X[j-1, 0:2, ::2, 3, *t+1, Tok[t]]")
    assert isinstance(stmt, A.Equation) and isinstance(stmt.rhs, A.TensorRef)
    idx = stmt.rhs.indices
    assert idx is not None
    f = "t.fuse"
    assert idx[0] == A.IndexOffset("j", -1, Loc(f, 1, 7, 3))
    assert idx[1] == A.IndexSlice(0, 2, None, "0:2", Loc(f, 1, 12, 3))
    assert idx[2] == A.IndexSlice(None, None, 2, "::2", Loc(f, 1, 17, 3))
    assert idx[3] == A.IndexNumber(3, Loc(f, 1, 22, 1))
    assert idx[4] == A.IndexOffset("t", 1, Loc(f, 1, 25, 4), time=True)
    assert isinstance(idx[5], A.IndexTensor) and idx[5].loc == Loc(f, 1, 31, 3)


def test_number_literal_kinds() -> None:
    stmt = one("Y = 2 2.0 1e-3")
    assert isinstance(stmt, A.Equation)
    nums: list[A.Number] = []

    def walk(e: A.Expr) -> None:
        if isinstance(e, A.BinOp):
            walk(e.lhs)
            walk(e.rhs)
        elif isinstance(e, A.Number):
            nums.append(e)

    walk(stmt.rhs)
    assert [(n.value, n.is_int) for n in nums] == [(2, True), (2.0, False), (0.001, False)]
    assert isinstance(nums[0].value, int)


def test_parse_expression_helper() -> None:
    assert sx(parse_expression("a + b c")) == "(+ a (j* b c))"
    with pytest.raises(FuseError):
        parse_expression("a = b")


# ---------------------------------------------------------------------------
# Lexer details
# ---------------------------------------------------------------------------


def test_tokens_and_newline_suppression() -> None:
    toks = tokenize("Y[i,\n j] = f(a,\n b)\n{\nA = 1\n}\n", "l.fuse")
    kinds = [t.kind for t in toks]
    # no NEWLINE inside [] or (), but after the statement and inside {}
    assert kinds == [
        "NAME", "[", "NAME", ",", "NAME", "]", "=", "NAME", "(", "NAME", ",", "NAME", ")", NEWLINE,
        "{", NEWLINE, "NAME", "=", "NUMBER", NEWLINE, "}", NEWLINE, "EOF",
    ]  # fmt: skip
    assert toks[4].loc == Loc("l.fuse", 2, 2, 1)


def test_primes_are_part_of_names() -> None:
    toks = tokenize("p' s'' x'y", "l.fuse")
    assert [(t.kind, t.text) for t in toks[:-1]] == [("NAME", "p'"), ("NAME", "s''"), ("NAME", "x'"), ("NAME", "y")]


def test_max_assign_token() -> None:
    toks = tokenize("Y[i] max= X min=1 avg==2 max(a)", "l.fuse")
    assert [t.text for t in toks[:-1]] == [
        "Y",
        "[",
        "i",
        "]",
        "max=",
        "X",
        "min=",
        "1",
        "avg",
        "==",
        "2",
        "max",
        "(",
        "a",
        ")",
    ]


# ---------------------------------------------------------------------------
# Errors: location, message, rendering
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "col", "fragment"),
    [
        # brackets
        ("Y[i] = X[i", 1, 11, "expected ',' or ']' to close '[' opened at 1:9, found end of file"),
        ("A = 1\nY[i] = X[i\nZ = 1", 3, 3, "to close '[' opened at 2:9, found '='"),
        ("Y[i] = f(a, b", 1, 14, "to close '(' opened at 1:9, found end of file"),
        ("Y[i] = X[i)", 1, 11, "expected ',' or ']' to close '[' opened at 1:9, found ')'"),
        ("Y = (a + b", 1, 11, "expected ')' to close '(' opened at 1:5"),
        ("Y = [1, 2", 1, 10, "to close '[' opened at 1:5"),
        ("{ A = 1", 1, 8, "expected '}' to close '{' opened at 1:1, found end of file"),
        ("A = 1\n}", 2, 1, "unexpected '}'"),
        ("Y = case { a -> 1", 1, 18, "to close '{' opened at 1:10"),
        ("Y = f({a: 1", 1, 12, "to close '{' opened at 1:7"),
        ("Y = f(x\n", 1, 8, "found end of file"),
        # literals
        ("Y = 1e", 1, 5, "invalid number literal '1e'"),
        ("Y = 3 1e+ 2", 1, 7, "invalid number literal '1e+'"),
        ("Y = 2x", 1, 5, "invalid number literal '2x'"),
        ("Y = 1.2.3", 1, 5, "invalid number literal '1.2.3'"),
        ("Y = 1e999", 1, 5, "too large"),
        ('W = "abc', 1, 5, "unterminated string literal"),
        ('W = "abc\nX = 1"', 1, 5, "unterminated string literal"),
        ('W = "a\\qb"', 1, 7, "invalid escape sequence '\\q'"),
        # characters
        ("Y = a $ b", 1, 7, "unexpected character '$'"),
        ("Y = a & b", 1, 7, "'&&'"),
        ("Y = a | b", 1, 7, "'||'"),
        ("Y = 'a'", 1, 5, "strings use"),
        ("Y = @softmax(x)", 1, 5, "unexpected character '@'"),
        ("Y = a \\ b", 1, 7, "line continuation"),
        # statements
        ("+ X", 1, 1, "expected a statement"),
        ("Y[i] = ", 1, 7, "expected an expression, found end of file"),
        ("Y[i] =\n  X[i]", 1, 7, "expected an expression, found end of line"),
        ("Y[i]  X[i]", 1, 7, "expected '=', '+=', 'max=', 'avg=' or 'min=' after the left-hand side 'Y'"),
        ("Y[i] max = X[i]", 1, 6, "write 'max=' without a space"),
        ("Y = X[i] Z[j] = 3", 1, 15, "expected the end of the statement"),
        ("{ Y = X[i] Z[j] = 3 }", 1, 17, "a newline, ';' or '}'"),
        ("Y = a max= b", 1, 7, "found 'max='"),
        ('W += "w.npy"', 1, 6, "a file source must use '='"),
        ('W[i] when M[i] = "w.npy"', 1, 18, "cannot have a 'when' guard"),
        ('let W = "w.npy"', 1, 1, "cannot be declared with 'let'"),
        ('"out.npy" += X', 1, 11, "a file sink must use '='"),
        ('"out.npy" X', 1, 11, "expected '=' after the sink path"),
        ("export", 1, 7, "expected a tensor name after 'export'"),
        ("export Y,", 1, 10, "expected a tensor name to export"),
        ("import lib", 1, 8, "expected a quoted path"),
        ('import "x.fuse"', 1, 16, "expected 'as'"),
        ('import "x.fuse" as', 1, 19, "expected a name after 'as'"),
        ("param D: = 3", 1, 10, "expected a type name"),
        ("param D: int", 1, 13, "expected '=' and a value after param 'D'"),
        ("const c 3", 1, 9, "expected '=' and a value after const 'c'"),
        ("axis i", 1, 7, "expected '=' and a value after axis 'i'"),
        ("fn f(a[x]) { }", 1, 12, "expected '->'"),
        ("fn f(a[x]) -> s", 1, 16, "expected '{' to start the body of fn 'f'"),
        ("fn f(a[x], a[y]) -> s { s = 1 }", 1, 12, "duplicate parameter 'a'"),
        ("fn f(a[x+1]) -> s { s = 1 }", 1, 9, "to close '[' opened at 1:7"),
        ("fn f(1) -> s { s = 1 }", 1, 6, "expected a parameter name"),
        ("fn f a -> s { }", 1, 6, "expected '(' and the parameters of fn 'f'"),
        # left-hand side indices
        ("Y[j+1] = X[j]", 1, 3, "not allowed on the left-hand side"),
        ("Y[1.5] = 1", 1, 3, "integer literal"),
        ("Y[*] = 1", 1, 4, "expected a virtual-time index name after '*'"),
        ("Y[*t+] = 1", 1, 6, "expected an integer offset"),
        ("Y[i,] = 1", 1, 5, "expected an index name, a position or '*t' on the left-hand side"),
        ("Y[i j] = 1", 1, 5, "expected ',' or ']' to close '[' opened at 1:2"),
        # right-hand side indices
        ("Y = X[q.]", 1, 7, "a dotted axis 'q.' is only allowed on the left-hand side"),
        ("Y = X[1.5]", 1, 7, "integer literal"),
        ("Y = X[0:2:0]", 1, 7, "a slice step cannot be 0"),
        ("Y = X[i:j]", 1, 8, "to close '[' opened at 1:6, found ':'"),
        ("Y = X[0:j]", 1, 9, "expected an integer literal, ',' or ']' in the slice"),
        ("Y = X[0:1.5]", 1, 9, "integer literal"),
        # expressions
        ("Y = 1 +", 1, 8, "expected an expression after '+'"),
        ("Y = a * ", 1, 8, "expected an expression after '*', found end of file"),
        ("Y = ()", 1, 6, "expected an expression inside '( )'"),
        ("Y = a < b < c", 1, 11, "comparisons cannot be chained"),
        ("Y = c ? a", 1, 10, "expected ':' of the conditional expression whose '?' is at 1:7"),
        ("Y = X[i] ]", 1, 10, "expected the end of the statement"),
        ("Y = X[i][j]", 1, 9, "expected the end of the statement"),
        ("Y = case { a -> b default -> c }", 1, 27, "after a case branch"),
        ("Y = case { default -> c; a -> b }", 1, 26, "'default' must be the last branch"),
        ("Y = case { }", 1, 5, "a case needs at least one branch"),
        ("Y = case { a b }", 1, 16, "expected '->' after the case condition"),
        ("Y = reduce(foo, i) x", 1, 12, "expected a reduction operator"),
        ("Y = reduce(sum) x", 1, 15, "names no index to reduce"),
        ("Y = reduce(sum, i)", 1, 19, "expected the expression to reduce"),
        ("Y = reduce(sum, 1) x", 1, 17, "expected an index name to reduce"),
        ("Y = reduce(sum, i x", 1, 19, "to close '(' opened at 1:11, found name 'x'"),
        ("Y = f(a=1, b)", 1, 12, "positional argument after keyword arguments"),
        ("Y = f(a=1, a=2)", 1, 12, "duplicate keyword argument 'a'"),
        ("Y = f(max=1, max=2)", 1, 14, "duplicate keyword argument 'max'"),
        ("Y = lib::X", 1, 11, "expected '(' after 'lib::X'"),
        ("Y = lib::", 1, 10, "expected a function name after '::'"),
        ("Y = {a 1}", 1, 8, "expected ':' after the dict key 'a'"),
        ("Y = {1: 2}", 1, 6, "expected a key"),
        ("Y = {a: 1, a: 2}", 1, 12, "duplicate key 'a'"),
        ("Y = {a: 1 b: 2}", 1, 12, "expected ',' or '}' to close '{' opened at 1:5, found ':'"),
        ("Y = a !b", 1, 7, "expected the end of the statement"),
    ],
)
def test_errors(text: str, line: int, col: int, fragment: str) -> None:
    check_error(text, line, col, fragment)


def test_error_rendering_shows_line_and_caret() -> None:
    e = err("A = 1\nY[i] = W[i,j] X[j\nB = 2", "model.fuse")
    text = str(e)
    assert text.splitlines()[0].startswith("model.fuse:3:3: error: expected ',' or ']' to close '[' opened at 2:16")
    assert "    B = 2" in text
    assert "      ^" in text


def test_error_on_a_tab_indented_line() -> None:
    check_error("A = 1\n\tB = $", 2, 6, "unexpected character '$'")


def test_nesting_limit() -> None:
    ok = MAX_NESTING - 2
    assert rhs("(" * ok + "1" + ")" * ok).startswith("(paren")
    check_error("Y = " + "(" * 200 + "1" + ")" * 200, 1, 5 + MAX_NESTING, "nested too deeply")
    check_error("Y = " + "-" * 500 + "1", 1, 5 + MAX_NESTING, "nested too deeply")
    e = err("Y = " + "2**" * 2000 + "1")
    assert "nested too deeply" in e.message
    e = err("Y = " + "[" * 1000 + "]" * 1000)
    assert "nested too deeply" in e.message
    e = err("{" * 500 + "}" * 500)
    assert "nested too deeply" in e.message


# Any text at all gives a module or a FuseError, never another exception.
_FRAGMENTS = [
    "Y", "X", "i", "j", "p'", "q", "t", "=", "+=", "max=", "avg=", "min=", "max", "+", "-", "*", "/", "**",
    "<", "<=", "==", "!=", "&&", "||", "!", "?", ":", "::", "->", ",", ";", ".", "[", "]", "(", ")", "{", "}",
    "1", "2.5", "1e-3", ".5", '"s"', "when", "let", "export", "param", "const", "axis", "fn", "import", "as",
    "case", "default", "reduce", "sum", "true", "\n", " ", "#c\n", "'", "1e", '"', "\\",
]  # fmt: skip


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=40), st.booleans())
def test_fuzz_only_fuse_errors(parts: list[str], spaced: bool) -> None:
    text = (" " if spaced else "").join(parts)
    try:
        parse(text, "fuzz.fuse")
    except FuseError as e:
        assert e.loc is not None and e.loc.line >= 1 and e.loc.col >= 1


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.text(max_size=60))
def test_fuzz_arbitrary_text(text: str) -> None:
    try:
        parse(text, "fuzz.fuse")
    except FuseError as e:
        assert e.loc is not None and e.loc.line >= 1
        str(e)  # renders without error


# ---------------------------------------------------------------------------
# A realistic program and a large one
# ---------------------------------------------------------------------------

PROGRAM = """\
# Masked attention, core syntax
X[p, d]       = "ckpt/emb.npy"          # (P x D)
WQ[dk, d]     = "ckpt/wq.npy"
Causal[p, p'] = causal_mask(32)
NEG           = const(-10000.0)
Q[p, dk]      = WQ[dk, d] X[p, d]
Score[p, p']  = (Q[p, dk] Q[p', dk]) Scale + (1 - Causal[p, p']) NEG
Comp[p, p'.]  = softmax(Score[p, p'])
"runs/attn.npz" = Comp[p, p']
export Comp

# structured syntax
param D: int = 16
axis h = 4
import "lib.fuse" as lib
fn dot(a[x], b[x]) -> s { s = a[x] b[x] }
Sim[i, j] = dot(Emb[i, d], Emb[j, d]) + lib::bias(i)
Score2[u] when Risky[u] = Hi[u]
Pw[u] = case { Risky[u] -> Hi[u]; default -> Lo[u] }
Norm[i] = reduce(sum, d) x[i, d] * x[i, d]
H[i, *t+1] = relu(W[i, j] H[j, *t] + U[i, k] In[k, *t])
"""


def test_realistic_program() -> None:
    m = parse(PROGRAM, "prog.fuse")
    kinds = [type(s).__name__ for s in m.statements]
    assert kinds == [
        "Source", "Source", "Equation", "Equation", "Equation", "Equation", "Equation", "Sink", "Export",
        "ParamDecl", "AxisDecl", "Import", "FnDef", "Equation", "Equation", "Equation", "Equation", "Equation",
    ]  # fmt: skip
    score = m.statements[5]
    assert isinstance(score, A.Equation)
    assert sx(score.rhs) == ("(+ (j* (paren (j* Q[p,dk] Q[p',dk])) Scale) (j* (paren (- 1 Causal[p,p'])) NEG))")
    assert parse(PROGRAM, "prog.fuse") == m


def _big_program(n: int) -> str:
    forms = [
        "H{k}[b,h] = relu(W{k}[h,d] H{p}[b,d] + B{k}[h])",
        "S{k}[p, q.] = softmax(Q[p,d] K[q,d] / 8.0, axis=q)",
        "M{k}[i] max= A{k}[i,j] X[j] - 0.5",
        "G{k}[t,d] = Table[Tok[t], d] + X[t, 0:2] X[t, j+1]",
        "R{k}[i] = reduce(sum, j) A[i,j] B[j] + (c ? 1 : 2)",
        "C{k}[i] = case {{ X[i] > 0 -> X[i]; default -> -X[i]**2 }}",
    ]
    lines = [forms[k % len(forms)].format(k=k, p=max(k - 1, 0)) for k in range(n)]
    return "\n".join(lines) + "\n"


def test_parse_400_equations_timing() -> None:
    text = _big_program(400)
    start = time.perf_counter()
    m = parse(text, "big.fuse")
    elapsed = time.perf_counter() - start
    print(f"\nparsed 400 equations ({len(text)} characters) in {elapsed * 1000:.1f} ms")
    assert len(m.statements) == 400
    assert all(isinstance(s, A.Equation) for s in m.statements)


def test_operator_limit_is_per_expression_and_the_recursion_limit_comes_back() -> None:
    import sys

    from fuse_mlir.frontend.parser import MAX_OPERATORS, recursion_room

    chain = " + ".join(["X[i]"] * (MAX_OPERATORS + 1))
    before = sys.getrecursionlimit()
    with recursion_room():
        module = parse(f"A[i] = {chain}\nB[i] = {chain}\n")  # two expressions, each at the limit
        assert sys.getrecursionlimit() >= 8 * MAX_OPERATORS
    assert sys.getrecursionlimit() == before
    assert len(module.statements) == 2
