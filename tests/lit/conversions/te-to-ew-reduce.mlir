// lower-te-to-ew, reductions and normalisations (te_to_ew/reduce.py): logsumexp is max, Σ exp(x - m)
// and log + m with the max made finite; softmax is three kernels (max, Σ exp, exp / Σ); layer norm is
// mean, Σ (x - mean)², and the normalising map; any() or-s booleans into i8.
// RUN: %fuse-opt %s -p 'lower-te-to-ew' | filecheck %s
// CHECK-LABEL: builtin.module {
// CHECK-NEXT:   %[[V0:[0-9]+]] = te.input "X" {indices = ["i", "j"]} : tensor<?x?xf64>
// CHECK-NEXT:   %[[V1:[0-9]+]] = te.dim %[[V0]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V2:[0-9]+]] = te.dim %[[V0]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V3:[0-9]+]] = ew.generic ins(%[[V0]] : tensor<?x?xf64>) tables(:) extents(%[[V1]], %[[V2]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<max>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V4:[0-9]+]]: f64):
// CHECK-NEXT:     ew.yield %[[V4]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V5:[0-9]+]] = ew.generic ins(%[[V0]], %[[V3]] : tensor<?x?xf64>, tensor<?xf64>) tables(:) extents(%[[V1]], %[[V2]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64], [0 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<sum>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V6:[0-9]+]]: f64, %[[V7:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V8:[0-9]+]] = math.absf %[[V7]] : f64
// CHECK-NEXT:     %[[V9:[0-9]+]] = arith.constant 0x7ff0000000000000 : f64
// CHECK-NEXT:     %[[V10:[0-9]+]] = arith.cmpf olt, %[[V8]], %[[V9]] : f64
// CHECK-NEXT:     %[[V11:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:     %[[V12:[0-9]+]] = arith.select %[[V10]], %[[V7]], %[[V11]] : f64
// CHECK-NEXT:     %[[V13:[0-9]+]] = arith.subf %[[V6]], %[[V12]] : f64
// CHECK-NEXT:     %[[V14:[0-9]+]] = math.exp %[[V13]] : f64
// CHECK-NEXT:     ew.yield %[[V14]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V15:[0-9]+]] = ew.generic ins(%[[V5]], %[[V3]] : tensor<?xf64>, tensor<?xf64>) tables(:) extents(%[[V1]]) attributes {maps = {{\[\[}}0 : i64], [0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V16:[0-9]+]]: f64, %[[V17:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V18:[0-9]+]] = math.log %[[V16]] : f64
// CHECK-NEXT:     %[[V19:[0-9]+]] = math.absf %[[V17]] : f64
// CHECK-NEXT:     %[[V20:[0-9]+]] = arith.constant 0x7ff0000000000000 : f64
// CHECK-NEXT:     %[[V21:[0-9]+]] = arith.cmpf olt, %[[V19]], %[[V20]] : f64
// CHECK-NEXT:     %[[V22:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:     %[[V23:[0-9]+]] = arith.select %[[V21]], %[[V17]], %[[V22]] : f64
// CHECK-NEXT:     %[[V24:[0-9]+]] = arith.addf %[[V18]], %[[V23]] : f64
// CHECK-NEXT:     ew.yield %[[V24]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V25:[0-9]+]] = ew.generic ins(%[[V0]] : tensor<?x?xf64>) tables(:) extents(%[[V1]], %[[V2]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<max>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V26:[0-9]+]]: f64):
// CHECK-NEXT:     ew.yield %[[V26]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V27:[0-9]+]] = ew.generic ins(%[[V0]], %[[V25]] : tensor<?x?xf64>, tensor<?xf64>) tables(:) extents(%[[V1]], %[[V2]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64], [0 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<sum>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V28:[0-9]+]]: f64, %[[V29:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V30:[0-9]+]] = math.absf %[[V29]] : f64
// CHECK-NEXT:     %[[V31:[0-9]+]] = arith.constant 0x7ff0000000000000 : f64
// CHECK-NEXT:     %[[V32:[0-9]+]] = arith.cmpf olt, %[[V30]], %[[V31]] : f64
// CHECK-NEXT:     %[[V33:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:     %[[V34:[0-9]+]] = arith.select %[[V32]], %[[V29]], %[[V33]] : f64
// CHECK-NEXT:     %[[V35:[0-9]+]] = arith.subf %[[V28]], %[[V34]] : f64
// CHECK-NEXT:     %[[V36:[0-9]+]] = math.exp %[[V35]] : f64
// CHECK-NEXT:     ew.yield %[[V36]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V37:[0-9]+]] = ew.generic ins(%[[V27]] : tensor<?xf64>) tables(:) extents(%[[V1]]) attributes {maps = {{\[\[}}0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V38:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V39:[0-9]+]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:     %[[V40:[0-9]+]] = arith.divf %[[V39]], %[[V38]] : f64
// CHECK-NEXT:     ew.yield %[[V40]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V41:[0-9]+]] = ew.generic ins(%[[V0]], %[[V25]], %[[V37]] : tensor<?x?xf64>, tensor<?xf64>, tensor<?xf64>) tables(:) extents(%[[V1]], %[[V2]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64], [0 : i64], [0 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V42:[0-9]+]]: f64, %[[V43:[0-9]+]]: f64, %[[V44:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V45:[0-9]+]] = math.absf %[[V43]] : f64
// CHECK-NEXT:     %[[V46:[0-9]+]] = arith.constant 0x7ff0000000000000 : f64
// CHECK-NEXT:     %[[V47:[0-9]+]] = arith.cmpf olt, %[[V45]], %[[V46]] : f64
// CHECK-NEXT:     %[[V48:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:     %[[V49:[0-9]+]] = arith.select %[[V47]], %[[V43]], %[[V48]] : f64
// CHECK-NEXT:     %[[V50:[0-9]+]] = arith.subf %[[V42]], %[[V49]] : f64
// CHECK-NEXT:     %[[V51:[0-9]+]] = math.exp %[[V50]] : f64
// CHECK-NEXT:     %[[V52:[0-9]+]] = arith.mulf %[[V51]], %[[V44]] : f64
// CHECK-NEXT:     ew.yield %[[V52]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V53:[0-9]+]] = ew.generic ins(%[[V0]] : tensor<?x?xf64>) tables(:) extents(%[[V1]], %[[V2]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<sum>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V54:[0-9]+]]: f64):
// CHECK-NEXT:     ew.yield %[[V54]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V55:[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:   %[[V56:[0-9]+]] = arith.muli %[[V55]], %[[V2]] : index
// CHECK-NEXT:   %[[V57:[0-9]+]] = ew.generic ins(%[[V53]] : tensor<?xf64>) tables(:) extents(%[[V1]]) attributes {maps = {{\[\[}}0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V58:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V59:[0-9]+]] = arith.index_cast %[[V56]] : index to i64
// CHECK-NEXT:     %[[V60:[0-9]+]] = arith.sitofp %[[V59]] : i64 to f64
// CHECK-NEXT:     %[[V61:[0-9]+]] = arith.divf %[[V58]], %[[V60]] : f64
// CHECK-NEXT:     ew.yield %[[V61]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V62:[0-9]+]] = ew.generic ins(%[[V0]], %[[V57]] : tensor<?x?xf64>, tensor<?xf64>) tables(:) extents(%[[V1]], %[[V2]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64], [0 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<sum>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V63:[0-9]+]]: f64, %[[V64:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V65:[0-9]+]] = arith.subf %[[V63]], %[[V64]] : f64
// CHECK-NEXT:     %[[V66:[0-9]+]] = arith.mulf %[[V65]], %[[V65]] : f64
// CHECK-NEXT:     ew.yield %[[V66]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V67:[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:   %[[V68:[0-9]+]] = arith.muli %[[V67]], %[[V2]] : index
// CHECK-NEXT:   %[[V69:[0-9]+]] = ew.generic ins(%[[V62]] : tensor<?xf64>) tables(:) extents(%[[V1]]) attributes {maps = {{\[\[}}0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V70:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V71:[0-9]+]] = arith.index_cast %[[V68]] : index to i64
// CHECK-NEXT:     %[[V72:[0-9]+]] = arith.sitofp %[[V71]] : i64 to f64
// CHECK-NEXT:     %[[V73:[0-9]+]] = arith.divf %[[V70]], %[[V72]] : f64
// CHECK-NEXT:     ew.yield %[[V73]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V74:[0-9]+]] = ew.generic ins(%[[V69]] : tensor<?xf64>) tables(:) extents(%[[V1]]) attributes {maps = {{\[\[}}0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V75:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V76:[0-9]+]] = arith.constant 1.000000e-05 : f64
// CHECK-NEXT:     %[[V77:[0-9]+]] = arith.addf %[[V75]], %[[V76]] : f64
// CHECK-NEXT:     %[[V78:[0-9]+]] = math.sqrt %[[V77]] : f64
// CHECK-NEXT:     ew.yield %[[V78]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V79:[0-9]+]] = ew.generic ins(%[[V74]] : tensor<?xf64>) tables(:) extents(%[[V1]]) attributes {maps = {{\[\[}}0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V80:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V81:[0-9]+]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:     %[[V82:[0-9]+]] = arith.divf %[[V81]], %[[V80]] : f64
// CHECK-NEXT:     ew.yield %[[V82]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V83:[0-9]+]] = ew.generic ins(%[[V0]], %[[V57]], %[[V79]] : tensor<?x?xf64>, tensor<?xf64>, tensor<?xf64>) tables(:) extents(%[[V1]], %[[V2]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64], [0 : i64], [0 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V84:[0-9]+]]: f64, %[[V85:[0-9]+]]: f64, %[[V86:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V87:[0-9]+]] = arith.subf %[[V84]], %[[V85]] : f64
// CHECK-NEXT:     %[[V88:[0-9]+]] = arith.mulf %[[V87]], %[[V86]] : f64
// CHECK-NEXT:     ew.yield %[[V88]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V89:[0-9]+]] = te.constant dense<0.000000e+00> : tensor<f64> {indices = []} : tensor<f64>
// CHECK-NEXT:   %[[V90:[0-9]+]] = ew.generic ins(%[[V0]] : tensor<?x?xf64>) tables(:) extents(%[[V1]], %[[V2]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xi8> {
// CHECK-NEXT:   ^bb0(%[[V91:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V92:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:     %[[V93:[0-9]+]] = arith.cmpf ogt, %[[V91]], %[[V92]] : f64
// CHECK-NEXT:     %[[V94:[0-9]+]] = arith.extui %[[V93]] : i1 to i8
// CHECK-NEXT:     ew.yield %[[V94]] : i8
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V95:[0-9]+]] = ew.generic ins(%[[V90]] : tensor<?x?xi8>) tables(:) extents(%[[V1]], %[[V2]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<sum>]} -> tensor<?xi64> {
// CHECK-NEXT:   ^bb0(%[[V96:[0-9]+]]: i8):
// CHECK-NEXT:     %[[V97:[0-9]+]] = arith.extsi %[[V96]] : i8 to i64
// CHECK-NEXT:     ew.yield %[[V97]] : i64
// CHECK-NEXT:   }
// CHECK-NEXT:   te.export %[[V15]], %[[V41]], %[[V83]], %[[V95]] {names = ["L", "S", "N", "A"]} : tensor<?xf64>, tensor<?x?xf64>, tensor<?x?xf64>, tensor<?xi64>
// CHECK-NEXT: }
builtin.module {
  %0 = te.input "X" {indices = ["i", "j"]} : tensor<?x?xf64>
  %1 = te.reduce <logsumexp> %0 {operand_indices = [["i", "j"]], indices = ["i"]} : (tensor<?x?xf64>) -> tensor<?xf64>
  %2 = te.group "L" %1 {indices = ["i"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
  %3 = te.axis_fn "softmax" %0 {axis = "j", operand_indices = [["i", "j"]], indices = ["i", "j"]} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  %4 = te.group "S" %3 {indices = ["i", "j"], boolean = false} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  %5 = te.axis_fn "lnorm" %0 {axis = "j", operand_indices = [["i", "j"]], indices = ["i", "j"], params = {eps = 1.000000e-05 : f64}} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  %6 = te.group "N" %5 {indices = ["i", "j"], boolean = false} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  %7 = te.constant dense<0.000000e+00> : tensor<f64> {indices = []} : tensor<f64>
  %8 = te.map "gt" %0, %7 {operand_indices = [["i", "j"], []], indices = ["i", "j"]} : (tensor<?x?xf64>, tensor<f64>) -> tensor<?x?xi8>
  %9 = te.contract %8 {operand_indices = [["i", "j"]], indices = ["i"], projection = #te.projection<sum>} : (tensor<?x?xi8>) -> tensor<?xi64>
  %10 = te.group "A" %9 {indices = ["i"], boolean = false} : (tensor<?xi64>) -> tensor<?xi64>
  te.export %2, %4, %6, %10 {names = ["L", "S", "N", "A"]} : tensor<?xf64>, tensor<?x?xf64>, tensor<?x?xf64>, tensor<?xi64>
}
