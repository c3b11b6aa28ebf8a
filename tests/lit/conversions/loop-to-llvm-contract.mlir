// lower-loop-to-llvm: an accumulating add or sub whose other operand is a product used only there gets
// contract on both (with reassoc on the add), so LLVM may fuse them into one fma: the row dot product's
// fmul and fadd, the row's acc - a*b. A product that is also stored (%23) keeps its own rounding: its fmul
// and the add get no contract, the add keeps reassoc.
// RUN: %fuse-opt %s -p 'lower-loop-to-llvm' | filecheck %s
// CHECK-LABEL: builtin.module attributes {fuse.args = [#fuse.arg<"X", input>, #fuse.arg<"Y", input>], fuse.results = [#fuse.result<"D", export>, #fuse.result<"P", export>], fuse.errors = [], fuse.host_calls = []} {
// CHECK-NEXT:   llvm.func @fuse_alloc(!llvm.ptr, i64, i64) -> (!llvm.ptr {llvm.noalias}) attributes {no_unwind}
// CHECK-NEXT:   llvm.func internal @fuse_nest0(%[[V0:[0-9]+]]: i64, %[[V1:[0-9]+]]: i64, %[[V2:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V3:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V4:[0-9]+]]: i64, %[[V5:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V6:[0-9]+]]: i64, %[[V7:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V8:[0-9]+]]: i64, %[[V9:[0-9]+]]: i64, %[[V10:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V11:[0-9]+]]: !llvm.ptr {llvm.noalias}) -> i32 attributes {fuse.loop_depth = 2 : i64, no_unwind, no_inline} {
// CHECK-NEXT:     %[[V12:[0-9]+]] = llvm.mlir.constant(0) : i64
// CHECK-NEXT:     %[[V13:[0-9]+]] = llvm.mlir.constant(1) : i64
// CHECK-NEXT:     %[[V14:[0-9]+]] = llvm.mlir.constant(0.000000e+00 : f64) : f64
// CHECK-NEXT:     %[[V15:[0-9]+]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT:     llvm.br ^bb1(%[[V0]] : i64)
// CHECK-NEXT:   ^bb1(%[[V16:[0-9]+]]: i64):
// CHECK-NEXT:     %[[V17:[0-9]+]] = llvm.icmp "slt" %[[V16]], %[[V1]] : i64
// CHECK-NEXT:     llvm.cond_br %[[V17]], ^bb2, ^bb6
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     llvm.br ^bb3(%[[V12]], %[[V14]], %[[V14]], %[[V14]] : i64, f64, f64, f64)
// CHECK-NEXT:   ^bb3(%[[V18:[0-9]+]]: i64, %[[V19:[0-9]+]]: f64, %[[V20:[0-9]+]]: f64, %[[V21:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V22:[0-9]+]] = llvm.icmp "slt" %[[V18]], %[[V4]] : i64
// CHECK-NEXT:     llvm.cond_br %[[V22]], ^bb4, ^bb5(%[[V19]], %[[V20]], %[[V21]] : f64, f64, f64)
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     %[[V23:[0-9]+]] = llvm.mul %[[V16]], %[[V4]] overflow<nsw> : i64
// CHECK-NEXT:     %[[V24:[0-9]+]] = llvm.add %[[V23]], %[[V18]] overflow<nsw> : i64
// CHECK-NEXT:     %[[V25:[0-9]+]] = llvm.getelementptr inbounds %[[V5]][%[[V24]]] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK-NEXT:     %[[V26:[0-9]+]] = llvm.load %[[V25]] {alignment = 8 : i64} : !llvm.ptr -> f64
// CHECK-NEXT:     %[[V27:[0-9]+]] = llvm.mul %[[V16]], %[[V9]] overflow<nsw> : i64
// CHECK-NEXT:     %[[V28:[0-9]+]] = llvm.add %[[V27]], %[[V18]] overflow<nsw> : i64
// CHECK-NEXT:     %[[V29:[0-9]+]] = llvm.getelementptr inbounds %[[V7]][%[[V28]]] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK-NEXT:     %[[V30:[0-9]+]] = llvm.load %[[V29]] {alignment = 8 : i64} : !llvm.ptr -> f64
// CHECK-NEXT:     %[[V31:[0-9]+]] = llvm.fmul %[[V26]], %[[V30]] {fastmathFlags = #llvm.fastmath<contract>} : f64
// CHECK-NEXT:     %[[V32:[0-9]+]] = llvm.fadd %[[V19]], %[[V31]] {fastmathFlags = #llvm.fastmath<reassoc,contract>} : f64
// CHECK-NEXT:     %[[V33:[0-9]+]] = llvm.fmul %[[V26]], %[[V26]] {fastmathFlags = #llvm.fastmath<contract>} : f64
// CHECK-NEXT:     %[[V34:[0-9]+]] = llvm.fsub %[[V20]], %[[V33]] {fastmathFlags = #llvm.fastmath<reassoc,contract>} : f64
// CHECK-NEXT:     %[[V35:[0-9]+]] = llvm.fmul %[[V30]], %[[V30]] : f64
// CHECK-NEXT:     %[[V36:[0-9]+]] = llvm.fadd %[[V21]], %[[V35]] {fastmathFlags = #llvm.fastmath<reassoc>} : f64
// CHECK-NEXT:     %[[V37:[0-9]+]] = llvm.mul %[[V16]], %[[V4]] overflow<nsw> : i64
// CHECK-NEXT:     %[[V38:[0-9]+]] = llvm.add %[[V37]], %[[V18]] overflow<nsw> : i64
// CHECK-NEXT:     %[[V39:[0-9]+]] = llvm.getelementptr inbounds %[[V10]][%[[V38]]] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK-NEXT:     llvm.store %[[V35]], %[[V39]] {alignment = 8 : i64} : f64, !llvm.ptr
// CHECK-NEXT:     %[[V40:[0-9]+]] = llvm.add %[[V18]], %[[V13]] overflow<nsw> : i64
// CHECK-NEXT:     llvm.br ^bb3(%[[V40]], %[[V32]], %[[V34]], %[[V36]] : i64, f64, f64, f64)
// CHECK-NEXT:   ^bb5(%[[V41:[0-9]+]]: f64, %[[V42:[0-9]+]]: f64, %[[V43:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V44:[0-9]+]] = llvm.fadd %[[V41]], %[[V42]] : f64
// CHECK-NEXT:     %[[V45:[0-9]+]] = llvm.fadd %[[V44]], %[[V43]] : f64
// CHECK-NEXT:     %[[V46:[0-9]+]] = llvm.getelementptr inbounds %[[V11]][%[[V16]]] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK-NEXT:     llvm.store %[[V45]], %[[V46]] {alignment = 8 : i64} : f64, !llvm.ptr
// CHECK-NEXT:     %[[V47:[0-9]+]] = llvm.add %[[V16]], %[[V13]] overflow<nsw> : i64
// CHECK-NEXT:     llvm.br ^bb1(%[[V47]] : i64)
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     llvm.return %[[V15]] : i32
// CHECK-NEXT:   }
// CHECK-NEXT:   llvm.func @fuse_main(%[[V48:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V49:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V50:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V51:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V52:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V53:[0-9]+]]: !llvm.ptr) -> i32 attributes {no_unwind} {
// CHECK-NEXT:     %[[V54:[0-9]+]] = llvm.mlir.constant(0.000000e+00 : f64) : f64
// CHECK-NEXT:     %[[V55:[0-9]+]] = llvm.mlir.constant(0) : i64
// CHECK-NEXT:     %[[V56:[0-9]+]] = llvm.mlir.constant(1) : i64
// CHECK-NEXT:     %[[V57:[0-9]+]] = llvm.mlir.constant(8) : i64
// CHECK-NEXT:     %[[V58:[0-9]+]] = llvm.mlir.constant(9223372036854775807) : i64
// CHECK-NEXT:     %[[V59:[0-9]+]] = llvm.mlir.constant(true) : i1
// CHECK-NEXT:     %[[V60:[0-9]+]] = llvm.mlir.constant(-4) : i64
// CHECK-NEXT:     %[[V61:[0-9]+]] = llvm.mlir.constant(-4 : i32) : i32
// CHECK-NEXT:     %[[V62:[0-9]+]] = llvm.mlir.constant(-2) : i64
// CHECK-NEXT:     %[[V63:[0-9]+]] = llvm.mlir.constant(-2 : i32) : i32
// CHECK-NEXT:     %[[V64:[0-9]+]] = llvm.alloca %[[V56]] x i64 {alignment = 8 : i64} : (i64) -> !llvm.ptr
// CHECK-NEXT:     %[[V65:[0-9]+]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT:     %[[V66:[0-9]+]] = llvm.load %[[V48]] {alignment = 8 : i64} : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT:     %[[V67:[0-9]+]] = llvm.load %[[V49]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V68:[0-9]+]] = llvm.getelementptr inbounds %[[V49]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     %[[V69:[0-9]+]] = llvm.load %[[V68]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V70:[0-9]+]] = llvm.getelementptr inbounds %[[V48]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:     %[[V71:[0-9]+]] = llvm.load %[[V70]] {alignment = 8 : i64} : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT:     %[[V72:[0-9]+]] = llvm.getelementptr inbounds %[[V49]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     %[[V73:[0-9]+]] = llvm.load %[[V72]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V74:[0-9]+]] = llvm.getelementptr inbounds %[[V49]][3] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     %[[V75:[0-9]+]] = llvm.load %[[V74]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V76:[0-9]+]] = llvm.icmp "eq" %[[V67]], %[[V55]] : i64
// CHECK-NEXT:     %[[V77:[0-9]+]] = llvm.select %[[V76]], %[[V56]], %[[V67]] : i1, i64
// CHECK-NEXT:     %[[V78:[0-9]+]] = llvm.udiv %[[V58]], %[[V77]] : i64
// CHECK-NEXT:     %[[V79:[0-9]+]] = llvm.icmp "ule" %[[V57]], %[[V78]] : i64
// CHECK-NEXT:     %[[V80:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V79]], %[[V59]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V80]], ^bb1, ^bb7
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     %[[V81:[0-9]+]] = llvm.mul %[[V57]], %[[V67]] : i64
// CHECK-NEXT:     %[[V82:[0-9]+]] = llvm.call @fuse_alloc(%[[V53]], %[[V81]], %[[V55]]) : (!llvm.ptr, i64, i64) -> !llvm.ptr
// CHECK-NEXT:     %[[V83:[0-9]+]] = llvm.ptrtoint %[[V82]] : !llvm.ptr to i64
// CHECK-NEXT:     %[[V84:[0-9]+]] = llvm.icmp "ne" %[[V83]], %[[V55]] : i64
// CHECK-NEXT:     %[[V85:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V84]], %[[V59]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V85]], ^bb2, ^bb8
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     %[[V86:[0-9]+]] = llvm.icmp "eq" %[[V67]], %[[V55]] : i64
// CHECK-NEXT:     %[[V87:[0-9]+]] = llvm.select %[[V86]], %[[V56]], %[[V67]] : i1, i64
// CHECK-NEXT:     %[[V88:[0-9]+]] = llvm.udiv %[[V58]], %[[V87]] : i64
// CHECK-NEXT:     %[[V89:[0-9]+]] = llvm.icmp "ule" %[[V57]], %[[V88]] : i64
// CHECK-NEXT:     %[[V90:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V89]], %[[V59]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V90]], ^bb3, ^bb9
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     %[[V91:[0-9]+]] = llvm.mul %[[V57]], %[[V67]] : i64
// CHECK-NEXT:     %[[V92:[0-9]+]] = llvm.icmp "eq" %[[V69]], %[[V55]] : i64
// CHECK-NEXT:     %[[V93:[0-9]+]] = llvm.select %[[V92]], %[[V56]], %[[V69]] : i1, i64
// CHECK-NEXT:     %[[V94:[0-9]+]] = llvm.udiv %[[V58]], %[[V93]] : i64
// CHECK-NEXT:     %[[V95:[0-9]+]] = llvm.icmp "ule" %[[V91]], %[[V94]] : i64
// CHECK-NEXT:     %[[V96:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V95]], %[[V59]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V96]], ^bb4, ^bb10
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     %[[V97:[0-9]+]] = llvm.mul %[[V91]], %[[V69]] : i64
// CHECK-NEXT:     %[[V98:[0-9]+]] = llvm.call @fuse_alloc(%[[V53]], %[[V97]], %[[V56]]) : (!llvm.ptr, i64, i64) -> !llvm.ptr
// CHECK-NEXT:     %[[V99:[0-9]+]] = llvm.ptrtoint %[[V98]] : !llvm.ptr to i64
// CHECK-NEXT:     %[[V100:[0-9]+]] = llvm.icmp "ne" %[[V99]], %[[V55]] : i64
// CHECK-NEXT:     %[[V101:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V100]], %[[V59]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V101]], ^bb5, ^bb11
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     %[[V102:[0-9]+]] = llvm.call @fuse_nest0(%[[V55]], %[[V67]], %[[V52]], %[[V64]], %[[V69]], %[[V66]], %[[V67]], %[[V71]], %[[V73]], %[[V75]], %[[V98]], %[[V82]]) : (i64, i64, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64, i64, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-NEXT:     %[[V103:[0-9]+]] = llvm.icmp "eq" %[[V102]], %[[V65]] : i32
// CHECK-NEXT:     %[[V104:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V103]], %[[V59]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V104]], ^bb6, ^bb12
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     llvm.store %[[V82]], %[[V50]] {alignment = 8 : i64} : !llvm.ptr, !llvm.ptr
// CHECK-NEXT:     llvm.store %[[V67]], %[[V51]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V105:[0-9]+]] = llvm.getelementptr inbounds %[[V50]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:     llvm.store %[[V98]], %[[V105]] {alignment = 8 : i64} : !llvm.ptr, !llvm.ptr
// CHECK-NEXT:     %[[V106:[0-9]+]] = llvm.getelementptr inbounds %[[V51]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V67]], %[[V106]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V107:[0-9]+]] = llvm.getelementptr inbounds %[[V51]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V69]], %[[V107]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V65]] : i32
// CHECK-NEXT:   ^bb7:
// CHECK-NEXT:     llvm.store %[[V60]], %[[V52]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V108:[0-9]+]] = llvm.getelementptr inbounds %[[V52]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V55]], %[[V108]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V109:[0-9]+]] = llvm.getelementptr inbounds %[[V52]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V55]], %[[V109]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V61]] : i32
// CHECK-NEXT:   ^bb8:
// CHECK-NEXT:     llvm.store %[[V62]], %[[V52]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V110:[0-9]+]] = llvm.getelementptr inbounds %[[V52]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V81]], %[[V110]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V111:[0-9]+]] = llvm.getelementptr inbounds %[[V52]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V55]], %[[V111]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V63]] : i32
// CHECK-NEXT:   ^bb9:
// CHECK-NEXT:     llvm.store %[[V60]], %[[V52]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V112:[0-9]+]] = llvm.getelementptr inbounds %[[V52]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V56]], %[[V112]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V113:[0-9]+]] = llvm.getelementptr inbounds %[[V52]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V55]], %[[V113]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V61]] : i32
// CHECK-NEXT:   ^bb10:
// CHECK-NEXT:     llvm.store %[[V60]], %[[V52]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V114:[0-9]+]] = llvm.getelementptr inbounds %[[V52]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V56]], %[[V114]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V115:[0-9]+]] = llvm.getelementptr inbounds %[[V52]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V55]], %[[V115]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V61]] : i32
// CHECK-NEXT:   ^bb11:
// CHECK-NEXT:     llvm.store %[[V62]], %[[V52]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V116:[0-9]+]] = llvm.getelementptr inbounds %[[V52]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V97]], %[[V116]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V117:[0-9]+]] = llvm.getelementptr inbounds %[[V52]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V56]], %[[V117]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V63]] : i32
// CHECK-NEXT:   ^bb12:
// CHECK-NEXT:     llvm.return %[[V102]] : i32
// CHECK-NEXT:   }
// CHECK-NEXT: }
builtin.module attributes {fuse.args = [#fuse.arg<"X", input>, #fuse.arg<"Y", input>], fuse.results = [#fuse.result<"D", export>, #fuse.result<"P", export>], fuse.errors = [], fuse.host_calls = []} {
  func.func @fuse_main() {
    %0 = arith.constant 0.000000e+00 : f64
    %1 = arith.constant 0 : index
    %2 = arith.constant 1 : index
    %3 = loop.arg 0 : i64 "X" : memref<?x?xf64>
    %4 = loop.arg 1 : i64 "Y" : memref<?x?xf64>
    %5 = loop.dim %3, 0 : i64 : memref<?x?xf64>
    %6 = loop.dim %3, 1 : i64 : memref<?x?xf64>
    %7 = loop.alloc(%5) : memref<?xf64>
    %8 = loop.alloc(%5, %6) : memref<?x?xf64>
    loop.for %1 to %5 step %2 attributes {parallel} {
    ^bb0(%9: index):
      %10, %11, %12 = loop.for %1 to %6 step %2 iter_args(%0, %0, %0 : f64, f64, f64) -> f64, f64, f64 {
      ^bb0(%13: index, %14: f64, %15: f64, %16: f64):
        %17 = loop.load %3[%9, %13] : memref<?x?xf64> -> f64
        %18 = loop.load %4[%9, %13] : memref<?x?xf64> -> f64
        %19 = arith.mulf %17, %18 : f64
        %20 = arith.addf %14, %19 : f64
        %21 = arith.mulf %17, %17 : f64
        %22 = arith.subf %15, %21 : f64
        %23 = arith.mulf %18, %18 : f64
        %24 = arith.addf %16, %23 : f64
        loop.store %23, %8[%9, %13] : f64, memref<?x?xf64>
        loop.yield %20, %22, %24 : f64, f64, f64
      }
      %25 = arith.addf %10, %11 : f64
      %26 = arith.addf %25, %12 : f64
      loop.store %26, %7[%9] : f64, memref<?xf64>
      loop.yield
    }
    loop.result %7, 0 : i64 "D" : memref<?xf64>
    loop.result %8, 1 : i64 "P" : memref<?x?xf64>
    func.return
  }
}
