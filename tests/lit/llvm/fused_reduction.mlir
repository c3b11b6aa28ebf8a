// Fusion turns a map chain and its reduction into one kernel.
// RUN: %fuse-opt %s -p fuse | filecheck %s
// CHECK-COUNT-1: ew.generic
// CHECK-NOT: ew.generic
// CHECK: te.export
builtin.module {
  %0 = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %1 = te.dim %0, 0 : i64 : tensor<?xf64>
  %2 = ew.generic ins(%0 : tensor<?xf64>) tables(:) extents(%1) attributes {maps = [[0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
  ^bb0(%3: f64):
    %4 = math.exp %3 : f64
    ew.yield %4 : f64
  }
  %5 = ew.generic ins(%2 : tensor<?xf64>) tables(:) extents(%1) attributes {maps = [[0 : i64]], iterators = [#ew.iterator<reduction>], kind = [#ew.kind<sum>]} -> tensor<f64> {
  ^bb0(%6: f64):
    ew.yield %6 : f64
  }
  te.export %5 {names = ["S"]} : tensor<f64>
}
