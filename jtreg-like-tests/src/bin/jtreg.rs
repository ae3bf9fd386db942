//! `jtreg`: the test runner; invoked as `rtvm-testvm` (the runner makes that link), the
//! test VM — the rtvm launcher with every test main registered.

fn main() {
    // Arguments as bytes: the test VM reports a non-UTF-8 option like the rtvm launcher does.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let invoked_as = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map(rtvm::lossy)
        .unwrap_or_else(|| "jtreg".into());
    let code = if invoked_as == rtvm_jtreg::TEST_VM_NAME {
        rtvm_jtreg::test_vm_main(&args[1..])
    } else if args.get(1).is_some_and(|a| a == "--test-vm") {
        rtvm_jtreg::test_vm_main(&args[2..])
    } else {
        let args: Vec<String> = args[1..].iter().map(|a| rtvm::lossy(a)).collect();
        rtvm_jtreg::cli::main(&args)
    };
    std::process::exit(code);
}
