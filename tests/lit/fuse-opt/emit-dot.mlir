// --emit=dot / --view-op-graph: the dataflow as Graphviz; regions are clusters, inplace edges bold red.
// RUN: %fuse-opt %s --emit=dot | filecheck %s
// RUN: %fuse-opt %s --view-op-graph | filecheck %s
// RUN: %fuse-opt %s -p cse --emit=dot | filecheck %s --check-prefix=CSE
// RUN: %fuse-opt %s --emit=tensor_eq | filecheck %s --check-prefix=TE
// RUN: %fuse-opt %repo/examples/mlp.fuse -p te-O2 --emit=dot | filecheck %s --check-prefix=MLP
// Below the tensor_eq level the graph has one node per kernel (loop nest, gemm) and buffers as ellipses:
// RUN: %fuse-opt %repo/examples/mlp.fuse -p O2 --emit=dot | filecheck %s --check-prefix=KERNELS
// RUN: %fuse-opt %repo/examples/mlp.fuse -p O2 --emit=dot --dot-detail=ops | filecheck %s --check-prefix=OPS
// RUN: %fuse-opt %s --emit=dot --dot-detail=kernels | filecheck %s --check-prefix=TEKERNELS

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %a = te.map "relu" %x {operand_indices = [["i"]], indices = ["i"], inplace = 0 : i64} : (tensor<?xf64>) -> tensor<?xf64>
  %b = te.map "relu" %x {operand_indices = [["i"]], indices = ["i"]} : (tensor<?xf64>) -> tensor<?xf64>
  builtin.module {
    %y = te.input "Y" {indices = ["i"]} : tensor<?xf64>
    te.export %y {names = ["Y"]} : tensor<?xf64>
  }
  te.export %a, %b {names = ["A", "B"]} : tensor<?xf64>, tensor<?xf64>
}

// CHECK:      digraph "module" {
// CHECK:        n0 [label="te.input \"X\""];
// CHECK-NEXT:   n1 [label="te.map \"relu\""];
// CHECK-NEXT:   n2 [label="te.map \"relu\""];
// CHECK-NEXT:   subgraph cluster_1 {
// CHECK-NEXT:     label="builtin.module";
// CHECK:          n3 [label="builtin.module", style=filled
// CHECK-NEXT:     n4 [label="te.input \"Y\""];
// CHECK-NEXT:     n5 [label="te.export"];
// CHECK-NEXT:   }
// CHECK-NEXT:   n6 [label="te.export"];
// CHECK-NEXT:   n0 -> n1 [color=red, penwidth=2, style=bold, label="inplace", fontcolor=red];
// CHECK-NEXT:   n0 -> n2;
// CHECK-NEXT:   n4 -> n5;
// CHECK-NEXT:   n1 -> n6;
// CHECK-NEXT:   n2 -> n6;
// CHECK-NEXT: }

// The graph is of the module after the pipeline (cse keeps both relus: their attributes differ).
// CSE: n0 -> n1 [color=red
// CSE: n0 -> n2;

// TE: te.map "relu" %x

// MLP: digraph "module" {
// MLP: [label="te.source \"W1\""];
// MLP: [label="te.contract"];
// MLP: [label="te.axis_fn \"softmax\""];
// MLP: [label="te.export"];

// KERNELS: digraph "module" {
// KERNELS: [label="loop.arg \"X\"", shape=ellipse];
// The first layer (6x5 by 5x4, static: 240 FLOPs) is a loop nest, too small for BLAS: fuse-rows joins its
// product and its bias+relu into one nest over the rows (kernel 1), with the two unfused nests kept as the
// fallback for rows too big for the cache (kernels 2, 3). The second layer's input is a computed
// (dynamic-extent) tensor, so it goes to BLAS.
// KERNELS: [label="kernel 1: loop.for (depth 3)\naddf, maximumf, mulf", style=filled
// KERNELS: [label="kernel 2: loop.for (depth 3)\naddf, mulf", style=filled
// KERNELS: [label="kernel 3: loop.for (depth 2)\naddf, maximumf", style=filled
// KERNELS: [label="kernel 5: loop.gemm", style=filled
// KERNELS: [color="#aa3377", label="writes"];
// KERNELS-NOT: arith.constant
// KERNELS-NOT: math.fma
// KERNELS: }

// OPS: subgraph cluster_
// OPS: [label="math.fma"];

// TEKERNELS: n1 [label="te.map \"relu\""];
// TEKERNELS: n0 -> n1;
