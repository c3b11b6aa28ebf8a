"""The native backend: loop level -> llvm dialect -> LLVM IR text -> llvmlite JIT (see docs/native-abi.md)."""
