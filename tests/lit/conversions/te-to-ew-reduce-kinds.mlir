// lower-te-to-ew, reduction kinds the frontend rarely writes directly: te.reduce <any> or-s nonzero
// elements into i8; a te.contract with a "mean" projection sums, then divides by the reduced extents' product.
// RUN: %fuse-opt %s -p 'lower-te-to-ew' | filecheck %s
// CHECK-LABEL: builtin.module {
// CHECK-NEXT:   %[[V0:[0-9]+]] = te.input "X" {indices = ["i", "j"]} : tensor<?x?xi8>
// CHECK-NEXT:   %[[V1:[0-9]+]] = te.dim %[[V0]], 0 : i64 : tensor<?x?xi8>
// CHECK-NEXT:   %[[V2:[0-9]+]] = te.dim %[[V0]], 1 : i64 : tensor<?x?xi8>
// CHECK-NEXT:   %[[V3:[0-9]+]] = ew.generic ins(%[[V0]] : tensor<?x?xi8>) tables(:) extents(%[[V1]], %[[V2]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<any>]} -> tensor<?xi8> {
// CHECK-NEXT:   ^bb0(%[[V4:[0-9]+]]: i8):
// CHECK-NEXT:     %[[V5:[0-9]+]] = arith.constant 0 : i8
// CHECK-NEXT:     %[[V6:[0-9]+]] = arith.cmpi ne, %[[V4]], %[[V5]] : i8
// CHECK-NEXT:     %[[V7:[0-9]+]] = arith.extui %[[V6]] : i1 to i8
// CHECK-NEXT:     ew.yield %[[V7]] : i8
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V8:[0-9]+]] = te.input "A" {indices = ["i", "j"]} : tensor<?x?xf64>
// CHECK-NEXT:   %[[V9:[0-9]+]] = te.input "B" {indices = ["j"]} : tensor<?xf64>
// CHECK-NEXT:   %[[V10:[0-9]+]] = te.dim %[[V8]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V11:[0-9]+]] = te.dim %[[V8]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V12:[0-9]+]] = te.dim %[[V9]], 0 : i64 : tensor<?xf64>
// CHECK-NEXT:   %[[V13:[0-9]+]] = ew.generic ins(%[[V8]], %[[V9]] : tensor<?x?xf64>, tensor<?xf64>) tables(:) extents(%[[V10]], %[[V11]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64], [1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<sum>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V14:[0-9]+]]: f64, %[[V15:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V16:[0-9]+]] = arith.mulf %[[V14]], %[[V15]] : f64
// CHECK-NEXT:     ew.yield %[[V16]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V17:[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:   %[[V18:[0-9]+]] = arith.muli %[[V17]], %[[V11]] : index
// CHECK-NEXT:   %[[V19:[0-9]+]] = ew.generic ins(%[[V13]] : tensor<?xf64>) tables(:) extents(%[[V10]]) attributes {maps = {{\[\[}}0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V20:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V21:[0-9]+]] = arith.index_cast %[[V18]] : index to i64
// CHECK-NEXT:     %[[V22:[0-9]+]] = arith.sitofp %[[V21]] : i64 to f64
// CHECK-NEXT:     %[[V23:[0-9]+]] = arith.divf %[[V20]], %[[V22]] : f64
// CHECK-NEXT:     ew.yield %[[V23]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   te.export %[[V3]], %[[V19]] {names = ["Any", "Mean"]} : tensor<?xi8>, tensor<?xf64>
// CHECK-NEXT: }
builtin.module {
  %0 = te.input "X" {indices = ["i", "j"]} : tensor<?x?xi8>
  %1 = te.reduce <any> %0 {operand_indices = [["i", "j"]], indices = ["i"]} : (tensor<?x?xi8>) -> tensor<?xi8>
  %2 = te.input "A" {indices = ["i", "j"]} : tensor<?x?xf64>
  %3 = te.input "B" {indices = ["j"]} : tensor<?xf64>
  %4 = te.contract %2, %3 {operand_indices = [["i", "j"], ["j"]], indices = ["i"], projection = #te.projection<mean>} : (tensor<?x?xf64>, tensor<?xf64>) -> tensor<?xf64>
  te.export %1, %4 {names = ["Any", "Mean"]} : tensor<?xi8>, tensor<?xf64>
}
