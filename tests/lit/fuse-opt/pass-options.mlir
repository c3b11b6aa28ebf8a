// Pass options: dashes or underscores, quoted strings, booleans; bad ones are located errors.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -m pip install -q --no-deps --no-build-isolation --no-index --target %t/site %repo/tests/plugins/fuse_mlir_demo_plugin
// RUN: env PYTHONPATH=%t/site:%pythonpath %fuse-opt %s -p 'demo-count-ops{attr-name="my.count"}' | filecheck %s
// RUN: env PYTHONPATH=%t/site:%pythonpath %fuse-opt %s -p 'demo-count-ops{attr_name=other report=false}' | filecheck %s --check-prefix=UNDERSCORE
// RUN: env PYTHONPATH=%t/site:%pythonpath not %fuse-opt %s -p 'cse,demo-count-ops{report=maybe}' 2>&1 | filecheck %s --check-prefix=BADVALUE
// RUN: not %fuse-opt %s -p 'cse,dce{aggressive=true}' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not %fuse-opt %s -p 'cse{' 2>&1 | filecheck %s --check-prefix=SYNTAX

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  te.export %x {names = ["X"]} : tensor<?xf64>
}

// CHECK: builtin.module attributes {my.count = 2 : i64}
// UNDERSCORE: builtin.module attributes {other = 2 : i64}

// BADVALUE:      <pass-pipeline>:1:5: error: option 'report' of pass 'demo-count-ops' expects bool, got maybe
// BADVALUE-NEXT:     cse,demo-count-ops{report=maybe}
// BADVALUE-NEXT: {{^        \^~+$}}

// UNKNOWN:      <pass-pipeline>:1:5: error: pass 'dce' has no option 'aggressive' (its options: none)
// UNKNOWN-NEXT:     cse,dce{aggressive=true}
// UNKNOWN-NEXT: {{^        \^~~$}}

// SYNTAX: <pass-pipeline>:1:5: error: missing '}' after the options of 'cse'
