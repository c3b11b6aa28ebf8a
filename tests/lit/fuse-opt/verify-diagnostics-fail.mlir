// --verify-diagnostics fails (exit status 1) on an unexpected diagnostic, an annotation that nothing
// matched (wrong text, wrong line, never produced), or a severity mismatch, one located error each;
// chunks that succeed still print, and a failing chunk does not stop the others.
// RUN: not %fuse-opt %S/Inputs/diagnostic-mismatches.mlir --split-input-file --verify-diagnostics 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=ERR < %t.err
// The same file without --split-input-file: one module fails at its first error.
// RUN: not %fuse-opt %S/Inputs/diagnostic-mismatches.mlir --verify-diagnostics 2>&1 | filecheck %s --check-prefix=WHOLE

// CHECK:     te.input "X" {indices = ["i"]}
// CHECK:     // -----
// CHECK:     te.export

// ERR:      diagnostic-mismatches.mlir:4:3: error: unexpected error: te.input: result has rank 1 but 2 index names
// ERR-NEXT:   %x = te.input "X" {indices = ["i", "j"]} : tensor<?xf64>
// ERR-NEXT: {{^ +\^~$}}
// ERR:      diagnostic-mismatches.mlir:10:6: error: expected error "this error never happens" was not produced
// ERR-NEXT:   // expected-error @+1 {{[{][{]}}this error never happens{{[}][}]}}
// ERR-NEXT: {{^ +\^~+$}}
// ERR:      diagnostic-mismatches.mlir:18:3: error: unexpected error: te.input: result has rank 1
// ERR:      diagnostic-mismatches.mlir:17:6: error: expected error "result has rank 1 but 2 index names" was not produced
// ERR:      diagnostic-mismatches.mlir:25:3: error: unexpected error: te.input: result has rank 1
// ERR:      diagnostic-mismatches.mlir:24:6: error: expected error "rank 2 but 1 index names" was not produced
// ERR:      diagnostic-mismatches.mlir:32:3: error: 'error' diagnostic emitted when expecting a 'warning'
// ERR-NOT:  diagnostic-mismatches.mlir:{{3[3-9]}}

// WHOLE: diagnostic-mismatches.mlir:4:3: error: unexpected error: te.input: result has rank 1
// WHOLE: diagnostic-mismatches.mlir:10:6: error: expected error "this error never happens" was not produced
