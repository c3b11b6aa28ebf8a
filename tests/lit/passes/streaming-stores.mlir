// streaming-stores: a store is marked nontemporal when its nest never reads the buffer back, it sits directly
// in an innermost step-1 loop whose last position is that loop's induction variable (its other positions
// defined outside the loop), and its element is 4 or 8 bytes wide.
// RUN: %fuse-opt %s -p 'streaming-stores' --split-input-file --pass-statistics 2>%t.stats | filecheck %s
// RUN: filecheck %s --check-prefix=STATS < %t.stats

// An elementwise kernel's output row, and the row of a 2-d output: marked.
// CHECK-LABEL: builtin.module
// CHECK:       loop.store %w, %y[%i] {nontemporal} : f64, memref<?xf64>
// CHECK:       loop.store %{{v[_0-9]*}}, %b[%{{i[_0-9]*}}, %j] {nontemporal} : f32, memref<?x?xf32>
builtin.module {
  func.func @fuse_main() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %x = loop.arg 0 : i64 "X" : memref<?xf64>
    %n = loop.dim %x, 0 : i64 : memref<?xf64>
    %y = loop.alloc(%n) : memref<?xf64>
    loop.for %c0 to %n step %c1 attributes {parallel} {
    ^bb0(%i: index):
      %v = loop.load %x[%i] : memref<?xf64> -> f64
      %w = arith.mulf %v, %v : f64
      loop.store %w, %y[%i] : f64, memref<?xf64>
      loop.yield
    }
    %a = loop.arg 1 : i64 "A" : memref<?x?xf32>
    %r = loop.dim %a, 0 : i64 : memref<?x?xf32>
    %c = loop.dim %a, 1 : i64 : memref<?x?xf32>
    %b = loop.alloc(%r, %c) : memref<?x?xf32>
    loop.for %c0 to %r step %c1 attributes {parallel} {
    ^bb0(%i: index):
      loop.for %c0 to %c step %c1 {
      ^bb1(%j: index):
        %v = loop.load %a[%i, %j] : memref<?x?xf32> -> f32
        loop.store %v, %b[%i, %j] : f32, memref<?x?xf32>
        loop.yield
      }
      loop.yield
    }
    loop.result %y, 0 : i64 "Y" : memref<?xf64>
    loop.result %b, 1 : i64 "B" : memref<?x?xf32>
    func.return
  }
}

// -----

// Not marked: a buffer the nest loads again (softmax's exp row, scaled in place), a column store (the last
// position is not the inner loop's variable), a store after its inner loop (a row sum), a loop of step 2, a
// loop that allocates, and a 1-byte element.
// CHECK-LABEL: builtin.module
// CHECK-NOT:   nontemporal
builtin.module {
  func.func @fuse_main() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %a = loop.arg 0 : i64 "A" : memref<?x?xf64>
    %r = loop.dim %a, 0 : i64 : memref<?x?xf64>
    %c = loop.dim %a, 1 : i64 : memref<?x?xf64>
    %e = loop.alloc(%r, %c) : memref<?x?xf64>
    %t = loop.alloc(%c, %r) : memref<?x?xf64>
    %s = loop.alloc(%r) : memref<?xf64>
    %h = loop.alloc(%r, %c) : memref<?x?xf64>
    %k = loop.alloc(%r, %c) : memref<?x?xi8>
    %zero = arith.constant 0.000000e+00 : f64
    loop.for %c0 to %r step %c1 attributes {parallel} {
    ^bb0(%i: index):
      loop.for %c0 to %c step %c1 {
      ^bb1(%j: index):
        %v = loop.load %a[%i, %j] : memref<?x?xf64> -> f64
        loop.store %v, %e[%i, %j] : f64, memref<?x?xf64>
        loop.store %v, %t[%j, %i] : f64, memref<?x?xf64>
        loop.yield
      }
      loop.for %c0 to %c step %c1 {
      ^bb1(%j: index):
        %v = loop.load %e[%i, %j] : memref<?x?xf64> -> f64
        %w = arith.addf %v, %v : f64
        loop.store %w, %e[%i, %j] : f64, memref<?x?xf64>
        loop.yield
      }
      %sum = loop.for %c0 to %c step %c1 iter_args(%zero : f64) -> f64 {
      ^bb1(%j: index, %acc: f64):
        %v = loop.load %a[%i, %j] : memref<?x?xf64> -> f64
        %nxt = arith.addf %acc, %v : f64
        loop.yield %nxt : f64
      }
      loop.store %sum, %s[%i] : f64, memref<?xf64>
      loop.for %c0 to %c step %c2 {
      ^bb1(%j: index):
        %v = loop.load %a[%i, %j] : memref<?x?xf64> -> f64
        loop.store %v, %h[%i, %j] : f64, memref<?x?xf64>
        loop.yield
      }
      loop.for %c0 to %c step %c1 {
      ^bb1(%j: index):
        %scratch = loop.alloc() : memref<f64>
        %v = loop.load %a[%i, %j] : memref<?x?xf64> -> f64
        %b = arith.fptosi %v : f64 to i8
        loop.store %b, %k[%i, %j] : i8, memref<?x?xi8>
        loop.yield
      }
      loop.yield
    }
    loop.result %e, 0 : i64 "E" : memref<?x?xf64>
    func.return
  }
}

// -----

// Not marked: an alloc a donated input may back at run time (fuse.reuse): it aliases the X this nest reads.
// CHECK-LABEL: builtin.module
// CHECK-NOT:   nontemporal
builtin.module attributes {fuse.args = [#fuse.arg<"X", input>], fuse.results = [#fuse.result<"Y", export>], fuse.reuse = [#fuse.reuse<0, "X">]} {
  func.func @fuse_main() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %x = loop.arg 0 : i64 "X" : memref<?xf64>
    %n = loop.dim %x, 0 : i64 : memref<?xf64>
    %y = loop.alloc(%n) : memref<?xf64>
    loop.for %c0 to %n step %c1 attributes {parallel} {
    ^bb0(%i: index):
      %v = loop.load %x[%i] : memref<?xf64> -> f64
      %w = arith.mulf %v, %v : f64
      loop.store %w, %y[%i] : f64, memref<?xf64>
      loop.yield
    }
    loop.result %y, 0 : i64 "Y" : memref<?xf64>
    func.return
  }
}

// STATS: streaming-stores
// STATS: (2) stores-marked
