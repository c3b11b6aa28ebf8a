// Typed attributes: te.access axes (#te.axis), ew.generic iterators (#ew.iterator) and reduction kinds
// (#ew.kind) print, parse and print back unchanged, also through the generic form.
// RUN: %fuse-opt %s | filecheck %s
// RUN: %fuse-opt %s | %fuse-opt | filecheck %s
// RUN: %fuse-opt %s --print-op-generic | %fuse-opt | filecheck %s

builtin.module {
  %x = te.input "X" {indices = ["i", "j"]} : tensor<?x?xf64>
  %p = te.input "P" {indices = ["k"]} : tensor<?xi64>
  %a = te.access %x[] () {axes = [#te.axis<i + 1>, #te.axis<j - 2>], gather_indices = [], indices = ["i", "j"]} : tensor<?x?xf64>[] -> tensor<?x?xf64>
  %b = te.access %x[%p] () {axes = [#te.axis<3>, #te.axis<gather 0>], gather_indices = [["k"]], indices = ["k"]} : tensor<?x?xf64>[tensor<?xi64>] -> tensor<?xf64>
  %c = te.access %x[] () {axes = [#te.axis<slice -3:?:-1 as "-3::-1">, #te.axis<"j'">], gather_indices = [], indices = ["-3::-1", "j'"]} : tensor<?x?xf64>[] -> tensor<?x?xf64>
  %d = te.access %x[] () {axes = [#te.axis<"slice">, #te.axis<"slice">], gather_indices = [], indices = ["slice"]} : tensor<?x?xf64>[] -> tensor<?xf64>
  %n = te.dim %x, 0 : i64 : tensor<?x?xf64>
  %m = te.dim %x, 1 : i64 : tensor<?x?xf64>
  %s, %t = ew.generic ins(%x : tensor<?x?xf64>) tables(:) extents(%n, %m) attributes {maps = [[0, 1]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<sum>, #ew.kind<max>]} -> tensor<?xf64>, tensor<?xf64> {
  ^bb0(%v: f64):
    ew.yield %v, %v : f64, f64
  }
  te.export %a, %b, %c, %d, %s, %t {names = ["A", "B", "C", "D", "S", "T"]} : tensor<?x?xf64>, tensor<?xf64>, tensor<?x?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<?xf64>
}

// CHECK:      te.access %{{.*}}[] () {axes = {{\[}}#te.axis<i + 1>, #te.axis<j - 2>{{\]}}, gather_indices = [], indices = ["i", "j"]}
// CHECK-NEXT: te.access %{{.*}}[%{{.*}}] () {axes = {{\[}}#te.axis<3>, #te.axis<gather 0>{{\]}}
// CHECK-NEXT: te.access %{{.*}}[] () {axes = {{\[}}#te.axis<slice -3:?:-1 as "-3::-1">, #te.axis<"j'">{{\]}}
// CHECK-NEXT: te.access %{{.*}}[] () {axes = {{\[}}#te.axis<"slice">, #te.axis<"slice">{{\]}}
// CHECK:      ew.generic
// CHECK-SAME: iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<sum>, #ew.kind<max>]
