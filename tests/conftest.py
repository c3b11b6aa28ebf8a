"""Suite-wide fixtures: the persistent compile cache goes to a temporary folder, never the user's home cache.

``python -m pytest --check-bounds`` (or ``FUSE_CHECK_BOUNDS=1 python -m pytest``) runs the whole suite with
checked native kernels: every load and store of llvm and numba code tests its position (docs/runtime.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


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
    """Point ``FUSE_CACHE_DIR`` (read on every compile, inherited by subprocesses) at a session temp folder."""
    old = os.environ.get("FUSE_CACHE_DIR")
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


def _needs_cxx(item: pytest.Item) -> bool:
    return "torch_compile" in item.name


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow tests (see SLOW_FILES) and skip torch.compile tests on a machine without g++."""
    import shutil

    slow = pytest.mark.slow
    no_cxx = pytest.mark.skip(reason="torch.compile needs a C++ compiler (g++) on PATH; install g++ to run it")
    has_cxx = shutil.which("g++") is not None or shutil.which(os.environ.get("CXX", "g++")) is not None
    for item in items:
        if item.path.name in SLOW_FILES or any(w in item.nodeid for w in SLOW_WORDS):
            item.add_marker(slow)
        if _needs_cxx(item) and not has_cxx:
            item.add_marker(no_cxx)
