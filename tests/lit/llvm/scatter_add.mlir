// An ew.scatter_add down to LLVM IR with threads: the zero fill and the scatter are two outlined nests, each
// with a chunk function fuse_main runs through fuse_parallel_for. In the scatter nest the index is loaded and
// tested (unsigned, against the row count) before the inner loop, and a failed test returns error 1 with the
// index and the extent before anything is stored; the inner loop is the read-add-write of one chunk of a row.
// RUN: %fuse-opt %s -p 'lower-ew-to-loop,lower-loop-to-llvm{threads=2 parallel-min=0}' --emit=llvm-ir | filecheck %s
// CHECK: define internal i32 @fuse_nest0(
// CHECK: define internal i32 @fuse_nest0_chunk(
// CHECK: define internal i32 @fuse_nest1(
// CHECK: %[[ROW:.*]] = load i64, ptr
// CHECK-NEXT: %[[OK:.*]] = icmp ult i64 %[[ROW]], %[[ROWS:arg[0-9]+]]
// CHECK-NEXT: %[[LIKELY:.*]] = call i1 @llvm.expect.i1(i1 %[[OK]], i1 true)
// CHECK-NEXT: br i1 %[[LIKELY]], label %{{.*}}, label %[[FAIL:bb[0-9]+]]
// CHECK: %[[X:.*]] = load double
// CHECK: %[[OLD:.*]] = load double
// CHECK-NEXT: %[[NEW:.*]] = fadd double %[[OLD]], %[[X]]
// CHECK: store double %[[NEW]]
// CHECK: [[FAIL]]:
// CHECK-NEXT: store i64 1, ptr
// CHECK: store i64 %[[ROW]]
// CHECK: store i64 %[[ROWS]]
// CHECK-NEXT: ret i32 1
// CHECK: define internal i32 @fuse_nest1_chunk(
// CHECK: define i32 @fuse_main(
// CHECK: call i32 @fuse_parallel_for(ptr @fuse_nest0_chunk
// CHECK: call i32 @fuse_parallel_for(ptr @fuse_nest1_chunk
builtin.module {
  %u = te.input "U" {indices = ["b", "d"]} : tensor<?x?xf64>
  %i = te.input "Idx" {indices = ["b"]} : tensor<?xi64>
  %z = te.input "Z" {indices = ["v"]} : tensor<?xf64>
  %n = te.dim %z, 0 : i64 : tensor<?xf64>
  %s = ew.scatter_add %u[%i] (%n) {maps = [[0 : i64]], places = [-1 : i64, 1 : i64], check = "scattered index {0} is out of range for an axis of extent {1}"} : tensor<?x?xf64>[tensor<?xi64>] -> tensor<?x?xf64>
  te.export %s {names = ["S"]} : tensor<?x?xf64>
}
