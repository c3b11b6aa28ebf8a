// A verifier failure points at the operation that fails.
// RUN: not %fuse-opt %s 2>&1 | filecheck %s

builtin.module {
  %0 = te.input "X" {indices = ["i", "j"]} : tensor<?xf64>
}

// CHECK:      verify_error.mlir:5:3: error: te.input: result has rank 1 but 2 index names
// CHECK-NEXT:   %0 = te.input "X"
// CHECK-NEXT: {{^ +\^~$}}
// CHECK-NOT:  Traceback
