// lower-te-to-ew keeps a te.fixpoint around its lowered body: the extents met inside (te.dim of the
// iterate) stay inside, and the same te.fixpoint is rebuilt over the lowered initial value.
// RUN: %fuse-opt %s -p 'lower-te-to-ew' | filecheck %s
// CHECK-LABEL: builtin.module {
// CHECK-NEXT:   %[[V0:[0-9]+]] = te.input "B" {indices = ["i"]} : tensor<?xf64>
// CHECK-NEXT:   %[[V1:[0-9]+]] = te.constant dense<0.000000e+00> : tensor<f64> {indices = []} : tensor<f64>
// CHECK-NEXT:   %[[V2:[0-9]+]] = te.dim %[[V0]], 0 : i64 : tensor<?xf64>
// CHECK-NEXT:   %[[V3:[0-9]+]] = ew.generic ins(:) tables(:) extents(%[[V2]]) attributes {maps = [], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:     %[[V4:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:     ew.yield %[[V4]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V5:[0-9]+]], %[[V6:[0-9]+]], %[[V7:[0-9]+]] = te.fixpoint "X"(%[[V3]]) attributes {names = ["X"], max_iters = 32 : i64, atol = 1.000000e-06 : f64, rtol = 1.000000e-05 : f64} : (tensor<?xf64>) -> (tensor<?xf64>, tensor<i64>, tensor<i8>) {
// CHECK-NEXT:   ^bb0(%[[V8:[0-9]+]]: tensor<i64>, %[[V9:[0-9]+]]: tensor<?xf64>):
// CHECK-NEXT:     %[[V10:[0-9]+]] = te.constant dense<5.000000e-01> : tensor<f64> {indices = []} : tensor<f64>
// CHECK-NEXT:     %[[V11:[0-9]+]] = te.dim %[[V9]], 0 : i64 : tensor<?xf64>
// CHECK-NEXT:     %[[V12:[0-9]+]] = ew.generic ins(%[[V9]] : tensor<?xf64>) tables(:) extents(%[[V11]]) attributes {maps = {{\[\[}}0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:     ^bb0(%[[V13:[0-9]+]]: f64):
// CHECK-NEXT:       %[[V14:[0-9]+]] = arith.constant 5.000000e-01 : f64
// CHECK-NEXT:       %[[V15:[0-9]+]] = arith.mulf %[[V13]], %[[V14]] : f64
// CHECK-NEXT:       ew.yield %[[V15]] : f64
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[V16:[0-9]+]] = te.dim %[[V0]], 0 : i64 : tensor<?xf64>
// CHECK-NEXT:     %[[V17:[0-9]+]] = ew.generic ins(%[[V12]], %[[V0]] : tensor<?xf64>, tensor<?xf64>) tables(:) extents(%[[V11]]) attributes {maps = {{\[\[}}0 : i64], [0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:     ^bb0(%[[V18:[0-9]+]]: f64, %[[V19:[0-9]+]]: f64):
// CHECK-NEXT:       %[[V20:[0-9]+]] = arith.addf %[[V18]], %[[V19]] : f64
// CHECK-NEXT:       ew.yield %[[V20]] : f64
// CHECK-NEXT:     }
// CHECK-NEXT:     te.yield %[[V17]] : tensor<?xf64>
// CHECK-NEXT:   }
// CHECK-NEXT:   te.export %[[V5]], %[[V6]], %[[V7]] {names = ["X", "X#iterations", "X#converged"]} : tensor<?xf64>, tensor<i64>, tensor<i8>
// CHECK-NEXT: }
builtin.module {
  %0 = te.input "B" {indices = ["i"]} : tensor<?xf64>
  %1 = te.constant dense<0.000000e+00> : tensor<f64> {indices = []} : tensor<f64>
  %2 = te.dim %0, 0 : i64 : tensor<?xf64>
  %3 = te.broadcast %1(%2) {operand_indices = [[]], indices = ["i"]} : tensor<f64> -> tensor<?xf64>
  %4, %5, %6 = te.fixpoint "X"(%3) attributes {names = ["X"], max_iters = 32 : i64, atol = 1.000000e-06 : f64, rtol = 1.000000e-05 : f64} : (tensor<?xf64>) -> (tensor<?xf64>, tensor<i64>, tensor<i8>) {
  ^bb0(%7: tensor<i64>, %8: tensor<?xf64>):
    %9 = te.constant dense<5.000000e-01> : tensor<f64> {indices = []} : tensor<f64>
    %10 = te.contract %8, %9 {operand_indices = [["i"], []], indices = ["i"], projection = #te.projection<sum>} : (tensor<?xf64>, tensor<f64>) -> tensor<?xf64>
    %11 = te.map "add" %10, %0 {operand_indices = [["i"], ["i"]], indices = ["i"]} : (tensor<?xf64>, tensor<?xf64>) -> tensor<?xf64>
    %12 = te.group "X" %11 {indices = ["i"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
    te.yield %12 : tensor<?xf64>
  }
  te.export %4, %5, %6 {names = ["X", "X#iterations", "X#converged"]} : tensor<?xf64>, tensor<i64>, tensor<i8>
}
