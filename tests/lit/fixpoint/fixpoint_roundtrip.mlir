// te.fixpoint prints and parses back unchanged (custom and generic forms), and
// lowers through elemwise to a loop.while with the state updated in place.
// RUN: %fuse-opt %s | %fuse-opt | filecheck %s
// RUN: %fuse-opt %s --print-op-generic | %fuse-opt | filecheck %s
// RUN: %fuse-opt %s -p lower-te-to-ew,lower-ew-to-loop | filecheck %s --check-prefix=LOOP

builtin.module {
  %par = te.input "Par" {indices = ["x", "z"]} : tensor<?x?xi8>
  %n0 = te.dim %par, 0 : i64 : tensor<?x?xi8>
  %zero = te.constant dense<0> : tensor<i8> {indices = []} : tensor<i8>
  %init = te.broadcast %zero(%n0, %n0) {operand_indices = [[]], indices = ["x", "z"]} : tensor<i8> -> tensor<?x?xi8>
  %anc, %iters, %conv = te.fixpoint "Anc"(%init) attributes {names = ["Anc"], max_iters = 32 : i64, atol = 1.000000e-06 : f64, rtol = 1.000000e-05 : f64} : (tensor<?x?xi8>) -> (tensor<?x?xi8>, tensor<i64>, tensor<i8>) {
  ^bb0(%it: tensor<i64>, %cur: tensor<?x?xi8>):
    %j = te.contract %cur, %par {operand_indices = [["x", "y"], ["y", "z"]], indices = ["x", "z"], projection = #te.projection<sum>} : (tensor<?x?xi8>, tensor<?x?xi8>) -> tensor<?x?xi64>
    %u = te.map "add" %par, %j {operand_indices = [["x", "z"], ["x", "z"]], indices = ["x", "z"]} : (tensor<?x?xi8>, tensor<?x?xi64>) -> tensor<?x?xi64>
    %g = te.group "Anc" %u {indices = ["x", "z"], boolean = true} : (tensor<?x?xi64>) -> tensor<?x?xi8>
    te.yield %g : tensor<?x?xi8>
  }
  te.export %anc, %iters, %conv {names = ["Anc", "Anc#iterations", "Anc#converged"]} : tensor<?x?xi8>, tensor<i64>, tensor<i8>
}

// CHECK:      %{{.*}}, %{{.*}}, %{{.*}} = te.fixpoint "Anc"(%{{.*}}) attributes {names = ["Anc"], max_iters = 32 : i64, atol = 1.000000e-06 : f64, rtol = 1.000000e-05 : f64} : (tensor<?x?xi8>) -> (tensor<?x?xi8>, tensor<i64>, tensor<i8>) {
// CHECK-NEXT: ^{{.*}}(%{{.*}}: tensor<i64>, %{{.*}}: tensor<?x?xi8>):
// CHECK:        te.group "Anc"
// CHECK-NEXT:   te.yield %{{.*}} : tensor<?x?xi8>
// CHECK-NEXT: }

// LOOP:      %[[COUNT:.*]] = loop.alloc() : memref<i64>
// Every buffer of the body is allocated once, before the loop:
// LOOP:      loop.alloc(%{{.*}}, %{{.*}}) : memref<?x?xi64>
// LOOP:      loop.alloc(%{{.*}}, %{{.*}}) : memref<?x?xi64>
// LOOP:      loop.alloc(%{{.*}}, %{{.*}}) : memref<?x?xi8>
// LOOP-NOT:  loop.alloc
// LOOP:      %{{.*}}, %{{.*}} = loop.while iter_args(%{{.*}}, %{{.*}} : index, i1) -> index, i1 {
// LOOP-NEXT: ^{{.*}}(%[[IT:.*]]: index, %{{.*}}: i1):
// LOOP-NOT:    loop.alloc
// LOOP:        loop.store %{{.*}}, %[[COUNT]][] : i64, memref<i64>
// LOOP-NOT:    loop.alloc
// LOOP:        loop.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : i8, memref<?x?xi8>
// LOOP-NOT:    loop.alloc
// LOOP:        loop.yield %{{.*}}, %{{.*}}, %{{.*}} : i1, index, i1
// LOOP-NEXT: }
