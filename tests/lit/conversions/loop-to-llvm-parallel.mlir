// lower-loop-to-llvm with threads (loop_to_llvm/parallel.py): a nest whose outer loop folds its
// carried value with one associative op also gets a chunk function @fuse_nest0_chunk; fuse_main runs it
// through fuse_parallel_for in min(trip, clamp(work / 16384, threads, threads * 16)) chunks, claimed by the
// threads as they go, and folds the chunks' partial sums in chunk order.
// RUN: %fuse-opt %s -p 'lower-loop-to-llvm{threads=2 parallel-min=0}' | filecheck %s
// CHECK-LABEL: builtin.module attributes {fuse.args = [#fuse.arg<"X", input>], fuse.results = [#fuse.result<"S", export>], fuse.errors = [], fuse.host_calls = []} {
// CHECK-NEXT:   llvm.func @fuse_alloc(!llvm.ptr, i64, i64) -> (!llvm.ptr {llvm.noalias}) attributes {no_unwind}
// CHECK-NEXT:   llvm.func @fuse_parallel_for(!llvm.ptr, !llvm.ptr, i64, i64, !llvm.ptr) -> i32 attributes {no_unwind}
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
// CHECK-NEXT:   llvm.func internal @fuse_nest0_chunk(%[[V26:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V27:[0-9]+]]: i64, %[[V28:[0-9]+]]: !llvm.ptr) -> i32 attributes {no_unwind} {
// CHECK-NEXT:     %[[V29:[0-9]+]] = llvm.mlir.constant(1) : i64
// CHECK-NEXT:     %[[V30:[0-9]+]] = llvm.load %[[V26]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V31:[0-9]+]] = llvm.getelementptr inbounds %[[V26]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     %[[V32:[0-9]+]] = llvm.load %[[V31]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V33:[0-9]+]] = llvm.getelementptr inbounds %[[V26]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     %[[V34:[0-9]+]] = llvm.load %[[V33]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V35:[0-9]+]] = llvm.sub %[[V32]], %[[V30]] : i64
// CHECK-NEXT:     %[[V36:[0-9]+]] = llvm.mul %[[V35]], %[[V27]] overflow<nsw> : i64
// CHECK-NEXT:     %[[V37:[0-9]+]] = llvm.sdiv %[[V36]], %[[V34]] : i64
// CHECK-NEXT:     %[[V38:[0-9]+]] = llvm.add %[[V30]], %[[V37]] overflow<nsw> : i64
// CHECK-NEXT:     %[[V39:[0-9]+]] = llvm.add %[[V27]], %[[V29]] overflow<nsw> : i64
// CHECK-NEXT:     %[[V40:[0-9]+]] = llvm.mul %[[V35]], %[[V39]] overflow<nsw> : i64
// CHECK-NEXT:     %[[V41:[0-9]+]] = llvm.sdiv %[[V40]], %[[V34]] : i64
// CHECK-NEXT:     %[[V42:[0-9]+]] = llvm.add %[[V30]], %[[V41]] overflow<nsw> : i64
// CHECK-NEXT:     %[[V43:[0-9]+]] = llvm.getelementptr inbounds %[[V26]][3] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     %[[V44:[0-9]+]] = llvm.load %[[V43]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V45:[0-9]+]] = llvm.getelementptr inbounds %[[V26]][4] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     %[[V46:[0-9]+]] = llvm.load %[[V45]] {alignment = 8 : i64} : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT:     %[[V47:[0-9]+]] = llvm.getelementptr inbounds %[[V26]][5] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     %[[V48:[0-9]+]] = llvm.load %[[V47]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V49:[0-9]+]] = llvm.getelementptr inbounds %[[V26]][6] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     %[[V50:[0-9]+]] = llvm.load %[[V49]] {alignment = 8 : i64} : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT:     %[[V51:[0-9]+]] = llvm.call @fuse_nest0(%[[V38]], %[[V42]], %[[V28]], %[[V26]], %[[V44]], %[[V46]], %[[V48]], %[[V50]]) : (i64, i64, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr) -> i32
// CHECK-NEXT:     llvm.return %[[V51]] : i32
// CHECK-NEXT:   }
// CHECK-NEXT:   llvm.func @fuse_main(%[[V52:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V53:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V54:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V55:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V56:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V57:[0-9]+]]: !llvm.ptr) -> i32 attributes {no_unwind} {
// CHECK-NEXT:     %[[V58:[0-9]+]] = llvm.mlir.constant(0.000000e+00 : f64) : f64
// CHECK-NEXT:     %[[V59:[0-9]+]] = llvm.mlir.constant(0) : i64
// CHECK-NEXT:     %[[V60:[0-9]+]] = llvm.mlir.constant(1) : i64
// CHECK-NEXT:     %[[V61:[0-9]+]] = llvm.mlir.constant(8) : i64
// CHECK-NEXT:     %[[V62:[0-9]+]] = llvm.mlir.constant(9223372036854775807) : i64
// CHECK-NEXT:     %[[V63:[0-9]+]] = llvm.mlir.constant(true) : i1
// CHECK-NEXT:     %[[V64:[0-9]+]] = llvm.mlir.constant(-4) : i64
// CHECK-NEXT:     %[[V65:[0-9]+]] = llvm.mlir.constant(-4 : i32) : i32
// CHECK-NEXT:     %[[V66:[0-9]+]] = llvm.mlir.constant(-2) : i64
// CHECK-NEXT:     %[[V67:[0-9]+]] = llvm.mlir.constant(-2 : i32) : i32
// CHECK-NEXT:     %[[V68:[0-9]+]] = llvm.mlir.constant(7) : i64
// CHECK-NEXT:     %[[V69:[0-9]+]] = llvm.alloca %[[V68]] x i64 {alignment = 8 : i64} : (i64) -> !llvm.ptr
// CHECK-NEXT:     %[[V70:[0-9]+]] = llvm.mlir.constant(16384) : i64
// CHECK-NEXT:     %[[V71:[0-9]+]] = llvm.mlir.constant(2) : i64
// CHECK-NEXT:     %[[V72:[0-9]+]] = llvm.mlir.constant(32) : i64
// CHECK-NEXT:     %[[V73:[0-9]+]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT:     %[[V74:[0-9]+]] = llvm.load %[[V52]] {alignment = 8 : i64} : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT:     %[[V75:[0-9]+]] = llvm.load %[[V53]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V76:[0-9]+]] = llvm.getelementptr inbounds %[[V53]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     %[[V77:[0-9]+]] = llvm.load %[[V76]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V78:[0-9]+]] = llvm.icmp "eq" %[[V75]], %[[V59]] : i64
// CHECK-NEXT:     %[[V79:[0-9]+]] = llvm.select %[[V78]], %[[V60]], %[[V75]] : i1, i64
// CHECK-NEXT:     %[[V80:[0-9]+]] = llvm.udiv %[[V62]], %[[V79]] : i64
// CHECK-NEXT:     %[[V81:[0-9]+]] = llvm.icmp "ule" %[[V61]], %[[V80]] : i64
// CHECK-NEXT:     %[[V82:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V81]], %[[V63]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V82]], ^bb1, ^bb4
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     %[[V83:[0-9]+]] = llvm.mul %[[V61]], %[[V75]] : i64
// CHECK-NEXT:     %[[V84:[0-9]+]] = llvm.call @fuse_alloc(%[[V57]], %[[V83]], %[[V59]]) : (!llvm.ptr, i64, i64) -> !llvm.ptr
// CHECK-NEXT:     %[[V85:[0-9]+]] = llvm.ptrtoint %[[V84]] : !llvm.ptr to i64
// CHECK-NEXT:     %[[V86:[0-9]+]] = llvm.icmp "ne" %[[V85]], %[[V59]] : i64
// CHECK-NEXT:     %[[V87:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V86]], %[[V63]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V87]], ^bb2, ^bb5
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     %[[V88:[0-9]+]] = llvm.sub %[[V75]], %[[V59]] : i64
// CHECK-NEXT:     %[[V89:[0-9]+]] = llvm.mul %[[V88]], %[[V77]] : i64
// CHECK-NEXT:     %[[V90:[0-9]+]] = llvm.icmp "sge" %[[V89]], %[[V59]] : i64
// CHECK-NEXT:     %[[V91:[0-9]+]] = llvm.icmp "sgt" %[[V88]], %[[V60]] : i64
// CHECK-NEXT:     %[[V92:[0-9]+]] = llvm.and %[[V90]], %[[V91]] : i1
// CHECK-NEXT:     %[[V93:[0-9]+]] = llvm.sdiv %[[V89]], %[[V70]] : i64
// CHECK-NEXT:     %[[V94:[0-9]+]] = llvm.call_intrinsic "llvm.smax.i64"(%[[V93]], %[[V71]]) : (i64, i64) -> i64
// CHECK-NEXT:     %[[V95:[0-9]+]] = llvm.call_intrinsic "llvm.smin.i64"(%[[V94]], %[[V72]]) : (i64, i64) -> i64
// CHECK-NEXT:     %[[V96:[0-9]+]] = llvm.call_intrinsic "llvm.smin.i64"(%[[V88]], %[[V95]]) : (i64, i64) -> i64
// CHECK-NEXT:     %[[V97:[0-9]+]] = llvm.select %[[V92]], %[[V96]], %[[V60]] : i1, i64
// CHECK-NEXT:     llvm.store %[[V59]], %[[V69]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V98:[0-9]+]] = llvm.getelementptr inbounds %[[V69]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V75]], %[[V98]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V99:[0-9]+]] = llvm.getelementptr inbounds %[[V69]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V97]], %[[V99]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V100:[0-9]+]] = llvm.getelementptr inbounds %[[V69]][3] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V77]], %[[V100]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V101:[0-9]+]] = llvm.getelementptr inbounds %[[V69]][4] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V74]], %[[V101]] {alignment = 8 : i64} : !llvm.ptr, !llvm.ptr
// CHECK-NEXT:     %[[V102:[0-9]+]] = llvm.getelementptr inbounds %[[V69]][5] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V75]], %[[V102]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V103:[0-9]+]] = llvm.getelementptr inbounds %[[V69]][6] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V84]], %[[V103]] {alignment = 8 : i64} : !llvm.ptr, !llvm.ptr
// CHECK-NEXT:     %[[V104:[0-9]+]] = llvm.mlir.addressof @fuse_nest0_chunk : !llvm.ptr
// CHECK-NEXT:     %[[V105:[0-9]+]] = llvm.call @fuse_parallel_for(%[[V104]], %[[V69]], %[[V97]], %[[V71]], %[[V56]]) : (!llvm.ptr, !llvm.ptr, i64, i64, !llvm.ptr) -> i32
// CHECK-NEXT:     %[[V106:[0-9]+]] = llvm.icmp "eq" %[[V105]], %[[V73]] : i32
// CHECK-NEXT:     %[[V107:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V106]], %[[V63]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V107]], ^bb3, ^bb6
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     llvm.store %[[V84]], %[[V54]] {alignment = 8 : i64} : !llvm.ptr, !llvm.ptr
// CHECK-NEXT:     llvm.store %[[V75]], %[[V55]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V73]] : i32
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     llvm.store %[[V64]], %[[V56]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V108:[0-9]+]] = llvm.getelementptr inbounds %[[V56]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V59]], %[[V108]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V109:[0-9]+]] = llvm.getelementptr inbounds %[[V56]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V59]], %[[V109]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V65]] : i32
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     llvm.store %[[V66]], %[[V56]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V110:[0-9]+]] = llvm.getelementptr inbounds %[[V56]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V83]], %[[V110]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V111:[0-9]+]] = llvm.getelementptr inbounds %[[V56]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V59]], %[[V111]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V67]] : i32
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     llvm.return %[[V105]] : i32
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
