// contract-order: a factor is summed over the indices only it has first (presum), products of three or more
// factors become pairwise steps, and a product it factored so reads 0 when a projected index is empty.
// RUN: %fuse-opt %s -p contract-order --split-input-file | filecheck %s
// RUN: %fuse-opt %s -p 'contract-order,lower-te-to-ew' --split-input-file | filecheck %s --check-prefix=EW

// T[j] = X4[j] X5[j, l]: X5 is summed over l before the product; l's extent is known only at run time, so
// the result is guarded by te.generate "nonempty" of it.
builtin.module {
  %x4 = te.input "X4" {indices = ["j"]} : tensor<?xf64>
  %x5 = te.input "X5" {indices = ["j", "l"]} : tensor<?x?xf64>
  %t = te.contract %x4, %x5 {operand_indices = [["j"], ["j", "l"]], indices = ["j"], projection = #te.projection<sum>} : (tensor<?xf64>, tensor<?x?xf64>) -> tensor<?xf64>
  te.export %t {names = ["T"]} : tensor<?xf64>
}
// CHECK-LABEL: builtin.module {
// CHECK:       %[[PRE:.*]] = te.contract %[[X5:.*]] {operand_indices = {{\[\["j", "l"\]\]}}, indices = ["j"], projection = #te.projection<sum>}
// CHECK-NEXT:  %[[PROD:.*]] = te.contract %[[X4:.*]], %[[PRE]] {operand_indices = {{\[\["j"\], \["j"\]\]}}
// CHECK-NEXT:  %[[L:.*]] = te.dim %[[X5]], 1
// CHECK-NEXT:  %[[NE:.*]] = te.generate "nonempty"(%[[L]]) {indices = []} : tensor<i8>
// CHECK-NEXT:  %[[Z:.*]] = te.constant dense<0.000000e+00> : tensor<f64>
// CHECK-NEXT:  %[[G:.*]] = te.map "select" %[[NE]], %[[PROD]], %[[Z]] {operand_indices = {{\[\[\], \["j"\], \[\]\]}}, indices = ["j"]}
// CHECK-NEXT:  te.export %[[G]] {names = ["T"]}

// At the ew level the test is on the extent, outside the kernels: a 0-d generic reads it.
// EW-LABEL: builtin.module {
// EW:       %[[ZERO:.*]] = arith.constant 0 : index
// EW-NEXT:  %[[POS:.*]] = arith.cmpi sgt, %{{.*}}, %[[ZERO]] : index
// EW-NEXT:  ew.generic ins(:) tables(:) extents() {{.*}} -> tensor<i8> {
// EW-NEXT:    %[[B:.*]] = arith.extui %[[POS]] : i1 to i8
// EW-NEXT:    ew.yield %[[B]] : i8

// -----

// A chain of three: pairwise steps; j and k are projected with run-time extents, so the last step is guarded
// on both (a NaN in A times the empty sum over k of B C would otherwise be NaN).
builtin.module {
  %a = te.input "A" {indices = ["i", "j"]} : tensor<?x?xf64>
  %b = te.input "B" {indices = ["j", "k"]} : tensor<?x?xf64>
  %c = te.input "C" {indices = ["k", "l"]} : tensor<?x?xf64>
  %t = te.contract %a, %b, %c {operand_indices = [["i", "j"], ["j", "k"], ["k", "l"]], indices = ["i", "l"], projection = #te.projection<sum>} : (tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf64>) -> tensor<?x?xf64>
  te.export %t {names = ["T"]} : tensor<?x?xf64>
}
// CHECK-LABEL: builtin.module {
// CHECK:       te.contract %{{.*}}, %{{.*}} {operand_indices = {{.*}}
// CHECK:       %[[LAST:.*]] = te.contract %{{.*}}, %{{.*}} {operand_indices = {{.*}}, indices = ["i", "l"]
// CHECK-NEXT:  %[[J:.*]] = te.dim %[[A:.*]], 1
// CHECK-NEXT:  %[[K:.*]] = te.dim %[[B:.*]], 1
// CHECK-NEXT:  %[[NE:.*]] = te.generate "nonempty"(%[[J]], %[[K]]) {indices = []} : tensor<i8>
// CHECK:       te.map "select" %[[NE]], %[[LAST]]
// CHECK-NOT:   te.generate

// -----

// A projected extent known positive needs no guard, and a product left whole (two factors, nothing to
// presum) keeps its term-by-term sum, so none either.
builtin.module {
  %x4 = te.input "X4" {indices = ["j"]} : tensor<?xf64>
  %x5 = te.input "X5" {indices = ["j", "l"]} : tensor<?x3xf64>
  %t = te.contract %x4, %x5 {operand_indices = [["j"], ["j", "l"]], indices = ["j"], projection = #te.projection<sum>} : (tensor<?xf64>, tensor<?x3xf64>) -> tensor<?xf64>
  %w = te.input "W" {indices = ["i", "j"]} : tensor<?x?xf64>
  %m = te.contract %w, %x4 {operand_indices = [["i", "j"], ["j"]], indices = ["i"], projection = #te.projection<sum>} : (tensor<?x?xf64>, tensor<?xf64>) -> tensor<?xf64>
  te.export %t, %m {names = ["T", "M"]} : tensor<?xf64>, tensor<?xf64>
}
// CHECK-LABEL: builtin.module {
// CHECK-NOT:   te.generate
// CHECK-NOT:   te.map
// CHECK:       te.export
