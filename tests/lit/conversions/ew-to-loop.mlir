// lower-ew-to-loop: each kernel becomes a loop nest over buffers in func.func @fuse_main (the native
// ABI's shape): inputs are loop.arg slots, results loop.result slots, a map loads and stores per element,
// a reduction carries its accumulator through loop.for, ew.contract is a loop.gemm, a host call stays one.
// RUN: %fuse-opt %s -p 'lower-ew-to-loop' | filecheck %s
// CHECK-LABEL: builtin.module attributes {fuse.args = [#fuse.arg<"X", input>, #fuse.arg<"B", input>], fuse.results = [#fuse.result<"S", export>, #fuse.result<"C", export>, #fuse.result<"H", export>], fuse.errors = [#fuse.error<"j is {1} in X[i, j] but {0} in X[j, k]", "<stdin>:3:14:1">, #fuse.error<"j is {1} in B[j] but {0} in X[i, j]", "<stdin>:1:26:1">], fuse.host_calls = [#fuse.host_call<"concat", {axis = 1 : i64}>]} {
// CHECK-NEXT:   func.func @fuse_main() {
// CHECK-NEXT:     %[[V0:[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:     %[[V1:[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:     %[[V2:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:     %[[V3:[0-9]+]] = loop.arg 0 : i64 "X" : memref<?x?xf64>
// CHECK-NEXT:     %[[V4:[0-9]+]] = loop.arg 1 : i64 "B" : memref<?xf64>
// CHECK-NEXT:     %[[V5:[0-9]+]] = loop.dim %[[V3]], 0 : i64 : memref<?x?xf64>
// CHECK-NEXT:     %[[V6:[0-9]+]] = loop.dim %[[V3]], 1 : i64 : memref<?x?xf64>
// CHECK-NEXT:     %[[V7:[0-9]+]] = arith.cmpi eq, %[[V5]], %[[V6]] : index
// CHECK-NEXT:     loop.check %[[V7]], %[[V5]], %[[V6]] code 1 : i64
// CHECK-NEXT:     %[[V8:[0-9]+]] = loop.dim %[[V4]], 0 : i64 : memref<?xf64>
// CHECK-NEXT:     %[[V9:[0-9]+]] = arith.cmpi eq, %[[V5]], %[[V8]] : index
// CHECK-NEXT:     loop.check %[[V9]], %[[V5]], %[[V8]] code 2 : i64
// CHECK-NEXT:     %[[V10:[0-9]+]] = loop.alloc(%[[V5]], %[[V6]]) : memref<?x?xf64>
// CHECK-NEXT:     loop.for %[[V0]] to %[[V5]] step %[[V1]] attributes {parallel} {
// CHECK-NEXT:     ^bb0(%[[V11:[0-9]+]]: index):
// CHECK-NEXT:       loop.for %[[V0]] to %[[V6]] step %[[V1]] attributes {parallel} {
// CHECK-NEXT:       ^bb0(%[[V12:[0-9]+]]: index):
// CHECK-NEXT:         %[[V13:[0-9]+]] = loop.load %[[V3]][%[[V11]], %[[V12]]] : memref<?x?xf64> -> f64
// CHECK-NEXT:         %[[V14:[0-9]+]] = math.exp %[[V13]] : f64
// CHECK-NEXT:         loop.store %[[V14]], %[[V10]][%[[V11]], %[[V12]]] : f64, memref<?x?xf64>
// CHECK-NEXT:         loop.yield
// CHECK-NEXT:       }
// CHECK-NEXT:       loop.yield
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[V15:[0-9]+]] = loop.alloc(%[[V5]], %[[V6]]) : memref<?x?xf64>
// CHECK-NEXT:     loop.for %[[V0]] to %[[V5]] step %[[V1]] attributes {parallel} {
// CHECK-NEXT:     ^bb0(%[[V16:[0-9]+]]: index):
// CHECK-NEXT:       loop.for %[[V0]] to %[[V6]] step %[[V1]] attributes {parallel} {
// CHECK-NEXT:       ^bb0(%[[V17:[0-9]+]]: index):
// CHECK-NEXT:         %[[V18:[0-9]+]] = loop.load %[[V10]][%[[V16]], %[[V17]]] : memref<?x?xf64> -> f64
// CHECK-NEXT:         %[[V19:[0-9]+]] = loop.load %[[V4]][%[[V17]]] : memref<?xf64> -> f64
// CHECK-NEXT:         %[[V20:[0-9]+]] = arith.addf %[[V18]], %[[V19]] : f64
// CHECK-NEXT:         loop.store %[[V20]], %[[V15]][%[[V16]], %[[V17]]] : f64, memref<?x?xf64>
// CHECK-NEXT:         loop.yield
// CHECK-NEXT:       }
// CHECK-NEXT:       loop.yield
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[V21:[0-9]+]] = loop.alloc(%[[V5]]) : memref<?xf64>
// CHECK-NEXT:     loop.for %[[V0]] to %[[V5]] step %[[V1]] attributes {parallel} {
// CHECK-NEXT:     ^bb0(%[[V22:[0-9]+]]: index):
// CHECK-NEXT:       %[[V23:[0-9]+]] = loop.for %[[V0]] to %[[V6]] step %[[V1]] iter_args(%[[V2]] : f64) -> f64 {
// CHECK-NEXT:       ^bb0(%[[V24:[0-9]+]]: index, %[[V25:[0-9]+]]: f64):
// CHECK-NEXT:         %[[V26:[0-9]+]] = loop.load %[[V15]][%[[V22]], %[[V24]]] : memref<?x?xf64> -> f64
// CHECK-NEXT:         %[[V27:[0-9]+]] = arith.addf %[[V25]], %[[V26]] : f64
// CHECK-NEXT:         loop.yield %[[V27]] : f64
// CHECK-NEXT:       }
// CHECK-NEXT:       loop.store %[[V23]], %[[V21]][%[[V22]]] : f64, memref<?xf64>
// CHECK-NEXT:       loop.yield
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[V28:[0-9]+]] = loop.alloc(%[[V5]], %[[V6]]) : memref<?x?xf64>
// CHECK-NEXT:     %[[V29:[0-9]+]] = arith.cmpi eq, %[[V6]], %[[V0]] : index
// CHECK-NEXT:     %[[V30:[0-9]+]] = arith.select %[[V29]], %[[V5]], %[[V0]] : index
// CHECK-NEXT:     loop.for %[[V0]] to %[[V30]] step %[[V1]] attributes {parallel} {
// CHECK-NEXT:     ^bb0(%[[V31:[0-9]+]]: index):
// CHECK-NEXT:       loop.for %[[V0]] to %[[V6]] step %[[V1]] attributes {parallel} {
// CHECK-NEXT:       ^bb0(%[[V32:[0-9]+]]: index):
// CHECK-NEXT:         loop.store %[[V2]], %[[V28]][%[[V31]], %[[V32]]] : f64, memref<?x?xf64>
// CHECK-NEXT:         loop.yield
// CHECK-NEXT:       }
// CHECK-NEXT:       loop.yield
// CHECK-NEXT:     }
// CHECK-NEXT:     loop.gemm %[[V3]], %[[V3]], %[[V28]] batch %[[V1]] m %[[V5]] n %[[V6]] k %[[V6]] {trans_a = false, trans_b = false, broadcast_a = false, broadcast_b = false} : memref<?x?xf64>, memref<?x?xf64>, memref<?x?xf64>
// CHECK-NEXT:     %[[V33:[0-9]+]] = loop.alloc(%[[V5]], %[[V6]]) : memref<?x?xf64>
// CHECK-NEXT:     loop.for %[[V0]] to %[[V5]] step %[[V1]] attributes {parallel} {
// CHECK-NEXT:     ^bb0(%[[V34:[0-9]+]]: index):
// CHECK-NEXT:       loop.for %[[V0]] to %[[V6]] step %[[V1]] attributes {parallel} {
// CHECK-NEXT:       ^bb0(%[[V35:[0-9]+]]: index):
// CHECK-NEXT:         %[[V36:[0-9]+]] = loop.load %[[V3]][%[[V34]], %[[V35]]] : memref<?x?xf64> -> f64
// CHECK-NEXT:         loop.store %[[V36]], %[[V33]][%[[V34]], %[[V35]]] : f64, memref<?x?xf64>
// CHECK-NEXT:         loop.yield
// CHECK-NEXT:       }
// CHECK-NEXT:       loop.yield
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[V37:[0-9]+]] = loop.alloc(%[[V5]], %[[V6]]) : memref<?x?xf64>
// CHECK-NEXT:     loop.for %[[V0]] to %[[V5]] step %[[V1]] attributes {parallel} {
// CHECK-NEXT:     ^bb0(%[[V38:[0-9]+]]: index):
// CHECK-NEXT:       loop.for %[[V0]] to %[[V6]] step %[[V1]] attributes {parallel} {
// CHECK-NEXT:       ^bb0(%[[V39:[0-9]+]]: index):
// CHECK-NEXT:         %[[V40:[0-9]+]] = loop.load %[[V3]][%[[V38]], %[[V39]]] : memref<?x?xf64> -> f64
// CHECK-NEXT:         loop.store %[[V40]], %[[V37]][%[[V38]], %[[V39]]] : f64, memref<?x?xf64>
// CHECK-NEXT:         loop.yield
// CHECK-NEXT:       }
// CHECK-NEXT:       loop.yield
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[V41:[0-9]+]] = loop.host_call "concat"(%[[V33]], %[[V37]]) {id = 0 : i64, params = {axis = 1 : i64}} : (memref<?x?xf64>, memref<?x?xf64>) -> memref<?x?xf64>
// CHECK-NEXT:     loop.result %[[V21]], 0 : i64 "S" : memref<?xf64>
// CHECK-NEXT:     loop.result %[[V28]], 1 : i64 "C" : memref<?x?xf64>
// CHECK-NEXT:     loop.result %[[V41]], 2 : i64 "H" : memref<?x?xf64>
// CHECK-NEXT:     func.return
// CHECK-NEXT:   }
// CHECK-NEXT: }
builtin.module {
  %0 = te.input "X" {indices = ["i", "j"]} : tensor<?x?xf64>
  %1 = te.input "B" {indices = ["j"]} : tensor<?xf64>
  %2 = te.dim %0, 0 : i64 : tensor<?x?xf64>
  %3 = te.dim %0, 1 : i64 : tensor<?x?xf64>
  te.check_dim %2, %3 {message = "j is {1} in X[i, j] but {0} in X[j, k]"} loc("<stdin>":3:14)
  %4 = te.dim %1, 0 : i64 : tensor<?xf64>
  te.check_dim %2, %4 {message = "j is {1} in B[j] but {0} in X[i, j]"} loc("<stdin>":1:26)
  %5 = te.dim %0, 0 : i64 : tensor<?x?xf64>
  %6 = te.dim %0, 1 : i64 : tensor<?x?xf64>
  %7 = ew.generic ins(%0 : tensor<?x?xf64>) tables(:) extents(%5, %6) attributes {maps = [[0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
  ^bb0(%8: f64):
    %9 = math.exp %8 : f64
    ew.yield %9 : f64
  }
  %10 = te.dim %1, 0 : i64 : tensor<?xf64>
  %11 = ew.generic ins(%7, %1 : tensor<?x?xf64>, tensor<?xf64>) tables(:) extents(%5, %6) attributes {maps = [[0 : i64, 1 : i64], [1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
  ^bb0(%12: f64, %13: f64):
    %14 = arith.addf %12, %13 : f64
    ew.yield %14 : f64
  }
  %15 = ew.generic ins(%11 : tensor<?x?xf64>) tables(:) extents(%5, %6) attributes {maps = [[0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<sum>]} -> tensor<?xf64> {
  ^bb0(%16: f64):
    ew.yield %16 : f64
  }
  %17 = ew.contract %0, %0 extents(%5, %6, %6) {maps = [[0 : i64, 2 : i64], [2 : i64, 1 : i64]], out = [0 : i64, 1 : i64]} : tensor<?x?xf64>, tensor<?x?xf64> -> tensor<?x?xf64>
  %18 = ew.generic ins(%0 : tensor<?x?xf64>) tables(:) extents(%5, %6) attributes {maps = [[0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
  ^bb0(%19: f64):
    ew.yield %19 : f64
  }
  %20 = ew.generic ins(%0 : tensor<?x?xf64>) tables(:) extents(%5, %6) attributes {maps = [[0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
  ^bb0(%21: f64):
    ew.yield %21 : f64
  }
  %22 = ew.host_call "concat" %18, %20 {params = {axis = 1 : i64}} : (tensor<?x?xf64>, tensor<?x?xf64>) -> tensor<?x?xf64>
  te.export %15, %17, %22 {names = ["S", "C", "H"]} : tensor<?xf64>, tensor<?x?xf64>, tensor<?x?xf64>
}
