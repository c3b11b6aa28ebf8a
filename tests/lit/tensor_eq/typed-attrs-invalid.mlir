// Malformed typed attributes are located errors that say what was expected.
// RUN: %fuse-opt %s --split-input-file --verify-diagnostics

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  // expected-error @+1 {{expected an access axis: name, name + n, name - n, n, slice a:b:c as "t", gather n}}
  %a = te.access %x[] () {axes = [#te.axis<>], gather_indices = [], indices = ["i"]} : tensor<?xf64>[] -> tensor<?xf64>
}

// -----

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  // expected-error @+1 {{Expected ':' between slice bounds (start:stop:step, ? where absent)}}
  %a = te.access %x[] () {axes = [#te.axis<slice 1:2 as "s">], gather_indices = [], indices = ["s"]} : tensor<?xf64>[] -> tensor<?xf64>
}

// -----

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  // expected-error @+1 {{#te.axis: slice step cannot be zero}}
  %a = te.access %x[] () {axes = [#te.axis<slice 1:?:0 as "s">], gather_indices = [], indices = ["s"]} : tensor<?xf64>[] -> tensor<?xf64>
}

// -----

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  // expected-error @+1 {{a gather operand number, 0 or more}}
  %a = te.access %x[] () {axes = [#te.axis<gather -1>], gather_indices = [], indices = []} : tensor<?xf64>[] -> tensor<f64>
}

// -----

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  // expected-error @+1 {{an offset: name + n or name - n}}
  %a = te.access %x[] () {axes = [#te.axis<i + j>], gather_indices = [], indices = ["i"]} : tensor<?xf64>[] -> tensor<?xf64>
}

// -----

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  // expected-error @+1 {{te.access: axis #te.axis<gather 1> names gather operand 1, but there are 0}}
  %a = te.access %x[] () {axes = [#te.axis<gather 1>], gather_indices = [], indices = []} : tensor<?xf64>[] -> tensor<f64>
}

// -----

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  // expected-error @+1 {{te.access: result indices ['j'] must be exactly the indices the axes and gathers produce ['i']}}
  %a = te.access %x[] () {axes = [#te.axis<i>], gather_indices = [], indices = ["j"]} : tensor<?xf64>[] -> tensor<?xf64>
}

// -----

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  // expected-error @+1 {{te.access: source has rank 1 but 2 axes}}
  %a = te.access %x[] () {axes = [#te.axis<i>, #te.axis<i>], gather_indices = [], indices = ["i"]} : tensor<?xf64>[] -> tensor<?xf64>
}

// -----

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %n = te.dim %x, 0 : i64 : tensor<?xf64>
  // expected-error @+1 {{Expected `parallel`, or `reduction`.}}
  %s = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<window>], kind = [#ew.kind<sum>]} -> tensor<f64> {
  ^bb0(%v: f64):
    ew.yield %v : f64
  }
}

// -----

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %n = te.dim %x, 0 : i64 : tensor<?xf64>
  // expected-error @+1 {{Expected `none`, `sum`, `prod`, `max`, `min`, or `any`.}}
  %s = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<reduction>], kind = [#ew.kind<mean>]} -> tensor<f64> {
  ^bb0(%v: f64):
    ew.yield %v : f64
  }
}

// -----

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %n = te.dim %x, 0 : i64 : tensor<?xf64>
  // expected-error @+1 {{ew.generic: a reduction kind is needed exactly when a dim is a reduction}}
  %s = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<reduction>], kind = [#ew.kind<none>]} -> tensor<f64> {
  ^bb0(%v: f64):
    ew.yield %v : f64
  }
}

// -----

builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %n = te.dim %x, 0 : i64 : tensor<?xf64>
  // expected-error @+1 {{expected ArrayAttr attribute}}
  %s = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<reduction>], kind = "sum"} -> tensor<f64> {
  ^bb0(%v: f64):
    ew.yield %v : f64
  }
}

// -----

builtin.module {
  // expected-error @+1 {{a location range must end after its start column 9}}
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64> loc("p.fuse":3:9 to :4)
}
