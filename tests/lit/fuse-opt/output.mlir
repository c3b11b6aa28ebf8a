// -o writes the result to a file (stdout stays empty); --print-op-generic prints the generic form;
// .fuse programs and stdin go through the same pipeline.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %fuse-opt %S/Inputs/dup.mlir -p cse -o %t/out.mlir | filecheck %s --allow-empty --check-prefix=EMPTY
// RUN: filecheck %s < %t/out.mlir
// RUN: %fuse-opt %S/Inputs/dup.mlir -p cse --print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: %fuse-opt %S/Inputs/dup.mlir -p cse --print-op-generic | %fuse-opt -p dce | filecheck %s
// RUN: %fuse-opt %repo/examples/mlp.fuse -p te-O2 -o %t/mlp.mlir && %fuse-opt %t/mlp.mlir -p te-O2 | filecheck %s --check-prefix=FUSE

// CHECK: te.export %a, %a, %bc

// EMPTY-NOT: {{.}}

// GENERIC: "te.export"(%a, %a, %bc)

// FUSE: te.export {{.*}} {names = ["Logits", "P", "LogZ", "LogP", "Pred"]}
