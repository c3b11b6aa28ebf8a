"""Programs as functions of JAX and PyTorch arrays, differentiable by those frameworks (docs/autodiff.md).

- :func:`jax_function`: the program lowered to ``jax.numpy`` operations (the
  jax backend's tensor_eq walker called on the caller's arrays, no NumPy
  conversion), so it composes with ``jax.jit``, ``jax.grad``, ``jax.vmap``
  and sharded or on-device arrays like any jax code.
- :func:`torch_function`: the same on ``torch`` operations: ``torch.autograd``
  and ``torch.compile`` see ordinary torch ops.
- :func:`jax_native` / :func:`torch_native`: a compiled llvm runner as the
  forward of a ``jax.custom_vjp`` / ``torch.autograd.Function``, whose
  backward runs the llvm-compiled gradient program (``Program.grad``). The
  arrays cross to the host as NumPy (``jax.pure_callback`` for jax), so these
  cost a copy per input and output and a host round trip per call.

Each function takes the program's inputs as keyword arguments and returns its
exports as a dict; lowerings are made per input dtype signature and cached.
Data-dependent run-time checks (a gathered index out of range) cannot be
raised inside a traced function: there the indices are clamped, as in the
jax and torch backends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fuse_mlir.diagnostics import FuseError

Program = Any  # a fuse_mlir.program.Program (its lower, grad and compile); typed loosely: interop sits below it


def _walker_function(
    program: Program,
    ops_for: Callable[[dict[str, Any]], tuple[Any, str]],
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]] = lambda f: f,
) -> Callable[..., dict]:
    """The walker on the caller's arrays; ``ops_for(inputs)`` gives the kernel table for them and a cache key
    part (the device, for torch)."""
    from fuse_mlir.backends.array_walk import TeWalker

    cache: dict[tuple, tuple[Callable[..., Any], list[str]]] = {}
    names = [s.name for s in program.lower().inputs]

    def prepare(dtypes: tuple, ops: Any, where: str) -> tuple[Callable[..., Any], list[str]]:
        lowered = program.lower({k: np.dtype(d) for k, d in dtypes})
        walker = TeWalker(lowered.module, ops)
        sources = {k: ops.asarray(v) for k, v in lowered.sources.items()}
        exports = list(walker.meta.exports)

        def run(*arrays: Any) -> Any:
            out, _sinks, _checks = walker(dict(zip(names, arrays)), sources)
            return tuple(out[k] for k in exports)

        hit = cache[(dtypes, where)] = (wrap(run), exports)
        return hit

    def fn(**inputs: Any) -> dict[str, Any]:
        unknown = sorted(set(inputs) - set(names))
        missing = [n for n in names if n not in inputs]
        if unknown or missing:
            raise FuseError(
                f"expected the inputs {', '.join(names) or 'none'}"
                + (f"; unknown: {', '.join(unknown)}" if unknown else "")
                + (f"; missing: {', '.join(missing)}" if missing else "")
            )
        dtypes = tuple(sorted((k, str(np.dtype(str(v.dtype).replace("torch.", "")))) for k, v in inputs.items()))
        ops, where = ops_for(inputs)
        hit = cache.get((dtypes, where))
        if hit is None:
            hit = prepare(dtypes, ops, where)
        run, exports = hit
        return dict(zip(exports, run(*(inputs[n] for n in names))))

    fn.prepare = prepare  # type: ignore[attr-defined]
    fn.input_names = names  # type: ignore[attr-defined]
    return fn


def jax_function(program: Program) -> Callable[..., dict]:
    """``f(**inputs) -> exports`` on jax arrays, traceable by ``jax.jit``/``jax.grad``/``jax.vmap`` (float64 needs
    ``jax.config.update("jax_enable_x64", True)``)."""
    from fuse_mlir.backends.jax import JaxOps

    ops = JaxOps()
    return _walker_function(program, lambda inputs: (ops, ""))


def torch_function(program: Program) -> Callable[..., dict]:
    """``f(**inputs) -> exports`` on torch tensors, differentiable by ``torch.autograd``, compilable by
    ``torch.compile``."""
    import torch

    from fuse_mlir.backends.torch import TorchOps

    tables: dict[str, TorchOps] = {}

    def ops_for(inputs: dict[str, Any]) -> tuple[TorchOps, str]:
        dev = next((v.device for v in inputs.values() if isinstance(v, torch.Tensor)), torch.device("cpu"))
        key = str(dev)
        if key not in tables:
            tables[key] = TorchOps(dev)
        return tables[key], key

    # torch.compile records the walk as one opaque call that AOT autograd traces into torch ops (the walker's
    # Python bookkeeping stays out of dynamo): no graph break, and autograd sees ordinary torch operations.
    fn = _walker_function(program, ops_for, torch.compiler.allow_in_graph)
    # torch.compile cannot trace the lowering itself: lower the all-float32 and all-float64 signatures on the
    # CPU now (other signatures and devices are lowered at their first eager call).
    cpu, key = ops_for({})
    for dt in ("float32", "float64"):
        fn.prepare(tuple(sorted((n, dt) for n in fn.input_names)), cpu, key)  # type: ignore[attr-defined]
    return fn


def _native_pair(program: Program, of: str, wrt: Sequence[str]) -> tuple[Any, Any, list[str]]:
    forward = program.compile("llvm")
    backward = program.grad(of, list(wrt)).compile("llvm")
    return forward, backward, list(wrt)


def jax_native(program: Program, of: str, wrt: Sequence[str]) -> Callable[..., Any]:
    """``f(*wrt_arrays, **other_inputs) -> of`` running the llvm kernels, with a ``jax.custom_vjp`` whose
    backward is the llvm-compiled gradient program (calls go through ``jax.pure_callback``)."""
    import jax
    import jax.numpy as jnp

    forward, backward, names = _native_pair(program, of, wrt)

    def host(runner: Any, keys: list[str]) -> Callable[..., Any]:
        def call(args: Any, kwargs: dict[str, Any]) -> Any:
            arrays = {n: np.asarray(a) for n, a in zip(names, args)}
            arrays.update({k: np.asarray(v) for k, v in kwargs.items()})
            out = runner(**arrays)
            return tuple(np.asarray(out[k]) for k in keys)

        return call

    def shapes(args: Any, keys: list[str]) -> tuple:
        like = {f"d{of}_d{n}": a for n, a in zip(names, args)}
        return tuple(
            jax.ShapeDtypeStruct(like[k].shape, like[k].dtype) if k in like else jax.ShapeDtypeStruct((), args[0].dtype)
            for k in keys
        )

    keys = [of, *(f"d{of}_d{n}" for n in names)]

    @jax.custom_vjp
    def core(args: tuple, others: dict) -> Any:
        (out,) = jax.pure_callback(host(forward, [of]), shapes(args, [of]), args, others)
        return out

    def fwd(args: tuple, others: dict) -> Any:
        outs = jax.pure_callback(host(backward, keys), shapes(args, keys), args, others)
        return outs[0], (outs[1:], others)

    def bwd(res: Any, g: Any) -> Any:
        grads, others = res
        return tuple(g * d for d in grads), jax.tree.map(jnp.zeros_like, others)

    core.defvjp(fwd, bwd)

    def f(*args: Any, **others: Any) -> Any:
        return core(tuple(args), dict(others))

    return f


def torch_native(program: Program, of: str, wrt: Sequence[str]) -> Callable[..., Any]:
    """``f(*wrt_tensors, **other_inputs) -> of`` running the llvm kernels inside a ``torch.autograd.Function``
    whose backward is the llvm-compiled gradient program (computed with the forward, kept for backward)."""
    import torch

    forward, backward, names = _native_pair(program, of, wrt)

    class Native(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, kwargs: dict[str, Any], *args: torch.Tensor) -> torch.Tensor:
            arrays = {n: a.detach().cpu().numpy() for n, a in zip(names, args)}
            arrays.update(
                {k: v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
            )
            if any(ctx.needs_input_grad[1:]):
                out = backward(**arrays)
                ctx.grads = [torch.from_numpy(np.asarray(out[f"d{of}_d{n}"])) for n in names]
            else:
                out = forward(**arrays)
            return torch.from_numpy(np.asarray(out[of]))

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> Any:
            return (None, *(g * d for d in ctx.grads))

    def f(*args: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        return Native.apply(kwargs, *args)

    return f
