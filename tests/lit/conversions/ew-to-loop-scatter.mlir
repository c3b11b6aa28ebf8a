// lower-ew-to-loop, ew.scatter_add: the result is zero-filled by a parallel nest, then a second nest whose
// parallel outer loop runs over 16-element (128-byte) chunks of the named axis d; inside, every update b is
// visited serially: its index is loaded once per chunk and checked (code 2, before any store), then the chunk's
// elements are read, added and written back. Distinct chunks never write one element: no race, and duplicate
// indices accumulate in order.
// RUN: %fuse-opt %s -p 'lower-ew-to-loop' | filecheck %s
// CHECK-LABEL: builtin.module attributes {{.*}}fuse.errors = [#fuse.error<"scattered index {0} is out of range for an axis of extent {1}", "">]
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK: %[[W:.*]] = arith.constant 16 : index
// CHECK: %[[U:.*]] = loop.arg 0 : i64 "U"
// CHECK: %[[I:.*]] = loop.arg 1 : i64 "Idx"
// CHECK: %[[V:.*]] = loop.dim %{{.*}}, 0 : i64 : memref<?xf64>
// CHECK: %[[B:.*]] = loop.dim %[[U]], 0
// CHECK: %[[D:.*]] = loop.dim %[[U]], 1
// CHECK: %[[S:.*]] = loop.alloc(%[[V]], %[[D]]) : memref<?x?xf64>
// CHECK: loop.for %{{.*}} to %[[V]] step %{{.*}} attributes {parallel} {
// CHECK: loop.store %[[ZERO]], %[[S]]
// CHECK: %[[CHUNKS:.*]] = arith.divui %{{.*}}, %[[W]] : index
// CHECK: loop.for %{{.*}} to %[[CHUNKS]] step %{{.*}} attributes {parallel} {
// CHECK-NEXT: ^bb0(%[[C:.*]]: index):
// CHECK-NEXT: %[[START:.*]] = arith.muli %[[C]], %[[W]] : index
// CHECK: loop.for %{{.*}} to %[[B]] step %{{.*}} {
// CHECK-NEXT: ^bb0(%[[BI:.*]]: index):
// CHECK-NEXT: %[[RAW:.*]] = loop.load %[[I]][%[[BI]]] : memref<?xi64> -> i64
// CHECK-NEXT: %[[ROW:.*]] = arith.index_cast %[[RAW]] : i64 to index
// CHECK-NEXT: %[[OK:.*]] = arith.cmpi ult, %[[ROW]], %[[V]] : index
// CHECK-NEXT: loop.check %[[OK]], %[[ROW]], %[[V]] code 1 : i64
// CHECK: loop.for
// CHECK-NEXT: ^bb0(%[[K:.*]]: index):
// CHECK-NEXT: %[[DI:.*]] = arith.addi %[[START]], %[[K]] : index
// CHECK-NEXT: %[[X:.*]] = loop.load %[[U]][%[[BI]], %[[DI]]]
// CHECK-NEXT: %[[OLD:.*]] = loop.load %[[S]][%[[ROW]], %[[DI]]]
// CHECK-NEXT: %[[NEW:.*]] = arith.addf %[[OLD]], %[[X]] : f64
// CHECK-NEXT: loop.store %[[NEW]], %[[S]][%[[ROW]], %[[DI]]]
// CHECK: loop.result %[[S]], 0 : i64 "S"
builtin.module {
  %u = te.input "U" {indices = ["b", "d"]} : tensor<?x?xf64>
  %i = te.input "Idx" {indices = ["b"]} : tensor<?xi64>
  %z = te.input "Z" {indices = ["v"]} : tensor<?xf64>
  %n = te.dim %z, 0 : i64 : tensor<?xf64>
  %s = ew.scatter_add %u[%i] (%n) {maps = [[0 : i64]], places = [-1 : i64, 1 : i64], check = "scattered index {0} is out of range for an axis of extent {1}"} : tensor<?x?xf64>[tensor<?xi64>] -> tensor<?x?xf64>
  te.export %s {names = ["S"]} : tensor<?x?xf64>
}
