// fuse-rows: a row sum and the division by it become one parallel nest over rows with two sequential phases;
// the row sum reaches the second phase as a value. Rows over row-cache-bytes run the original nests (row_fallback).
// RUN: %fuse-opt %s -p fuse-rows --pass-statistics 2>%t.stats | filecheck %s
// RUN: filecheck %s --check-prefix=STATS < %t.stats
// RUN: %fuse-opt %s -p 'fuse-rows{row-cache-bytes=-1}' | filecheck %s --check-prefix=ALWAYS
// RUN: %fuse-opt %s -p 'fuse-rows{row-cache-bytes=0}' | filecheck %s --check-prefix=OFF
// CHECK-LABEL: builtin.module
// The split: all rows when a row of X and of the output (8 bytes per column each) fits 512 KiB, else none.
// CHECK: %[[FITS:.*]] = arith.cmpi ule, %{{.*}}, %{{.*}} : index
// CHECK: %[[SPLIT:.*]] = arith.select %[[FITS]], %{{.*}}, %{{.*}} : index
// CHECK: loop.for %{{.*}} to %[[SPLIT]] step %{{.*}} attributes {parallel} {
// CHECK-NEXT: ^{{.*}}(%[[ROW:.*]]: index):
// CHECK: %[[SUM:.*]] = loop.for {{.*}} iter_args
// CHECK: loop.load %{{.*}}[%[[ROW]], %{{.*}}]
// CHECK: loop.store %[[SUM]], %{{.*}}[%[[ROW]]]
// CHECK: loop.for {{.*}} attributes {parallel} {
// CHECK-NOT: loop.load %{{.*}}[%[[ROW]]] :
// CHECK: arith.divf %{{.*}}, %[[SUM]] : f64
// CHECK: loop.for %[[SPLIT]] to %{{.*}} attributes {parallel, row_fallback}
// CHECK: loop.for %[[SPLIT]] to %{{.*}} attributes {parallel, row_fallback}
// STATS: (1) loads-forwarded
// STATS: (1) nests-fused
// ALWAYS-NOT: row_fallback
// ALWAYS: loop.for {{.*}} attributes {parallel} {
// ALWAYS-NOT: row_fallback
// OFF-NOT: row_fallback
// OFF-COUNT-2: loop.for %{{.*}} to %{{.*}} step %{{.*}} attributes {parallel} {
builtin.module {
  func.func @fuse_main() {
    %0 = arith.constant 0 : index
    %1 = arith.constant 1 : index
    %2 = arith.constant 0.000000e+00 : f64
    %3 = loop.arg 0 : i64 "X" : memref<?x?xf64>
    %4 = loop.dim %3, 0 : i64 : memref<?x?xf64>
    %5 = loop.dim %3, 1 : i64 : memref<?x?xf64>
    %6 = loop.alloc(%4) : memref<?xf64>
    loop.for %0 to %4 step %1 attributes {parallel} {
    ^bb0(%7: index):
      %8 = loop.for %0 to %5 step %1 iter_args(%2 : f64) -> f64 {
      ^bb1(%9: index, %10: f64):
        %11 = loop.load %3[%7, %9] : memref<?x?xf64> -> f64
        %12 = arith.addf %10, %11 : f64
        loop.yield %12 : f64
      }
      loop.store %8, %6[%7] : f64, memref<?xf64>
      loop.yield
    }
    %13 = loop.alloc(%4, %5) : memref<?x?xf64>
    loop.for %0 to %4 step %1 attributes {parallel} {
    ^bb2(%14: index):
      loop.for %0 to %5 step %1 attributes {parallel} {
      ^bb3(%15: index):
        %16 = loop.load %3[%14, %15] : memref<?x?xf64> -> f64
        %17 = loop.load %6[%14] : memref<?xf64> -> f64
        %18 = arith.divf %16, %17 : f64
        loop.store %18, %13[%14, %15] : f64, memref<?x?xf64>
        loop.yield
      }
      loop.yield
    }
    loop.result %13, 0 : i64 "Y" : memref<?x?xf64>
    func.return
  }
}
