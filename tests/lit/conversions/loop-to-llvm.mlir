// lower-loop-to-llvm: fuse_main takes the six ABI pointers; arguments load their data pointer and
// extents, allocations call fuse_alloc after a checked byte size, the top-level nest is outlined as the
// internal noinline @fuse_nest0 called with its buffers and extents, and its carried sum gets reassoc.
// RUN: %fuse-opt %s -p 'lower-loop-to-llvm' | filecheck %s
// CHECK-LABEL: builtin.module attributes {fuse.args = [#fuse.arg<"X", input>], fuse.results = [#fuse.result<"S", export>], fuse.errors = [], fuse.host_calls = []} {
// CHECK-NEXT:   llvm.func @fuse_alloc(!llvm.ptr, i64, i64) -> (!llvm.ptr {llvm.noalias}) attributes {no_unwind}
// CHECK-NEXT:   llvm.func internal @fuse_nest0(%[[V0:[0-9]+]]: i64, %[[V1:[0-9]+]]: i64, %[[V2:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V3:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V4:[0-9]+]]: i64, %[[V5:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V6:[0-9]+]]: i64, %[[V7:[0-9]+]]: !llvm.ptr {llvm.noalias}) -> i32 attributes {fuse.loop_depth = 2 : i64, no_unwind, no_inline} {
// CHECK-NEXT:     %[[V8:[0-9]+]] = llvm.mlir.constant(0) : i64
// CHECK-NEXT:     %[[V9:[0-9]+]] = llvm.mlir.constant(1) : i64
// CHECK-NEXT:     %[[V10:[0-9]+]] = llvm.mlir.constant(0.000000e+00 : f64) : f64
// CHECK-NEXT:     %[[V11:[0-9]+]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT:     llvm.br ^bb1(%[[V0]] : i64)
// CHECK-NEXT:   ^bb1(%[[V12:[0-9]+]]: i64):
// CHECK-NEXT:     %[[V13:[0-9]+]] = llvm.icmp "slt" %[[V12]], %[[V1]] : i64
// CHECK-NEXT:     llvm.cond_br %[[V13]], ^bb2, ^bb6
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     llvm.br ^bb3(%[[V8]], %[[V10]] : i64, f64)
// CHECK-NEXT:   ^bb3(%[[V14:[0-9]+]]: i64, %[[V15:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V16:[0-9]+]] = llvm.icmp "slt" %[[V14]], %[[V4]] : i64
// CHECK-NEXT:     llvm.cond_br %[[V16]], ^bb4, ^bb5(%[[V15]] : f64)
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     %[[V17:[0-9]+]] = llvm.mul %[[V12]], %[[V4]] overflow<nsw> : i64
// CHECK-NEXT:     %[[V18:[0-9]+]] = llvm.add %[[V17]], %[[V14]] overflow<nsw> : i64
// CHECK-NEXT:     %[[V19:[0-9]+]] = llvm.getelementptr inbounds %[[V5]][%[[V18]]] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK-NEXT:     %[[V20:[0-9]+]] = llvm.load %[[V19]] {alignment = 8 : i64} : !llvm.ptr -> f64
// CHECK-NEXT:     %[[V21:[0-9]+]] = llvm.fadd %[[V15]], %[[V20]] {fastmathFlags = #llvm.fastmath<reassoc>} : f64
// CHECK-NEXT:     %[[V22:[0-9]+]] = llvm.add %[[V14]], %[[V9]] overflow<nsw> : i64
// CHECK-NEXT:     llvm.br ^bb3(%[[V22]], %[[V21]] : i64, f64)
// CHECK-NEXT:   ^bb5(%[[V23:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V24:[0-9]+]] = llvm.getelementptr inbounds %[[V7]][%[[V12]]] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK-NEXT:     llvm.store %[[V23]], %[[V24]] {alignment = 8 : i64} : f64, !llvm.ptr
// CHECK-NEXT:     %[[V25:[0-9]+]] = llvm.add %[[V12]], %[[V9]] overflow<nsw> : i64
// CHECK-NEXT:     llvm.br ^bb1(%[[V25]] : i64)
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     llvm.return %[[V11]] : i32
// CHECK-NEXT:   }
// CHECK-NEXT:   llvm.func @fuse_main(%[[V26:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V27:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V28:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V29:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V30:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V31:[0-9]+]]: !llvm.ptr) -> i32 attributes {no_unwind} {
// CHECK-NEXT:     %[[V32:[0-9]+]] = llvm.mlir.constant(0.000000e+00 : f64) : f64
// CHECK-NEXT:     %[[V33:[0-9]+]] = llvm.mlir.constant(0) : i64
// CHECK-NEXT:     %[[V34:[0-9]+]] = llvm.mlir.constant(1) : i64
// CHECK-NEXT:     %[[V35:[0-9]+]] = llvm.mlir.constant(8) : i64
// CHECK-NEXT:     %[[V36:[0-9]+]] = llvm.mlir.constant(9223372036854775807) : i64
// CHECK-NEXT:     %[[V37:[0-9]+]] = llvm.mlir.constant(true) : i1
// CHECK-NEXT:     %[[V38:[0-9]+]] = llvm.mlir.constant(-4) : i64
// CHECK-NEXT:     %[[V39:[0-9]+]] = llvm.mlir.constant(-4 : i32) : i32
// CHECK-NEXT:     %[[V40:[0-9]+]] = llvm.mlir.constant(-2) : i64
// CHECK-NEXT:     %[[V41:[0-9]+]] = llvm.mlir.constant(-2 : i32) : i32
// CHECK-NEXT:     %[[V42:[0-9]+]] = llvm.alloca %[[V34]] x i64 {alignment = 8 : i64} : (i64) -> !llvm.ptr
// CHECK-NEXT:     %[[V43:[0-9]+]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT:     %[[V44:[0-9]+]] = llvm.load %[[V26]] {alignment = 8 : i64} : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT:     %[[V45:[0-9]+]] = llvm.load %[[V27]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V46:[0-9]+]] = llvm.getelementptr inbounds %[[V27]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     %[[V47:[0-9]+]] = llvm.load %[[V46]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V48:[0-9]+]] = llvm.icmp "eq" %[[V45]], %[[V33]] : i64
// CHECK-NEXT:     %[[V49:[0-9]+]] = llvm.select %[[V48]], %[[V34]], %[[V45]] : i1, i64
// CHECK-NEXT:     %[[V50:[0-9]+]] = llvm.udiv %[[V36]], %[[V49]] : i64
// CHECK-NEXT:     %[[V51:[0-9]+]] = llvm.icmp "ule" %[[V35]], %[[V50]] : i64
// CHECK-NEXT:     %[[V52:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V51]], %[[V37]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V52]], ^bb1, ^bb4
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     %[[V53:[0-9]+]] = llvm.mul %[[V35]], %[[V45]] : i64
// CHECK-NEXT:     %[[V54:[0-9]+]] = llvm.call @fuse_alloc(%[[V31]], %[[V53]], %[[V33]]) : (!llvm.ptr, i64, i64) -> !llvm.ptr
// CHECK-NEXT:     %[[V55:[0-9]+]] = llvm.ptrtoint %[[V54]] : !llvm.ptr to i64
// CHECK-NEXT:     %[[V56:[0-9]+]] = llvm.icmp "ne" %[[V55]], %[[V33]] : i64
// CHECK-NEXT:     %[[V57:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V56]], %[[V37]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V57]], ^bb2, ^bb5
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     %[[V58:[0-9]+]] = llvm.call @fuse_nest0(%[[V33]], %[[V45]], %[[V30]], %[[V42]], %[[V47]], %[[V44]], %[[V45]], %[[V54]]) : (i64, i64, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr) -> i32
// CHECK-NEXT:     %[[V59:[0-9]+]] = llvm.icmp "eq" %[[V58]], %[[V43]] : i32
// CHECK-NEXT:     %[[V60:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V59]], %[[V37]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V60]], ^bb3, ^bb6
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     llvm.store %[[V54]], %[[V28]] {alignment = 8 : i64} : !llvm.ptr, !llvm.ptr
// CHECK-NEXT:     llvm.store %[[V45]], %[[V29]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V43]] : i32
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     llvm.store %[[V38]], %[[V30]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V61:[0-9]+]] = llvm.getelementptr inbounds %[[V30]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V33]], %[[V61]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V62:[0-9]+]] = llvm.getelementptr inbounds %[[V30]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V33]], %[[V62]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V39]] : i32
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     llvm.store %[[V40]], %[[V30]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V63:[0-9]+]] = llvm.getelementptr inbounds %[[V30]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V53]], %[[V63]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V64:[0-9]+]] = llvm.getelementptr inbounds %[[V30]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V33]], %[[V64]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V41]] : i32
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     llvm.return %[[V58]] : i32
// CHECK-NEXT:   }
// CHECK-NEXT: }
builtin.module attributes {fuse.args = [#fuse.arg<"X", input>], fuse.results = [#fuse.result<"S", export>], fuse.errors = [], fuse.host_calls = []} {
  func.func @fuse_main() {
    %0 = arith.constant 0.000000e+00 : f64
    %1 = arith.constant 0 : index
    %2 = arith.constant 1 : index
    %3 = loop.arg 0 : i64 "X" : memref<?x?xf64>
    %4 = loop.dim %3, 0 : i64 : memref<?x?xf64>
    %5 = loop.dim %3, 1 : i64 : memref<?x?xf64>
    %6 = loop.alloc(%4) : memref<?xf64>
    loop.for %1 to %4 step %2 attributes {parallel} {
    ^bb0(%7: index):
      %8 = loop.for %1 to %5 step %2 iter_args(%0 : f64) -> f64 {
      ^bb0(%9: index, %10: f64):
        %11 = loop.load %3[%7, %9] : memref<?x?xf64> -> f64
        %12 = arith.addf %10, %11 : f64
        loop.yield %12 : f64
      }
      loop.store %8, %6[%7] : f64, memref<?xf64>
      loop.yield
    }
    loop.result %6, 0 : i64 "S" : memref<?xf64>
    func.return
  }
}
