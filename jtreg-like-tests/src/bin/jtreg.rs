//! `jtreg`: the test runner; invoked as `rtvm-testvm` (the runner makes that link), the
//! test VM — the rtvm launcher with every test main registered.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let invoked_as = std::path::Path::new(args.first().map(String::as_str).unwrap_or("jtreg"))
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("jtreg")
        .to_owned();
    let code = if invoked_as == rtvm_jtreg::TEST_VM_NAME {
        rtvm_jtreg::test_vm_main(&args[1..])
    } else if args.get(1).map(String::as_str) == Some("--test-vm") {
        rtvm_jtreg::test_vm_main(&args[2..])
    } else {
        rtvm_jtreg::cli::main(&args[1..])
    };
    std::process::exit(code);
}
