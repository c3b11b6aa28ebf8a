// expected-remark @unknown {{demo-count-ops: 2 ops}}
builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  te.export %x {names = ["X"]} : tensor<?xf64>
}
