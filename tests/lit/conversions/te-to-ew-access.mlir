// lower-te-to-ew, access family (te_to_ew/access.py): offsets read a clamped position and select 0
// outside the axis; a numeric position is checked once before the kernel (te.check_dim); a gather reads
// through an index tensor with a located check; a slice starts at Python's clamped start; concat aligns
// each part then joins them in an ew.host_call; a numeric write (place) selects where the index equals the
// position; even() and causal_mask() are index-only kernels; flattening concat reads row and column back.
// RUN: %fuse-opt %s -p 'lower-te-to-ew' | filecheck %s
// CHECK-LABEL: builtin.module {
// CHECK-NEXT:   %[[V0:[0-9]+]] = te.input "X" {indices = ["i"]} : tensor<?xf64>
// CHECK-NEXT:   %[[V1:[0-9]+]] = te.input "T" {indices = ["i", "j"]} : tensor<?x?xf64>
// CHECK-NEXT:   %[[V2:[0-9]+]] = te.input "I" {indices = ["t"]} : tensor<?xi64>
// CHECK-NEXT:   %[[V3:[0-9]+]] = te.input "R" {indices = ["b", "i", "j"]} : tensor<?x?x?xf64>
// CHECK-NEXT:   %[[V4:[0-9]+]] = te.dim %[[V0]], 0 : i64 : tensor<?xf64>
// CHECK-NEXT:   %[[V5:[0-9]+]] = te.dim %[[V1]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   te.check_dim %[[V4]], %[[V5]] {message = "i is {1} in T[i, j] but {0} in S[i]"}
// CHECK-NEXT:   %[[V6:[0-9]+]] = te.dim %[[V3]], 1 : i64 : tensor<?x?x?xf64>
// CHECK-NEXT:   te.check_dim %[[V4]], %[[V6]] {message = "i is {1} in R[b, i, j] but {0} in S[i]"}
// CHECK-NEXT:   %[[V7:[0-9]+]] = te.dim %[[V0]], 0 : i64 : tensor<?xf64>
// CHECK-NEXT:   %[[V8:[0-9]+]] = ew.generic ins(:) tables(%[[V0]] : tensor<?xf64>) extents(%[[V7]]) attributes {maps = [], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V9:[0-9]+]]: tensor<?xf64>):
// CHECK-NEXT:     %[[V10:[0-9]+]] = ew.index 0 : i64
// CHECK-NEXT:     %[[V11:[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:     %[[V12:[0-9]+]] = arith.addi %[[V10]], %[[V11]] : index
// CHECK-NEXT:     %[[V13:[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:     %[[V14:[0-9]+]] = arith.cmpi sge, %[[V12]], %[[V13]] : index
// CHECK-NEXT:     %[[V15:[0-9]+]] = arith.cmpi slt, %[[V12]], %[[V7]] : index
// CHECK-NEXT:     %[[V16:[0-9]+]] = arith.andi %[[V14]], %[[V15]] : i1
// CHECK-NEXT:     %[[V17:[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:     %[[V18:[0-9]+]] = arith.subi %[[V7]], %[[V17]] : index
// CHECK-NEXT:     %[[V19:[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:     %[[V20:[0-9]+]] = arith.maxsi %[[V12]], %[[V19]] : index
// CHECK-NEXT:     %[[V21:[0-9]+]] = arith.minsi %[[V20]], %[[V18]] : index
// CHECK-NEXT:     %[[V22:[0-9]+]] = ew.extract %[[V9]][%[[V21]]] : tensor<?xf64> -> f64
// CHECK-NEXT:     %[[V23:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:     %[[V24:[0-9]+]] = arith.select %[[V16]], %[[V22]], %[[V23]] : f64
// CHECK-NEXT:     ew.yield %[[V24]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V25:[0-9]+]] = ew.generic ins(:) tables(%[[V0]] : tensor<?xf64>) extents(%[[V7]]) attributes {maps = [], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V26:[0-9]+]]: tensor<?xf64>):
// CHECK-NEXT:     %[[V27:[0-9]+]] = ew.index 0 : i64
// CHECK-NEXT:     %[[V28:[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:     %[[V29:[0-9]+]] = arith.addi %[[V27]], %[[V28]] : index
// CHECK-NEXT:     %[[V30:[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:     %[[V31:[0-9]+]] = arith.cmpi sge, %[[V29]], %[[V30]] : index
// CHECK-NEXT:     %[[V32:[0-9]+]] = arith.cmpi slt, %[[V29]], %[[V7]] : index
// CHECK-NEXT:     %[[V33:[0-9]+]] = arith.andi %[[V31]], %[[V32]] : i1
// CHECK-NEXT:     %[[V34:[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:     %[[V35:[0-9]+]] = arith.subi %[[V7]], %[[V34]] : index
// CHECK-NEXT:     %[[V36:[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:     %[[V37:[0-9]+]] = arith.maxsi %[[V29]], %[[V36]] : index
// CHECK-NEXT:     %[[V38:[0-9]+]] = arith.minsi %[[V37]], %[[V35]] : index
// CHECK-NEXT:     %[[V39:[0-9]+]] = ew.extract %[[V26]][%[[V38]]] : tensor<?xf64> -> f64
// CHECK-NEXT:     %[[V40:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:     %[[V41:[0-9]+]] = arith.select %[[V33]], %[[V39]], %[[V40]] : f64
// CHECK-NEXT:     ew.yield %[[V41]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V42:[0-9]+]] = ew.generic ins(%[[V8]], %[[V25]] : tensor<?xf64>, tensor<?xf64>) tables(:) extents(%[[V7]]) attributes {maps = {{\[\[}}0 : i64], [0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V43:[0-9]+]]: f64, %[[V44:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V45:[0-9]+]] = arith.addf %[[V43]], %[[V44]] : f64
// CHECK-NEXT:     ew.yield %[[V45]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V46:[0-9]+]] = te.dim %[[V1]], 0 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V47:[0-9]+]] = te.dim %[[V1]], 1 : i64 : tensor<?x?xf64>
// CHECK-NEXT:   %[[V48:[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:   te.check_dim %[[V48]], %[[V46]] {message = "position {0} is out of range for axis 0 (extent {1})", predicate = "lt"}
// CHECK-NEXT:   %[[V49:[0-9]+]] = ew.generic ins(:) tables(%[[V1]] : tensor<?x?xf64>) extents(%[[V47]]) attributes {maps = [], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V50:[0-9]+]]: tensor<?x?xf64>):
// CHECK-NEXT:     %[[V51:[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:     %[[V52:[0-9]+]] = ew.index 0 : i64
// CHECK-NEXT:     %[[V53:[0-9]+]] = ew.extract %[[V50]][%[[V51]], %[[V52]]] : tensor<?x?xf64> -> f64
// CHECK-NEXT:     ew.yield %[[V53]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V54:[0-9]+]] = te.dim %[[V2]], 0 : i64 : tensor<?xi64>
// CHECK-NEXT:   %[[V55:[0-9]+]] = ew.generic ins(%[[V2]] : tensor<?xi64>) tables(%[[V1]] : tensor<?x?xf64>) extents(%[[V54]], %[[V47]]) attributes {maps = {{\[\[}}0 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V56:[0-9]+]]: i64, %[[V57:[0-9]+]]: tensor<?x?xf64>):
// CHECK-NEXT:     %[[V58:[0-9]+]] = arith.index_cast %[[V56]] : i64 to index
// CHECK-NEXT:     %[[V59:[0-9]+]] = ew.index 1 : i64
// CHECK-NEXT:     %[[V60:[0-9]+]] = ew.extract %[[V57]][%[[V58]], %[[V59]]] {check = "gathered index {0} is out of range for axis 0 (extent {1})"} : tensor<?x?xf64> -> f64
// CHECK-NEXT:     ew.yield %[[V60]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V61:[0-9]+]] = te.slice_len %[[V7]] {slice = [1 : i64, 0 : i64, 2 : i64], present = [1 : i64, 0 : i64, 1 : i64]}
// CHECK-NEXT:   %[[V62:[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:   %[[V63:[0-9]+]] = arith.minsi %[[V62]], %[[V7]] : index
// CHECK-NEXT:   %[[V64:[0-9]+]] = ew.generic ins(:) tables(%[[V0]] : tensor<?xf64>) extents(%[[V61]]) attributes {maps = [], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V65:[0-9]+]]: tensor<?xf64>):
// CHECK-NEXT:     %[[V66:[0-9]+]] = ew.index 0 : i64
// CHECK-NEXT:     %[[V67:[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:     %[[V68:[0-9]+]] = arith.muli %[[V66]], %[[V67]] : index
// CHECK-NEXT:     %[[V69:[0-9]+]] = arith.addi %[[V63]], %[[V68]] : index
// CHECK-NEXT:     %[[V70:[0-9]+]] = ew.extract %[[V65]][%[[V69]]] : tensor<?xf64> -> f64
// CHECK-NEXT:     ew.yield %[[V70]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V71:[0-9]+]] = ew.generic ins(%[[V64]] : tensor<?xf64>) tables(:) extents(%[[V61]]) attributes {maps = {{\[\[}}0 : i64]], iterators = [#ew.iterator<reduction>], kind = [#ew.kind<sum>]} -> tensor<f64> {
// CHECK-NEXT:   ^bb0(%[[V72:[0-9]+]]: f64):
// CHECK-NEXT:     ew.yield %[[V72]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V73:[0-9]+]] = ew.generic ins(%[[V71]] : tensor<f64>) tables(:) extents(%[[V4]]) attributes {maps = {{\[\[}}]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V74:[0-9]+]]: f64):
// CHECK-NEXT:     ew.yield %[[V74]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V75:[0-9]+]] = ew.generic ins(%[[V1]] : tensor<?x?xf64>) tables(:) extents(%[[V46]], %[[V47]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V76:[0-9]+]]: f64):
// CHECK-NEXT:     ew.yield %[[V76]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V77:[0-9]+]] = ew.generic ins(%[[V1]] : tensor<?x?xf64>) tables(:) extents(%[[V46]], %[[V47]]) attributes {maps = {{\[\[}}0 : i64, 1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V78:[0-9]+]]: f64):
// CHECK-NEXT:     ew.yield %[[V78]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V79:[0-9]+]] = ew.host_call "concat" %[[V75]], %[[V77]] {params = {axis = 1 : i64}} : (tensor<?x?xf64>, tensor<?x?xf64>) -> tensor<?x?xf64>
// CHECK-NEXT:   %[[V80:[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:   te.check_dim %[[V80]], %[[V46]] {message = "position {0} is out of range for axis 0 (extent {1})", predicate = "lt"}
// CHECK-NEXT:   %[[V81:[0-9]+]] = ew.generic ins(:) tables(%[[V1]] : tensor<?x?xf64>) extents(%[[V47]]) attributes {maps = [], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V82:[0-9]+]]: tensor<?x?xf64>):
// CHECK-NEXT:     %[[V83:[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:     %[[V84:[0-9]+]] = ew.index 0 : i64
// CHECK-NEXT:     %[[V85:[0-9]+]] = ew.extract %[[V82]][%[[V83]], %[[V84]]] : tensor<?x?xf64> -> f64
// CHECK-NEXT:     ew.yield %[[V85]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V86:[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:   %[[V87:[0-9]+]] = ew.generic ins(%[[V81]] : tensor<?xf64>) tables(:) extents(%[[V86]], %[[V47]]) attributes {maps = {{\[\[}}1 : i64]], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V88:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V89:[0-9]+]] = ew.index 0 : i64
// CHECK-NEXT:     %[[V90:[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:     %[[V91:[0-9]+]] = arith.cmpi eq, %[[V89]], %[[V90]] : index
// CHECK-NEXT:     %[[V92:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:     %[[V93:[0-9]+]] = arith.select %[[V91]], %[[V88]], %[[V92]] : f64
// CHECK-NEXT:     ew.yield %[[V93]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V94:[0-9]+]] = ew.generic ins(:) tables(:) extents(%[[V4]]) attributes {maps = [], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xi8> {
// CHECK-NEXT:     %[[V95:[0-9]+]] = ew.index 0 : i64
// CHECK-NEXT:     %[[V96:[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:     %[[V97:[0-9]+]] = arith.remui %[[V95]], %[[V96]] : index
// CHECK-NEXT:     %[[V98:[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:     %[[V99:[0-9]+]] = arith.cmpi eq, %[[V97]], %[[V98]] : index
// CHECK-NEXT:     %[[V100:[0-9]+]] = arith.extui %[[V99]] : i1 to i8
// CHECK-NEXT:     ew.yield %[[V100]] : i8
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V101:[0-9]+]] = ew.generic ins(%[[V94]], %[[V0]] : tensor<?xi8>, tensor<?xf64>) tables(:) extents(%[[V4]]) attributes {maps = {{\[\[}}0 : i64], [0 : i64]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
// CHECK-NEXT:   ^bb0(%[[V102:[0-9]+]]: i8, %[[V103:[0-9]+]]: f64):
// CHECK-NEXT:     %[[V104:[0-9]+]] = arith.sitofp %[[V102]] : i8 to f64
// CHECK-NEXT:     %[[V105:[0-9]+]] = arith.mulf %[[V104]], %[[V103]] : f64
// CHECK-NEXT:     ew.yield %[[V105]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V106:[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:   %[[V107:[0-9]+]] = ew.generic ins(:) tables(:) extents(%[[V106]], %[[V106]]) attributes {maps = [], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:     %[[V108:[0-9]+]] = ew.index 1 : i64
// CHECK-NEXT:     %[[V109:[0-9]+]] = ew.index 0 : i64
// CHECK-NEXT:     %[[V110:[0-9]+]] = arith.cmpi ule, %[[V108]], %[[V109]] : index
// CHECK-NEXT:     %[[V111:[0-9]+]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:     %[[V112:[0-9]+]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:     %[[V113:[0-9]+]] = arith.select %[[V110]], %[[V111]], %[[V112]] : f64
// CHECK-NEXT:     ew.yield %[[V113]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V114:[0-9]+]] = te.dim %[[V3]], 0 : i64 : tensor<?x?x?xf64>
// CHECK-NEXT:   %[[V115:[0-9]+]] = te.dim %[[V3]], 1 : i64 : tensor<?x?x?xf64>
// CHECK-NEXT:   %[[V116:[0-9]+]] = te.dim %[[V3]], 2 : i64 : tensor<?x?x?xf64>
// CHECK-NEXT:   %[[V117:[0-9]+]] = arith.muli %[[V115]], %[[V116]] : index
// CHECK-NEXT:   %[[V118:[0-9]+]] = ew.generic ins(:) tables(%[[V3]] : tensor<?x?x?xf64>) extents(%[[V114]], %[[V117]]) attributes {maps = [], iterators = [#ew.iterator<parallel>, #ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?x?xf64> {
// CHECK-NEXT:   ^bb0(%[[V119:[0-9]+]]: tensor<?x?x?xf64>):
// CHECK-NEXT:     %[[V120:[0-9]+]] = ew.index 1 : i64
// CHECK-NEXT:     %[[V121:[0-9]+]] = arith.divui %[[V120]], %[[V116]] : index
// CHECK-NEXT:     %[[V122:[0-9]+]] = arith.remui %[[V120]], %[[V116]] : index
// CHECK-NEXT:     %[[V123:[0-9]+]] = ew.index 0 : i64
// CHECK-NEXT:     %[[V124:[0-9]+]] = ew.extract %[[V119]][%[[V123]], %[[V121]], %[[V122]]] : tensor<?x?x?xf64> -> f64
// CHECK-NEXT:     ew.yield %[[V124]] : f64
// CHECK-NEXT:   }
// CHECK-NEXT:   te.export %[[V42]], %[[V49]], %[[V55]], %[[V73]], %[[V79]], %[[V87]], %[[V101]], %[[V107]], %[[V118]] {names = ["Y", "Z", "E", "S", "C", "P", "V", "M", "F"]} : tensor<?xf64>, tensor<?xf64>, tensor<?x?xf64>, tensor<?xf64>, tensor<?x?xf64>, tensor<?x?xf64>, tensor<?xf64>, tensor<?x?xf64>, tensor<?x?xf64>
// CHECK-NEXT: }
builtin.module {
  %0 = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %1 = te.input "T" {indices = ["i", "j"]} : tensor<?x?xf64>
  %2 = te.input "I" {indices = ["t"]} : tensor<?xi64>
  %3 = te.input "R" {indices = ["b", "i", "j"]} : tensor<?x?x?xf64>
  %4 = te.dim %0, 0 : i64 : tensor<?xf64>
  %5 = te.dim %1, 0 : i64 : tensor<?x?xf64>
  te.check_dim %4, %5 {message = "i is {1} in T[i, j] but {0} in S[i]"} loc("<stdin>":5:19)
  %6 = te.dim %3, 1 : i64 : tensor<?x?x?xf64>
  te.check_dim %4, %6 {message = "i is {1} in R[b, i, j] but {0} in S[i]"} loc("<stdin>":9:21)
  %7 = te.access %0[] () {axes = [#te.axis<i + 1>], gather_indices = [], indices = ["i"]} : tensor<?xf64>[] -> tensor<?xf64> loc("<stdin>":1:8)
  %8 = te.access %0[] () {axes = [#te.axis<i - 1>], gather_indices = [], indices = ["i"]} : tensor<?xf64>[] -> tensor<?xf64> loc("<stdin>":1:17)
  %9 = te.map "add" %7, %8 {operand_indices = [["i"], ["i"]], indices = ["i"]} : (tensor<?xf64>, tensor<?xf64>) -> tensor<?xf64>
  %10 = te.group "Y" %9 {indices = ["i"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
  %11 = te.access %1[] () {axes = [#te.axis<0>, #te.axis<d>], gather_indices = [], indices = ["d"]} : tensor<?x?xf64>[] -> tensor<?xf64> loc("<stdin>":2:8)
  %12 = te.group "Z" %11 {indices = ["d"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
  %13 = te.access %1[%2] () {axes = [#te.axis<gather 0>, #te.axis<d>], gather_indices = [["t"]], indices = ["t", "d"]} : tensor<?x?xf64>[tensor<?xi64>] -> tensor<?x?xf64> loc("<stdin>":3:10)
  %14 = te.group "E" %13 {indices = ["t", "d"], boolean = false} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  %15 = te.access %0[] () {axes = [#te.axis<slice 1:?:2 as "1::2">], gather_indices = [], indices = ["1::2"]} : tensor<?xf64>[] -> tensor<?xf64> loc("<stdin>":4:8)
  %16 = te.contract %15 {operand_indices = [["1::2"]], indices = [], projection = #te.projection<sum>} : (tensor<?xf64>) -> tensor<f64>
  %17 = te.broadcast %16(%4) {operand_indices = [[]], indices = ["i"]} : tensor<f64> -> tensor<?xf64>
  %18 = te.group "S" %17 {indices = ["i"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
  %19 = te.concat %1, %1 {axis = "j", operand_axes = ["j#c1.0", "j#c1.1"], operand_indices = [["i", "j#c1.0"], ["i", "j#c1.1"]], indices = ["i", "j"]} : (tensor<?x?xf64>, tensor<?x?xf64>) -> tensor<?x?xf64>
  %20 = te.group "C" %19 {indices = ["i", "j"], boolean = false} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  %21 = te.access %1[] () {axes = [#te.axis<2>, #te.axis<d>], gather_indices = [], indices = ["d"]} : tensor<?x?xf64>[] -> tensor<?xf64> loc("<stdin>":6:10)
  %22 = arith.constant 2 : index
  %23 = te.place %21(%22) {positions = [1 : i64, -1 : i64], operand_indices = [["d"]], indices = ["#0", "d"]} : tensor<?xf64> -> tensor<2x?xf64> loc("<stdin>":6:1)
  %24 = te.group "P" %23 {indices = ["d0", "d"], boolean = false} : (tensor<2x?xf64>) -> tensor<2x?xf64>
  %25 = te.generate "even"(%4) {indices = ["i"]} : tensor<?xi8>
  %26 = te.contract %25, %0 {operand_indices = [["i"], ["i"]], indices = ["i"], projection = #te.projection<sum>} : (tensor<?xi8>, tensor<?xf64>) -> tensor<?xf64>
  %27 = te.group "V" %26 {indices = ["i"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
  %28 = arith.constant 3 : index
  %29 = te.generate "causal_mask"(%28, %28) {indices = ["p", "q"]} : tensor<3x3xf64>
  %30 = te.group "M" %29 {indices = ["p", "q"], boolean = false} : (tensor<3x3xf64>) -> tensor<3x3xf64>
  %31 = te.flatten %3 {operand_indices = [["b", "i", "j"]], indices = ["b", "k"]} : (tensor<?x?x?xf64>) -> tensor<?x?xf64>
  %32 = te.group "F" %31 {indices = ["b", "k"], boolean = false} : (tensor<?x?xf64>) -> tensor<?x?xf64>
  te.export %10, %12, %14, %18, %20, %24, %27, %30, %32 {names = ["Y", "Z", "E", "S", "C", "P", "V", "M", "F"]} : tensor<?xf64>, tensor<?xf64>, tensor<?x?xf64>, tensor<?xf64>, tensor<?x?xf64>, tensor<2x?xf64>, tensor<?xf64>, tensor<3x3xf64>, tensor<?x?xf64>
}
