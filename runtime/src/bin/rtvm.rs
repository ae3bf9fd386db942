//! The `rtvm` launcher: `rtvm [options] <Main> [args...]`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let status = rtvm::launcher::launch("rtvm", &args, &rtvm::launcher::Mains::builtin());
    std::process::exit(status);
}
