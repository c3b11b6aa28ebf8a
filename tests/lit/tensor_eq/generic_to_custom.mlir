// Generic-form input prints in the custom form, also when read from stdin.
// RUN: %fuse-opt %s | filecheck %s
// RUN: %fuse-opt < %s | filecheck %s

"builtin.module"() ({
  %0 = "te.input"() {name = "X", indices = ["i"]} : () -> tensor<?xf64>
  %1 = "te.contract"(%0, %0) {operand_indices = [["i"], ["i"]], indices = [], projection = #te.projection<sum>} : (tensor<?xf64>, tensor<?xf64>) -> tensor<f64>
  "te.export"(%1) {names = ["S"]} : (tensor<f64>) -> ()
}) : () -> ()

// CHECK:      builtin.module {
// CHECK-NEXT:   %0 = te.input "X" {indices = ["i"]} : tensor<?xf64>
// CHECK-NEXT:   %1 = te.contract %0, %0 {operand_indices = {{\[\["i"\], \["i"\]\]}}, indices = [], projection = #te.projection<sum>} : (tensor<?xf64>, tensor<?xf64>) -> tensor<f64>
// CHECK-NEXT:   te.export %1 {names = ["S"]} : tensor<f64>
// CHECK-NEXT: }
