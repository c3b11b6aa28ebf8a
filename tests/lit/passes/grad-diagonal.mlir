// grad through a diagonal read A[i,i]: one te.scatter_add, the first axis through the name i, the second
// gathered by iota over i (duplicates would accumulate); no one-hot selection (te.map "eq") or contraction.
// RUN: %fuse-opt %s -p 'grad{of=L wrt=A}' | filecheck %s
// CHECK-LABEL: builtin.module
// CHECK: %[[L:.*]] = te.group "L"
// CHECK-NOT: te.map "eq"
// CHECK: %[[N:.*]] = te.dim %a, 1
// CHECK: %[[IOTA:.*]] = te.generate "iota"
// CHECK: %[[D:.*]] = te.scatter_add %{{.*}}[%[[IOTA]]] (%[[N]]) {axes = [#te.axis<i>, #te.axis<gather 0>], operand_indices = [["i"]], gather_indices = [["i"]], indices = ["i", "{{_g[0-9]+}}"]}
// CHECK-NOT: te.contract
// CHECK: %[[G:.*]] = te.group "dL_dA" %[[D]] {indices = ["i", "j"], boolean = false}
// CHECK: te.export %[[L]], %[[G]] {names = ["L", "dL_dA"]}
builtin.module {
  %a = te.input "A" {indices = ["i", "j"]} : tensor<?x?xf64>
  %d = te.access %a[] () {axes = [#te.axis<i>, #te.axis<i>], gather_indices = [], indices = ["i"]} : tensor<?x?xf64>[] -> tensor<?xf64>
  %t = te.contract %d {operand_indices = [["i"]], indices = [], projection = #te.projection<sum>} : (tensor<?xf64>) -> tensor<f64>
  %l = te.group "L" %t {indices = [], boolean = false} : (tensor<f64>) -> tensor<f64>
  te.export %l {names = ["L"]} : tensor<f64>
}
