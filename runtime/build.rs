//! Links the C library (`cdylib`) with `-z nodelete`: once loaded it stays loaded, because
//! thread-exit hooks (`pthread_key` destructors), signal handlers and threads of a VM point
//! into its code — a `dlclose` that unmapped it would leave them dangling.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    println!("cargo:rerun-if-changed=build.rs");
}
