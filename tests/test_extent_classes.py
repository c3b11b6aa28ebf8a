"""The extent classes' canonical definition (frontend/shapes.py), kept per class as definitions arrive."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fuse_mlir.diagnostics import FuseError, Loc
from fuse_mlir.frontend.shapes import DimDef, Dims, Where

WHERE = Where("i", "X[i]", Loc("p.fuse", 1, 1, 1))
KINDS = ("const", "input", "derived", "bound")


def _naive(dims: Dims, key: tuple) -> DimDef | None:
    """The rule as written: the first constant, else the first input axis, else the first derived extent."""
    ds = dims.definitions(key)
    for kind in ("const", "input", "derived"):
        for d in ds:
            if d.kind == kind:
                return d
    return None


STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("def"), st.integers(0, 7), st.sampled_from(KINDS), st.integers(0, 3)),
        st.tuples(st.just("union"), st.integers(0, 7), st.integers(0, 7), st.just(0)),
        st.tuples(st.just("ask"), st.integers(0, 7), st.just(""), st.just(0)),
        st.tuples(st.just("settle"), st.just(0), st.just(""), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(STEPS)
def test_the_canonical_definition_follows_every_change_of_its_class(steps: list[tuple]) -> None:
    # canonical() is brought up to date from the definitions added since its last answer (a scan per call was
    # quadratic in a class's size); unions, new definitions and settle_bounds' replaced lists must all show.
    dims = Dims()
    for op, a, b, value in steps:
        key = ("T", "X", a)
        if op == "def":
            dims.add_def(key, DimDef(str(b), value, WHERE))
        elif op == "union":
            dims.union(key, ("T", "X", b))
        elif op == "settle":
            try:
                dims.settle_bounds()
            except FuseError:
                return  # a class with a bound and a run-time extent: an error, as in a program
        assert dims.canonical(key) == _naive(dims, key)
        assert dims.canonical(key) is _naive(dims, key)
    for a in range(8):
        assert dims.canonical(("T", "X", a)) is _naive(dims, ("T", "X", a))
