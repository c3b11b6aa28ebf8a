// semi-naive: a boolean closure's fixpoint carries (R, Δ), joins only Δ with Par,
// and checks only R; the first run is peeled before the loop.
// RUN: %fuse-opt %s -p semi-naive | filecheck %s

builtin.module {
  %par = te.source "Par" "par.tsv" {indices = ["x", "z"]} : tensor<8x8xi8>
  %n = arith.constant 8 : index
  %zero = te.constant dense<0> : tensor<i8> {indices = []} : tensor<i8>
  %init = te.broadcast %zero(%n, %n) {operand_indices = [[]], indices = ["x", "z"]} : tensor<i8> -> tensor<8x8xi8>
  %anc, %iters, %conv = te.fixpoint "Anc"(%init) attributes {names = ["Anc"], max_iters = 32 : i64, atol = 1.000000e-06 : f64, rtol = 1.000000e-05 : f64} : (tensor<8x8xi8>) -> (tensor<8x8xi8>, tensor<i64>, tensor<i8>) {
  ^bb0(%it: tensor<i64>, %cur: tensor<8x8xi8>):
    %j = te.contract %cur, %par {operand_indices = [["x", "y"], ["y", "z"]], indices = ["x", "z"], projection = #te.projection<sum>} : (tensor<8x8xi8>, tensor<8x8xi8>) -> tensor<8x8xi64>
    %u = te.map "add" %par, %j {operand_indices = [["x", "z"], ["x", "z"]], indices = ["x", "z"]} : (tensor<8x8xi8>, tensor<8x8xi64>) -> tensor<8x8xi64>
    %g = te.group "Anc" %u {indices = ["x", "z"], boolean = true} : (tensor<8x8xi64>) -> tensor<8x8xi8>
    te.yield %g : tensor<8x8xi8>
  }
  te.export %anc, %iters, %conv {names = ["Anc", "Anc#iterations", "Anc#converged"]} : tensor<8x8xi8>, tensor<i64>, tensor<i8>
}

// The peeled first run, T(0):
// CHECK:      %[[J0:.*]] = te.contract %[[INIT:.*]], %[[PAR:.*]] {operand_indices
// CHECK:      %[[FIRST:.*]] = te.group "Anc"
// CHECK:      %[[R:.*]], %[[D:.*]], %[[N:.*]], %[[C:.*]] = te.fixpoint "Anc"(%[[INIT]], %[[FIRST]]) attributes {names = ["Anc", "Anc.delta"], {{.*}}checked = [true, false]}
// CHECK-NEXT: ^{{.*}}(%{{.*}}: tensor<i64>, %[[CUR:.*]]: tensor<8x8xi8>, %[[DELTA:.*]]: tensor<8x8xi8>):
// CHECK-NEXT:   %[[MERGED:.*]] = te.group "Anc" %[[CUR]], %[[DELTA]] {indices = ["x", "z"], boolean = true}
// CHECK-NEXT:   %[[DJ:.*]] = te.contract %[[DELTA]], %[[PAR]]
// CHECK-NEXT:   %[[DG:.*]] = te.group "Anc" %[[DJ]]
// CHECK-NEXT:   %[[NEW:.*]] = te.map "gt" %[[DG]], %[[MERGED]]
// CHECK-NEXT:   %[[NEXT:.*]] = te.group "Anc" %[[NEW]]
// CHECK-NEXT:   te.yield %[[MERGED]], %[[NEXT]] : tensor<8x8xi8>, tensor<8x8xi8>
// CHECK:      te.export %[[R]], %[[N]], %[[C]]
