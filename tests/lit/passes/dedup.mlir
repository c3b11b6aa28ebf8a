// dedup merges kernels with equal bodies (names differ), never allocations, never in-place buffers.
// RUN: %fuse-opt %s -p dedup --split-input-file --pass-statistics 2>%t.stats | filecheck %s
// RUN: filecheck %s --check-prefix=STATS < %t.stats
// CHECK-LABEL: builtin.module
// CHECK: %[[A:.*]] = ew.generic
// CHECK-NOT: ew.generic
// CHECK: te.export %[[A]], %[[A]]
// STATS: (2) ops-merged
builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %n = te.dim %x, 0 : i64 : tensor<?xf64>
  %a = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
  ^bb0(%v: f64):
    %e = math.exp %v : f64
    ew.yield %e : f64
  }
  %b = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
  ^bb0(%w: f64):
    %f = math.exp %w : f64
    ew.yield %f : f64
  }
  te.export %a, %b {names = ["A", "B"]} : tensor<?xf64>, tensor<?xf64>
}
// -----
// Two identical kernels whose results are each overwritten in place stay two.
// CHECK-LABEL: builtin.module
// CHECK: %[[P:.*]] = ew.generic
// CHECK: %[[Q:.*]] = ew.generic
// CHECK: ew.generic ins(%[[P]] : tensor<?xf64>)
// CHECK-SAME: inplace = [0 : i64]
// CHECK: ew.generic ins(%[[Q]] : tensor<?xf64>)
// CHECK-SAME: inplace = [0 : i64]
builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %n = te.dim %x, 0 : i64 : tensor<?xf64>
  %p = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
  ^bb0(%v: f64):
    %e = math.exp %v : f64
    ew.yield %e : f64
  }
  %q = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
  ^bb0(%v: f64):
    %e = math.exp %v : f64
    ew.yield %e : f64
  }
  %r = ew.generic ins(%p : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>], inplace = [0]} -> tensor<?xf64> {
  ^bb0(%v: f64):
    %e = arith.addf %v, %v : f64
    ew.yield %e : f64
  }
  %s = ew.generic ins(%q : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>], inplace = [0]} -> tensor<?xf64> {
  ^bb0(%v: f64):
    %e = arith.mulf %v, %v : f64
    ew.yield %e : f64
  }
  te.export %r, %s {names = ["R", "S"]} : tensor<?xf64>, tensor<?xf64>
}
// -----
// Two identical allocations are not merged.
// CHECK-LABEL: builtin.module
// CHECK: loop.alloc
// CHECK: loop.alloc
builtin.module {
  func.func @fuse_main() {
    %n = arith.constant 5 : index
    %a = loop.alloc(%n) : memref<?xf64>
    %b = loop.alloc(%n) : memref<?xf64>
    loop.result %a, 0 : i64 "A" : memref<?xf64>
    loop.result %b, 1 : i64 "B" : memref<?xf64>
    func.return
  }
}
// -----
// Identical equations at the tensor_eq level become one.
// CHECK-LABEL: builtin.module
// CHECK-COUNT-1: te.map "exp"
// CHECK-NOT: te.map
builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %a = te.map "exp" %x {operand_indices = [["i"]], indices = ["i"]} : (tensor<?xf64>) -> tensor<?xf64>
  %b = te.map "exp" %x {operand_indices = [["i"]], indices = ["i"]} : (tensor<?xf64>) -> tensor<?xf64>
  te.export %a, %b {names = ["A", "B"]} : tensor<?xf64>, tensor<?xf64>
}
