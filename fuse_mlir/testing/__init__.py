"""Testing tools shipped with fuse_mlir: the differential fuzzer (:mod:`fuse_mlir.testing.fuzz`)."""
