// Custom form: parses, verifies, and prints back unchanged, also through the generic form.
// RUN: %fuse-opt %s | filecheck %s
// RUN: %fuse-opt %s | %fuse-opt | filecheck %s
// RUN: %fuse-opt %s --print-op-generic | %fuse-opt | filecheck %s
// RUN: %fuse-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

builtin.module {
  %0 = te.input "A" {indices = ["i", "j"]} : tensor<?x?xf32>
  %1 = te.contract %0 {operand_indices = [["i", "j"]], indices = ["i"], projection = #te.projection<max>} : (tensor<?x?xf32>) -> tensor<?xf32>
  %2 = te.group "M" %1 {indices = ["i"], boolean = false} : (tensor<?xf32>) -> tensor<?xf32>
  te.export %2 {names = ["M"]} : tensor<?xf32>
}

// CHECK:      builtin.module {
// CHECK-NEXT:   %0 = te.input "A" {indices = ["i", "j"]} : tensor<?x?xf32>
// CHECK-NEXT:   %1 = te.contract %0 {operand_indices = {{\[\["i", "j"\]\]}}, indices = ["i"], projection = #te.projection<max>} : (tensor<?x?xf32>) -> tensor<?xf32>
// CHECK-NEXT:   %2 = te.group "M" %1 {indices = ["i"], boolean = false} : (tensor<?xf32>) -> tensor<?xf32>
// CHECK-NEXT:   te.export %2 {names = ["M"]} : tensor<?xf32>
// CHECK-NEXT: }

// GENERIC:      "builtin.module"() ({
// GENERIC-NEXT:   %0 = "te.input"() {name = "A", indices = ["i", "j"]} : () -> tensor<?x?xf32>
// GENERIC-NEXT:   %1 = "te.contract"(%0) {operand_indices = {{\[\["i", "j"\]\]}}, indices = ["i"], projection = #te.projection<max>} : (tensor<?x?xf32>) -> tensor<?xf32>
// GENERIC-NEXT:   %2 = "te.group"(%1) {name = "M", indices = ["i"], boolean = false} : (tensor<?xf32>) -> tensor<?xf32>
// GENERIC-NEXT:   "te.export"(%2) {names = ["M"]} : (tensor<?xf32>) -> ()
// GENERIC-NEXT: }) : () -> ()
