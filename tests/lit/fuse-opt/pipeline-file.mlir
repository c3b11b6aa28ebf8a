// -p @FILE reads a pipeline file (one pass per line, '#' comments, @includes).
// RUN: %fuse-opt %S/Inputs/dup.mlir -p @%S/Inputs/tidy.pipeline | filecheck %s
// RUN: %fuse-opt %S/Inputs/dup.mlir -p @%S/Inputs/tidy.pipeline --print-ir-after-all 2>&1 >/dev/null | filecheck %s --check-prefix=ORDER
// The pipeline file in examples/ works on the example programs.
// RUN: %fuse-opt %repo/examples/mlp.fuse -p @%repo/examples/tidy.pipeline | filecheck %s --check-prefix=MLP

// CHECK:      builtin.module {
// CHECK-NEXT:   %x = te.input "X"
// CHECK-NEXT:   %n = arith.constant 5 : index
// CHECK-NEXT:   %a = te.contract %x, %x
// CHECK-NEXT:   %bc = te.broadcast %x(%n)
// CHECK-NEXT:   te.export %a, %a, %bc
// CHECK-NEXT: }

// ORDER: IR Dump After canonicalize
// ORDER: IR Dump After cse
// ORDER: IR Dump After dce

// MLP: te.export {{.*}} {names = ["Logits", "P", "LogZ", "LogP", "Pred"]}
