//! The C API as a shared library built with the tests: `cargo test` builds examples but not
//! the `cdylib` of the library target, so this example re-exports the C symbols
//! (`target/<profile>/examples/librtvm_capi.so`). `cargo build -p rtvm` builds the real
//! `librtvm.so` and `librtvm.a`.
pub use rtvm::capi::*;
