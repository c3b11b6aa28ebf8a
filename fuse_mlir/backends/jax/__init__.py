"""The jax backend: the tensor_eq walker on ``jax.numpy``, traced once per shape signature inside ``jax.jit``.

``compile(backend="jax", device=None, donate=(), mesh=None, in_shardings=None, shard=None,
return_type="numpy"|"native")``:

- ``device``: a jax device, or a platform name ("cpu", "gpu", "tpu"; first device of it);
- ``donate``: input names whose device buffers XLA may reuse for results (only those are donated;
  the runner copies every input to the device, so the caller's arrays stay valid);
- ``mesh`` with ``in_shardings`` (input name -> ``PartitionSpec`` or ``NamedSharding``), or
  the named-axis form ``shard={"b": "data"}`` (every input with index ``b`` is split along
  that axis over the mesh axis ``data``; the mesh defaults to all devices on one axis ``data``):
  the program runs sharded across the mesh's devices, XLA inserting the collectives.

float64 needs jax's x64 mode: it is switched on for the traced function only (``jax.enable_x64``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from fuse_mlir.backends.array_walk import ArrayExecutor, ArrayOps, TeWalker, WalkOutput, check_return_type
from fuse_mlir.diagnostics import FuseError, FuseRuntimeError
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.lowered import Lowered, RunResult

_UNARY: dict[str, Callable[[jax.Array], jax.Array]] = {
    "exp": jnp.exp,
    "log": jnp.log,
    "sqrt": jnp.sqrt,
    "abs": jnp.abs,
    "tanh": jnp.tanh,
    "sin": jnp.sin,
    "cos": jnp.cos,
    "isfinite": jnp.isfinite,
}
_REDUCE = {"sum": jnp.sum, "mean": jnp.mean, "max": jnp.max, "min": jnp.min, "prod": jnp.prod, "any": jnp.any}


class JaxOps(ArrayOps):
    """The walker's kernel table on ``jax.numpy`` (NumPy's own names, so most entries delegate)."""

    name = "jax"

    def asarray(self, x: np.ndarray) -> jax.Array:
        return jnp.asarray(x)

    def to_numpy(self, x: jax.Array) -> np.ndarray:
        return np.array(x)

    def astype(self, x: jax.Array, dtype: np.dtype) -> jax.Array:
        return x.astype(dtype)

    def numpy_dtype(self, x: jax.Array) -> np.dtype:
        return np.dtype(x.dtype)

    def argmax_bool(self, flags: jax.Array) -> jax.Array:
        return jnp.argmax(flags)

    def zeros(self, shape: Sequence[int], dtype: np.dtype) -> jax.Array:
        return jnp.zeros(tuple(shape), dtype=dtype)

    def arange(self, n: int) -> jax.Array:
        return jnp.arange(n, dtype=jnp.int64)

    def transpose(self, x: jax.Array, perm: Sequence[int]) -> jax.Array:
        return jnp.transpose(x, tuple(perm))

    def reshape(self, x: jax.Array, shape: Sequence[int]) -> jax.Array:
        return jnp.reshape(x, tuple(shape))

    def broadcast_to(self, x: jax.Array, shape: Sequence[int]) -> jax.Array:
        return jnp.broadcast_to(x, tuple(shape))

    def einsum(self, spec: str, *xs: jax.Array) -> jax.Array:
        # HIGHEST: full float32/float64 products on every platform (TPUs and GPUs default to lower precision).
        return jnp.einsum(spec, *xs, precision=jax.lax.Precision.HIGHEST)

    def where(self, c: jax.Array, a: Any, b: Any) -> jax.Array:
        return jnp.where(c, a, b)

    def reduce(self, x: jax.Array, axes: tuple[int, ...], kind: str, keepdims: bool = False) -> jax.Array:
        return _REDUCE[kind](x, axis=axes, keepdims=keepdims)

    def unary(self, fn: str, x: jax.Array) -> jax.Array:
        return _UNARY[fn](x)

    def maximum(self, a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.maximum(a, b)

    def minimum(self, a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.minimum(a, b)

    def power(self, a: jax.Array, b: jax.Array) -> jax.Array:
        if not jnp.issubdtype(a.dtype, jnp.floating):
            b = jnp.maximum(b, 0)  # a negative exponent is reported by the walker's deferred check
        return jnp.power(a, b)

    def clip(self, x: jax.Array, lo: float, hi: float) -> jax.Array:
        return jnp.clip(x, lo, hi)

    def concatenate(self, xs: Sequence[jax.Array], axis: int) -> jax.Array:
        return jnp.concatenate(list(xs), axis=axis)

    def stack(self, xs: Sequence[jax.Array], axis: int) -> jax.Array:
        return jnp.stack(list(xs), axis=axis)

    def set_at(self, x: jax.Array, index: tuple[Any, ...], value: jax.Array) -> jax.Array:
        return x.at[index].set(value)

    def add_at(self, x: jax.Array, index: tuple[Any, ...], value: jax.Array) -> jax.Array:
        return x.at[index].add(value)

    def argsort_stable(self, x: jax.Array, axis: int) -> jax.Array:
        return jnp.argsort(x, axis=axis, stable=True)

    def flip(self, x: jax.Array, axis: int) -> jax.Array:
        return jnp.flip(x, axis=axis)

    def take_along_axis(self, x: jax.Array, idx: jax.Array, axis: int) -> jax.Array:
        return jnp.take_along_axis(x, idx, axis=axis)

    def svd_u(self, x: jax.Array) -> jax.Array:
        return jnp.linalg.svd(x, full_matrices=False)[0]

    def matmul(self, a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def input_indices(lowered: Lowered) -> dict[str, tuple[str, ...]]:
    """Each input's index names in the tensor_eq module (those of its first use in the program)."""
    return {
        op.tensor_name.data: te.names_of(op.indices)
        for op in lowered.module.body.block.ops
        if isinstance(op, te.InputOp)
    }


