// lower-te-to-ew, model blocks (te_to_ew/block.py): attention is a contraction for the scores, a
// scaling map, a softmax over the key axis and a contraction with V; rope rotates feature pairs reading
// the partner from the input as a table after an even-extent check; tucker_dense runs as an ew.host_call.
// RUN: %fuse-opt %s -p 'lower-te-to-ew' | filecheck %s
// CHECK-LABEL: builtin.module {
// CHECK-NEXT:   %[[V0:[0-9]+]] = te.input "Q" {indices = ["p", "d"]} : tensor<?x?xf64>
// CHECK-NEXT:   %[[V1:[0-9]+]] = te.input "K" {indices = ["p'", "d"]} : tensor<?x?xf64>
// CHECK-NEXT:   %[[V2:[0-9]+]] = te.input "V" {indices = ["p'", "e"]} : tensor<?x?xf64>
// CHECK-NEXT:   %[[V3:[0-9]+]] = te.dim %[[V0]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V4:[0-9]+]] = te.dim %[[V1]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   te.check_dim %[[V3]], %[[V4]] {message = "d is {1} in K[p', d] but {0} in Q[p, d]"}
// CHECK-NEXT:   %[[V5:[0-9]+]] = te.dim %[[V1]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V6:[0-9]+]] = te.dim %[[V2]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   te.check_dim %[[V5]], %[[V6]] {message = "p' is {1} in V[p', e] but {0} in K[p', d]"}
// CHECK-NEXT:   %[[V7:[0-9]+]] = te.dim %[[V0]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V8:[0-9]+]] = te.dim %[[V0]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V9:[0-9]+]] = te.dim %[[V1]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V10:[0-9]+]] = te.dim %[[V1]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V11:[0-9]+]] = ew.contract %[[V0]], %[[V1]] extents(%[[V7]], %[[V9]], %[[V8]]) {maps = {{\[\[}}0 : i64, 2 : i64], [1 : i64, 2 : i64]], out = [0 : i64, 1 : i64]} : tensor<?x?xf64>, tensor<?x?xf64> -> tensor<?x?xf64>
// CHECK-NEXT:   %[[V12:[0-9]+]] = te.dim %[[V2]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V13:[0-9]+]] = te.dim %[[V2]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V14:[0-9]+]] = ew.generic ins(%[[V11]] : tensor<?x?xf64>) tables(:) extents(%[[V7]], %[[V9]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V15:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V16:[0-9]+]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:     %[[V17:[0-9]+]] = arith.index_cast %[[V8]] : index to i64
// CHECK-NEXT:     %[[V18:[0-9]+]] = arith.sitofp %[[V17]] : i64 to f64
// CHECK-NEXT:     %[[V19:[0-9]+]] = math.sqrt %[[V18]] : f64
// CHECK-NEXT:     %[[V20:[0-9]+]] = arith.divf %[[V16]], %[[V19]] : f64
// CHECK-NEXT:     %[[V21:[0-9]+]] = arith.mulf %[[V15]], %[[V20]] : f64
// CHECK-NEXT:     ew.yield %[[V21]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V22:[0-9]+]] = ew.generic ins(%[[V14]] : tensor<?x?xf64>) tables(:) extents(%[[V7]], %[[V9]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<max>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V23:[0-9]+]]: f64):
// CHECK-NEXT:     ew.yield %[[V23]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V24:[0-9]+]] = ew.generic ins(%[[V14]], %[[V22]] : tensor<?x?xf64>, tensor<?xf64>) tables(:) extents(%[[V7]], %[[V9]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64], [0 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<reduction>], kind = [#ew.kind<sum>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V25:[0-9]+]]: f64, %[[V26:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V27:[0-9]+]] = math.absf %[[V26]] : f64
// CHECK-NEXT:     %[[V28:[0-9]+]] = arith.constant 0x7ff0000000000000 : f64
// CHECK-NEXT:     %[[V29:[0-9]+]] = arith.cmpf olt, %[[V27]], %[[V28]] : f64
// CHECK-NEXT:     %[[V30:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:     %[[V31:[0-9]+]] = arith.select %[[V29]], %[[V26]], %[[V30]] : f64
// CHECK-NEXT:     %[[V32:[0-9]+]] = arith.subf %[[V25]], %[[V31]] : f64
// CHECK-NEXT:     %[[V33:[0-9]+]] = math.exp %[[V32]] : f64
// CHECK-NEXT:     ew.yield %[[V33]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V34:[0-9]+]] = ew.generic ins(%[[V24]] : tensor<?xf64>) tables(:) extents(%[[V7]]) attributes {maps = {{\[\[}}0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V35:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V36:[0-9]+]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:     %[[V37:[0-9]+]] = arith.divf %[[V36]], %[[V35]] : f64
// CHECK-NEXT:     ew.yield %[[V37]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V38:[0-9]+]] = ew.generic ins(%[[V14]], %[[V22]], %[[V34]] : tensor<?x?xf64>, tensor<?xf64>, tensor<?xf64>) tables(:) extents(%[[V7]], %[[V9]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64], [0 : i64], [0 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V39:[0-9]+]]: f64, %[[V40:[0-9]+]]: f64, %[[V41:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V42:[0-9]+]] = math.absf %[[V40]] : f64
// CHECK-NEXT:     %[[V43:[0-9]+]] = arith.constant 0x7ff0000000000000 : f64
// CHECK-NEXT:     %[[V44:[0-9]+]] = arith.cmpf olt, %[[V42]], %[[V43]] : f64
// CHECK-NEXT:     %[[V45:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:     %[[V46:[0-9]+]] = arith.select %[[V44]], %[[V40]], %[[V45]] : f64
// CHECK-NEXT:     %[[V47:[0-9]+]] = arith.subf %[[V39]], %[[V46]] : f64
// CHECK-NEXT:     %[[V48:[0-9]+]] = math.exp %[[V47]] : f64
// CHECK-NEXT:     %[[V49:[0-9]+]] = arith.mulf %[[V48]], %[[V41]] : f64
// CHECK-NEXT:     ew.yield %[[V49]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V50:[0-9]+]] = ew.contract %[[V38]], %[[V2]] extents(%[[V7]], %[[V13]], %[[V9]]) {maps = {{\[\[}}0 : i64, 2 : i64], [2 : i64, 1 : i64]], out = [0 : i64, 1 : i64]} : tensor<?x?xf64>, tensor<?x?xf64> -> tensor<?x?xf64>
// CHECK-NEXT:   %[[V51:[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:   te.check_dim %[[V8]], %[[V51]] {message = "rope needs an even feature extent: d is {0}", predicate = "dvd"}
// CHECK-NEXT:   %[[V54:[0-9]+]] = ew.generic ins(%[[V0]] : tensor<?x?xf64>) tables(%[[V0]] : tensor<?x?xf64>) extents(%[[V7]], %[[V8]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V55:[0-9]+]]: f64, %[[V56:[0-9]+]]: tensor<?x?xf64>):
// CHECK-NEXT:     %[[V57:[0-9]+]] = ew.index 1 : i64
// CHECK-NEXT:     %[[V58:[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:     %[[V59:[0-9]+]] = arith.xori %[[V57]], %[[V58]] : index
// CHECK-NEXT:     %[[V60:[0-9]+]] = ew.index 0 : i64
// CHECK-NEXT:     %[[V61:[0-9]+]] = ew.extract %[[V56]][%[[V60]], %[[V59]]] : tensor<?x?xf64> -> f64
// CHECK-NEXT:     %[[V62:[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:     %[[V63:[0-9]+]] = arith.remui %[[V57]], %[[V62]] : index
// CHECK-NEXT:     %[[V64:[0-9]+]] = arith.subi %[[V57]], %[[V63]] : index
// CHECK-NEXT:     %[[V65:[0-9]+]] = arith.index_cast %[[V64]] : index to i64
// CHECK-NEXT:     %[[V66:[0-9]+]] = arith.sitofp %[[V65]] : i64 to f64
// CHECK-NEXT:     %[[V67:[0-9]+]] = arith.index_cast %[[V8]] : index to i64
// CHECK-NEXT:     %[[V68:[0-9]+]] = arith.sitofp %[[V67]] : i64 to f64
// CHECK-NEXT:     %[[V69:[0-9]+]] = arith.divf %[[V66]], %[[V68]] : f64
// CHECK-NEXT:     %[[V70:[0-9]+]] = arith.negf %[[V69]] : f64
// CHECK-NEXT:     %[[V71:[0-9]+]] = arith.constant 9.2103403719761836 : f64
// CHECK-NEXT:     %[[V72:[0-9]+]] = arith.mulf %[[V70]], %[[V71]] : f64
// CHECK-NEXT:     %[[V73:[0-9]+]] = math.exp %[[V72]] : f64
// CHECK-NEXT:     %[[V74:[0-9]+]] = ew.index 0 : i64
// CHECK-NEXT:     %[[V75:[0-9]+]] = arith.index_cast %[[V74]] : index to i64
// CHECK-NEXT:     %[[V76:[0-9]+]] = arith.sitofp %[[V75]] : i64 to f64
// CHECK-NEXT:     %[[V77:[0-9]+]] = arith.mulf %[[V76]], %[[V73]] : f64
// CHECK-NEXT:     %[[V78:[0-9]+]] = math.cos %[[V77]] : f64
// CHECK-NEXT:     %[[V79:[0-9]+]] = math.sin %[[V77]] : f64
// CHECK-NEXT:     %[[V80:[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:     %[[V81:[0-9]+]] = arith.remui %[[V57]], %[[V80]] : index
// CHECK-NEXT:     %[[V82:[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:     %[[V83:[0-9]+]] = arith.cmpi eq, %[[V81]], %[[V82]] : index
// CHECK-NEXT:     %[[V84:[0-9]+]] = arith.mulf %[[V55]], %[[V78]] : f64
// CHECK-NEXT:     %[[V85:[0-9]+]] = arith.mulf %[[V61]], %[[V79]] : f64
// CHECK-NEXT:     %[[V86:[0-9]+]] = arith.subf %[[V84]], %[[V85]] : f64
// CHECK-NEXT:     %[[V87:[0-9]+]] = arith.mulf %[[V61]], %[[V79]] : f64
// CHECK-NEXT:     %[[V88:[0-9]+]] = arith.mulf %[[V55]], %[[V78]] : f64
// CHECK-NEXT:     %[[V89:[0-9]+]] = arith.addf %[[V87]], %[[V88]] : f64
// CHECK-NEXT:     %[[V90:[0-9]+]] = arith.select %[[V83]], %[[V86]], %[[V89]] : f64
// CHECK-NEXT:     ew.yield %[[V90]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V91:[0-9]+]] = ew.host_call "tucker_dense" %[[V0]] {params = {rank = 1 : i64, threshold = 5.000000e-01 : f64}} : (tensor<?x?xf64>) -> tensor<?x?xf64>
// CHECK-NEXT:   te.export %[[V50]], %[[V54]], %[[V91]] {names = ["Y", "R", "T"]} : tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf64>
// CHECK-NEXT: }
builtin.module {
  %0 = te.input "Q" {indices = ["p", "d"]} : tensor<?x?xf64>
  %1 = te.input "K" {indices = ["p'", "d"]} : tensor<?x?xf64>
  %2 = te.input "V" {indices = ["p'", "e"]} : tensor<?x?xf64>
  %3 = te.dim %0, 1 : i64 : tensor<?x?xf64>
  %4 = te.dim %1, 1 : i64 : tensor<?x?xf64>
  te.check_dim %3, %4 {message = "d is {1} in K[p', d] but {0} in Q[p, d]"} loc("<stdin>":1:33)
  %5 = te.dim %1, 0 : i64 : tensor<?x?xf64>
  %6 = te.dim %2, 0 : i64 : tensor<?x?xf64>
  te.check_dim %5, %6 {message = "p' is {1} in V[p', e] but {0} in K[p', d]"} loc("<stdin>":1:39 to :40)
  %7 = te.block "attention" %0, %1, %2 {operand_indices = [["p", "d"], ["p'", "d"], ["p'", "e"]], indices = ["p", "e"], roles = {feature = "d", key = "p'", query = "p", value = "e"}, params = {causal = false}} : (tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf64>) -> tensor<?x?xf64>
  %8 = te.group "Y" %7 {indices = ["p", "e"], boolean = false} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  %9 = te.block "rope" %0 {operand_indices = [["p", "d"]], indices = ["p", "d"], roles = {feature = "d", sequence = "p"}, params = {base = 1.000000e+04 : f64}} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  %10 = te.group "R" %9 {indices = ["p", "d"], boolean = false} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  %11 = te.block "tucker_dense" %0 {operand_indices = [["p", "d"]], indices = ["p", "d"], roles = {}, params = {rank = 1 : i64, threshold = 5.000000e-01 : f64}} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  %12 = te.group "T" %11 {indices = ["p", "d"], boolean = false} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  te.export %8, %10, %12 {names = ["Y", "R", "T"]} : tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xf64>
}
