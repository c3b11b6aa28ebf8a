// freeze: equal pure ops in a body merge, and bodies equal up to SSA names get equal keys.
// RUN: %fuse-opt %s -p freeze | filecheck %s
// CHECK: %a = ew.generic {{.*}} body_key = "[[KEY:[0-9a-f]+]]"
// CHECK-COUNT-1: math.exp
// CHECK-NEXT: arith.mulf %[[E:.*]], %[[E]]
// CHECK: %b = ew.generic {{.*}} body_key = "[[KEY]]"
// CHECK: %c = ew.generic
// CHECK-NOT: [[KEY]]
// CHECK: te.export
builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %n = te.dim %x, 0 : i64 : tensor<?xf64>
  %a = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
  ^bb0(%v: f64):
    %e1 = math.exp %v : f64
    %e2 = math.exp %v : f64
    %p = arith.mulf %e1, %e2 : f64
    ew.yield %p : f64
  }
  %b = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
  ^bb0(%other: f64):
    %f = math.exp %other : f64
    %q = arith.mulf %f, %f : f64
    ew.yield %q : f64
  }
  %c = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
  ^bb0(%other: f64):
    %f = math.exp %other : f64
    %q = arith.addf %f, %f : f64
    ew.yield %q : f64
  }
  te.export %a, %b, %c {names = ["A", "B", "C"]} : tensor<?xf64>, tensor<?xf64>, tensor<?xf64>
}
