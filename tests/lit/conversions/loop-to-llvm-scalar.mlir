// lower-loop-to-llvm, the arith/math op table (loop_to_llvm/scalar.py), one lowering per op class: float
// arithmetic keeps its fast-math flags, math functions become type-mangled intrinsics (llvm.exp2.f64) or
// libm calls (erf), rsqrt is 1 / sqrt, fpowi is llvm.powi with an i32 exponent, integer floor/ceil
// divisions are built from sdiv/srem, min/max/abs/ctlz/ctpop are intrinsics, casts are llvm casts.
// RUN: %fuse-opt %s -p 'lower-loop-to-llvm' | filecheck %s
// CHECK-LABEL: builtin.module attributes {fuse.args = [#fuse.arg<"X", input>, #fuse.arg<"N", input>], fuse.results = [#fuse.result<"Y", export>, #fuse.result<"K", export>], fuse.errors = [], fuse.host_calls = []} {
// CHECK-NEXT:   llvm.func @erf(f64) -> f64 attributes {no_unwind}
// CHECK-NEXT:   llvm.func @fuse_alloc(!llvm.ptr, i64, i64) -> (!llvm.ptr {llvm.noalias}) attributes {no_unwind}
// CHECK-NEXT:   llvm.func internal @fuse_nest0(%[[V0:[0-9]+]]: i64, %[[V1:[0-9]+]]: i64, %[[V2:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V3:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V4:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V5:[0-9]+]]: i64, %[[V6:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V7:[0-9]+]]: i64, %[[V8:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V9:[0-9]+]]: !llvm.ptr {llvm.noalias}) -> i32 attributes {fuse.loop_depth = 1 : i64, no_unwind, no_inline} {
// CHECK-NEXT:     %[[V10:[0-9]+]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT:     %[[V11:[0-9]+]] = llvm.mlir.constant(3) : i64
// CHECK-NEXT:     %[[V12:[0-9]+]] = llvm.mlir.constant(1) : i64
// CHECK-NEXT:     %[[V13:[0-9]+]] = llvm.mlir.constant(1.000000e+00 : f64) : f64
// CHECK-NEXT:     %[[V14:[0-9]+]] = llvm.mlir.constant(0) : i64
// CHECK-NEXT:     %[[V15:[0-9]+]] = llvm.mlir.constant(false) : i1
// CHECK-NEXT:     %[[V16:[0-9]+]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT:     llvm.br ^bb1(%[[V0]] : i64)
// CHECK-NEXT:   ^bb1(%[[V17:[0-9]+]]: i64):
// CHECK-NEXT:     %[[V18:[0-9]+]] = llvm.icmp "slt" %[[V17]], %[[V1]] : i64
// CHECK-NEXT:     llvm.cond_br %[[V18]], ^bb2, ^bb3
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     %[[V19:[0-9]+]] = llvm.getelementptr inbounds %[[V4]][%[[V17]]] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK-NEXT:     %[[V20:[0-9]+]] = llvm.load %[[V19]] {alignment = 8 : i64} : !llvm.ptr -> f64
// CHECK-NEXT:     %[[V21:[0-9]+]] = llvm.getelementptr inbounds %[[V6]][%[[V17]]] : (!llvm.ptr, i64) -> !llvm.ptr, i64
// CHECK-NEXT:     %[[V22:[0-9]+]] = llvm.load %[[V21]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V23:[0-9]+]] = llvm.call_intrinsic "llvm.exp2.f64"(%[[V20]]) {fastmathFlags = #llvm.fastmath<fast>} : (f64) -> f64
// CHECK-NEXT:     %[[V24:[0-9]+]] = llvm.call @erf(%[[V23]]) : (f64) -> f64
// CHECK-NEXT:     %[[V25:[0-9]+]] = llvm.call_intrinsic "llvm.sqrt.f64"(%[[V24]]) : (f64) -> f64
// CHECK-NEXT:     %[[V26:[0-9]+]] = llvm.fdiv %[[V13]], %[[V25]] : f64
// CHECK-NEXT:     %[[V27:[0-9]+]] = llvm.trunc %[[V22]] : i64 to i32
// CHECK-NEXT:     %[[V28:[0-9]+]] = llvm.call_intrinsic "llvm.powi.f64.i32"(%[[V26]], %[[V27]]) : (f64, i32) -> f64
// CHECK-NEXT:     %[[V29:[0-9]+]] = llvm.call_intrinsic "llvm.maximum.f64"(%[[V28]], %[[V20]]) : (f64, f64) -> f64
// CHECK-NEXT:     %[[V30:[0-9]+]] = llvm.fneg %[[V29]] : f64
// CHECK-NEXT:     %[[V31:[0-9]+]] = llvm.fcmp "olt" %[[V30]], %[[V10]] : f64
// CHECK-NEXT:     %[[V32:[0-9]+]] = llvm.select %[[V31]], %[[V30]], %[[V10]] : i1, f64
// CHECK-NEXT:     %[[V33:[0-9]+]] = llvm.fdiv %[[V32]], %[[V10]] : f64
// CHECK-NEXT:     %[[V34:[0-9]+]] = llvm.sdiv %[[V22]], %[[V11]] : i64
// CHECK-NEXT:     %[[V35:[0-9]+]] = llvm.srem %[[V22]], %[[V11]] : i64
// CHECK-NEXT:     %[[V36:[0-9]+]] = llvm.icmp "ne" %[[V35]], %[[V14]] : i64
// CHECK-NEXT:     %[[V37:[0-9]+]] = llvm.icmp "slt" %[[V35]], %[[V14]] : i64
// CHECK-NEXT:     %[[V38:[0-9]+]] = llvm.icmp "slt" %[[V11]], %[[V14]] : i64
// CHECK-NEXT:     %[[V39:[0-9]+]] = llvm.icmp "ne" %[[V37]], %[[V38]] : i1
// CHECK-NEXT:     %[[V40:[0-9]+]] = llvm.and %[[V36]], %[[V39]] : i1
// CHECK-NEXT:     %[[V41:[0-9]+]] = llvm.zext %[[V40]] : i1 to i64
// CHECK-NEXT:     %[[V42:[0-9]+]] = llvm.sub %[[V34]], %[[V41]] : i64
// CHECK-NEXT:     %[[V43:[0-9]+]] = llvm.sdiv %[[V42]], %[[V11]] : i64
// CHECK-NEXT:     %[[V44:[0-9]+]] = llvm.srem %[[V42]], %[[V11]] : i64
// CHECK-NEXT:     %[[V45:[0-9]+]] = llvm.icmp "ne" %[[V44]], %[[V14]] : i64
// CHECK-NEXT:     %[[V46:[0-9]+]] = llvm.icmp "slt" %[[V44]], %[[V14]] : i64
// CHECK-NEXT:     %[[V47:[0-9]+]] = llvm.icmp "slt" %[[V11]], %[[V14]] : i64
// CHECK-NEXT:     %[[V48:[0-9]+]] = llvm.icmp "eq" %[[V46]], %[[V47]] : i1
// CHECK-NEXT:     %[[V49:[0-9]+]] = llvm.and %[[V45]], %[[V48]] : i1
// CHECK-NEXT:     %[[V50:[0-9]+]] = llvm.zext %[[V49]] : i1 to i64
// CHECK-NEXT:     %[[V51:[0-9]+]] = llvm.add %[[V43]], %[[V50]] : i64
// CHECK-NEXT:     %[[V52:[0-9]+]] = llvm.udiv %[[V51]], %[[V11]] : i64
// CHECK-NEXT:     %[[V53:[0-9]+]] = llvm.urem %[[V51]], %[[V11]] : i64
// CHECK-NEXT:     %[[V54:[0-9]+]] = llvm.icmp "ne" %[[V53]], %[[V14]] : i64
// CHECK-NEXT:     %[[V55:[0-9]+]] = llvm.zext %[[V54]] : i1 to i64
// CHECK-NEXT:     %[[V56:[0-9]+]] = llvm.add %[[V52]], %[[V55]] : i64
// CHECK-NEXT:     %[[V57:[0-9]+]] = llvm.call_intrinsic "llvm.smax.i64"(%[[V56]], %[[V22]]) : (i64, i64) -> i64
// CHECK-NEXT:     %[[V58:[0-9]+]] = llvm.call_intrinsic "llvm.abs.i64"(%[[V57]], %[[V15]]) : (i64, i1) -> i64
// CHECK-NEXT:     %[[V59:[0-9]+]] = llvm.call_intrinsic "llvm.ctlz.i64"(%[[V58]], %[[V15]]) : (i64, i1) -> i64
// CHECK-NEXT:     %[[V60:[0-9]+]] = llvm.call_intrinsic "llvm.ctpop.i64"(%[[V59]]) : (i64) -> i64
// CHECK-NEXT:     %[[V61:[0-9]+]] = llvm.shl %[[V60]], %[[V11]] : i64
// CHECK-NEXT:     %[[V62:[0-9]+]] = llvm.add %[[V61]], %[[V17]] : i64
// CHECK-NEXT:     %[[V63:[0-9]+]] = llvm.sitofp %[[V62]] : i64 to f64
// CHECK-NEXT:     %[[V64:[0-9]+]] = llvm.fadd %[[V33]], %[[V63]] : f64
// CHECK-NEXT:     %[[V65:[0-9]+]] = llvm.fptosi %[[V64]] : f64 to i64
// CHECK-NEXT:     %[[V66:[0-9]+]] = llvm.getelementptr inbounds %[[V8]][%[[V17]]] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK-NEXT:     llvm.store %[[V64]], %[[V66]] {alignment = 8 : i64} : f64, !llvm.ptr
// CHECK-NEXT:     %[[V67:[0-9]+]] = llvm.getelementptr inbounds %[[V9]][%[[V17]]] : (!llvm.ptr, i64) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V65]], %[[V67]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V68:[0-9]+]] = llvm.add %[[V17]], %[[V12]] overflow<nsw> : i64
// CHECK-NEXT:     llvm.br ^bb1(%[[V68]] : i64)
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     llvm.return %[[V16]] : i32
// CHECK-NEXT:   }
// CHECK-NEXT:   llvm.func @fuse_main(%[[V69:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V70:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V71:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V72:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V73:[0-9]+]]: !llvm.ptr {llvm.noalias}, %[[V74:[0-9]+]]: !llvm.ptr) -> i32 attributes {no_unwind} {
// CHECK-NEXT:     %[[V75:[0-9]+]] = llvm.mlir.constant(0) : i64
// CHECK-NEXT:     %[[V76:[0-9]+]] = llvm.mlir.constant(1) : i64
// CHECK-NEXT:     %[[V77:[0-9]+]] = llvm.mlir.constant(2.000000e+00 : f64) : f64
// CHECK-NEXT:     %[[V78:[0-9]+]] = llvm.mlir.constant(3) : i64
// CHECK-NEXT:     %[[V79:[0-9]+]] = llvm.mlir.constant(8) : i64
// CHECK-NEXT:     %[[V80:[0-9]+]] = llvm.mlir.constant(9223372036854775807) : i64
// CHECK-NEXT:     %[[V81:[0-9]+]] = llvm.mlir.constant(true) : i1
// CHECK-NEXT:     %[[V82:[0-9]+]] = llvm.mlir.constant(-4) : i64
// CHECK-NEXT:     %[[V83:[0-9]+]] = llvm.mlir.constant(-4 : i32) : i32
// CHECK-NEXT:     %[[V84:[0-9]+]] = llvm.mlir.constant(-2) : i64
// CHECK-NEXT:     %[[V85:[0-9]+]] = llvm.mlir.constant(-2 : i32) : i32
// CHECK-NEXT:     %[[V86:[0-9]+]] = llvm.alloca %[[V76]] x i64 {alignment = 8 : i64} : (i64) -> !llvm.ptr
// CHECK-NEXT:     %[[V87:[0-9]+]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT:     %[[V88:[0-9]+]] = llvm.load %[[V69]] {alignment = 8 : i64} : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT:     %[[V89:[0-9]+]] = llvm.load %[[V70]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V90:[0-9]+]] = llvm.getelementptr inbounds %[[V69]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:     %[[V91:[0-9]+]] = llvm.load %[[V90]] {alignment = 8 : i64} : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT:     %[[V92:[0-9]+]] = llvm.getelementptr inbounds %[[V70]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     %[[V93:[0-9]+]] = llvm.load %[[V92]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK-NEXT:     %[[V94:[0-9]+]] = llvm.icmp "eq" %[[V89]], %[[V75]] : i64
// CHECK-NEXT:     %[[V95:[0-9]+]] = llvm.select %[[V94]], %[[V76]], %[[V89]] : i1, i64
// CHECK-NEXT:     %[[V96:[0-9]+]] = llvm.udiv %[[V80]], %[[V95]] : i64
// CHECK-NEXT:     %[[V97:[0-9]+]] = llvm.icmp "ule" %[[V79]], %[[V96]] : i64
// CHECK-NEXT:     %[[V98:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V97]], %[[V81]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V98]], ^bb1, ^bb6
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     %[[V99:[0-9]+]] = llvm.mul %[[V79]], %[[V89]] : i64
// CHECK-NEXT:     %[[V100:[0-9]+]] = llvm.call @fuse_alloc(%[[V74]], %[[V99]], %[[V75]]) : (!llvm.ptr, i64, i64) -> !llvm.ptr
// CHECK-NEXT:     %[[V101:[0-9]+]] = llvm.ptrtoint %[[V100]] : !llvm.ptr to i64
// CHECK-NEXT:     %[[V102:[0-9]+]] = llvm.icmp "ne" %[[V101]], %[[V75]] : i64
// CHECK-NEXT:     %[[V103:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V102]], %[[V81]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V103]], ^bb2, ^bb7
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     %[[V104:[0-9]+]] = llvm.icmp "eq" %[[V89]], %[[V75]] : i64
// CHECK-NEXT:     %[[V105:[0-9]+]] = llvm.select %[[V104]], %[[V76]], %[[V89]] : i1, i64
// CHECK-NEXT:     %[[V106:[0-9]+]] = llvm.udiv %[[V80]], %[[V105]] : i64
// CHECK-NEXT:     %[[V107:[0-9]+]] = llvm.icmp "ule" %[[V79]], %[[V106]] : i64
// CHECK-NEXT:     %[[V108:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V107]], %[[V81]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V108]], ^bb3, ^bb8
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     %[[V109:[0-9]+]] = llvm.mul %[[V79]], %[[V89]] : i64
// CHECK-NEXT:     %[[V110:[0-9]+]] = llvm.call @fuse_alloc(%[[V74]], %[[V109]], %[[V76]]) : (!llvm.ptr, i64, i64) -> !llvm.ptr
// CHECK-NEXT:     %[[V111:[0-9]+]] = llvm.ptrtoint %[[V110]] : !llvm.ptr to i64
// CHECK-NEXT:     %[[V112:[0-9]+]] = llvm.icmp "ne" %[[V111]], %[[V75]] : i64
// CHECK-NEXT:     %[[V113:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V112]], %[[V81]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V113]], ^bb4, ^bb9
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     %[[V114:[0-9]+]] = llvm.call @fuse_nest0(%[[V75]], %[[V89]], %[[V73]], %[[V86]], %[[V88]], %[[V89]], %[[V91]], %[[V93]], %[[V100]], %[[V110]]) : (i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-NEXT:     %[[V115:[0-9]+]] = llvm.icmp "eq" %[[V114]], %[[V87]] : i32
// CHECK-NEXT:     %[[V116:[0-9]+]] = llvm.call_intrinsic "llvm.expect.i1"(%[[V115]], %[[V81]]) : (i1, i1) -> i1
// CHECK-NEXT:     llvm.cond_br %[[V116]], ^bb5, ^bb10
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     llvm.store %[[V100]], %[[V71]] {alignment = 8 : i64} : !llvm.ptr, !llvm.ptr
// CHECK-NEXT:     llvm.store %[[V89]], %[[V72]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V117:[0-9]+]] = llvm.getelementptr inbounds %[[V71]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:     llvm.store %[[V110]], %[[V117]] {alignment = 8 : i64} : !llvm.ptr, !llvm.ptr
// CHECK-NEXT:     %[[V118:[0-9]+]] = llvm.getelementptr inbounds %[[V72]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V89]], %[[V118]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V87]] : i32
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     llvm.store %[[V82]], %[[V73]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V119:[0-9]+]] = llvm.getelementptr inbounds %[[V73]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V75]], %[[V119]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V120:[0-9]+]] = llvm.getelementptr inbounds %[[V73]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V75]], %[[V120]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V83]] : i32
// CHECK-NEXT:   ^bb7:
// CHECK-NEXT:     llvm.store %[[V84]], %[[V73]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V121:[0-9]+]] = llvm.getelementptr inbounds %[[V73]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V99]], %[[V121]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V122:[0-9]+]] = llvm.getelementptr inbounds %[[V73]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V75]], %[[V122]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V85]] : i32
// CHECK-NEXT:   ^bb8:
// CHECK-NEXT:     llvm.store %[[V82]], %[[V73]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V123:[0-9]+]] = llvm.getelementptr inbounds %[[V73]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V76]], %[[V123]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V124:[0-9]+]] = llvm.getelementptr inbounds %[[V73]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V75]], %[[V124]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V83]] : i32
// CHECK-NEXT:   ^bb9:
// CHECK-NEXT:     llvm.store %[[V84]], %[[V73]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V125:[0-9]+]] = llvm.getelementptr inbounds %[[V73]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V109]], %[[V125]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     %[[V126:[0-9]+]] = llvm.getelementptr inbounds %[[V73]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:     llvm.store %[[V76]], %[[V126]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK-NEXT:     llvm.return %[[V85]] : i32
// CHECK-NEXT:   ^bb10:
// CHECK-NEXT:     llvm.return %[[V114]] : i32
// CHECK-NEXT:   }
// CHECK-NEXT: }
builtin.module attributes {fuse.args = [#fuse.arg<"X", input>, #fuse.arg<"N", input>], fuse.results = [#fuse.result<"Y", export>, #fuse.result<"K", export>], fuse.errors = [], fuse.host_calls = []} {
  func.func @fuse_main() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %two = arith.constant 2.000000e+00 : f64
    %three = arith.constant 3 : i64
    %x = loop.arg 0 : i64 "X" : memref<?xf64>
    %n = loop.arg 1 : i64 "N" : memref<?xi64>
    %len = loop.dim %x, 0 : i64 : memref<?xf64>
    %y = loop.alloc(%len) : memref<?xf64>
    %k = loop.alloc(%len) : memref<?xi64>
    loop.for %c0 to %len step %c1 attributes {parallel} {
    ^bb0(%i: index):
      %v = loop.load %x[%i] : memref<?xf64> -> f64
      %m = loop.load %n[%i] : memref<?xi64> -> i64
      %e = math.exp2 %v fastmath<fast> : f64
      %f = math.erf %e : f64
      %r = math.rsqrt %f : f64
      %m32 = arith.trunci %m : i64 to i32
      %p = math.fpowi %r, %m32 : f64, i32
      %g = arith.maximumf %p, %v : f64
      %neg = arith.negf %g : f64
      %lt = arith.cmpf olt, %neg, %two : f64
      %s = arith.select %lt, %neg, %two : f64
      %d = arith.divf %s, %two : f64
      %fl = arith.floordivsi %m, %three : i64
      %cd = arith.ceildivsi %fl, %three : i64
      %cu = arith.ceildivui %cd, %three : i64
      %mx = arith.maxsi %cu, %m : i64
      %ab = math.absi %mx : i64
      %lz = math.ctlz %ab : i64
      %pc = math.ctpop %lz : i64
      %sh = arith.shli %pc, %three : i64
      %iv = arith.index_cast %i : index to i64
      %sum = arith.addi %sh, %iv : i64
      %fv = arith.sitofp %sum : i64 to f64
      %out = arith.addf %d, %fv : f64
      %back = arith.fptosi %out : f64 to i64
      loop.store %out, %y[%i] : f64, memref<?xf64>
      loop.store %back, %k[%i] : i64, memref<?xi64>
      loop.yield
    }
    loop.result %y, 0 : i64 "Y" : memref<?xf64>
    loop.result %k, 1 : i64 "K" : memref<?xi64>
    func.return
  }
}
