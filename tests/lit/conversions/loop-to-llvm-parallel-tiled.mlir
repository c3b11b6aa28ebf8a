// lower-loop-to-llvm with threads: the work estimate of a parallel nest (whether it is split over threads, into
// how many chunks) multiplies the outer trip count by a bound on each inner loop's trip taken from outside the
// nest: n for a loop over [0, n), k for a tile over [s, min(s + k, e)) (pipeline-rows' blocks of rows, any
// strip-mined loop). Here: blocks × rows per block × columns, compared with parallel-min.
// RUN: %fuse-opt %s -p 'lower-loop-to-llvm{threads=2 parallel-min=100000}' | filecheck %s
builtin.module attributes {fuse.args = [#fuse.arg<"X", input>], fuse.results = [#fuse.result<"S", export>], fuse.errors = [], fuse.host_calls = []} {
  func.func @fuse_main() {
    %zero = arith.constant 0.000000e+00 : f64
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %x = loop.arg 0 : i64 "X" : memref<?x?xf64>
    %rows = loop.dim %x, 0 : i64 : memref<?x?xf64>
    %cols = loop.dim %x, 1 : i64 : memref<?x?xf64>
    %s = loop.alloc(%rows) : memref<?xf64>
    %per = arith.ceildivsi %rows, %c64 : index
    %blocks = arith.ceildivsi %rows, %per : index
    loop.for %c0 to %blocks step %c1 attributes {parallel} {
    ^bb0(%b: index):
      %off = arith.muli %b, %per : index
      %end0 = arith.addi %off, %per : index
      %end = arith.minsi %end0, %rows : index
      loop.for %off to %end step %c1 {
      ^bb1(%r: index):
        %sum = loop.for %c0 to %cols step %c1 iter_args(%zero : f64) -> f64 {
        ^bb2(%c: index, %acc: f64):
          %v = loop.load %x[%r, %c] : memref<?x?xf64> -> f64
          %next = arith.addf %acc, %v : f64
          loop.yield %next : f64
        }
        loop.store %sum, %s[%r] : f64, memref<?xf64>
        loop.yield
      }
      loop.yield
    }
    loop.result %s, 0 : i64 "S" : memref<?xf64>
    func.return
  }
}

// CHECK-LABEL: llvm.func @fuse_main
// CHECK:       %[[PER:[0-9]+]] = llvm.add %{{[0-9]+}}, %{{[0-9]+}} : i64
// CHECK:       %[[TRIP:[0-9]+]] = llvm.sub %{{[0-9]+}}, %{{[0-9]+}} : i64
// CHECK-NEXT:  %[[W1:[0-9]+]] = llvm.mul %[[TRIP]], %[[PER]] : i64
// CHECK-NEXT:  %[[W2:[0-9]+]] = llvm.mul %[[W1]], %{{[0-9]+}} : i64
// CHECK-NEXT:  %{{[0-9]+}} = llvm.icmp "sge" %[[W2]], %{{[0-9]+}} : i64
// CHECK:       llvm.call @fuse_parallel_for
