// --timing: per-pass wall times on stderr, never mixed into the IR on stdout.
// RUN: %fuse-opt %S/Inputs/dup.mlir -p canonicalize,cse --timing 2>%t.err | filecheck %s --check-prefix=OUT
// RUN: filecheck %s < %t.err

// OUT:     builtin.module {
// OUT-NOT: Execution time

// CHECK:      ... Execution time report ...
// CHECK:        Total Execution Time: {{[0-9]+\.[0-9]+}} seconds
// CHECK:        ----Wall Time----  ----Name----
// CHECK-NEXT:   {{ *[0-9]+\.[0-9]+ \( *[0-9.]+%\)}}  pipeline parsing
// CHECK-NEXT:   {{ *[0-9]+\.[0-9]+ \( *[0-9.]+%\)}}  parsing
// CHECK-NEXT:   {{ *[0-9]+\.[0-9]+ \( *[0-9.]+%\)}}  canonicalize
// CHECK-NEXT:   {{ *[0-9]+\.[0-9]+ \( *[0-9.]+%\)}}  cse
// CHECK-NEXT:   {{ *[0-9]+\.[0-9]+ \( *[0-9.]+%\)}}  output
// CHECK-NEXT:   {{ *[0-9]+\.[0-9]+ \(100.0%\)}}  Total
