// lower-loop-to-llvm of mathx.ldexp (the vector-math expansions' final scale by 2^n): with native-ldexp (what
// the JIT sets on AVX-512 hosts) one llvm.ldexp intrinsic, which LLVM turns into vscalefpd/vscalefps; without it
// (the default, every other host) x * 2^(n>>1) * 2^(n - (n>>1)), each power of two built from exponent bits in
// an integer of the float's width (i64 for f64, i32 for f32), so the loop still vectorises.
// RUN: %fuse-opt %s -p 'lower-loop-to-llvm{native-ldexp=true}' | filecheck %s --check-prefix=NATIVE
// RUN: %fuse-opt %s -p 'lower-loop-to-llvm' | filecheck %s --check-prefix=SPLIT
builtin.module attributes {fuse.args = [#fuse.arg<"X", input>, #fuse.arg<"F", input>, #fuse.arg<"N", input>], fuse.results = [#fuse.result<"Y", export>, #fuse.result<"G", export>], fuse.errors = [], fuse.host_calls = []} {
  func.func @fuse_main() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %x = loop.arg 0 : i64 "X" : memref<?xf64>
    %f = loop.arg 1 : i64 "F" : memref<?xf32>
    %n = loop.arg 2 : i64 "N" : memref<?xi32>
    %len = loop.dim %x, 0 : i64 : memref<?xf64>
    %y = loop.alloc(%len) : memref<?xf64>
    %g = loop.alloc(%len) : memref<?xf32>
    loop.for %c0 to %len step %c1 attributes {parallel} {
    ^bb0(%i: index):
      %v = loop.load %x[%i] : memref<?xf64> -> f64
      %w = loop.load %f[%i] : memref<?xf32> -> f32
      %m = loop.load %n[%i] : memref<?xi32> -> i32
      %s = mathx.ldexp %v, %m : f64
      %t = mathx.ldexp %w, %m : f32
      loop.store %s, %y[%i] : f64, memref<?xf64>
      loop.store %t, %g[%i] : f32, memref<?xf32>
      loop.yield
    }
    loop.result %y, 0 : i64 "Y" : memref<?xf64>
    loop.result %g, 1 : i64 "G" : memref<?xf32>
    func.return
  }
}

// NATIVE:      %[[M:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> i32
// NATIVE-NEXT: %[[S:[0-9]+]] = llvm.call_intrinsic "llvm.ldexp.f64.i32"(%{{[0-9]+}}, %[[M]]) : (f64, i32) -> f64
// NATIVE-NEXT: %{{[0-9]+}} = llvm.call_intrinsic "llvm.ldexp.f32.i32"(%{{[0-9]+}}, %[[M]]) : (f32, i32) -> f32
// NATIVE-NOT:  llvm.shl

// SPLIT-NOT:   llvm.ldexp
// SPLIT:       %[[M:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> i32
// SPLIT-NEXT:  %[[W:[0-9]+]] = llvm.sext %[[M]] : i32 to i64
// SPLIT-NEXT:  %[[N1:[0-9]+]] = llvm.ashr %[[W]], %[[ONE:[0-9]+]] : i64
// SPLIT-NEXT:  %[[N2:[0-9]+]] = llvm.sub %[[W]], %[[N1]] : i64
// SPLIT-NEXT:  %[[E1:[0-9]+]] = llvm.add %[[N1]], %[[BIAS:[0-9]+]] : i64
// SPLIT-NEXT:  %[[B1:[0-9]+]] = llvm.shl %[[E1]], %[[MANT:[0-9]+]] : i64
// SPLIT-NEXT:  %[[P1:[0-9]+]] = llvm.bitcast %[[B1]] : i64 to f64
// SPLIT-NEXT:  %[[H:[0-9]+]] = llvm.fmul %{{[0-9]+}}, %[[P1]] : f64
// SPLIT-NEXT:  %[[E2:[0-9]+]] = llvm.add %[[N2]], %[[BIAS]] : i64
// SPLIT-NEXT:  %[[B2:[0-9]+]] = llvm.shl %[[E2]], %[[MANT]] : i64
// SPLIT-NEXT:  %[[P2:[0-9]+]] = llvm.bitcast %[[B2]] : i64 to f64
// SPLIT-NEXT:  %{{[0-9]+}} = llvm.fmul %[[H]], %[[P2]] : f64
// SPLIT-NEXT:  %[[F1:[0-9]+]] = llvm.ashr %[[M]], %{{[0-9]+}} : i32
// SPLIT-NEXT:  %[[F2:[0-9]+]] = llvm.sub %[[M]], %[[F1]] : i32
// SPLIT:       llvm.bitcast %{{[0-9]+}} : i32 to f32
// SPLIT:       llvm.fmul %{{[0-9]+}}, %{{[0-9]+}} : f32
