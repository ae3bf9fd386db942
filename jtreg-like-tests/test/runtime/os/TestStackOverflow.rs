/*
 * @test id=main-thread
 * @summary A main that recurses into its guard zone is reported — thread name, fault
 *          address, guard and stack ranges — and the VM aborts; never a silent SIGSEGV
 * @requires os.family == "linux"
 * @run driver TestStackOverflow main
 */

/*
 * @test id=vm-thread
 * @summary The same for a thread the main started, with a larger stack
 * @requires os.family == "linux"
 * @run driver TestStackOverflow thread
 */

/*
 * @test id=unmitigated
 * @summary With the mitigation off the thread places its guard zone itself; an overflow is
 *          still reported
 * @requires os.family == "linux"
 * @run driver TestStackOverflow unmitigated
 */

use rtvm_jtreg::testlib::*;

#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 32]);
    recurse(depth + 1) + frame[7]
}

fn expect_report(out: &OutputAnalyzer, thread: &str) -> TestResult {
    check(out.signal == Some(6), || format!("expected death by SIGABRT, got exit {} signal {:?}", out.exit, out.signal))?;
    out.stderr_should_contain(&format!("stack overflow in thread \"{thread}\": fault address 0x"))?
        .should_match("guard zone \\[0x[0-9a-f]+ - 0x[0-9a-f]+\\), stack \\[0x[0-9a-f]+ - 0x[0-9a-f]+\\)")?
        .should_not_contain("NOT REACHED")?;
    // The fault address lies in the guard zone the report names.
    let line = out.first_match("stack overflow in thread")?.unwrap_or_default();
    let hex = |key: &str| -> Option<u64> {
        let at = line.find(key)? + key.len();
        u64::from_str_radix(line[at..].trim_start_matches("0x").split(|c: char| !c.is_ascii_hexdigit()).next()?, 16).ok()
    };
    let (fault, gs, ge) = (hex("fault address "), hex("guard zone ["), hex(" - "));
    check(matches!((fault, gs, ge), (Some(f), Some(s), Some(e)) if s <= f && f < e), || format!("fault outside the guard: {line}"))?;
    Ok(())
}

pub fn main(vm: &Vm, args: &[String]) -> TestResult {
    match args.first().map(String::as_str) {
        Some("main") => {
            let out = ProcessTools::execute_limited_test_vm(&["-Xss256k", "TestStackOverflow", "overflow-main"])?;
            expect_report(&out, "main")
        }
        Some("thread") => {
            let out = ProcessTools::execute_limited_test_vm(&["TestStackOverflow", "overflow-thread"])?;
            expect_report(&out, "Recurser")
        }
        Some("unmitigated") => {
            let out = ProcessTools::execute_limited_test_vm(&[
                "-XX:+UnlockDiagnosticVMOptions",
                "-XX:+DisableTHPStackMitigation",
                "-Xss512k",
                "TestStackOverflow",
                "overflow-main",
            ])?;
            expect_report(&out, "main")
        }
        Some("overflow-main") => {
            println!("{}", recurse(0));
            println!("NOT REACHED");
            Ok(())
        }
        Some("overflow-thread") => {
            let t = vm.thread("Recurser").stack_size(4 << 20).spawn(|| {
                println!("{}", recurse(0));
            })?;
            t.join()?;
            println!("NOT REACHED");
            Ok(())
        }
        other => Err(TestFailure(format!("unknown mode {other:?}")).into()),
    }
}
