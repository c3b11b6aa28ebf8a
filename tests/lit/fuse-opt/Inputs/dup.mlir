builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %n = arith.addi %c2, %c3 : index
  %a = te.contract %x, %x {operand_indices = [["i"], ["i"]], indices = [], projection = #te.projection<sum>} : (tensor<?xf64>, tensor<?xf64>) -> tensor<f64>
  %b = te.contract %x, %x {operand_indices = [["i"], ["i"]], indices = [], projection = #te.projection<sum>} : (tensor<?xf64>, tensor<?xf64>) -> tensor<f64>
  %unused = te.map "neg" %x {operand_indices = [["i"]], indices = ["i"]} : (tensor<?xf64>) -> tensor<?xf64>
  %bc = te.broadcast %x(%n) {operand_indices = [["i"]], indices = ["i", "j"]} : tensor<?xf64> -> tensor<?x5xf64>
  te.export %a, %b, %bc {names = ["A", "B", "C"]} : tensor<f64>, tensor<f64>, tensor<?x5xf64>
}
