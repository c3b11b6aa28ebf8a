// -p / --pass-pipeline: passes by name, options in braces, named pipelines, the mlir-opt wrapper.
// RUN: %fuse-opt %S/Inputs/dup.mlir -p cse | filecheck %s --check-prefix=CSE
// RUN: %fuse-opt %S/Inputs/dup.mlir --pass-pipeline=cse | filecheck %s --check-prefix=CSE
// RUN: %fuse-opt %S/Inputs/dup.mlir -p 'builtin.module(cse)' | filecheck %s --check-prefix=CSE
// RUN: %fuse-opt %S/Inputs/dup.mlir -p canonicalize,cse,dce | filecheck %s --check-prefix=ALL
// RUN: %fuse-opt %S/Inputs/dup.mlir -p te-O2 | filecheck %s --check-prefix=ALL
// RUN: %fuse-opt %S/Inputs/dup.mlir -p te-O0 | filecheck %s --check-prefix=O0
// RUN: %fuse-opt -p cse < %S/Inputs/dup.mlir | filecheck %s --check-prefix=CSE
// RUN: %fuse-opt %S/Inputs/dup.mlir | filecheck %s --check-prefix=NONE

// CSE:      %n = arith.addi %c2, %c3 : index
// CSE-NEXT: %a = te.contract %x, %x
// CSE-NOT:  te.contract
// CSE-NOT:  te.map "neg"
// CSE:      te.export %a, %a, %bc

// ALL:      builtin.module {
// ALL-NEXT:   %x = te.input "X"
// ALL-NEXT:   %n = arith.constant 5 : index
// ALL-NEXT:   %a = te.contract %x, %x
// ALL-NEXT:   %bc = te.broadcast %x(%n)
// ALL-NEXT:   te.export %a, %a, %bc
// ALL-NEXT: }

// O0:     %n = arith.constant 5 : index
// O0-NOT: te.map "neg"
// O0:     te.export %a, %a, %bc

// NONE: %b = te.contract
// NONE: %unused = te.map "neg"