def _device(device: Any) -> jax.Device | None:
    if device is None or isinstance(device, jax.Device):
        return device
    text = str(device)
    platform, _, number = text.partition(":")
    platform = {"cuda": "gpu", "rocm": "gpu"}.get(platform, platform)
    try:
        devices = jax.devices(platform)
    except RuntimeError as e:
        raise FuseError(f"the jax backend cannot use device {text!r}: {e}") from None
    k = int(number) if number.isdigit() else 0
    if k >= len(devices):
        raise FuseError(f"the jax backend cannot use device {text!r}: jax has {len(devices)} {platform} device(s)")
    return devices[k]


class JaxExecutor(ArrayExecutor):
    """Runs lowered programs as one ``jax.jit`` function per tensor_eq module (see the module docstring)."""

    def __init__(
        self,
        device: Any = None,
        donate: Sequence[str] | str = (),
        mesh: Mesh | None = None,
        in_shardings: Mapping[str, Any] | None = None,
        shard: Mapping[str, str] | None = None,
        return_type: str = "numpy",
        opt_level: str | int = "O2",
    ):
        super().__init__(target="jax", opt_level=opt_level)
        self.ops = JaxOps()
        self.return_type = check_return_type(return_type)
        self.device = _device(device)
        self.donate = (donate,) if isinstance(donate, str) else tuple(donate)
        if (in_shardings is not None or shard is not None) and self.device is not None:
            raise FuseError("the jax backend takes either device= or a sharding (mesh, in_shardings, shard), not both")
        if in_shardings is not None and shard is not None:
            raise FuseError("the jax backend takes in_shardings= or shard=, not both")
        if (
            in_shardings is not None
            and mesh is None
            and not all(isinstance(s, NamedSharding) for s in in_shardings.values())
        ):
            raise FuseError("in_shardings with PartitionSpecs needs mesh= (or give NamedShardings)")
        if shard is not None and mesh is None:
            mesh = jax.make_mesh((len(jax.devices()),), ("data",))
        if shard is not None:
            assert mesh is not None
            for index, axis in shard.items():
                if axis not in mesh.axis_names:
                    raise FuseError(
                        f"shard: index {index} goes to mesh axis {axis!r}, but the mesh has {mesh.axis_names}"
                    )
        self.mesh = mesh
        self.in_shardings = dict(in_shardings or {})
        self.shard = dict(shard or {})

    def sharding_for(self, lowered: Lowered, name: str, ndim: int) -> Any:
        """The sharding of input ``name`` (None: replicated, or jax's default placement without a mesh)."""
        if name in self.in_shardings:
            spec = self.in_shardings[name]
            return spec if isinstance(spec, NamedSharding) else NamedSharding(self.mesh, spec)
        if self.shard:
            names = input_indices(lowered).get(name)
            if names is not None and len(names) == ndim:
                return NamedSharding(self.mesh, PartitionSpec(*[self.shard.get(n) for n in names]))
        if self.mesh is not None:
            return NamedSharding(self.mesh, PartitionSpec())
        return None

    def build(self, walker: TeWalker) -> Callable[..., WalkOutput]:
        donate = set(self.donate)

        def run(donated: dict[str, jax.Array], kept: dict[str, jax.Array], sources: dict[str, jax.Array]) -> WalkOutput:
            return walker({**donated, **kept}, sources)

        # Only the named inputs are donated: they travel in their own argument.
        jitted = jax.jit(run, donate_argnames=("donated",) if donate else ())

        def call(inputs: dict[str, jax.Array], sources: dict[str, jax.Array]) -> WalkOutput:
            donated = {k: v for k, v in inputs.items() if k in donate}
            kept = {k: v for k, v in inputs.items() if k not in donate}
            with jax.enable_x64(True):
                return jitted(donated, kept, sources)

        return call

    def __call__(self, lowered: Lowered, arrays: dict[str, np.ndarray]) -> RunResult:
        unknown = sorted(set(self.donate) - set(arrays))
        if unknown:
            raise FuseRuntimeError(f"donate names {', '.join(unknown)}, which are not inputs of the program")
        unknown = sorted(set(self.in_shardings) - set(arrays))
        if unknown:
            raise FuseRuntimeError(f"in_shardings names {', '.join(unknown)}, which are not inputs of the program")
        with jax.enable_x64(True):
            return super().__call__(lowered, arrays)

    def to_device(self, lowered: Lowered, name: str, array: np.ndarray) -> jax.Array:
        sharding = self.sharding_for(lowered, name, array.ndim) if name not in lowered.sources else None
        if sharding is None and self.mesh is not None:
            sharding = NamedSharding(self.mesh, PartitionSpec())
        target = sharding if sharding is not None else self.device
        try:
            return jax.device_put(array, target)
        except ValueError as e:
            raise FuseRuntimeError(f"input {name} cannot be placed with sharding {sharding}: {e}") from None
