"""Conversions: the passes that lower one level to the next (te → ew → loop → llvm dialect).

As in MLIR's ``lib/Conversion``: each lowering lives here apart from the
level-preserving transforms and the pass infrastructure. ``te_to_ew`` holds
the tensor_eq → elemwise rewrite patterns, one module per op family.
"""
