// grad through a gather (an embedding lookup E[b, d] = T[Idx[b], d]): the adjoint is a te.scatter_add of the
// adjoint of E through the same axes, its gathered axis as long as T's (te.dim), with no one-hot iota.
// RUN: %fuse-opt %s -p 'grad{of=L wrt=T}' | filecheck %s
// CHECK-LABEL: builtin.module
// CHECK: %[[I:.*]] = te.input "Idx"
// CHECK: %[[L:.*]] = te.group "L"
// CHECK-NOT: te.generate
// CHECK: %[[DE:.*]] = te.map "add" {{.*}} indices = ["b", "d"]}
// CHECK: %[[V:.*]] = te.dim %t, 0
// CHECK: %[[S:.*]] = te.scatter_add %[[DE]][%[[I]]] (%[[V]]) {axes = [#te.axis<gather 0>, #te.axis<d>], operand_indices = {{\[\[}}"b", "d"]], gather_indices = {{\[\[}}"b"]], indices = ["{{_g[0-9]+}}", "d"]} : tensor<?x?xf64>[tensor<?xi64>] -> tensor<?x?xf64>
// CHECK: %[[G:.*]] = te.group "dL_dT" %[[S]] {indices = ["v", "d"], boolean = false}
// CHECK: te.export %[[L]], %[[G]] {names = ["L", "dL_dT"]}
builtin.module {
  %t = te.input "T" {indices = ["v", "d"]} : tensor<?x?xf64>
  %i = te.input "Idx" {indices = ["b"]} : tensor<?xi64>
  %e = te.access %t[%i] () {axes = [#te.axis<gather 0>, #te.axis<d>], gather_indices = [["b"]], indices = ["b", "d"]} : tensor<?x?xf64>[tensor<?xi64>] -> tensor<?x?xf64>
  %s = te.contract %e, %e {operand_indices = [["b", "d"], ["b", "d"]], indices = [], projection = #te.projection<sum>} : (tensor<?x?xf64>, tensor<?x?xf64>) -> tensor<f64>
  %l = te.group "L" %s {indices = [], boolean = false} : (tensor<f64>) -> tensor<f64>
  te.export %l {names = ["L"]} : tensor<f64>
}
