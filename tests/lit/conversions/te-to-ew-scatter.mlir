// lower-te-to-ew, te.scatter_add (te_to_ew/access.py): each index tensor's extents are checked against the
// update's (te.check_dim), then one ew.scatter_add over the update's own axes: maps give the update axis of each
// index tensor axis, places the update axis (>= 0) or gather (-1 - n) each result axis is written at.
// RUN: %fuse-opt %s -p 'lower-te-to-ew' | filecheck %s
// CHECK-LABEL: builtin.module
// CHECK: %[[N:.*]] = te.dim %z, 0
// CHECK: %[[B:.*]] = te.dim %u, 0
// CHECK: %[[T:.*]] = te.dim %u, 1
// CHECK: %[[IB:.*]] = te.dim %i, 0
// CHECK: te.check_dim %[[B]], %[[IB]] {message = "index b is {0} in the update but {1} in an index tensor"}
// CHECK: %[[IT:.*]] = te.dim %j, 0
// CHECK: %[[IB2:.*]] = te.dim %j, 1
// CHECK: te.check_dim %[[T]], %[[IT]] {message = "index t is {0} in the update but {1} in an index tensor"}
// CHECK: te.check_dim %[[B]], %[[IB2]]
// CHECK: %s = ew.scatter_add %u[%i, %j] (%[[N]], %[[N]]) {maps = {{\[\[}}0 : i64], [1 : i64, 0 : i64]], places = [2 : i64, -2 : i64, -1 : i64], check = "scattered index {0} is out of range for an axis of extent {1}"} : tensor<?x?x?xf32>[tensor<?xi64>, tensor<?x?xi32>] -> tensor<?x?x?xf32>
// CHECK-NEXT: te.export %s
builtin.module {
  %u = te.input "U" {indices = ["b", "t", "d"]} : tensor<?x?x?xf32>
  %i = te.input "I" {indices = ["b"]} : tensor<?xi64>
  %j = te.input "J" {indices = ["t", "b"]} : tensor<?x?xi32>
  %z = te.input "Z" {indices = ["v"]} : tensor<?xf32>
  %n = te.dim %z, 0 : i64 : tensor<?xf32>
  %s = te.scatter_add %u[%i, %j] (%n, %n) {axes = [#te.axis<d>, #te.axis<gather 1>, #te.axis<gather 0>], operand_indices = [["b", "t", "d"]], gather_indices = [["b"], ["t", "b"]], indices = ["d", "v", "w"]} : tensor<?x?x?xf32>[tensor<?xi64>, tensor<?x?xi32>] -> tensor<?x?x?xf32>
  te.export %s {names = ["S"]} : tensor<?x?x?xf32>
}
