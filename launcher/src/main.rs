//! The `rtvm` launcher: `rtvm [options] <Main> [args...]`.

fn main() {
    // Arguments as bytes: one that is not UTF-8 is reported, never a panic.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let status = rtvm_launcher::launch("rtvm", &args, &rtvm_launcher::Mains::builtin());
    std::process::exit(status);
}
