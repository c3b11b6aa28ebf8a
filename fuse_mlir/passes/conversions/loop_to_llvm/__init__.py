"""Pieces of the loop → llvm-dialect lowering (the pass is ``conversions/lower_loop_to_llvm.py``).

``builder``: building llvm functions (blocks, counted loops, guards, hoisted
constants); ``scalar``: the arith/math → llvm op table, keyed by op class;
``parallel``: top-level loop nests outlined as functions and split over threads.
"""
