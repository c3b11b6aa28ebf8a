// lower-te-to-ew, which way round a GEMM writes its result (gemm.py orientation_cost, te_to_ew/contract.py):
// a `gemm_result` attribute (the per-shape planner's choice) makes the ew.contract write that order, followed
// by a permuting ew.generic copy into the op's own order; without it, static float64 extents of a skinny product
// (4096 x 4096 @ 4096 x 256) pick the transposed result by themselves; float32 (no preferred side) and an
// attribute that is not a reordering of the result's indices leave the GEMM writing the result's own order.
// RUN: %fuse-opt %s -p 'lower-te-to-ew' | filecheck %s
// CHECK-LABEL: builtin.module {
// CHECK-NEXT:   %[[V0:[0-9]+]] = te.input "W" {indices = ["i", "j"]} : tensor<?x?xf64>
// CHECK-NEXT:   %[[V1:[0-9]+]] = te.input "X" {indices = ["j", "b"]} : tensor<?x?xf64>
// CHECK-NEXT:   %[[V2:[0-9]+]] = te.dim %[[V0]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V3:[0-9]+]] = te.dim %[[V0]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V4:[0-9]+]] = te.dim %[[V1]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V5:[0-9]+]] = te.dim %[[V1]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V6:[0-9]+]] = ew.contract %[[V0]], %[[V1]] extents(%[[V5]], %[[V2]], %[[V3]]) {maps = {{\[\[}}1 : i64, 2 : i64], [2 : i64, 0 : i64]], out = [0 : i64, 1 : i64]} : tensor<?x?xf64>, tensor<?x?xf64> -> tensor<?x?xf64>
// CHECK-NEXT:   %[[V7:[0-9]+]] = ew.generic ins(%[[V6]] : tensor<?x?xf64>) tables(:) extents(%[[V2]], %[[V5]]) attributes {maps = {{\[\[}}1 : i64, 0 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V8:[0-9]+]]: f64):
// CHECK-NEXT:     ew.yield %[[V8]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V9:[0-9]+]] = ew.contract %[[V0]], %[[V1]] extents(%[[V2]], %[[V5]], %[[V3]]) {maps = {{\[\[}}0 : i64, 2 : i64], [2 : i64, 1 : i64]], out = [0 : i64, 1 : i64]} : tensor<?x?xf64>, tensor<?x?xf64> -> tensor<?x?xf64>
// CHECK-NEXT:   %[[V10:[0-9]+]] = te.input "S" {indices = ["i", "j"]} : tensor<4096x4096xf64>
// CHECK-NEXT:   %[[V11:[0-9]+]] = te.input "T" {indices = ["j", "b"]} : tensor<4096x256xf64>
// CHECK-NEXT:   %[[V12:[0-9]+]] = te.dim %[[V10]], 0 : i64 : tensor<4096x4096xf64>
// CHECK-NEXT:   %[[V13:[0-9]+]] = te.dim %[[V10]], 1 : i64 : tensor<4096x4096xf64>
// CHECK-NEXT:   %[[V14:[0-9]+]] = te.dim %[[V11]], 0 : i64 : tensor<4096x256xf64>
// CHECK-NEXT:   %[[V15:[0-9]+]] = te.dim %[[V11]], 1 : i64 : tensor<4096x256xf64>
// CHECK-NEXT:   %[[V16:[0-9]+]] = ew.contract %[[V10]], %[[V11]] extents(%[[V15]], %[[V12]], %[[V13]]) {maps = {{\[\[}}1 : i64, 2 : i64], [2 : i64, 0 : i64]], out = [0 : i64, 1 : i64]} : tensor<4096x4096xf64>, tensor<4096x256xf64> -> tensor<?x?xf64>
// CHECK-NEXT:   %[[V17:[0-9]+]] = ew.generic ins(%[[V16]] : tensor<?x?xf64>) tables(:) extents(%[[V12]], %[[V15]]) attributes {maps = {{\[\[}}1 : i64, 0 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V18:[0-9]+]]: f64):
// CHECK-NEXT:     ew.yield %[[V18]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V19:[0-9]+]] = te.input "U" {indices = ["i", "j"]} : tensor<4096x4096xf32>
// CHECK-NEXT:   %[[V20:[0-9]+]] = te.input "V" {indices = ["j", "b"]} : tensor<4096x256xf32>
// CHECK-NEXT:   %[[V21:[0-9]+]] = te.dim %[[V19]], 0 : i64 : tensor<4096x4096xf32>
// CHECK-NEXT:   %[[V22:[0-9]+]] = te.dim %[[V19]], 1 : i64 : tensor<4096x4096xf32>
// CHECK-NEXT:   %[[V23:[0-9]+]] = te.dim %[[V20]], 0 : i64 : tensor<4096x256xf32>
// CHECK-NEXT:   %[[V24:[0-9]+]] = te.dim %[[V20]], 1 : i64 : tensor<4096x256xf32>
// CHECK-NEXT:   %[[V25:[0-9]+]] = ew.contract %[[V19]], %[[V20]] extents(%[[V21]], %[[V24]], %[[V22]]) {maps = {{\[\[}}0 : i64, 2 : i64], [2 : i64, 1 : i64]], out = [0 : i64, 1 : i64]} : tensor<4096x4096xf32>, tensor<4096x256xf32> -> tensor<?x?xf32>
// CHECK-NEXT:   te.export %[[V7]], %[[V9]], %[[V17]], %[[V25]] {names = ["A", "B", "C", "D"]} : tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf32>
// CHECK-NEXT: }
builtin.module {
  %0 = te.input "W" {indices = ["i", "j"]} : tensor<?x?xf64>
  %1 = te.input "X" {indices = ["j", "b"]} : tensor<?x?xf64>
  %2 = te.contract %0, %1 {operand_indices = [["i", "j"], ["j", "b"]], indices = ["i", "b"], projection = #te.projection<sum>, gemm_result = ["b", "i"]} : (tensor<?x?xf64>, tensor<?x?xf64>) -> tensor<?x?xf64>
  %3 = te.contract %0, %1 {operand_indices = [["i", "j"], ["j", "b"]], indices = ["i", "b"], projection = #te.projection<sum>, gemm_result = ["b", "q"]} : (tensor<?x?xf64>, tensor<?x?xf64>) -> tensor<?x?xf64>
  %4 = te.input "S" {indices = ["i", "j"]} : tensor<4096x4096xf64>
  %5 = te.input "T" {indices = ["j", "b"]} : tensor<4096x256xf64>
  %6 = te.contract %4, %5 {operand_indices = [["i", "j"], ["j", "b"]], indices = ["i", "b"], projection = #te.projection<sum>} : (tensor<4096x4096xf64>, tensor<4096x256xf64>) -> tensor<4096x256xf64>
  %7 = te.input "U" {indices = ["i", "j"]} : tensor<4096x4096xf32>
  %8 = te.input "V" {indices = ["j", "b"]} : tensor<4096x256xf32>
  %9 = te.contract %7, %8 {operand_indices = [["i", "j"], ["j", "b"]], indices = ["i", "b"], projection = #te.projection<sum>} : (tensor<4096x4096xf32>, tensor<4096x256xf32>) -> tensor<4096x256xf32>
  te.export %2, %3, %6, %9 {names = ["A", "B", "C", "D"]} : tensor<?x?xf64>, tensor<?x?xf64>, tensor<4096x256xf64>, tensor<4096x256xf32>
}
