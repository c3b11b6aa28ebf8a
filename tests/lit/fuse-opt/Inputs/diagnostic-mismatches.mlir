// Each chunk breaks the --verify-diagnostics contract in one way (see verify-diagnostics-fail.mlir).

builtin.module {
  %x = te.input "X" {indices = ["i", "j"]} : tensor<?xf64>
}

// -----

builtin.module {
  // expected-error @+1 {{this error never happens}}
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
}

// -----

builtin.module {
  // expected-error @+2 {{result has rank 1 but 2 index names}}
  %x = te.input "X" {indices = ["i", "j"]} : tensor<?xf64>
}

// -----

builtin.module {
  // expected-error @+1 {{rank 2 but 1 index names}}
  %x = te.input "X" {indices = ["i", "j"]} : tensor<?xf64>
}

// -----

builtin.module {
  // expected-warning @+1 {{result has rank 1}}
  %x = te.input "X" {indices = ["i", "j"]} : tensor<?xf64>
}

// -----

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  te.export %x {names = ["X"]} : tensor<?xf64>
}
