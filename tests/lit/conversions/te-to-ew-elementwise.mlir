// lower-te-to-ew, pointwise family (te_to_ew/elementwise.py): te.map bodies call the builtin (scalar
// constants become immediates); te.broadcast copies over the new names;
// te.group adds its terms (or-s them for a boolean result); an integer power asserts a non-negative exponent.
// RUN: %fuse-opt %s -p 'lower-te-to-ew' | filecheck %s
// CHECK-LABEL: builtin.module {
// CHECK-NEXT:   %[[V0:[0-9]+]] = te.input "X" {indices = ["i", "j"]} : tensor<?x?xf64>
// CHECK-NEXT:   %[[V1:[0-9]+]] = te.input "B" {indices = ["j"]} : tensor<?xf64>
// CHECK-NEXT:   %[[V2:[0-9]+]] = te.input "N" {indices = ["i"]} : tensor<?xi64>
// CHECK-NEXT:   %[[V3:[0-9]+]] = te.input "M" {indices = ["i"]} : tensor<?xi64>
// CHECK-NEXT:   %[[V4:[0-9]+]] = te.dim %[[V0]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V5:[0-9]+]] = te.dim %[[V0]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   te.check_dim %[[V4]], %[[V5]] {message = "j is {1} in X[i, j] but {0} in B[j]"}
// CHECK-NEXT:   %[[V6:[0-9]+]] = te.dim %[[V1]], 0 : i64 : tensor<?xf64>
// CHECK-NEXT:   te.check_dim %[[V4]], %[[V6]] {message = "i is {1} in B[i] but {0} in X[i, j]"}
// CHECK-NEXT:   %[[V7:[0-9]+]] = te.dim %[[V2]], 0 : i64 : tensor<?xi64>
// CHECK-NEXT:   %[[V8:[0-9]+]] = te.dim %[[V3]], 0 : i64 : tensor<?xi64>
// CHECK-NEXT:   te.check_dim %[[V7]], %[[V8]] {message = "i is {1} in M[i] but {0} in N[i]"}
// CHECK-NEXT:   %[[V9:[0-9]+]] = te.dim %[[V0]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V10:[0-9]+]] = te.dim %[[V0]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V11:[0-9]+]] = ew.generic ins(%[[V0]] : tensor<?x?xf64>) tables(:) extents(%[[V9]], %[[V10]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V12:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V13:[0-9]+]] = math.exp %[[V12]] : f64
// CHECK-NEXT:     ew.yield %[[V13]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V14:[0-9]+]] = te.constant dense<2.000000e+00> : tensor<f64> {indices = []} : tensor<f64>
// CHECK-NEXT:   %[[V15:[0-9]+]] = te.dim %[[V1]], 0 : i64 : tensor<?xf64>
// CHECK-NEXT:   %[[V16:[0-9]+]] = ew.generic ins(%[[V1]] : tensor<?xf64>) tables(:) extents(%[[V15]]) attributes {maps = {{\[\[}}0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V17:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V18:[0-9]+]] = arith.constant 2.000000e+00 : f64
// CHECK-NEXT:     %[[V19:[0-9]+]] = arith.mulf %[[V17]], %[[V18]] : f64
// CHECK-NEXT:     ew.yield %[[V19]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V20:[0-9]+]] = ew.generic ins(%[[V11]], %[[V16]] : tensor<?x?xf64>, tensor<?xf64>) tables(:) extents(%[[V9]], %[[V10]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64], [1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V21:[0-9]+]]: f64, %[[V22:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V23:[0-9]+]] = arith.addf %[[V21]], %[[V22]] : f64
// CHECK-NEXT:     ew.yield %[[V23]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V24:[0-9]+]] = te.constant dense<0.000000e+00> : tensor<f64> {indices = []} : tensor<f64>
// CHECK-NEXT:   %[[V25:[0-9]+]] = ew.generic ins(%[[V0]] : tensor<?x?xf64>) tables(:) extents(%[[V9]], %[[V10]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xi8> {
// CHECK-NEXT:   ^bb0(%[[V26:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V27:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:     %[[V28:[0-9]+]] = arith.cmpf ogt, %[[V26]], %[[V27]] : f64
// CHECK-NEXT:     %[[V29:[0-9]+]] = arith.extui %[[V28]] : i1 to i8
// CHECK-NEXT:     ew.yield %[[V29]] : i8
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V30:[0-9]+]] = te.constant dense<1.000000e+00> : tensor<f64> {indices = []} : tensor<f64>
// CHECK-NEXT:   %[[V31:[0-9]+]] = ew.generic ins(%[[V1]] : tensor<?xf64>) tables(:) extents(%[[V15]]) attributes {maps = {{\[\[}}0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xi8> {
// CHECK-NEXT:   ^bb0(%[[V32:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V33:[0-9]+]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:     %[[V34:[0-9]+]] = arith.cmpf ogt, %[[V32]], %[[V33]] : f64
// CHECK-NEXT:     %[[V35:[0-9]+]] = arith.extui %[[V34]] : i1 to i8
// CHECK-NEXT:     ew.yield %[[V35]] : i8
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V36:[0-9]+]] = ew.generic ins(%[[V25]], %[[V31]] : tensor<?x?xi8>, tensor<?xi8>) tables(:) extents(%[[V9]], %[[V10]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64], [0 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xi8> {
// CHECK-NEXT:   ^bb0(%[[V37:[0-9]+]]: i8, %[[V38:[0-9]+]]: i8):
// CHECK-NEXT:     %[[V39:[0-9]+]] = arith.constant 0 : i8
// CHECK-NEXT:     %[[V40:[0-9]+]] = arith.cmpi ne, %[[V37]], %[[V39]] : i8
// CHECK-NEXT:     %[[V41:[0-9]+]] = arith.constant 0 : i8
// CHECK-NEXT:     %[[V42:[0-9]+]] = arith.cmpi ne, %[[V38]], %[[V41]] : i8
// CHECK-NEXT:     %[[V43:[0-9]+]] = arith.ori %[[V40]], %[[V42]] : i1
// CHECK-NEXT:     %[[V44:[0-9]+]] = arith.extui %[[V43]] : i1 to i8
// CHECK-NEXT:     ew.yield %[[V44]] : i8
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V45:[0-9]+]] = ew.generic ins(%[[V36]] : tensor<?x?xi8>) tables(:) extents(%[[V9]], %[[V10]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<sum>]} -> tensor<?xi64> {
// CHECK-NEXT:   ^bb0(%[[V46:[0-9]+]]: i8):
// CHECK-NEXT:     %[[V47:[0-9]+]] = arith.extsi %[[V46]] : i8 to i64
// CHECK-NEXT:     ew.yield %[[V47]] : i64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V48:[0-9]+]] = te.dim %[[V2]], 0 : i64 : tensor<?xi64>
// CHECK-NEXT:   %[[V49:[0-9]+]] = te.dim %[[V3]], 0 : i64 : tensor<?xi64>
// CHECK-NEXT:   %[[V50:[0-9]+]] = ew.generic ins(%[[V2]], %[[V3]] : tensor<?xi64>, tensor<?xi64>) tables(:) extents(%[[V48]]) attributes {maps = {{\[\[}}0 : i64], [0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xi64> {
// CHECK-NEXT:   ^bb0(%[[V51:[0-9]+]]: i64, %[[V52:[0-9]+]]: i64):
// CHECK-NEXT:     %[[V53:[0-9]+]] = arith.constant 0 : i64
// CHECK-NEXT:     %[[V54:[0-9]+]] = arith.cmpi sge, %[[V52]], %[[V53]] : i64
// CHECK-NEXT:     ew.assert %[[V54]], %[[V52]] {message = "an integer cannot be raised to a negative integer power (exponent {0})"} : i64
// CHECK-NEXT:     %[[V55:[0-9]+]] = arith.sitofp %[[V51]] : i64 to f64
// CHECK-NEXT:     %[[V56:[0-9]+]] = arith.sitofp %[[V52]] : i64 to f64
// CHECK-NEXT:     %[[V57:[0-9]+]] = math.powf %[[V55]], %[[V56]] : f64
// CHECK-NEXT:     %[[V58:[0-9]+]] = arith.fptosi %[[V57]] : f64 to i64
// CHECK-NEXT:     ew.yield %[[V58]] : i64
// CHECK-NEXT:   }
// CHECK-NEXT:   te.export %[[V20]], %[[V45]], %[[V50]] {names = ["Y", "G", "K"]} : tensor<?x?xf64>, tensor<?xi64>, tensor<?xi64>
// CHECK-NEXT: }
builtin.module {
  %0 = te.input "X" {indices = ["i", "j"]} : tensor<?x?xf64>
  %1 = te.input "B" {indices = ["j"]} : tensor<?xf64>
  %2 = te.input "N" {indices = ["i"]} : tensor<?xi64>
  %3 = te.input "M" {indices = ["i"]} : tensor<?xi64>
  %4 = te.dim %0, 0 : i64 : tensor<?x?xf64>
  %5 = te.dim %0, 1 : i64 : tensor<?x?xf64>
  te.check_dim %4, %5 {message = "j is {1} in X[i, j] but {0} in B[j]"} loc("<stdin>":1:18)
  %6 = te.dim %1, 0 : i64 : tensor<?xf64>
  te.check_dim %4, %6 {message = "i is {1} in B[i] but {0} in X[i, j]"} loc("<stdin>":2:24)
  %7 = te.dim %2, 0 : i64 : tensor<?xi64>
  %8 = te.dim %3, 0 : i64 : tensor<?xi64>
  te.check_dim %7, %8 {message = "i is {1} in M[i] but {0} in N[i]"} loc("<stdin>":3:18)
  %9 = te.map "exp" %0 {operand_indices = [["i", "j"]], indices = ["i", "j"]} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  %10 = te.constant dense<2.000000e+00> : tensor<f64> {indices = []} : tensor<f64>
  %11 = te.contract %1, %10 {operand_indices = [["j"], []], indices = ["j"], projection = #te.projection<sum>} : (tensor<?xf64>, tensor<f64>) -> tensor<?xf64>
  %12 = te.map "add" %9, %11 {operand_indices = [["i", "j"], ["j"]], indices = ["i", "j"]} : (tensor<?x?xf64>, tensor<?xf64>) -> tensor<?x?xf64>
  %13 = te.group "Y" %12 {indices = ["i", "j"], boolean = false} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  %14 = te.constant dense<0.000000e+00> : tensor<f64> {indices = []} : tensor<f64>
  %15 = te.map "gt" %0, %14 {operand_indices = [["i", "j"], []], indices = ["i", "j"]} : (tensor<?x?xf64>, tensor<f64>) -> tensor<?x?xi8>
  %16 = te.constant dense<1.000000e+00> : tensor<f64> {indices = []} : tensor<f64>
  %17 = te.map "gt" %1, %16 {operand_indices = [["i"], []], indices = ["i"]} : (tensor<?xf64>, tensor<f64>) -> tensor<?xi8>
  %18 = te.map "or" %15, %17 {operand_indices = [["i", "j"], ["i"]], indices = ["i", "j"]} : (tensor<?x?xi8>, tensor<?xi8>) -> tensor<?x?xi8>
  %19 = te.contract %18 {operand_indices = [["i", "j"]], indices = ["i"], projection = #te.projection<sum>} : (tensor<?x?xi8>) -> tensor<?xi64>
  %20 = te.group "G" %19 {indices = ["i"], boolean = false} : (tensor<?xi64>) -> tensor<?xi64>
  %21 = te.map "pow" %2, %3 {operand_indices = [["i"], ["i"]], indices = ["i"]} : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64> loc("<stdin>":3:8)
  %22 = te.group "K" %21 {indices = ["i"], boolean = false} : (tensor<?xi64>) -> tensor<?xi64>
  te.export %13, %20, %22 {names = ["Y", "G", "K"]} : tensor<?x?xf64>, tensor<?xi64>, tensor<?xi64>
}
