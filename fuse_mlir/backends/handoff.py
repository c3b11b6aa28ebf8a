"""Factories for the hand-off backends (torch, jax, numba) and ``auto``'s choice among all backends.

Each factory imports its framework only when asked for, so fuse_mlir works
without them; a missing framework is a :class:`FuseError` that says what to
install. ``auto`` picks ``llvm`` for plain CPU runs and hands off to torch or
jax when the options ask for something only they have (a CUDA device, a
device mesh, sharding, donation, ``torch.compile``); see docs/backends.md.
"""

from __future__ import annotations

import importlib
from typing import Any

from fuse_mlir.diagnostics import FuseError

_EXTRA = {"torch": "torch==2.13.0", "jax": "jax", "numba": "numba"}


def _require(framework: str) -> None:
    try:
        importlib.import_module(framework)
    except ImportError as e:
        raise FuseError(f"the {framework} backend needs {framework} (pip install '{_EXTRA[framework]}'): {e}") from None


def _check_options(backend: str, options: dict[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise FuseError(
            f"the {backend} backend has no option{'s' * (len(unknown) > 1)} {', '.join(unknown)} "
            f"(its options: {', '.join(allowed)})"
        )


# Every backend also takes opt_level (torch and jax run their target's pipeline, torch-O2 / jax-O2 ..., on the
# tensor_eq module before walking it; their frameworks fuse on their own), donate (jax donates
# those inputs' device buffers; torch and numba work on copies of the inputs, so there is nothing to reuse) and
# check_bounds (numba builds checked; torch and jax index through their own checked operations).
COMMON_OPTIONS = ("opt_level", "donate", "check_bounds")
TORCH_OPTIONS = ("mode", "device", "return_type", *COMMON_OPTIONS)
JAX_OPTIONS = ("device", "mesh", "in_shardings", "shard", "return_type", *COMMON_OPTIONS)
NUMBA_OPTIONS = ("parallel", "return_type", *COMMON_OPTIONS)


def _common(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` without the common ones (``opt_level`` is validated here)."""
    from fuse_mlir.targets import normalise_opt_level

    normalise_opt_level(options.get("opt_level", "O2"))
    return {k: v for k, v in options.items() if k not in COMMON_OPTIONS}


def torch_executor(**options: Any) -> Any:
    _check_options("torch", options, TORCH_OPTIONS)
    _require("torch")
    from fuse_mlir.backends.torch import TorchExecutor

    return TorchExecutor(opt_level=options.get("opt_level", "O2"), **_common(options))


def jax_executor(**options: Any) -> Any:
    _check_options("jax", options, JAX_OPTIONS)
    _require("jax")
    from fuse_mlir.backends.jax import JaxExecutor

    return JaxExecutor(donate=options.get("donate", ()), opt_level=options.get("opt_level", "O2"), **_common(options))


def numba_executor(**options: Any) -> Any:
    _check_options("numba", options, NUMBA_OPTIONS)
    _require("numba")
    from fuse_mlir.backends.numba import NumbaExecutor

    return NumbaExecutor(
        opt_level=options.get("opt_level", "O2"), check_bounds=options.get("check_bounds"), **_common(options)
    )


def _is_gpu_device(device: Any) -> bool:
    text = str(getattr(device, "platform", None) or getattr(device, "type", None) or device).lower()
    return text.startswith(("cuda", "gpu", "tpu", "rocm", "mps"))


def choose_backend(options: dict[str, Any]) -> str:
    """The backend ``auto`` runs with these options (see docs/backends.md for the rules)."""
    if any(options.get(k) for k in ("mesh", "in_shardings", "shard", "donate")):
        return "jax"
    if options.get("mode") in ("eager", "compile"):
        return "torch"
    device = options.get("device")
    if device is None or str(device).lower() == "cpu":
        return "llvm"
    if type(device).__module__.startswith("jax"):
        return "jax"
    if not _is_gpu_device(device):
        raise FuseError(f"backend 'auto' does not know device {device!r} (use 'cpu', 'cuda' or a jax device)")
    try:
        import torch

        if str(device).startswith("cuda") and torch.cuda.is_available():
            return "torch"
    except ImportError:
        pass
    try:
        import jax

        platform = str(getattr(device, "platform", device)).split(":")[0].replace("cuda", "gpu")
        if jax.devices(platform):
            return "jax"
    except (ImportError, RuntimeError):
        pass
    raise FuseError(f"backend 'auto': no installed framework (torch, jax) can use device {device!r}")
