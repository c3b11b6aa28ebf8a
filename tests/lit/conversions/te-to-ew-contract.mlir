// lower-te-to-ew, contraction family (te_to_ew/contract.py): a float matrix product stays whole as
// ew.contract (BLAS); a matrix-vector product, a max projection and a mean become ew.generic kernels with
// a reduction iterator (the mean divides by the product of the reduced extents).
// RUN: %fuse-opt %s -p 'lower-te-to-ew' | filecheck %s
// CHECK-LABEL: builtin.module {
// CHECK-NEXT:   %[[V0:[0-9]+]] = te.input "A" {indices = ["i", "j"]} : tensor<?x?xf64>
// CHECK-NEXT:   %[[V1:[0-9]+]] = te.input "B" {indices = ["j", "k"]} : tensor<?x?xf64>
// CHECK-NEXT:   %[[V2:[0-9]+]] = te.input "X" {indices = ["j"]} : tensor<?xf64>
// CHECK-NEXT:   %[[V3:[0-9]+]] = te.dim %[[V0]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V4:[0-9]+]] = te.dim %[[V1]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   te.check_dim %[[V3]], %[[V4]] {message = "j is {1} in B[j, k] but {0} in A[i, j]"}
// CHECK-NEXT:   %[[V5:[0-9]+]] = te.dim %[[V2]], 0 : i64 : tensor<?xf64>
// CHECK-NEXT:   te.check_dim %[[V3]], %[[V5]] {message = "j is {1} in X[j] but {0} in A[i, j]"}
// CHECK-NEXT:   %[[V6:[0-9]+]] = te.dim %[[V0]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V7:[0-9]+]] = te.dim %[[V0]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V8:[0-9]+]] = te.dim %[[V1]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V9:[0-9]+]] = te.dim %[[V1]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V10:[0-9]+]] = ew.contract %[[V0]], %[[V1]] extents(%[[V6]], %[[V9]], %[[V7]]) {maps = {{\[\[}}0 : i64, 2 : i64], [2 : i64, 1 : i64]], out = [0 : i64, 1 : i64]} : tensor<?x?xf64>, tensor<?x?xf64> -> tensor<?x?xf64>
// CHECK-NEXT:   %[[V11:[0-9]+]] = te.dim %[[V2]], 0 : i64 : tensor<?xf64>
// CHECK-NEXT:   %[[V12:[0-9]+]] = ew.generic ins(%[[V0]], %[[V2]] : tensor<?x?xf64>, tensor<?xf64>) tables(:) extents(%[[V6]], %[[V7]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64], [1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<sum>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V13:[0-9]+]]: f64, %[[V14:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V15:[0-9]+]] = arith.mulf %[[V13]], %[[V14]] : f64
// CHECK-NEXT:     ew.yield %[[V15]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V16:[0-9]+]] = ew.generic ins(%[[V0]], %[[V2]] : tensor<?x?xf64>, tensor<?xf64>) tables(:) extents(%[[V6]], %[[V7]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64], [1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V17:[0-9]+]]: f64, %[[V18:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V19:[0-9]+]] = arith.mulf %[[V17]], %[[V18]] : f64
// CHECK-NEXT:     ew.yield %[[V19]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V20:[0-9]+]] = ew.generic ins(%[[V16]] : tensor<?x?xf64>) tables(:) extents(%[[V6]], %[[V7]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<max>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V21:[0-9]+]]: f64):
// CHECK-NEXT:     ew.yield %[[V21]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V22:[0-9]+]] = ew.generic ins(%[[V0]] : tensor<?x?xf64>) tables(:) extents(%[[V6]], %[[V7]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<sum>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V23:[0-9]+]]: f64):
// CHECK-NEXT:     ew.yield %[[V23]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V24:[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:   %[[V25:[0-9]+]] = arith.muli %[[V24]], %[[V7]] : index
// CHECK-NEXT:   %[[V26:[0-9]+]] = ew.generic ins(%[[V22]] : tensor<?xf64>) tables(:) extents(%[[V6]]) attributes {maps = {{\[\[}}0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V27:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V28:[0-9]+]] = arith.index_cast %[[V25]] : index to i64
// CHECK-NEXT:     %[[V29:[0-9]+]] = arith.sitofp %[[V28]] : i64 to f64
// CHECK-NEXT:     %[[V30:[0-9]+]] = arith.divf %[[V27]], %[[V29]] : f64
// CHECK-NEXT:     ew.yield %[[V30]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   te.export %[[V10]], %[[V12]], %[[V20]], %[[V26]] {names = ["C", "V", "M", "N"]} : tensor<?x?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>
// CHECK-NEXT: }
builtin.module {
  %0 = te.input "A" {indices = ["i", "j"]} : tensor<?x?xf64>
  %1 = te.input "B" {indices = ["j", "k"]} : tensor<?x?xf64>
  %2 = te.input "X" {indices = ["j"]} : tensor<?xf64>
  %3 = te.dim %0, 1 : i64 : tensor<?x?xf64>
  %4 = te.dim %1, 0 : i64 : tensor<?x?xf64>
  te.check_dim %3, %4 {message = "j is {1} in B[j, k] but {0} in A[i, j]"} loc("<stdin>":1:19)
  %5 = te.dim %2, 0 : i64 : tensor<?xf64>
  te.check_dim %3, %5 {message = "j is {1} in X[j] but {0} in A[i, j]"} loc("<stdin>":2:17)
  %6 = te.contract %0, %1 {operand_indices = [["i", "j"], ["j", "k"]], indices = ["i", "k"], projection = #te.projection<sum>} : (tensor<?x?xf64>, tensor<?x?xf64>) -> tensor<?x?xf64>
  %7 = te.group "C" %6 {indices = ["i", "k"], boolean = false} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  %8 = te.contract %0, %2 {operand_indices = [["i", "j"], ["j"]], indices = ["i"], projection = #te.projection<sum>} : (tensor<?x?xf64>, tensor<?xf64>) -> tensor<?xf64>
  %9 = te.group "V" %8 {indices = ["i"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
  %10 = te.contract %0, %2 {operand_indices = [["i", "j"], ["j"]], indices = ["i", "j"], projection = #te.projection<sum>} : (tensor<?x?xf64>, tensor<?xf64>) -> tensor<?x?xf64>
  %11 = te.reduce <max> %10 {operand_indices = [["i", "j"]], indices = ["i"]} : (tensor<?x?xf64>) -> tensor<?xf64>
  %12 = te.group "M" %11 {indices = ["i"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
  %13 = te.reduce <mean> %0 {operand_indices = [["i", "j"]], indices = ["i"]} : (tensor<?x?xf64>) -> tensor<?xf64>
  %14 = te.group "N" %13 {indices = ["i"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
  te.export %7, %9, %12, %14 {names = ["C", "V", "M", "N"]} : tensor<?x?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>
}
