// A syntax error is reported at its line and column with the source line and a caret.
// RUN: not %fuse-opt %s 2>&1 | filecheck %s

builtin.module {
  %0 = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %1 = te.contract %0 %0 {operand_indices = [["i"], ["i"]], indices = [], projection = #te.projection<sum>} : (tensor<?xf64>, tensor<?xf64>) -> tensor<f64>
}

// CHECK:      syntax_error.mlir:6:23: error: Expected ':'
// CHECK-NEXT:   %1 = te.contract %0 %0 {operand_indices
// CHECK-NEXT: {{^ +\^~$}}
// CHECK-NOT:  Traceback
