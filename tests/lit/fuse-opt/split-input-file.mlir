// --split-input-file: each chunk between '// -----' lines runs on its own; an error in one chunk
// is reported at its line in the whole file, the other chunks still run, and the exit status is 1.
// RUN: not %fuse-opt %s --split-input-file -p cse 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=ERR < %t.err
// Without the flag the separators are comments and the first error stops everything.
// RUN: not %fuse-opt %s 2>&1 | filecheck %s --check-prefix=WHOLE

builtin.module {
  %x = te.input "A" {indices = ["i"]} : tensor<?xf64>
  te.export %x {names = ["A"]} : tensor<?xf64>
}

// -----

builtin.module {
  %x = te.input "B" {indices = ["i", "j"]} : tensor<?xf64>
}

// -----

builtin.module {
  %x = te.input "C" {indices = ["i"]} : tensor<?xf64>
  te.export %x {names = ["C"]} : tensor<?xf64>
}

// CHECK:      builtin.module {
// CHECK-NEXT:   %x = te.input "A"
// CHECK-NEXT:   te.export
// CHECK-NEXT: }
// CHECK-NEXT: // -----
// CHECK-NEXT: builtin.module {
// CHECK-NEXT:   %x = te.input "C"

// ERR:      split-input-file.mlir:16:3: error: te.input: result has rank 1 but 2 index names
// ERR-NEXT:   %x = te.input "B" {indices = ["i", "j"]} : tensor<?xf64>
// ERR-NEXT: {{^ +\^~$}}
// ERR-NOT:  error

// WHOLE: split-input-file.mlir:16:3: error: te.input: result has rank 1 but 2 index names
