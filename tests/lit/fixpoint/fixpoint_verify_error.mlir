// The te.fixpoint verifier: the body must yield the carried types.
// RUN: not %fuse-opt %s 2>&1 | filecheck %s

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %r, %n, %c = te.fixpoint "X"(%x) attributes {names = ["X"], max_iters = 4 : i64, atol = 0.000000e+00 : f64, rtol = 0.000000e+00 : f64} : (tensor<?xf64>) -> (tensor<?xf64>, tensor<i64>, tensor<i8>) {
  ^bb0(%it: tensor<i64>, %cur: tensor<?xf64>):
    te.yield %it : tensor<i64>
  }
}

// CHECK: error: te.fixpoint: the body must end with te.yield of the carried types
// CHECK-NOT: Traceback
