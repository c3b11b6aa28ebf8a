// fuse-rows reuses a value an earlier phase computed (softmax's exp(x - max)) by storing it into the row of the
// map phase's output buffer, only when the value has that buffer's element type. Below, softmax(X) + N with an
// integer N: float64 X makes a float64 exp and output (reused); float32 X makes a float32 exp under a float64
// output, which that buffer cannot hold: the last phase recomputes it (it once stored f32 into the f64 buffer,
// which LLVM rejected).
// RUN: %fuse-opt %s --split-input-file -p 'fuse-rows{row-cache-bytes=-1}' --verify-each --pass-statistics 2>%t.stats | filecheck %s
// RUN: filecheck %s --check-prefix=STATS < %t.stats
// CHECK-LABEL: builtin.module
// CHECK: %[[E:.*]] = math.exp %{{.*}} : f64
// CHECK: loop.store %[[E]], %[[Y:.*]][%{{.*}}, %{{.*}}] : f64, memref<?x?xf64>
// CHECK: loop.load %[[Y]][%{{.*}}, %{{.*}}] : memref<?x?xf64> -> f64
// CHECK-LABEL: builtin.module
// CHECK-NOT: f32, memref<?x?xf64>
// CHECK: math.exp %{{.*}} : f32
// CHECK-NOT: f32, memref<?x?xf64>
// CHECK: math.exp %{{.*}} : f32
// CHECK-NOT: f32, memref<?x?xf64>
// CHECK: arith.extf %{{.*}} : f32 to f64
// STATS: (1) values-reused
builtin.module attributes {fuse.args = [#fuse.arg<"X", input>, #fuse.arg<"N", input>], fuse.results = [#fuse.result<"Y", export>], fuse.errors = [#fuse.error<"r is {1} in N[r, c] but {0} in X[r, c]", "smn.fuse:1:33:1">, #fuse.error<"c is {1} in N[r, c] but {0} in X[r, c]", "/tmp/bug/smn.fuse:1:36:1">], fuse.host_calls = []} {
  func.func @fuse_main() {
    %0 = arith.constant 0xfff0000000000000 : f64
    %1 = arith.constant 0 : index
    %2 = arith.constant 1 : index
    %3 = arith.constant 0.000000e+00 : f64
    %4 = loop.arg 0 : i64 "X" : memref<?x?xf64>
    %5 = loop.arg 1 : i64 "N" : memref<?x?xi32>
    %6 = loop.dim %4, 0 : i64 : memref<?x?xf64>
    %7 = loop.dim %5, 0 : i64 : memref<?x?xi32>
    %8 = arith.cmpi eq, %6, %7 : index
    loop.check %8, %6, %7 code 1 : i64
    %9 = loop.dim %4, 1 : i64 : memref<?x?xf64>
    %10 = loop.dim %5, 1 : i64 : memref<?x?xi32>
    %11 = arith.cmpi eq, %9, %10 : index
    loop.check %11, %9, %10 code 2 : i64
    %12 = loop.alloc(%6) : memref<?xf64>
    loop.for %1 to %6 step %2 attributes {parallel} {
    ^bb0(%13: index):
      %14 = loop.for %1 to %9 step %2 iter_args(%0 : f64) -> f64 {
      ^bb0(%15: index, %16: f64):
        %17 = loop.load %4[%13, %15] : memref<?x?xf64> -> f64
        %18 = arith.maximumf %16, %17 : f64
        loop.yield %18 : f64
      }
      loop.store %14, %12[%13] : f64, memref<?xf64>
      loop.yield
    }
    %19 = loop.alloc(%6) : memref<?xf64>
    loop.for %1 to %6 step %2 attributes {parallel} {
    ^bb0(%20: index):
      %21 = loop.for %1 to %9 step %2 iter_args(%3 : f64) -> f64 {
      ^bb0(%22: index, %23: f64):
        %24 = loop.load %4[%20, %22] : memref<?x?xf64> -> f64
        %25 = loop.load %12[%20] : memref<?xf64> -> f64
        %26 = math.absf %25 : f64
        %27 = arith.constant 0x7ff0000000000000 : f64
        %28 = arith.cmpf olt, %26, %27 : f64
        %29 = arith.constant 0.000000e+00 : f64
        %30 = arith.select %28, %25, %29 : f64
        %31 = arith.subf %24, %30 : f64
        %32 = math.exp %31 : f64
        %33 = arith.addf %23, %32 : f64
        loop.yield %33 : f64
      }
      loop.store %21, %19[%20] : f64, memref<?xf64>
      loop.yield
    }
    %34 = loop.alloc(%6, %9) : memref<?x?xf64>
    loop.for %1 to %6 step %2 attributes {parallel} {
    ^bb0(%35: index):
      loop.for %1 to %9 step %2 attributes {parallel} {
      ^bb0(%36: index):
        %37 = loop.load %5[%35, %36] : memref<?x?xi32> -> i32
        %38 = loop.load %4[%35, %36] : memref<?x?xf64> -> f64
        %39 = loop.load %12[%35] : memref<?xf64> -> f64
        %40 = loop.load %19[%35] : memref<?xf64> -> f64
        %41 = arith.constant 1.000000e+00 : f64
        %42 = arith.divf %41, %40 : f64
        %43 = math.absf %39 : f64
        %44 = arith.constant 0x7ff0000000000000 : f64
        %45 = arith.cmpf olt, %43, %44 : f64
        %46 = arith.constant 0.000000e+00 : f64
        %47 = arith.select %45, %39, %46 : f64
        %48 = arith.subf %38, %47 : f64
        %49 = math.exp %48 : f64
        %50 = arith.mulf %49, %42 : f64
        %51 = arith.sitofp %37 : i32 to f64
        %52 = arith.addf %50, %51 : f64
        loop.store %52, %34[%35, %36] : f64, memref<?x?xf64>
        loop.yield
      }
      loop.yield
    }
    loop.result %34, 0 : i64 "Y" : memref<?x?xf64>
    func.return
  }
}
// -----
builtin.module attributes {fuse.args = [#fuse.arg<"X", input>, #fuse.arg<"N", input>], fuse.results = [#fuse.result<"Y", export>], fuse.errors = [#fuse.error<"r is {1} in N[r, c] but {0} in X[r, c]", "smn.fuse:1:33:1">, #fuse.error<"c is {1} in N[r, c] but {0} in X[r, c]", "/tmp/bug/smn.fuse:1:36:1">], fuse.host_calls = []} {
  func.func @fuse_main() {
    %0 = arith.constant 0xff800000 : f32
    %1 = arith.constant 0 : index
    %2 = arith.constant 1 : index
    %3 = arith.constant 0.000000e+00 : f32
    %4 = loop.arg 0 : i64 "X" : memref<?x?xf32>
    %5 = loop.arg 1 : i64 "N" : memref<?x?xi32>
    %6 = loop.dim %4, 0 : i64 : memref<?x?xf32>
    %7 = loop.dim %5, 0 : i64 : memref<?x?xi32>
    %8 = arith.cmpi eq, %6, %7 : index
    loop.check %8, %6, %7 code 1 : i64
    %9 = loop.dim %4, 1 : i64 : memref<?x?xf32>
    %10 = loop.dim %5, 1 : i64 : memref<?x?xi32>
    %11 = arith.cmpi eq, %9, %10 : index
    loop.check %11, %9, %10 code 2 : i64
    %12 = loop.alloc(%6) : memref<?xf32>
    loop.for %1 to %6 step %2 attributes {parallel} {
    ^bb0(%13: index):
      %14 = loop.for %1 to %9 step %2 iter_args(%0 : f32) -> f32 {
      ^bb0(%15: index, %16: f32):
        %17 = loop.load %4[%13, %15] : memref<?x?xf32> -> f32
        %18 = arith.maximumf %16, %17 : f32
        loop.yield %18 : f32
      }
      loop.store %14, %12[%13] : f32, memref<?xf32>
      loop.yield
    }
    %19 = loop.alloc(%6) : memref<?xf32>
    loop.for %1 to %6 step %2 attributes {parallel} {
    ^bb0(%20: index):
      %21 = loop.for %1 to %9 step %2 iter_args(%3 : f32) -> f32 {
      ^bb0(%22: index, %23: f32):
        %24 = loop.load %4[%20, %22] : memref<?x?xf32> -> f32
        %25 = loop.load %12[%20] : memref<?xf32> -> f32
        %26 = math.absf %25 : f32
        %27 = arith.constant 0x7f800000 : f32
        %28 = arith.cmpf olt, %26, %27 : f32
        %29 = arith.constant 0.000000e+00 : f32
        %30 = arith.select %28, %25, %29 : f32
        %31 = arith.subf %24, %30 : f32
        %32 = math.exp %31 : f32
        %33 = arith.addf %23, %32 : f32
        loop.yield %33 : f32
      }
      loop.store %21, %19[%20] : f32, memref<?xf32>
      loop.yield
    }
    %34 = loop.alloc(%6, %9) : memref<?x?xf64>
    loop.for %1 to %6 step %2 attributes {parallel} {
    ^bb0(%35: index):
      loop.for %1 to %9 step %2 attributes {parallel} {
      ^bb0(%36: index):
        %37 = loop.load %5[%35, %36] : memref<?x?xi32> -> i32
        %38 = loop.load %4[%35, %36] : memref<?x?xf32> -> f32
        %39 = loop.load %12[%35] : memref<?xf32> -> f32
        %40 = loop.load %19[%35] : memref<?xf32> -> f32
        %41 = arith.constant 1.000000e+00 : f32
        %42 = arith.divf %41, %40 : f32
        %43 = math.absf %39 : f32
        %44 = arith.constant 0x7f800000 : f32
        %45 = arith.cmpf olt, %43, %44 : f32
        %46 = arith.constant 0.000000e+00 : f32
        %47 = arith.select %45, %39, %46 : f32
        %48 = arith.subf %38, %47 : f32
        %49 = math.exp %48 : f32
        %50 = arith.mulf %49, %42 : f32
        %51 = arith.extf %50 : f32 to f64
        %52 = arith.sitofp %37 : i32 to f64
        %53 = arith.addf %51, %52 : f64
        loop.store %53, %34[%35, %36] : f64, memref<?x?xf64>
        loop.yield
      }
      loop.yield
    }
    loop.result %34, 0 : i64 "Y" : memref<?x?xf64>
    func.return
  }
}
