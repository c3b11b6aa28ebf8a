"""The pass library API: registry, options, pipeline text, hooks and instruments, analysis caching,
named pipelines, levels, plug-ins, the graph view, the generated docs and the example script.

Passes defined here register into the global registry; the ``registry`` fixture puts the
registry back as it was after each test.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import ClassVar

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass, PassPipeline
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from fuse_mlir.cli import fuse_opt
from fuse_mlir.diagnostics import Diagnostic, FuseError, diagnostic_handler
from fuse_mlir.dialects.tensor_eq import MapOp
from fuse_mlir.ir import parse_mlir, print_module
from fuse_mlir.passes import (
    AnalysisManager,
    FusePass,
    PassFailure,
    PatternPass,
    Pipeline,
    PrintIR,
    Timing,
    VerifyEach,
    all_passes,
    get_pass,
    load_plugins,
    option,
    register_pass,
    register_pipeline,
)
from fuse_mlir.passes import docs as pass_docs
from fuse_mlir.passes import registry as reg
from fuse_mlir.passes.graph import to_dot
from fuse_mlir.passes.levels import DOT, lowering_spec, module_level, register_level
from fuse_mlir.passes.spec import parse_spec

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_DIR = ROOT / "tests" / "plugins" / "fuse_mlir_demo_plugin"

MODULE = """\
builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %a = te.map "neg" %x {operand_indices = [["i"]], indices = ["i"]} : (tensor<?xf64>) -> tensor<?xf64>
  %b = te.map "neg" %x {operand_indices = [["i"]], indices = ["i"]} : (tensor<?xf64>) -> tensor<?xf64>
  %unused = te.map "relu" %x {operand_indices = [["i"]], indices = ["i"]} : (tensor<?xf64>) -> tensor<?xf64>
  te.export %a, %b {names = ["A", "B"]} : tensor<?xf64>, tensor<?xf64>
}
"""


@pytest.fixture(autouse=True)
def registry() -> Iterator[None]:
    """Load the built-in passes, then restore the registry after the test."""
    all_passes()
    passes, pipelines = dict(reg._PASSES), dict(reg._PIPELINES)
    plugins_loaded = reg._plugins_loaded
    yield
    reg._PASSES.clear()
    reg._PASSES.update(passes)
    reg._PIPELINES.clear()
    reg._PIPELINES.update(pipelines)
    reg._plugins_loaded = plugins_loaded


def module() -> ModuleOp:
    return parse_mlir(MODULE, "m.mlir")


def maps(mod: ModuleOp) -> list[str]:
    return [op.fn.data for op in mod.walk() if isinstance(op, MapOp)]


# --- passes used by the tests ---------------------------------------------------------------


class NegToRelu(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MapOp, rewriter: PatternRewriter) -> None:
        if op.fn.data == "neg":
            op.attributes["fn"] = StringAttr("relu")
            rewriter.notify_op_modified(op)


def define_pattern_pass() -> type[PatternPass]:
    @register_pass
    @dataclass(frozen=True)
    class NegToReluPass(PatternPass):
        """Turn every te.map "neg" into "relu" (a test rewrite)."""

        name = "test-neg-to-relu"
        level: ClassVar[str] = "tensor_eq"
        limit: int = option(3, help="an unused option")

        def patterns(self) -> Sequence[RewritePattern]:
            return [NegToRelu()]

    return NegToReluPass


def count_maps(mod: ModuleOp) -> int:
    return len(maps(mod))


def define_analysis_pass(changes: bool, preserve: bool = False) -> type[FusePass]:
    @register_pass
    @dataclass(frozen=True)
    class UsesAnalysis(FusePass):
        """Read the map-count analysis twice (a test pass)."""

        name = f"test-analysis-{changes}-{preserve}"

        def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
            assert analyses.get(count_maps) == analyses.get(count_maps)
            if preserve:
                analyses.preserve(count_maps)
            return changes

    return UsesAnalysis


# --- registry ---------------------------------------------------------------------------------


def test_builtin_generic_passes_are_registered() -> None:
    names = [p.name for p in all_passes()]
    assert {"canonicalize", "cse", "dce"} <= set(names)
    assert names == sorted(names)
    cse = get_pass("cse")
    assert cse.origin == "fuse_mlir" and cse.level == "any"
    assert cse.summary.startswith("Common subexpression elimination")
    assert cse.example is not None and cse.options == []


def test_register_pattern_pass_with_options() -> None:
    cls = define_pattern_pass()
    info = get_pass("test-neg-to-relu")
    assert info.cls is cls and info.level == "tensor_eq"
    (opt,) = info.options
    assert (opt.name, opt.field, opt.type, opt.default, opt.required) == ("limit", "limit", "int", 3, False)
    assert opt.help == "an unused option" and opt.default_text() == "3"
    mod = module()
    Pipeline.parse("test-neg-to-relu{limit=5}").run(mod)
    assert maps(mod) == ["relu", "relu", "relu"]


def test_pattern_pass_leaves_dead_code_to_dce() -> None:
    define_pattern_pass()
    mod = module()
    Pipeline.parse("test-neg-to-relu").run(mod)
    assert len(maps(mod)) == 3  # the unused relu survives: the greedy driver's DCE is off
    Pipeline.parse("dce").run(mod)
    assert len(maps(mod)) == 2


def test_duplicate_pass_name_is_an_error() -> None:
    define_pattern_pass()

    with pytest.raises(ValueError, match="already registered"):

        @register_pass
        @dataclass(frozen=True)
        class Other(FusePass):
            """Another pass with a taken name."""

            name = "test-neg-to-relu"

            def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
                return False


def test_registering_the_same_class_again_is_fine() -> None:
    cls = define_pattern_pass()
    assert register_pass(cls) is cls


def test_pass_needs_a_docstring_and_a_name() -> None:
    with pytest.raises(ValueError, match="needs a docstring"):

        @register_pass
        @dataclass(frozen=True)
        class NoDoc(FusePass):
            name = "test-no-doc"

            def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
                return False

    with pytest.raises(ValueError, match="needs a `name`"):

        @register_pass
        @dataclass(frozen=True)
        class NoName(FusePass):
            """No name."""

            def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
                return False

    with pytest.raises(TypeError, match="ModulePass subclass"):
        register_pass(int)  # type: ignore[type-var]


def test_register_pass_makes_a_dataclass() -> None:
    @register_pass
    class Plain(FusePass):
        """Options from annotations, without @dataclass."""

        name = "test-plain"
        factor: float = 2.0

        def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
            return False

    assert [o.field for o in get_pass("test-plain").options] == ["factor"]
    assert Pipeline.parse("test-plain{factor=3.5}").passes[0].factor == 3.5  # type: ignore[attr-defined]


def test_unknown_pass_suggests_a_name() -> None:
    with pytest.raises(KeyError, match="did you mean 'canonicalize'"):
        get_pass("canonicalise")


def test_plain_xdsl_module_pass_registers_and_runs() -> None:
    @register_pass
    @dataclass(frozen=True)
    class Tag(ModulePass):
        """Set a module attribute (a plain xDSL pass)."""

        name = "test-tag"
        value: int = 1

        def apply(self, ctx: Context, op: ModuleOp) -> None:
            op.attributes["tag"] = IntegerAttr(self.value, i64)

    mod = module()
    Pipeline.parse("test-tag{value=7}").run(mod)
    assert mod.attributes["tag"] == IntegerAttr(7, i64)
    assert get_pass("test-tag").level == "any"


def test_fuse_pass_runs_in_xdsl_pass_pipeline() -> None:
    cls = define_pattern_pass()
    mod = module()
    PassPipeline((cls(),)).apply(Context(), mod)
    assert "neg" not in maps(mod)


# --- pipeline text ------------------------------------------------------------------------


def test_spec_syntax() -> None:
    els = parse_spec('a, b{x=1 y=2.5 z="s p" flag w=1,2,3 t=true}\nc # comment\n\n@f.pipeline')
    assert [e.name for e in els] == ["a", "b", "c", "f.pipeline"]
    assert els[1].params == {"x": (1,), "y": (2.5,), "z": ("s p",), "flag": (), "w": (1, 2, 3), "t": (True,)}
    assert els[3].include and not els[2].include
    assert (els[2].loc.line, els[2].loc.col) == (2, 1)
    assert [e.name for e in parse_spec("builtin.module(cse,dce)")] == ["cse", "dce"]
    assert parse_spec("") == [] and parse_spec("  # nothing\n") == []


@pytest.mark.parametrize(
    ("spec", "message", "col"),
    [
        ("cse,", "expected a pass name after ','", 5),
        ("cse{", "missing '}' after the options of 'cse'", 5),
        ("cse dce", "expected ',' or a new line between passes", 5),
        ("cse{a=1 a=2}", "option 'a' is given twice", 9),
        ('cse{a="x}', "unterminated string", 7),
        ("cse{=1}", "expected an option name", 5),
        ("@", "expected a file name after '@'", 2),
    ],
)
def test_spec_syntax_errors_are_located(spec: str, message: str, col: int) -> None:
    with pytest.raises(FuseError) as info:
        parse_spec(spec)
    assert info.value.message.startswith(message)
    assert info.value.loc is not None and (info.value.loc.file, info.value.loc.col) == ("<pass-pipeline>", col)
    assert "^" in str(info.value)


def test_pipeline_errors_are_located() -> None:
    define_pattern_pass()
    with pytest.raises(FuseError, match="unknown pass 'nope'") as info:
        Pipeline.parse("cse,nope")
    assert info.value.loc is not None and info.value.loc.col == 5
    with pytest.raises(FuseError, match="has no option 'limt' \\(its options: limit\\)"):
        Pipeline.parse("test-neg-to-relu{limt=1}")
    with pytest.raises(FuseError, match="option 'limit' of pass 'test-neg-to-relu' expects int, got x"):
        Pipeline.parse("test-neg-to-relu{limit=x}")


def test_pipeline_spec_round_trips() -> None:
    define_pattern_pass()
    pipeline = Pipeline.parse("cse, test-neg-to-relu{limit=5}\ndce")
    assert pipeline.spec() == "cse,test-neg-to-relu{limit=5},dce"
    assert Pipeline.parse(pipeline.spec()).spec() == pipeline.spec()
    assert len(pipeline) == 3 and [p.name for p in pipeline] == ["cse", "test-neg-to-relu", "dce"]
    assert (pipeline + Pipeline.parse("cse")).spec() == "cse,test-neg-to-relu{limit=5},dce,cse"


def test_pipeline_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "main.pipeline").write_text("# comment\ncanonicalize  # tidy\ncse, @sub/inner.pipeline\n")
    (tmp_path / "sub" / "inner.pipeline").write_text("dce\n")
    assert Pipeline.parse("@main.pipeline").spec() == "canonicalize,cse,dce"
    assert Pipeline.parse("cse,@main.pipeline").spec() == "cse,canonicalize,cse,dce"
    assert Pipeline.from_file(tmp_path / "main.pipeline").spec() == "canonicalize,cse,dce"
    (tmp_path / "loop.pipeline").write_text("cse\n@loop.pipeline\n")
    with pytest.raises(FuseError, match="includes itself"):
        Pipeline.parse("@loop.pipeline")
    with pytest.raises(FuseError, match="cannot read pipeline file 'missing.pipeline'"):
        Pipeline.parse("@missing.pipeline")
    (tmp_path / "bad.pipeline").write_text("cse\nnope\n")
    with pytest.raises(FuseError) as info:
        Pipeline.parse("@bad.pipeline")
    assert str(info.value).startswith("bad.pipeline:2:1: error: unknown pass 'nope'")


# --- named pipelines ----------------------------------------------------------------------


def test_named_pipelines() -> None:
    assert Pipeline.named("te-O0").spec() == "canonicalize,cse"
    assert Pipeline.named("te-O2").spec() == "canonicalize,cse,dce,dedup"
    assert Pipeline.parse("te-O2,cse").spec() == "canonicalize,cse,dce,dedup,cse"
    # O0/O2 mean what `fuse run -O0/-O2` and compile(opt_level=...) run: the default (llvm) backend's pipeline
    assert Pipeline.named("O2").spec() == Pipeline.named("llvm-O2").spec()
    assert Pipeline.named("O0").spec() == Pipeline.named("llvm-O0").spec()
    assert Pipeline.named("llvm-O0").spec() == "contract-order,lower-te-to-ew,expand-math,lower-ew-to-loop"
    assert "inplace" in Pipeline.named("llvm-O2").spec() and "fuse" not in Pipeline.named("torch-O2").spec()
    register_pipeline("test-tidy", "te-O0,dce", "a test pipeline")
    assert Pipeline.parse("test-tidy").spec() == "canonicalize,cse,dce"
    with pytest.raises(ValueError, match="already registered"):
        register_pipeline("test-tidy", "cse", "again")
    register_pipeline("test-tidy", "cse", "redefined", replace=True)
    assert Pipeline.named("test-tidy").spec() == "cse"
    with pytest.raises(ValueError, match="already the name of a pass"):
        register_pipeline("cse", "dce", "clash")
    with pytest.raises(FuseError, match="unknown pipeline"):
        Pipeline.named("O7")
    register_pipeline("test-self", "cse,test-self", "a cycle")
    with pytest.raises(FuseError, match="includes itself"):
        Pipeline.parse("test-self")


# --- running, hooks and instruments ----------------------------------------------------------


def test_run_returns_the_module_transformed_in_place() -> None:
    mod = module()
    assert Pipeline.parse("cse").run(mod) is mod
    assert maps(mod) == ["neg"]  # cse merged the two negations and dropped the unused relu


def test_hooks_order() -> None:
    calls: list[str] = []
    pipeline = Pipeline.parse("cse,dce")
    pipeline.before(lambda p, m: calls.append(f"before1 {p.name}"))
    pipeline.before(lambda p, m: calls.append(f"before2 {p.name}"))

    @pipeline.after
    def after1(p: ModulePass, m: ModuleOp) -> None:
        calls.append(f"after1 {p.name}")

    pipeline.after(lambda p, m: calls.append(f"after2 {p.name}"))
    pipeline.run(module())
    assert calls == [
        "before1 cse",
        "before2 cse",
        "after2 cse",
        "after1 cse",
        "before1 dce",
        "before2 dce",
        "after2 dce",
        "after1 dce",
    ]


def test_print_ir_instrument() -> None:
    out = io.StringIO()
    pipeline = Pipeline.parse("canonicalize,cse,dce")
    pipeline.instrument(PrintIR(before={"cse"}, after={"dce"}, stream=out))
    pipeline.run(module())
    text = out.getvalue()
    assert text.count("IR Dump") == 2
    assert text.index("// -----// IR Dump Before cse //----- //") < text.index("// -----// IR Dump After dce")
    every = io.StringIO()
    pipeline2 = Pipeline.parse("cse,dce")
    pipeline2.instrument(PrintIR(after_all=True, stream=every, generic=True))
    pipeline2.run(module())
    assert every.getvalue().count('"builtin.module"() ({') == 2


def test_timing_instrument() -> None:
    timing = Timing()
    pipeline = Pipeline.parse("cse,cse")
    pipeline.instrument(timing)
    with timing.measure("parsing"):
        mod = module()
    pipeline.run(mod)
    pipeline.run(mod)  # the same pass instances accumulate into their rows
    labels = [label for label, _ in timing.entries]
    assert labels == ["parsing", "cse", "cse"]
    assert all(secs >= 0 for _, secs in timing.entries)
    report = timing.report()
    assert "Total Execution Time:" in report and report.rstrip().endswith("Total")


def test_verify_each_names_the_pass_that_broke_the_module() -> None:
    @register_pass
    @dataclass(frozen=True)
    class Break(FusePass):
        """Add an index name to the first input (invalid)."""

        name = "test-break"

        def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
            for op in module.walk():
                if op.name == "te.input":
                    op.attributes["indices"] = ArrayAttr([StringAttr("i"), StringAttr("j")])
            return True

    pipeline = Pipeline.parse("cse,test-break,dce")
    pipeline.instrument(VerifyEach())
    with pytest.raises(FuseError) as info:
        pipeline.run(module())
    err = info.value
    assert err.message.startswith("IR does not verify after pass 'test-break': te.input: result has rank 1")
    assert err.loc is not None and (err.loc.file, err.loc.line) == ("m.mlir", 2)


def test_pass_crash_is_a_pass_failure_and_fuse_errors_pass_through() -> None:
    @register_pass
    @dataclass(frozen=True)
    class Crash(FusePass):
        """Raise."""

        name = "test-crash"
        user_error: bool = False

        def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
            if self.user_error:
                raise FuseError("the program is wrong")
            raise ZeroDivisionError("oops")

    with pytest.raises(PassFailure, match="pass 'test-crash' failed: ZeroDivisionError: oops"):
        Pipeline.parse("test-crash").run(module())
    with pytest.raises(FuseError, match="the program is wrong"):
        Pipeline.parse("test-crash{user-error=true}").run(module())


# --- analyses ---------------------------------------------------------------------------------


def test_analysis_is_cached_until_a_pass_changes_the_module() -> None:
    keep = define_analysis_pass(changes=False)
    change = define_analysis_pass(changes=True)
    mod = module()
    analyses = AnalysisManager(mod)
    Pipeline([keep(), keep(), keep()]).run(mod, analyses=analyses)
    assert (analyses.computed, analyses.hits) == (1, 5)
    analyses = AnalysisManager(mod)
    Pipeline([keep(), change(), keep()]).run(mod, analyses=analyses)
    assert analyses.computed == 2  # recomputed after the pass that changed the module


def test_preserved_analysis_survives_a_change() -> None:
    preserve = define_analysis_pass(changes=True, preserve=True)
    mod = module()
    analyses = AnalysisManager(mod)
    Pipeline([preserve(), preserve()]).run(mod, analyses=analyses)
    assert analyses.computed == 1
    assert analyses.cached(count_maps) == 3


def test_plain_passes_invalidate_analyses() -> None:
    keep = define_analysis_pass(changes=False)
    mod = module()
    analyses = AnalysisManager(mod)
    Pipeline([keep(), *Pipeline.parse("cse"), keep()]).run(mod, analyses=analyses)
    assert analyses.computed == 2


def test_analysis_manager_api() -> None:
    mod = module()
    am = AnalysisManager(mod)
    assert am.cached(count_maps) is None
    assert am.get(count_maps) == 3 and am.cached(count_maps) == 3
    am.invalidate(count_maps)
    assert am.cached(count_maps) is None
    am.get(count_maps)
    am.invalidate()
    assert am.cached(count_maps) is None and am.computed == 2


# --- levels -----------------------------------------------------------------------------------


def test_levels() -> None:
    assert module_level(module()) == "tensor_eq"
    assert lowering_spec("tensor_eq", "tensor_eq") == ""
    with pytest.raises(FuseError, match="unknown level"):
        lowering_spec("tensor_eq", "nowhere")
    with pytest.raises(ValueError, match="reserved"):
        register_level(DOT, "")


# --- plug-ins ---------------------------------------------------------------------------------


def _fake_entry_points(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, entries: dict[str, str]) -> None:
    eps = [metadata.EntryPoint(name, value, reg.PLUGIN_GROUP) for name, value in entries.items()]

    def entry_points(**kwargs: object) -> list[metadata.EntryPoint]:
        assert kwargs == {"group": reg.PLUGIN_GROUP}
        return eps

    monkeypatch.setattr(reg.metadata, "entry_points", entry_points)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_load_plugins_kinds_and_failures(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "plug_mod.py").write_text(
        "from dataclasses import dataclass\n"
        "from fuse_mlir.passes import FusePass, register_pass\n"
        "@register_pass\n@dataclass(frozen=True)\n"
        "class A(FusePass):\n    '''Plug-in pass A.'''\n    name = 'plug-a'\n"
        "    def run(self, ctx, module, analyses): return False\n"
        "@dataclass(frozen=True)\n"
        "class B(FusePass):\n    '''Plug-in pass B.'''\n    name = 'plug-b'\n"
        "    def run(self, ctx, module, analyses): return False\n"
        "def passes(): return [B]\n"
    )
    (tmp_path / "plug_broken.py").write_text("raise RuntimeError('cannot start')\n")
    (tmp_path / "plug_clash.py").write_text(
        "from dataclasses import dataclass\n"
        "from fuse_mlir.passes import FusePass, register_pass\n"
        "@register_pass\n@dataclass(frozen=True)\n"
        "class Cse(FusePass):\n    '''Clashes with cse.'''\n    name = 'cse'\n"
        "    def run(self, ctx, module, analyses): return False\n"
    )
    _fake_entry_points(
        monkeypatch,
        tmp_path,
        {
            "amod": "plug_mod",
            "bfunc": "plug_mod:passes",
            "broken": "plug_broken",
            "clash": "plug_clash",
            "missing": "no_such_module_anywhere",
            "notapass": "plug_mod:__doc__",
        },
    )
    seen: list[Diagnostic] = []
    with diagnostic_handler(seen.append):
        loaded = load_plugins(reload=True)
    assert loaded == ["amod", "bfunc"]
    assert get_pass("plug-a").origin == "plug-in amod"
    assert get_pass("plug-b").origin == "plug-in bfunc"
    assert get_pass("cse").origin == "fuse_mlir"  # the clash did not replace it
    messages = sorted(d.message for d in seen)
    assert [d.severity for d in seen] == ["warning"] * 4
    assert messages[0].startswith("plug-in 'broken' (plug_broken) of group fuse_mlir.passes failed to load")
    assert "RuntimeError: cannot start" in messages[0]
    assert "pass 'cse' is already registered" in messages[1]
    assert "ModuleNotFoundError" in messages[2]
    assert "expected a module, a ModulePass class or a function" in messages[3]


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo plug-in installed by pip (offline, no build isolation) into a private folder."""
    site = tmp_path_factory.mktemp("plugin") / "site"
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
    res = subprocess.run([*cmd, "--target", str(site), str(PLUGIN_DIR)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    return site


def _env(*paths: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*(str(p) for p in paths), str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("FUSE_DEBUG", None)
    return env


def test_installed_plugin_is_seen_by_fuse_opt(plugin_site: Path, tmp_path: Path) -> None:
    (tmp_path / "m.mlir").write_text(MODULE)
    opt = [sys.executable, "-m", "fuse_mlir.cli.fuse_opt"]
    listing = subprocess.run([*opt, "--list-passes"], capture_output=True, text=True, env=_env(plugin_site))
    assert listing.returncode == 0, listing.stderr
    assert "demo-count-ops  [level: any] (from plug-in demo (fuse-mlir-demo-plugin))" in listing.stdout
    res = subprocess.run(
        [*opt, str(tmp_path / "m.mlir"), "-p", "cse,demo-count-ops{attr-name=n}"],
        capture_output=True,
        text=True,
        env=_env(plugin_site),
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("builtin.module attributes {n = 3 : i64} {")
    without = subprocess.run([*opt, "--list-passes"], capture_output=True, text=True, env=_env())
    assert "demo-count-ops" not in without.stdout


# --- graph view -------------------------------------------------------------------------------


def test_to_dot_is_deterministic_and_marks_inplace() -> None:
    text = MODULE.replace(
        'indices = ["i"]} : (tensor<?xf64>) -> tensor<?xf64>\n  %b',
        'indices = ["i"], inplace = 0 : i64} : (tensor<?xf64>) -> tensor<?xf64>\n  %b',
        1,
    )
    mod = parse_mlir(text, "m.mlir")
    dot = to_dot(mod)
    assert dot == to_dot(parse_mlir(text, "m.mlir"))
    assert dot.startswith('digraph "module" {')
    assert 'n1 [label="te.map \\"neg\\""];' in dot
    assert 'n0 -> n1 [color=red, penwidth=2, style=bold, label="inplace", fontcolor=red];' in dot
    assert "n0 -> n2;" in dot and "subgraph" not in dot


# --- CLI details not covered by lit --------------------------------------------------------


def test_fuse_opt_split_chunks() -> None:
    text = "a\n// -----\nb\nc\n// -----\n"
    assert fuse_opt.split_chunks(text, "//") == [(0, "a\n"), (2, "b\nc\n"), (5, "")]
    assert fuse_opt.split_chunks("x\n# -----\ny", "#") == [(0, "x\n"), (2, "y")]


def test_fuse_opt_no_flags_is_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m.mlir").write_text(MODULE)
    assert fuse_opt.main([str(tmp_path / "m.mlir")]) == 0
    out = capsys.readouterr().out
    assert out == print_module(parse_mlir(MODULE, "m.mlir"))


def test_fuse_opt_pass_failure_is_an_internal_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    @register_pass
    @dataclass(frozen=True)
    class Crash(FusePass):
        """Raise."""

        name = "test-crash-cli"

        def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
            raise ZeroDivisionError("oops")

    (tmp_path / "m.mlir").write_text(MODULE)
    assert fuse_opt.main([str(tmp_path / "m.mlir"), "-p", "test-crash-cli"]) == 2
    err = capsys.readouterr().err
    assert "internal error: PassFailure: pass 'test-crash-cli' failed: ZeroDivisionError: oops" in err
    assert "Traceback" not in err


def test_fuse_opt_warning_is_printed_and_verifiable(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from fuse_mlir.diagnostics import warning
    from fuse_mlir.ir import op_loc

    @register_pass
    @dataclass(frozen=True)
    class Warn(FusePass):
        """Warn about every te.map "neg"."""

        name = "test-warn"

        def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
            for op in module.walk():
                if isinstance(op, MapOp) and op.fn.data == "neg":
                    warning("a negation", op_loc(op))
            return False

    path = tmp_path / "m.mlir"
    path.write_text(MODULE)
    assert fuse_opt.main([str(path), "-p", "test-warn"]) == 0
    err = capsys.readouterr().err
    assert f"{path}:3:3: warning: a negation" in err and f"{path}:4:3: warning: a negation" in err
    annotated = MODULE.replace("\n  %b", "  // expected-warning {{negation}}\n  %b", 1)
    path.write_text(annotated)
    assert fuse_opt.main([str(path), "-p", "test-warn", "--verify-diagnostics"]) == 1
    err = capsys.readouterr().err
    assert f"{path}:4:3: error: unexpected warning: a negation" in err
    path.write_text(annotated.replace("\n  %unused", "  // expected-warning {{negation}}\n  %unused", 1))
    assert fuse_opt.main([str(path), "-p", "test-warn", "--verify-diagnostics"]) == 0


# --- docs and the example -------------------------------------------------------------------


def test_passes_md_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "passes.md").read_text(encoding="utf-8")
    assert committed == pass_docs.render(), "docs/passes.md is stale: run python -m fuse_mlir.passes.docs"


def test_fuse_opt_md_documents_every_flag() -> None:
    text = (ROOT / "docs" / "fuse-opt.md").read_text(encoding="utf-8")
    flags = [f for action in fuse_opt.build_parser()._actions for f in action.option_strings]
    missing = [f for f in flags if f not in ("-h", "--help") and f"`{f}" not in text and f" {f}" not in text]
    assert not missing, f"docs/fuse-opt.md does not mention {missing}"


def test_every_builtin_pass_example_runs() -> None:
    for info in all_passes():
        if info.origin == "fuse_mlir" and info.example is not None:
            assert "builtin.module" in pass_docs.example_after(info)


def test_custom_pass_example_script(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "custom_pass.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
    )
    assert res.returncode == 0, res.stderr
    assert "// after fold-add-neg: te.map ops {'add': 2, 'eq': 1, 'relu': 1, 'sub': 1}" in res.stdout
    assert 'te.map "sub"' in res.stdout
    assert res.stdout.rstrip().endswith("// exports unchanged: True (Logits, P, LogZ, LogP, Pred)")


def test_pass_api_at_top_level() -> None:
    import fuse_mlir

    assert fuse_mlir.Pipeline is Pipeline and fuse_mlir.register_pass is register_pass
    with pytest.raises(AttributeError):
        _ = fuse_mlir.no_such_thing  # type: ignore[attr-defined]
