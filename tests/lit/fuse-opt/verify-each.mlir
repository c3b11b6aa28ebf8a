// --verify-each: verify after every pass; a broken module names the pass that broke it.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %fuse-opt %s -p canonicalize,cse,dce --verify-each | filecheck %s
// RUN: %python -m pip install -q --no-deps --no-build-isolation --no-index --target %t/site %repo/tests/plugins/fuse_mlir_demo_plugin
// RUN: env PYTHONPATH=%t/site:%pythonpath not %fuse-opt %s -p cse,demo-break-ir,dce --verify-each 2>&1 | filecheck %s --check-prefix=BROKEN
// Without --verify-each the module is still verified once, after the pipeline.
// RUN: env PYTHONPATH=%t/site:%pythonpath not %fuse-opt %s -p cse,demo-break-ir,dce 2>&1 | filecheck %s --check-prefix=AFTER

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  te.export %x {names = ["X"]} : tensor<?xf64>
}

// CHECK: te.input "X"

// BROKEN:      verify-each.mlir:10:3: error: IR does not verify after pass 'demo-break-ir': te.input: result has rank 1 but 2 index names
// BROKEN-NEXT:   %x = te.input "X"
// BROKEN-NOT:  Traceback

// AFTER: verify-each.mlir:10:3: error: IR does not verify after the pass pipeline (--verify-each finds the pass): te.input: result has rank 1
