// grad through te.access: a fixed position becomes a te.place; an offset mixed with a slice is read back at the
// opposite offset, then scattered (te.scatter_add) through the slice's positions, read from an iota through the
// same #te.axis slice: linear in the axis, no one-hot selection.
// RUN: %fuse-opt %s -p 'grad{of=L wrt=X}' | filecheck %s
// CHECK-LABEL: builtin.module
// CHECK: %[[L:.*]] = te.group "L"
// CHECK-NOT: te.map "eq"
// CHECK: %[[BACK:.*]] = te.access %{{.*}}[] () {axes = [#te.axis<i - 1>, #te.axis<"1::2">], gather_indices = [], indices = ["i", "1::2"]}
// CHECK: %[[N:.*]] = te.dim %x, 1
// CHECK: %[[IOTA_J:.*]] = te.generate "iota"(%[[N]])
// CHECK: %[[SLICED:.*]] = te.access %[[IOTA_J]][] () {axes = [#te.axis<slice 1:?:2 as "1::2">], gather_indices = [], indices = ["1::2"]}
// CHECK: %[[D1:.*]] = te.scatter_add %[[BACK]][%[[SLICED]]] (%[[N]]) {axes = [#te.axis<i>, #te.axis<gather 0>], operand_indices = [["i", "1::2"]], gather_indices = [["1::2"]], indices = ["i", "[[G1:_g[0-9]+]]"]}
// CHECK: %[[D2:.*]] = te.place %{{.*}} {positions = [3 : i64, -1 : i64], operand_indices = [["j"]], indices = ["{{_g[0-9]+}}", "j"]}
// CHECK: %[[D:.*]] = te.map "add" %[[D1]], %[[D2]]
// CHECK: %[[G:.*]] = te.group "dL_dX" %[[D]] {indices = ["i", "j"], boolean = false}
// CHECK: te.export %[[L]], %[[G]] {names = ["L", "dL_dX"]}
builtin.module {
  %x = te.input "X" {indices = ["i", "j"]} : tensor<?x?xf64>
  %a = te.access %x[] () {axes = [#te.axis<3>, #te.axis<j>], gather_indices = [], indices = ["j"]} : tensor<?x?xf64>[] -> tensor<?xf64>
  %b = te.access %x[] () {axes = [#te.axis<i + 1>, #te.axis<slice 1:?:2 as "1::2">], gather_indices = [], indices = ["i", "1::2"]} : tensor<?x?xf64>[] -> tensor<?x?xf64>
  %s = te.contract %a, %a {operand_indices = [["j"], ["j"]], indices = [], projection = #te.projection<sum>} : (tensor<?xf64>, tensor<?xf64>) -> tensor<f64>
  %t = te.contract %b {operand_indices = [["i", "1::2"]], indices = [], projection = #te.projection<sum>} : (tensor<?x?xf64>) -> tensor<f64>
  %u = te.map "add" %s, %t {operand_indices = [[], []], indices = []} : (tensor<f64>, tensor<f64>) -> tensor<f64>
  %l = te.group "L" %u {indices = [], boolean = false} : (tensor<f64>) -> tensor<f64>
  te.export %l {names = ["L"]} : tensor<f64>
}
