"""The torch backend: the tensor_eq walker on torch tensors, run eagerly or through ``torch.compile``.

``compile(backend="torch", mode="eager"|"compile", device=None, return_type="numpy"|"native")``.
``device`` defaults to ``"cuda"`` when torch sees a GPU and ``"cpu"`` otherwise.
Inputs are copied to the device on every call, so new values with the same
shapes give new results; ``torch.compile`` recompiles only when shapes change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from fuse_mlir.backends.array_walk import ArrayExecutor, ArrayOps, TeWalker, WalkOutput, check_return_type
from fuse_mlir.diagnostics import FuseError

MODES = ("eager", "compile")

_UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "abs": torch.abs,
    "tanh": torch.tanh,
    "sin": torch.sin,
    "cos": torch.cos,
    "isfinite": torch.isfinite,
}


def torch_dtype(dtype: np.dtype) -> torch.dtype:
    """The torch dtype of a NumPy dtype (bool included)."""
    return torch.from_numpy(np.empty(0, dtype=dtype)).dtype


_TO_NUMPY = {
    torch.bool: np.dtype(np.bool_),
    torch.int8: np.dtype(np.int8),
    torch.int16: np.dtype(np.int16),
    torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64),
    torch.uint8: np.dtype(np.uint8),
    torch.uint16: np.dtype(np.uint16),
    torch.uint32: np.dtype(np.uint32),
    torch.uint64: np.dtype(np.uint64),
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
}


class TorchOps(ArrayOps):
    """The walker's kernel table on torch tensors of one device."""

    name = "torch"

    def __init__(self, device: torch.device):
        self.device = device

    def asarray(self, x: np.ndarray) -> torch.Tensor:
        a = np.array(x, order="C", copy=None)
        if not a.flags.writeable:  # torch cannot share a read-only NumPy buffer
            a = a.copy()
        return torch.as_tensor(a, device=self.device)

    def to_numpy(self, x: torch.Tensor) -> np.ndarray:
        return x.detach().cpu().numpy().copy()

    def astype(self, x: torch.Tensor, dtype: np.dtype) -> torch.Tensor:
        return x.to(torch_dtype(dtype))

    def numpy_dtype(self, x: torch.Tensor) -> np.dtype:
        return _TO_NUMPY[x.dtype]

    def argmax_bool(self, flags: torch.Tensor) -> torch.Tensor:
        return torch.argmax(flags.to(torch.int8))

    def zeros(self, shape: Sequence[int], dtype: np.dtype) -> torch.Tensor:
        return torch.zeros(tuple(shape), dtype=torch_dtype(dtype), device=self.device)

    def arange(self, n: int) -> torch.Tensor:
        return torch.arange(n, dtype=torch.int64, device=self.device)

    def transpose(self, x: torch.Tensor, perm: Sequence[int]) -> torch.Tensor:
        return x.permute(*perm)

    def reshape(self, x: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
        return x.reshape(tuple(shape))

    def broadcast_to(self, x: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
        return torch.broadcast_to(x, tuple(shape))

    def einsum(self, spec: str, *xs: torch.Tensor) -> torch.Tensor:
        return torch.einsum(spec, *xs)

    def where(self, c: torch.Tensor, a: Any, b: Any) -> torch.Tensor:
        return torch.where(c, a, b)

    def reduce(self, x: torch.Tensor, axes: tuple[int, ...], kind: str, keepdims: bool = False) -> torch.Tensor:
        if not axes:
            return x
        dims = list(axes)
        if kind == "sum":
            return torch.sum(x, dim=dims, keepdim=keepdims)
        if kind == "mean":
            return torch.mean(x, dim=dims, keepdim=keepdims)
        if kind == "max":
            return torch.amax(x, dim=dims, keepdim=keepdims)
        if kind == "min":
            return torch.amin(x, dim=dims, keepdim=keepdims)
        if kind == "any":
            return torch.any(x, dim=tuple(dims), keepdim=keepdims)
        # prod: one axis at a time, from the last (torch.prod takes one dim)
        for d in sorted(dims, reverse=True):
            x = torch.prod(x, dim=d, keepdim=keepdims)
        return x

    def unary(self, fn: str, x: torch.Tensor) -> torch.Tensor:
        return _UNARY[fn](x)

    def maximum(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        r = torch.maximum(a, b)
        if not r.dtype.is_floating_point:
            return r
        # torch returns its first argument for two zeros; -0 < +0 (IEEE 754-2019): of two zeros, +0 if either
        # is, which is their sum
        return torch.where((a == 0) & (b == 0), a + b, r)

    def minimum(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        r = torch.minimum(a, b)
        if not r.dtype.is_floating_point:
            return r
        # of two zeros, -0 if either is: -((-a) + (-b))
        return torch.where((a == 0) & (b == 0), -(-a - b), r)

    def power(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if not a.dtype.is_floating_point:
            b = torch.clamp(b, min=0)  # a negative exponent is reported by the walker's deferred check
        return torch.pow(a, b)

    def clip(self, x: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
        return torch.clamp(x, lo, hi)

    def concatenate(self, xs: Sequence[torch.Tensor], axis: int) -> torch.Tensor:
        return torch.cat(list(xs), dim=axis)

    def stack(self, xs: Sequence[torch.Tensor], axis: int) -> torch.Tensor:
        return torch.stack(list(xs), dim=axis)

    def set_at(self, x: torch.Tensor, index: tuple[Any, ...], value: torch.Tensor) -> torch.Tensor:
        out = x.clone()
        out[index] = value
        return out

    def add_at(self, x: torch.Tensor, index: tuple[Any, ...], value: torch.Tensor) -> torch.Tensor:
        return x.index_put(index, value, accumulate=True)

    def argsort_stable(self, x: torch.Tensor, axis: int) -> torch.Tensor:
        return torch.argsort(x, dim=axis, stable=True)

    def flip(self, x: torch.Tensor, axis: int) -> torch.Tensor:
        return torch.flip(x, dims=[axis])

    def take_along_axis(self, x: torch.Tensor, idx: torch.Tensor, axis: int) -> torch.Tensor:
        return torch.take_along_dim(x, idx, dim=axis)

    def svd_u(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.svd(x, full_matrices=False)[0]

    def matmul(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def default_device() -> str:
    """``"cuda"`` when torch sees a GPU, else ``"cpu"``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


class TorchExecutor(ArrayExecutor):
    """Runs lowered programs through torch: ``mode`` eager or compile, on ``device``."""

    def __init__(
        self, mode: str = "eager", device: str | None = None, return_type: str = "numpy", opt_level: str | int = "O2"
    ):
        super().__init__(target="torch", opt_level=opt_level)
        if mode not in MODES:
            raise FuseError(f"the torch backend's mode must be one of {', '.join(MODES)}, not {mode!r}")
        try:
            dev = torch.device(device or default_device())
        except RuntimeError as e:
            raise FuseError(f"the torch backend cannot use device {device!r}: {e}") from None
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise FuseError("the torch backend was asked for device 'cuda', but torch sees no CUDA device")
        self.mode = mode
        self.device = dev
        self.return_type = check_return_type(return_type)
        self.ops = TorchOps(dev)

    def build(self, walker: TeWalker) -> Callable[..., WalkOutput]:
        def run(inputs: dict[str, torch.Tensor], sources: dict[str, torch.Tensor]) -> WalkOutput:
            with torch.no_grad():
                return walker(inputs, sources)

        if self.mode == "eager":
            return run
        compiled: dict[tuple, Callable[..., WalkOutput]] = {}

        def call(inputs: dict[str, torch.Tensor], sources: dict[str, torch.Tensor]) -> WalkOutput:
            # One graph per shape signature: make_fx runs the walker's Python (extent checks included) once
            # and records only torch operations; torch.compile then owns a graph module of its own, so no
            # two programs share a dynamo cache entry.
            key = tuple((k, tuple(v.shape), v.dtype) for k, v in sorted(inputs.items()))
            fn = compiled.get(key)
            if fn is None:
                graph = make_fx(run)(inputs, sources)
                fn = compiled[key] = torch.compile(graph, dynamic=False)
            return fn(inputs, sources)

        return call
