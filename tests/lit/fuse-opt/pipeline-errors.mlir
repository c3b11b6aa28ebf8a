// Pipeline mistakes are located diagnostics with a caret, exit status 1 and no traceback.
// RUN: not %fuse-opt %s -p cse,canonicalise 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not %fuse-opt %s -p 'cse,' 2>&1 | filecheck %s --check-prefix=TRAILING
// RUN: not %fuse-opt %s -p 'O2{x=1}' 2>&1 | filecheck %s --check-prefix=NAMEDOPT
// RUN: not %fuse-opt %s -p @%S/Inputs/bad.pipeline 2>&1 | filecheck %s --check-prefix=FILE
// RUN: not %fuse-opt %s -p @%S/Inputs/missing.pipeline 2>&1 | filecheck %s --check-prefix=MISSING

builtin.module {
}

// UNKNOWN:      <pass-pipeline>:1:5: error: unknown pass 'canonicalise'; did you mean 'canonicalize'? (fuse-opt --list-passes lists them)
// UNKNOWN-NEXT:     cse,canonicalise
// UNKNOWN-NEXT: {{^        \^~+$}}
// UNKNOWN-NOT:  Traceback

// TRAILING: <pass-pipeline>:1:5: error: expected a pass name after ','

// NAMEDOPT: <pass-pipeline>:1:1: error: pipeline 'O2' takes no options

// FILE:      bad.pipeline:3:1: error: unknown pass 'canonicalise'
// FILE-NEXT:     canonicalise   # misspelt
// FILE-NEXT: {{^    \^~+$}}

// MISSING: error: cannot read pipeline file '{{.*}}missing.pipeline': No such file or directory
