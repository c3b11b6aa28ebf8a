// Demand on a fixpoint-mode module: the query keeps the te.fixpoint whole (W is
// read only inside its body, so the pruned module must still hold it), gathers
// the selection from the loop's result, and pushes it into V, which only the
// reader of the loop uses. Z (not needed) is pruned. A recursive tensor itself
// can be the query's tensor.
// RUN: %fuse-opt %s -p 'demand{tensor=Y select="i=int"}' | filecheck %s
// RUN: %fuse-opt %s -p 'demand{tensor=S select="i=slice"}' | filecheck %s --check-prefix=REC

builtin.module {
  %0 = te.input "B" {indices = ["i"]} : tensor<?xf64>
  %1 = te.input "W" {indices = ["i", "j"]} : tensor<?x?xf64>
  %2 = te.input "V" {indices = ["i"]} : tensor<?xf64>
  %3 = te.dim %0, 0 : i64 : tensor<?xf64>
  %4 = te.dim %1, 0 : i64 : tensor<?x?xf64>
  te.check_dim %3, %4 {message = "i is {1} in W[i, j] but {0} in B[i]"}
  %5 = te.dim %1, 1 : i64 : tensor<?x?xf64>
  te.check_dim %3, %5 {message = "j is {1} in W[i, j] but {0} in S[j]"}
  %6 = te.dim %2, 0 : i64 : tensor<?xf64>
  te.check_dim %3, %6 {message = "i is {1} in V[i] but {0} in S[i]"}
  %7 = te.constant dense<0.000000e+00> : tensor<f64> {indices = []} : tensor<f64>
  %8 = te.broadcast %7(%3) {operand_indices = [[]], indices = ["i"]} : tensor<f64> -> tensor<?xf64>
  %9, %10, %11 = te.fixpoint "S"(%8) attributes {names = ["S"], max_iters = 32 : i64, atol = 1.000000e-06 : f64, rtol = 1.000000e-05 : f64} : (tensor<?xf64>) -> (tensor<?xf64>, tensor<i64>, tensor<i8>) {
  ^bb0(%12: tensor<i64>, %13: tensor<?xf64>):
    %14 = te.map "tanh" %13 {operand_indices = [["j"]], indices = ["j"]} : (tensor<?xf64>) -> tensor<?xf64>
    %15 = te.constant dense<2.500000e-01> : tensor<f64> {indices = []} : tensor<f64>
    %16 = te.contract %1, %14, %15 {operand_indices = [["i", "j"], ["j"], []], indices = ["i"], projection = #te.projection<sum>} : (tensor<?x?xf64>, tensor<?xf64>, tensor<f64>) -> tensor<?xf64>
    %17 = te.map "add" %0, %16 {operand_indices = [["i"], ["i"]], indices = ["i"]} : (tensor<?xf64>, tensor<?xf64>) -> tensor<?xf64>
    %18 = te.group "S" %17 {indices = ["i"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
    te.yield %18 : tensor<?xf64>
  }
  %19 = te.contract %2, %9 {operand_indices = [["i"], ["i"]], indices = ["i"], projection = #te.projection<sum>} : (tensor<?xf64>, tensor<?xf64>) -> tensor<?xf64>
  %20 = te.group "Y" %19 {indices = ["i"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
  %21 = te.group "Z" %2 {indices = ["i"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
  te.export %20, %9, %21, %10, %11 {names = ["Y", "S", "Z", "S#iterations", "S#converged"]} : tensor<?xf64>, tensor<?xf64>, tensor<?xf64>, tensor<i64>, tensor<i8>
}

// CHECK:      %[[SEL:.*]] = te.input "select:0" {indices = []} : tensor<i64>
// CHECK-NEXT: te.input "B"
// CHECK-NEXT: %[[W:.*]] = te.input "W"
// CHECK-NEXT: %[[V:.*]] = te.input "V"
// CHECK-NEXT: %[[VI:.*]] = te.access %[[V]][%[[SEL]]]
// CHECK:      %[[S:.*]], %{{.*}}, %{{.*}} = te.fixpoint "S"
// CHECK:        te.contract %[[W]], {{.*}} indices = ["i"]
// CHECK:        te.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[SI:.*]] = te.access %[[S]][%[[SEL]]] () {axes = {{\[}}#te.axis<gather 0>{{\]}}, gather_indices = {{\[\[\]\]}}, indices = []}
// CHECK-NEXT: %[[C:.*]] = te.contract %[[VI]], %[[SI]] {operand_indices = {{\[\[\], \[\]\]}}, indices = []
// CHECK-NEXT: %[[Y:.*]] = te.group "Y" %[[C]]
// CHECK-NOT:  te.group "Z"
// CHECK-NEXT: te.export %[[Y]] {names = ["Y"]} : tensor<f64>

// REC:      %[[SEL:.*]] = te.input "select:0" {indices = ["select0"]} : tensor<?xi64>
// REC-NOT:  te.input "V"
// REC:      %[[S:.*]], %{{.*}}, %{{.*}} = te.fixpoint "S"
// REC:      %[[G:.*]] = te.access %[[S]][%[[SEL]]] () {axes = {{\[}}#te.axis<gather 0>{{\]}}, gather_indices = {{\[\["i"\]\]}}, indices = ["i"]}
// REC-NEXT: te.export %[[G]] {names = ["S"]}
