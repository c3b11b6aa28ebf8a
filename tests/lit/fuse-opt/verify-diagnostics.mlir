// --verify-diagnostics: every diagnostic must match an expected-* annotation on its line, and every
// annotation must be matched; then the exit status is 0 (chunks that work still print).
// RUN: %fuse-opt %s --split-input-file --verify-diagnostics | filecheck %s

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  te.export %x {names = ["X"]} : tensor<?xf64>
}

// -----

builtin.module {
  %x = te.input "X" {indices = ["i", "j"]} : tensor<?xf64> // expected-error {{result has rank 1 but 2 index names}}
}

// -----

builtin.module {
  // expected-error @+1 {{te.input: result has rank 1}}
  %x = te.input "X" {indices = ["i", "j"]} : tensor<?xf64>
}

// -----

builtin.module {
  // expected-error @below {{use of undefined value %y}}
  te.export %y {names = ["Y"]} : tensor<?xf64>
}

// -----

builtin.module {
  %x = te.contrakt %x : tensor<?xf64>
  // expected-error @above {{unknown operation 'te.contrakt'}}
}

// -----

builtin.module {
  %x = te.input "X" {indices = ["i", "j"]} : tensor<?xf64>
  // expected-error-re @-1 {{rank [0-9] but [0-9] index names}}
}

// CHECK:      te.input "X" {indices = ["i"]}
// CHECK-NOT:  // -----
// CHECK-NOT:  te.input
