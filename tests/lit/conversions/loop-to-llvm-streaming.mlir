// lower-loop-to-llvm of a store marked nontemporal. With streaming-min-bytes > 0 the row loop runs in one of
// two versions, chosen when it starts: if the buffer holds at least that many bytes and the row's first
// element is 64-byte aligned, tiles of 128 float64 iterations store into a 64-byte aligned stack tile, each
// copied out with 16 whole-line vector<8xf64> stores marked nontemporal, and a seq_cst fence publishes the
// streamed lines; one ordinary loop then runs the iterations after the last whole tile, or the whole row when
// the test fails. Without the option (the default) the mark is ignored.
// RUN: %fuse-opt %s -p 'lower-loop-to-llvm{streaming-min-bytes=4096}' | filecheck %s --check-prefix=STREAM
// RUN: %fuse-opt %s -p 'lower-loop-to-llvm' | filecheck %s --check-prefix=PLAIN
builtin.module attributes {fuse.args = [#fuse.arg<"A", input>], fuse.results = [#fuse.result<"B", export>], fuse.errors = [], fuse.host_calls = []} {
  func.func @fuse_main() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %a = loop.arg 0 : i64 "A" : memref<?x?xf64>
    %r = loop.dim %a, 0 : i64 : memref<?x?xf64>
    %c = loop.dim %a, 1 : i64 : memref<?x?xf64>
    %b = loop.alloc(%r, %c) : memref<?x?xf64>
    loop.for %c0 to %r step %c1 attributes {parallel} {
    ^bb0(%i: index):
      loop.for %c0 to %c step %c1 {
      ^bb1(%j: index):
        %v = loop.load %a[%i, %j] : memref<?x?xf64> -> f64
        %w = arith.mulf %v, %v : f64
        loop.store %w, %b[%i, %j] {nontemporal} : f64, memref<?x?xf64>
        loop.yield
      }
      loop.yield
    }
    loop.result %b, 0 : i64 "B" : memref<?x?xf64>
    func.return
  }
}

// STREAM-LABEL: llvm.func internal @fuse_nest0
// STREAM-DAG:   %[[TILE:[0-9]+]] = llvm.alloca %{{[0-9]+}} x f64 {alignment = 64 : i64} : (i64) -> !llvm.ptr
// STREAM-DAG:   %[[MIN:[0-9]+]] = llvm.mlir.constant(4096) : i64
// STREAM:       %[[SIZE:[0-9]+]] = llvm.mul %{{[0-9]+}}, %{{[0-9]+}} : i64
// STREAM-NEXT:  %[[BIG:[0-9]+]] = llvm.icmp "uge" %[[SIZE]], %[[MIN]] : i64
// STREAM:       %[[ADDR:[0-9]+]] = llvm.ptrtoint %{{[0-9]+}} : !llvm.ptr to i64
// STREAM-NEXT:  %[[LOW:[0-9]+]] = llvm.and %[[ADDR]], %{{[0-9]+}} : i64
// STREAM-NEXT:  %[[ALIGNED:[0-9]+]] = llvm.icmp "eq" %[[LOW]], %{{[0-9]+}} : i64
// STREAM-NEXT:  %[[OK:[0-9]+]] = llvm.and %[[BIG]], %[[ALIGNED]] : i1
// STREAM-NEXT:  llvm.cond_br %[[OK]], ^{{bb[0-9]+}}, ^{{bb[0-9]+}}
// STREAM:       llvm.store %{{[0-9]+}}, %{{[0-9]+}} {alignment = 8 : i64} : f64, !llvm.ptr
// STREAM:       %[[LINE:[0-9]+]] = llvm.load %[[TILE]] {alignment = 64 : i64} : !llvm.ptr -> vector<8xf64>
// STREAM-NEXT:  llvm.store %[[LINE]], %{{[0-9]+}} {alignment = 64 : i64, nontemporal} : vector<8xf64>, !llvm.ptr
// STREAM-COUNT-15: {alignment = 64 : i64, nontemporal} : vector<8xf64>, !llvm.ptr
// STREAM:       llvm.fence seq_cst
// STREAM-NOT:   nontemporal

// PLAIN-NOT:    nontemporal
// PLAIN-NOT:    llvm.fence
