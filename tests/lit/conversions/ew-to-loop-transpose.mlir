// lower-ew-to-loop, a permuting copy (T[b, i, j] = A[i, j, b], as before a batched GEMM): the result is
// contiguous along j, the input along b, so the nest runs in 8 x 8 tiles of b and j (TRANSPOSE_TILE). The
// other result dim i stays the outermost loop (the one the threads split), then the loops over the tiles of b
// and of j, then b and j within their tiles, each over [s, s + min(8, n - s)): LLVM sees a trip count of at
// most 8 and unrolls the tile, the thread split's work estimate counts 8 for each.
// RUN: %fuse-opt %s -p 'lower-ew-to-loop' | filecheck %s
// CHECK-LABEL: builtin.module attributes {fuse.args = [#fuse.arg<"A", input>], fuse.results = [#fuse.result<"T", export>], fuse.errors = [], fuse.host_calls = []} {
// CHECK-NEXT:   func.func @fuse_main() {
// CHECK-NEXT:     %[[V0:[0-9]+]] = arith.constant 8 : index
// CHECK-NEXT:     %[[V1:[0-9]+]] = arith.constant 7 : index
// CHECK-NEXT:     %[[V2:[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:     %[[V3:[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:     %[[V4:[0-9]+]] = loop.arg 0 : i64 "A" : memref<?x?x?xf64>
// CHECK-NEXT:     %[[V5:[0-9]+]] = loop.dim %[[V4]], 0 : i64 : memref<?x?x?xf64>
// CHECK-NEXT:     %[[V6:[0-9]+]] = loop.dim %[[V4]], 1 : i64 : memref<?x?x?xf64>
// CHECK-NEXT:     %[[V7:[0-9]+]] = loop.dim %[[V4]], 2 : i64 : memref<?x?x?xf64>
// CHECK-NEXT:     %[[V8:[0-9]+]] = loop.alloc(%[[V7]], %[[V5]], %[[V6]]) : memref<?x?x?xf64>
// CHECK-NEXT:     %[[V9:[0-9]+]] = arith.addi %[[V7]], %[[V1]] : index
// CHECK-NEXT:     %[[V10:[0-9]+]] = arith.divui %[[V9]], %[[V0]] : index
// CHECK-NEXT:     %[[V11:[0-9]+]] = arith.addi %[[V6]], %[[V1]] : index
// CHECK-NEXT:     %[[V12:[0-9]+]] = arith.divui %[[V11]], %[[V0]] : index
// CHECK-NEXT:     loop.for %[[V3]] to %[[V5]] step %[[V2]] attributes {parallel} {
// CHECK-NEXT:     ^bb0(%[[V13:[0-9]+]]: index):
// CHECK-NEXT:       loop.for %[[V3]] to %[[V10]] step %[[V2]] attributes {parallel} {
// CHECK-NEXT:       ^bb0(%[[V14:[0-9]+]]: index):
// CHECK-NEXT:         %[[V15:[0-9]+]] = arith.muli %[[V14]], %[[V0]] : index
// CHECK-NEXT:         loop.for %[[V3]] to %[[V12]] step %[[V2]] attributes {parallel} {
// CHECK-NEXT:         ^bb0(%[[V16:[0-9]+]]: index):
// CHECK-NEXT:           %[[V17:[0-9]+]] = arith.muli %[[V16]], %[[V0]] : index
// CHECK-NEXT:           %[[V18:[0-9]+]] = arith.subi %[[V7]], %[[V15]] : index
// CHECK-NEXT:           %[[V19:[0-9]+]] = arith.minsi %[[V0]], %[[V18]] : index
// CHECK-NEXT:           %[[V20:[0-9]+]] = arith.addi %[[V15]], %[[V19]] : index
// CHECK-NEXT:           loop.for %[[V15]] to %[[V20]] step %[[V2]] attributes {parallel} {
// CHECK-NEXT:           ^bb0(%[[V21:[0-9]+]]: index):
// CHECK-NEXT:             %[[V22:[0-9]+]] = arith.subi %[[V6]], %[[V17]] : index
// CHECK-NEXT:             %[[V23:[0-9]+]] = arith.minsi %[[V0]], %[[V22]] : index
// CHECK-NEXT:             %[[V24:[0-9]+]] = arith.addi %[[V17]], %[[V23]] : index
// CHECK-NEXT:             loop.for %[[V17]] to %[[V24]] step %[[V2]] attributes {parallel} {
// CHECK-NEXT:             ^bb0(%[[V25:[0-9]+]]: index):
// CHECK-NEXT:               %[[V26:[0-9]+]] = loop.load %[[V4]][%[[V13]], %[[V25]], %[[V21]]] : memref<?x?x?xf64> -> f64
// CHECK-NEXT:               loop.store %[[V26]], %[[V8]][%[[V21]], %[[V13]], %[[V25]]] : f64, memref<?x?x?xf64>
// CHECK-NEXT:               loop.yield
// CHECK-NEXT:             }
// CHECK-NEXT:             loop.yield
// CHECK-NEXT:           }
// CHECK-NEXT:           loop.yield
// CHECK-NEXT:         }
// CHECK-NEXT:         loop.yield
// CHECK-NEXT:       }
// CHECK-NEXT:       loop.yield
// CHECK-NEXT:     }
// CHECK-NEXT:     loop.result %[[V8]], 0 : i64 "T" : memref<?x?x?xf64>
// CHECK-NEXT:     func.return
// CHECK-NEXT:   }
// CHECK-NEXT: }
builtin.module {
  %0 = te.input "A" {indices = ["i", "j", "b"]} : tensor<?x?x?xf64>
  %1 = te.dim %0, 0 : i64 : tensor<?x?x?xf64>
  %2 = te.dim %0, 1 : i64 : tensor<?x?x?xf64>
  %3 = te.dim %0, 2 : i64 : tensor<?x?x?xf64>
  %4 = ew.generic ins(%0 : tensor<?x?x?xf64>) tables(:) extents(%3, %1, %2) attributes {maps = [[1 : i64, 2 : i64, 0 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?x?xf64> {
  ^bb0(%5: f64):
    ew.yield %5 : f64
  }
  te.export %4 {names = ["T"]} : tensor<?x?x?xf64>
}
