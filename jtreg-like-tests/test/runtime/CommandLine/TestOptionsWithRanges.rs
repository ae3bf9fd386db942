/*
 * @test
 * @bug 8122937
 * @summary For every flag with a range in -XX:+PrintFlagsRanges: the minimum and maximum are
 *          accepted and the VM starts or fails cleanly; one below the minimum and one above
 *          the maximum are rejected with the range message and exit 1
 * @requires vm.flagless
 * @run driver TestOptionsWithRanges
 */

use rtvm_jtreg::testlib::*;

const UNLOCK: [&str; 2] = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+UnlockExperimentalVMOptions"];

struct Ranged {
    ty: String,
    name: String,
    min: i128,
    max: i128,
}

fn type_limits(ty: &str) -> Option<(i128, i128)> {
    Some(match ty {
        "int" => (i32::MIN as i128, i32::MAX as i128),
        "intx" => (i64::MIN as i128, i64::MAX as i128),
        "uint" => (0, u32::MAX as i128),
        "uintx" | "uint64_t" | "size_t" => (0, u64::MAX as i128),
        _ => return None,
    })
}

fn ranged_flags() -> Result<Vec<Ranged>, TestFailure> {
    let out = ProcessTools::execute_limited_test_vm(&[UNLOCK[0], UNLOCK[1], "-XX:+PrintFlagsRanges", "-version"])?;
    out.should_have_exit_value(0)?.stdout_should_contain("[Global flags ranges]")?;
    let mut flags = Vec::new();
    for line in out.stdout.lines().skip(1) {
        let (Some(open), Some(close)) = (line.find('['), line.find(']')) else { continue };
        let head: Vec<&str> = line[..open].split_whitespace().collect();
        let bounds: Vec<&str> = line[open + 1..close].split("...").map(str::trim).collect();
        if head.len() != 2 || bounds.len() != 2 || bounds[0].is_empty() {
            continue; // no range (blank brackets)
        }
        let parse = |s: &str| s.parse::<i128>().map_err(|_| TestFailure(format!("unparsable bound '{s}' in: {line}")));
        flags.push(Ranged { ty: head[0].into(), name: head[1].into(), min: parse(bounds[0])?, max: parse(bounds[1])? });
    }
    let in_table = rtvm::testing::flags::FLAGS.iter().filter(|f| f.printed_range().is_some()).count();
    check(flags.len() == in_table && in_table > 0, || format!("{} ranged flags listed, the table has {in_table}", flags.len()))?;
    Ok(flags)
}

fn run_with(name: &str, value: i128) -> Result<OutputAnalyzer, TestFailure> {
    let opt = format!("-XX:{name}={value}");
    ProcessTools::execute_limited_test_vm(&[UNLOCK[0], UNLOCK[1], &opt, "-version"])
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    let mut checked = 0;
    for f in ranged_flags()? {
        let (tmin, tmax) = type_limits(&f.ty).ok_or_else(|| TestFailure(format!("unexpected type {} for {}", f.ty, f.name)))?;
        for v in [f.min, f.max] {
            let out = run_with(&f.name, v)?;
            out.should_not_contain("is outside the allowed range")?.should_not_contain("Improperly specified VM option")?;
            check(out.signal.is_none(), || format!("{}={v} crashed the VM: {out:?}", f.name))?;
            if out.exit != 0 {
                // A boundary may be valid for the parser yet impossible for this machine
                // (a 16 EiB heap): then the VM must say so cleanly.
                out.should_have_exit_value(1)?.stdout_should_contain("Error occurred during initialization of VM")?;
                println!("{}={v}: accepted; initialization refused it cleanly", f.name);
            } else {
                println!("{}={v}: accepted; the VM started", f.name);
            }
            checked += 1;
        }
        for (v, limit, what) in [(f.min - 1, tmin, "minimum"), (f.max + 1, tmax, "maximum")] {
            let representable = if what == "minimum" { v >= limit } else { v <= limit };
            if !representable {
                println!("{}: the {what} is the type's own {what}; {v} cannot be written as a {}", f.name, f.ty);
                continue;
            }
            let out = run_with(&f.name, v)?;
            out.should_have_exit_value(1)?.stderr_should_contain(&format!(
                "{} {}={v} is outside the allowed range [ {} ... {} ]",
                f.ty, f.name, f.min, f.max
            ))?;
            if v < 0 && f.ty.starts_with('u') {
                unreachable!("negative values of unsigned types are not representable");
            }
            checked += 1;
        }
    }
    println!("{checked} boundary values checked");
    Ok(())
}
