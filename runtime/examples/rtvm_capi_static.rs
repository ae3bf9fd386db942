//! The C API as a static library built with the tests (see `rtvm_capi.rs`):
//! `target/<profile>/examples/librtvm_capi_static.a`.
pub use rtvm::capi::*;
