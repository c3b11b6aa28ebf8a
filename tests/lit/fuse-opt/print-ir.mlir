// --print-ir-after-all / --print-ir-before-all / --print-ir-after=NAME / --print-ir-before=NAME: dumps on stderr.
// RUN: %fuse-opt %S/Inputs/dup.mlir -p canonicalize,cse,dce --print-ir-after-all 2>%t.err | filecheck %s --check-prefix=OUT
// RUN: filecheck %s --check-prefix=AFTERALL < %t.err
// RUN: %fuse-opt %S/Inputs/dup.mlir -p canonicalize,cse,dce --print-ir-before=cse --print-ir-after=cse,dce 2>&1 >/dev/null | filecheck %s --check-prefix=NAMED
// RUN: %fuse-opt %S/Inputs/dup.mlir -p cse --print-ir-before-all --print-op-generic 2>&1 >/dev/null | filecheck %s --check-prefix=GENERIC

// OUT:     builtin.module {
// OUT-NOT: IR Dump

// AFTERALL:      // -----// IR Dump After canonicalize //----- //
// AFTERALL-NEXT: builtin.module {
// AFTERALL:        %n = arith.constant 5 : index
// AFTERALL:        %b = te.contract
// AFTERALL:      // -----// IR Dump After cse //----- //
// AFTERALL-NOT:    %b = te.contract
// AFTERALL:      // -----// IR Dump After dce //----- //

// NAMED-NOT: After canonicalize
// NAMED:     // -----// IR Dump Before cse //----- //
// NAMED:     %b = te.contract
// NAMED:     // -----// IR Dump After cse //----- //
// NAMED:     // -----// IR Dump After dce //----- //

// GENERIC:      // -----// IR Dump Before cse //----- //
// GENERIC-NEXT: "builtin.module"() ({
