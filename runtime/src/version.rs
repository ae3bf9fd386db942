//! The VM's name and version, as `-version`, `jcmd VM.version`, thread dumps and the perf
//! data say them.

/// The VM's name where HotSpot says `OpenJDK 64-Bit Server VM`.
pub(crate) const VM_NAME: &str = "rtvm 64-Bit VM";

/// The vendor (`java.vm.vendor`).
pub(crate) const VM_VENDOR: &str = "rtvm";

/// The version (`0.1.0`).
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The build profile: `release` or `debug`.
pub(crate) const fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// The version text `-version` prints (to stderr).
pub fn version_text() -> String {
    format!(
        "rtvm version \"{VERSION}\"\nrtvm Runtime Environment (build {VERSION}, {})\n{VM_NAME} (build {VERSION}, {}, {}-linux)\n",
        profile(),
        profile(),
        std::env::consts::ARCH
    )
}
