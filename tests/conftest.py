"""Suite-wide fixtures: the persistent compile cache goes to a temporary folder, never the user's home cache.

``python -m pytest --check-bounds`` is the checked pass: native kernels built checked (every load and store of
llvm and numba code tests its position, docs/runtime.md), over the tests that build and run native code. The rest
(cases on the reference interpreter, torch or jax, and files that only parse, print or lower IR, run FileCheck-style
checks or inspect packaging) run the same with or without it, so it leaves them out (:func:`checked_pass_leaves_out`;
``python -m tests.native_record`` verifies the choice against a recording of which tests ran native code).
``FUSE_CHECK_BOUNDS=1 python -m pytest`` runs the whole suite checked. Cases on a hand-off backend whose framework
is not installed are skipped, naming the package (tests/frameworks.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator

import pytest

from tests.frameworks import missing_framework


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--check-bounds",
        action="store_true",
        help="build every native kernel checked (FUSE_CHECK_BOUNDS=1): out-of-range accesses become errors",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--check-bounds"):
        os.environ["FUSE_CHECK_BOUNDS"] = "1"


def pytest_report_header(config: pytest.Config) -> str | None:
    value = os.environ.get("FUSE_CHECK_BOUNDS", "0").strip().lower()
    return (
        "fuse_mlir: checked native kernels (FUSE_CHECK_BOUNDS)"
        if value not in ("", "0", "false", "no", "off")
        else None
    )


@pytest.fixture(autouse=True, scope="session")
def _fuse_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Point ``FUSE_CACHE_DIR`` (read on every compile, inherited by subprocesses) at a session temp folder.

    Under pytest-xdist every worker gets the same folder (the session's, above the workers' own), so a kernel
    one worker compiled is loaded, not compiled again, by the others: the disk cache writes each entry
    atomically and its keys are the same in every process (tests that count compiles use folders of their own).
    """
    old = os.environ.get("FUSE_CACHE_DIR")
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = base.parent / "fuse_cache"
        shared.mkdir(exist_ok=True)
        os.environ["FUSE_CACHE_DIR"] = str(shared)
    else:
        os.environ["FUSE_CACHE_DIR"] = str(tmp_path_factory.mktemp("fuse_cache"))
    yield
    if old is None:
        os.environ.pop("FUSE_CACHE_DIR", None)
    else:
        os.environ["FUSE_CACHE_DIR"] = old


# The quick subset, `python -m pytest -m "not slow"`, leaves out what takes minutes rather than seconds: the
# hypothesis fuzzers and random-program corpora, big workloads, the lit suite (a subprocess per RUN line), the
# examples x pipelines grid, tests that start fresh interpreters, the hand-off frameworks (numba, jax, torch and
# torch.compile compile each program for seconds) and the docs examples re-run natively. CI runs everything.
SLOW_FILES = frozenset(
    {
        "test_properties.py",
        "test_workloads.py",
        "test_threads.py",
        "test_compile_cache.py",
        "test_lit.py",
        "test_handoff_backends.py",
    }
)
SLOW_WORDS = (
    "random_programs",
    "random_recursive",
    "fuzz",
    "across_processes",
    "every_process",
    "in_a_fresh",
    "numba",
    "torch_compile",
    "test_opt_pipelines.py::test_examples",
    "test_opt_pipelines.py::test_workloads",
    "installed_plugin",
    "test_command_line_json_matches_the_library",
    "test_example_runs_from_the_command_line",
    "semi_naive_equals_naive",
    "test_fuse_example_llvm",
    "test_slice_len_matches_python",
)


# The checked pass's selection. A case parametrised by a native backend (llvm, numba, or auto, which may pick
# either) stays; one parametrised only by backends that run no native code of ours is left out; so is every test
# of a file that builds no kernel (measured with tests/native_record.py: these parse, print, lower or interpret
# IR, or check packaging and import layers). A file not listed stays, so a new test is checked until shown not to
# need it.
NATIVE_BACKENDS = frozenset({"llvm", "numba", "auto"})
NON_NATIVE_BACKENDS = frozenset({"reference", "interp", "torch", "torch_compile", "jax"})
UNCHECKED_FILES = frozenset(
    {
        "test_contract_order.py",
        "test_frozen.py",
        "test_interp_registry.py",
        "test_io.py",
        "test_ir.py",
        "test_layers.py",
        "test_lower_ew_to_loop.py",
        "test_lower_te_to_ew.py",
        "test_packaging.py",
        "test_parser.py",
        "test_tensor_eq.py",
        "test_typed_attrs.py",
        "test_universe.py",
    }
)


def checked_pass_leaves_out(nodeid: str, params: Iterable[object]) -> bool:
    """Whether the checked pass (``--check-bounds``) leaves out the case ``nodeid`` with parameter values
    ``params``: it runs no native code, so building checked cannot change its outcome."""
    names = {p for p in params if isinstance(p, str)}
    if names & NATIVE_BACKENDS:
        return False
    if names & NON_NATIVE_BACKENDS:
        return True
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1] in UNCHECKED_FILES


def _needs_cxx(item: pytest.Item) -> bool:
    return "torch_compile" in item.name


def _backend_params(item: pytest.Item) -> list[str]:
    """The string values of a case's parameters (backend names among them), from its callspec."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return [v for v in params.values() if isinstance(v, str)]


def _leave_out(config: pytest.Config, items: list[pytest.Item], out: Callable[[pytest.Item], bool]) -> None:
    """Deselect (and report as deselected) the items ``out`` selects."""
    kept = [item for item in items if not out(item)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if out(item)])
        items[:] = kept


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow tests (see SLOW_FILES); skip torch.compile tests on a machine without g++, and every case
    parametrised by a hand-off backend whose framework is not installed (tests/frameworks.py)."""
    import shutil

    slow = pytest.mark.slow
    no_cxx = pytest.mark.skip(reason="torch.compile needs a C++ compiler (g++) on PATH; install g++ to run it")
    has_cxx = shutil.which("g++") is not None or shutil.which(os.environ.get("CXX", "g++")) is not None
    for item in items:
        if item.path.name in SLOW_FILES or any(w in item.nodeid for w in SLOW_WORDS):
            item.add_marker(slow)
        if _needs_cxx(item) and not has_cxx:
            item.add_marker(no_cxx)
        missing = next(filter(None, map(missing_framework, _backend_params(item))), None)
        if missing is not None:
            item.add_marker(pytest.mark.skip(reason=missing))
    if config.getoption("--check-bounds"):
        _leave_out(config, items, lambda item: checked_pass_leaves_out(item.nodeid, _backend_params(item)))
