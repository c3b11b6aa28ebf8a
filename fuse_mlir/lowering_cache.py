"""The warm start index: from a program's text, signature and options to its lowering's tables, on disk.

A second process running a program whose kernel is in the disk cache should
not rebuild any IR. This index maps a key over everything a lowering depends
on (the resolved program, imports included, with its file names and
locations; the input dtypes; the lowering options; each file source's dtype
and shape; the versions of fuse_mlir, NumPy and xDSL) to what the runner needs
without the module: the input specs, exports, group order, fixpoint groups
and the sha256 of the tensor_eq text (:meth:`Lowered.te_digest`), which is
what the llvm backend keys its kernels on. A hit gives a :class:`Lowered`
whose module is built only if something asks for it (a cold kernel, an
``explain()``, another backend).

Programs that load coordinate files (``.csv``/``.tsv``) are not indexed: their
lowering pads the loaded arrays, so it depends on the values. Entries live in
the disk cache folder (kind ``lowerings``) in the checksummed format of
:mod:`fuse_mlir.backends.llvm.diskcache`; a damaged entry reads as absent.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from fuse_mlir.diagnostics import Loc
from fuse_mlir.gemm import GemmSite
from fuse_mlir.io.sources import FACT_SUFFIXES
from fuse_mlir.lowered import FixpointGroup, InputSpec, Lowered, LowerOptions

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from fuse_mlir.frontend.resolve import Resolved

__all__ = ["STATS", "load", "store", "warm_key"]

KIND = "lowerings"

STATS: Counter[str] = Counter()
"""``hits`` (lowerings read from the index), ``misses``, ``stored``: for tests and ``--timing``-style reports."""


def _versions() -> str:
    """fuse_mlir's source digest, NumPy's version and xDSL's installation (its ``__init__`` path and mtime: reading
    its metadata costs tens of milliseconds, importing it hundreds)."""
    import importlib.util
    import os

    from fuse_mlir.backends.llvm.diskcache import code_version

    spec = importlib.util.find_spec("xdsl")
    origin = spec.origin if spec is not None and spec.origin else ""
    try:
        stamp = os.stat(origin).st_mtime_ns if origin else 0
    except OSError:
        stamp = 0
    return f"{code_version()}|numpy {np.__version__}|xdsl {origin}@{stamp}"


_BRACKETS: dict[type, str] = {list: "[]", tuple: "()", dict: "{}"}


def structure(obj: object) -> Iterator[str]:
    """``repr(obj)`` in pieces (``"".join`` gives it exactly), produced by an explicit stack.

    ``repr`` of a resolved program recurses through its expressions and copies each subtree's text into its
    parent's: quadratic in the depth, which for a sum of thousands of terms is the number of terms (the key
    of a 4,000-term sum took 1.4 s). This follows the same dataclass fields (those with ``repr=True``),
    lists, tuples and dicts, and writes every other value with its own ``repr`` (as it does a dataclass whose
    ``__repr__`` is its own: the generated one is the only one that wraps another)."""
    stack: list[tuple[bool, object]] = [(False, obj)]  # (is a piece of text, item)
    while stack:
        text, x = stack.pop()
        if text:
            yield cast(str, x)
            continue
        items: list[tuple[bool, object]]
        if is_dataclass(x) and not isinstance(x, type) and hasattr(type(x).__repr__, "__wrapped__"):
            shown = [f for f in fields(x) if f.repr]
            items = [(True, f"{type(x).__qualname__}(")]
            for k, f in enumerate(shown):
                items += [(True, f"{', ' if k else ''}{f.name}="), (False, getattr(x, f.name))]
            items.append((True, ")"))
        elif type(x) in _BRACKETS:
            pairs: list[tuple[object, object]] = (
                list(x.items()) if isinstance(x, dict) else [(None, e) for e in cast(list, x)]
            )
            brackets = _BRACKETS[type(x)]
            items = [(True, brackets[0])]
            for k, (key, value) in enumerate(pairs):
                if k:
                    items.append((True, ", "))
                if isinstance(x, dict):
                    items += [(False, key), (True, ": ")]
                items.append((False, value))
            items.append((True, ",)" if type(x) is tuple and len(pairs) == 1 else brackets[1]))
        else:
            yield repr(x)
            continue
        stack.extend(reversed(items))


def warm_key(
    resolved: Resolved,
    sources: Mapping[str, np.ndarray],
    dtypes: tuple[tuple[str, np.dtype], ...],
    options: LowerOptions | None,
) -> str | None:
    """The index key of one lowering, or None when it cannot be indexed (coordinate-file sources)."""
    if any(Path(s.path).suffix.lower() in FACT_SUFFIXES for s in resolved.sources):
        return None
    h = hashlib.sha256(f"fuse-lowering 1|{_versions()}\n".encode())
    h.update("".join(structure(resolved)).encode())  # repr(resolved), in linear time
    h.update(f"\n{[(n, np.dtype(d).str) for n, d in dtypes]}\n{options!r}\n".encode())
    for name in sorted(sources):
        a = sources[name]
        h.update(f"{name}|{a.dtype.str}|{a.shape}\n".encode())
    return h.hexdigest()


def load(key: str, sources: dict[str, np.ndarray], build: Callable[[], ModuleOp]) -> Lowered | None:
    """The lowering stored under ``key`` (its module made by ``build`` on first use), or None."""
    from fuse_mlir.backends.llvm.diskcache import read_entry

    entry = read_entry(key, KIND)
    if entry is None:
        STATS["misses"] += 1
        return None
    header = entry[0]
    try:
        inputs = [InputSpec(str(n), int(r), np.dtype(d), Loc.decode(loc)) for n, r, d, loc in header["inputs"]]
        fixpoints = [FixpointGroup(str(lb), tuple(names), int(m)) for lb, names, m in header["fixpoints"]]
        lowered = Lowered(
            None,
            inputs,
            [str(x) for x in header["exports"]],
            [str(x) for x in header["group_order"]],
            sources,
            fixpoints,
            digest=str(header["digest"]),
            build=build,
            planned=bool(header.get("planned", True)),  # an index written before the key: plan to be safe
            gemm_sites=_sites(header.get("gemm_sites")),
        )
    except (KeyError, TypeError, ValueError):
        STATS["misses"] += 1
        return None
    STATS["hits"] += 1
    return lowered


def _sites(data: Any) -> list[GemmSite] | None:
    """The header's GEMM sites (None when absent or malformed: the warm run then builds the IR to plan)."""
    if not isinstance(data, list):
        return None
    try:
        return [GemmSite.from_json(d) for d in data]
    except (KeyError, TypeError, ValueError):
        return None


def store(key: str, lowered: Lowered) -> None:
    """Index ``lowered`` under ``key`` (its module's digest is computed here if not yet known)."""
    from fuse_mlir.backends.llvm.diskcache import write_entry
    from fuse_mlir.passes.transforms.contract_plan import ShapePlans, gemm_sites

    header: dict[str, Any] = {
        "inputs": [[s.name, s.rank, s.dtype.str, s.loc.encode()] for s in lowered.inputs],
        "exports": list(lowered.exports),
        "group_order": list(lowered.group_order),
        "fixpoints": [[g.label, list(g.names), g.max_iters] for g in lowered.fixpoints],
        "digest": lowered.te_digest(),
        "planned": ShapePlans.needed(lowered),  # a warm run builds the IR only when its products need planning
    }
    if header["planned"]:
        sites = gemm_sites(lowered)  # GEMM orientation only: a warm run plans it without the IR
        header["gemm_sites"] = None if sites is None else [site.to_json() for site in sites]
    if write_entry(key, header, b"", KIND):
        STATS["stored"] += 1
