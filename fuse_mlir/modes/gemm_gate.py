"""Per-shape GEMM plans of a warm start, without the IR.

A lowering from the warm start index has no module until something builds
it (importing xDSL and lowering the program: about 0.15 s). When the only
per-shape choice in it is which way round a float64 GEMM writes its result
(:func:`fuse_mlir.passes.transforms.contract_plan.gemm_sites`, kept in the
index as :class:`~fuse_mlir.gemm.GemmSite` records), :class:`GemmGate`
decides that from the call's input shapes alone. A shape whose every GEMM
writes its own order runs the lowering as it is; any other runs a derived
lowering (:meth:`~fuse_mlir.lowered.Lowered.derived`) whose digest names the
choice, so its kernel comes from the disk cache, still without IR, when some
process compiled it before. The cold planner
(:class:`~fuse_mlir.passes.transforms.contract_plan.ShapePlans`) decides from
the same records and derives the same lowerings, so a shape runs the same
kernel in a cold process and a warm one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fuse_mlir.gemm import GemmSite, Orientation, orientation, orientation_tag
from fuse_mlir.lowered import Lowered, ShapeDispatch


class GemmGate:
    """The runner's planner for a warm lowering whose GEMM sites are known (``lowered.gemm_sites``).

    Same interface as ``ShapePlans`` where the runner uses it: :meth:`lowered_for`, :meth:`plan_for`,
    ``calls`` and ``native_calls`` (:class:`~fuse_mlir.lowered.ShapeDispatch`) and ``on_variant`` (told of each derived lowering; the runner maps its module, once built,
    back here).
    """

    def __init__(self, lowered: Lowered, sites: Sequence[GemmSite]):
        self.lowered = lowered
        self.sites = list(sites)
        self.names = [s.name for s in lowered.inputs]
        self.by_shape: dict[tuple, Lowered] = {}
        self.by_choice: dict[Orientation, Lowered] = {}
        self.on_variant: Callable[[Lowered], None] | None = None
        # The runner's direct calls and native entries by shape; a new shape picks its variant from the shapes alone.
        self.calls = ShapeDispatch(self.names, self.lowered_for)
        self.native_calls = ShapeDispatch(self.names, self.lowered_for)

    def lowered_for(self, arrays: Mapping[str, Any]) -> Lowered:
        """The lowering for these arrays' shapes (one dict lookup when the shapes were seen before)."""
        key = tuple(arrays[n].shape for n in self.names)
        hit = self.by_shape.get(key)
        if hit is None:
            hit = self.by_shape[key] = self._variant(orientation(self.sites, dict(zip(self.names, key))))
        return hit

    def _variant(self, choice: Orientation) -> Lowered:
        if not choice:
            return self.lowered
        hit = self.by_choice.get(choice)
        if hit is None:
            hit = self.by_choice[choice] = self.lowered.derived(orientation_tag(choice), lambda m: _edit(m, choice))
        return hit

    def plan_for(self, shapes: Mapping[str, tuple[int, ...]]) -> Any:
        """None: a gate plans no product orders (GEMM sides show in the module explain() reads)."""
        return None


def _edit(module: Any, choice: Orientation) -> None:
    """The derived lowering's edit, run only when its IR is built (imports the passes, hence xDSL, then)."""
    from fuse_mlir.passes.transforms.contract_plan import set_result_orders

    set_result_orders(module, choice)
