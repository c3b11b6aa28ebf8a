// grad: the adjoint of a contraction is a contraction; exports become the scalar and d<of>_d<wrt>.
// RUN: %fuse-opt %s -p 'grad{of=L wrt=W}' | filecheck %s
// CHECK-LABEL: builtin.module
// CHECK: %[[L:.*]] = te.group "L"
// CHECK: %[[SEED:.*]] = te.map "pow" %[[L]]
// CHECK: %[[D:.*]] = te.contract %[[SEED]], %{{.*}} {operand_indices = [[], ["i"]], indices = ["i"], projection = #te.projection<sum>}
// CHECK: %[[G:.*]] = te.group "dL_dW" %[[D]]
// CHECK: te.export %[[L]], %[[G]] {names = ["L", "dL_dW"]}
builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %w = te.input "W" {indices = ["i"]} : tensor<?xf64>
  %s = te.contract %x, %w {operand_indices = [["i"], ["i"]], indices = [], projection = #te.projection<sum>} : (tensor<?xf64>, tensor<?xf64>) -> tensor<f64>
  %l = te.group "L" %s {indices = [], boolean = false} : (tensor<f64>) -> tensor<f64>
  %y = te.map "exp" %x {operand_indices = [["i"]], indices = ["i"]} : (tensor<?xf64>) -> tensor<?xf64>
  te.export %l, %y {names = ["L", "Y"]} : tensor<f64>, tensor<?xf64>
}
