"""The tensor_eq → elemwise rewrite patterns, one module per op family.

``lowering`` holds the state the patterns share and the kernel builders;
``access`` (access, generate, flatten, concat, place), ``elementwise`` (map,
broadcast, cast, group), ``contract`` (contractions), ``reduce`` (reductions
and axis normalisations) and ``block`` (attention, rope, host-run blocks) the
patterns. The pass that drives them is ``conversions/lower_te_to_ew.py``.
"""
