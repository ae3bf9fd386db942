/*
 * @test
 * @bug 8122937
 * @summary For every flag with a range in -XX:+PrintFlagsRanges, HotSpot's TestOptionsWithRanges
 *          rules: valid values are the minimum, the maximum, and -1, 0, 1, 2^31-1, 2^31,
 *          2^32-1 and 2^32 where they lie inside the range — none may be refused with a range
 *          message, and the VM starts or fails cleanly; invalid values are the minimum - 1 and
 *          the maximum + 1 where the type can hold them — refused with HotSpot's range message
 *          and exit 1. Where java knows the flag, it must accept and refuse the same values.
 *          Double flags: the bounds and the midpoint are accepted, half a unit outside is
 *          refused with the value in six decimals, as java does.
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

/// The integer flags with a range, from -XX:+PrintFlagsRanges.
fn ranged_flags(java_flags: &str) -> Result<Vec<Ranged>, TestFailure> {
    let out = ProcessTools::execute_limited_test_vm(&[UNLOCK[0], UNLOCK[1], "-XX:+PrintFlagsRanges", "-version"])?;
    out.should_have_exit_value(0)?.stdout_should_contain("[Global flags ranges]")?;
    let mut flags = Vec::new();
    for line in out.stdout.lines().skip(1) {
        let (Some(open), Some(close)) = (line.find('['), line.find(']')) else { continue };
        let head: Vec<&str> = line[..open].split_whitespace().collect();
        let bounds: Vec<&str> = line[open + 1..close].split("...").map(str::trim).collect();
        if head.len() != 2 || bounds.len() != 2 || bounds[0].is_empty() || type_limits(head[0]).is_none() {
            continue; // no range (blank brackets), or not an integer flag
        }
        let parse = |s: &str| s.parse::<i128>().map_err(|_| TestFailure(format!("unparsable bound '{s}' in: {line}")));
        let f = Ranged { ty: head[0].into(), name: head[1].into(), min: parse(bounds[0])?, max: parse(bounds[1])? };
        // java must print the same range for a flag it has.
        if let Some(theirs) = java_flags.lines().find(|l| l.split_whitespace().nth(1) == Some(f.name.as_str())) {
            let ours = line.split_whitespace().take(6).collect::<Vec<_>>().join(" ");
            let theirs = theirs.split_whitespace().take(6).collect::<Vec<_>>().join(" ");
            check(ours == theirs, || format!("range differs from java's: '{ours}' vs '{theirs}'"))?;
        }
        flags.push(f);
    }
    check(!flags.is_empty(), || "no ranged integer flag listed".into())?;
    Ok(flags)
}

fn run_with(name: &str, value: i128) -> Result<OutputAnalyzer, TestFailure> {
    let opt = format!("-XX:{name}={value}");
    ProcessTools::execute_limited_test_vm(&[UNLOCK[0], UNLOCK[1], &opt, "-version"])
}

fn refused_for_range(out: &OutputAnalyzer, name: &str, value: i128) -> bool {
    out.stderr.contains("is outside the allowed range") || out.stderr.contains(&format!("Improperly specified VM option '{name}={value}'"))
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    let java_ranges = JavaTools::execute(&[UNLOCK[0], UNLOCK[1], "-XX:+PrintFlagsRanges", "-version"])?.map(|o| o.stdout).unwrap_or_default();
    let (mut valid, mut invalid, mut with_java) = (0, 0, 0);
    for f in ranged_flags(&java_ranges)? {
        let (tmin, tmax) = type_limits(&f.ty).unwrap_or((i128::MIN, i128::MAX));
        let java_knows = java_ranges.lines().any(|l| l.split_whitespace().nth(1) == Some(f.name.as_str()));
        let mut values = vec![f.min, f.max];
        for v in [-1, 0, 1, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32] {
            if v > f.min && v < f.max && !values.contains(&v) {
                values.push(v);
            }
        }
        for v in values {
            let out = run_with(&f.name, v)?;
            check(!refused_for_range(&out, &f.name, v), || format!("{}={v} is inside [{}, {}] but was refused: {}", f.name, f.min, f.max, out.stderr))?;
            check(out.signal.is_none(), || format!("{}={v} crashed the VM: {out:?}", f.name))?;
            if out.exit != 0 {
                // Valid for the parser yet impossible for this machine (a 16 EiB heap, a
                // 2^53 K stack): the VM says so cleanly, as java does.
                let clean = out.stdout.contains("Error occurred during initialization of VM")
                    || out.stdout.contains("specified is too small. Specify at least")
                    || out.stderr.contains("Invalid maximum heap size")
                    || out.stderr.contains("must be less than or equal to aligned maximum value");
                check(clean, || format!("{}={v}: exit {} without a clean message: {out:?}", f.name, out.exit))?;
            }
            valid += 1;
        }
        for (v, limit, above) in [(f.min - 1, tmin, false), (f.max + 1, tmax, true)] {
            let representable = if above { v <= limit } else { v >= limit };
            if !representable {
                continue;
            }
            let out = run_with(&f.name, v)?;
            out.should_have_exit_value(1)?.stderr_should_contain(&format!(
                "{} {}={v} is outside the allowed range [ {} ... {} ]",
                f.ty, f.name, f.min, f.max
            ))?;
            invalid += 1;
            if java_knows {
                if let Some(theirs) = JavaTools::execute(&[UNLOCK[0], UNLOCK[1], &format!("-XX:{}={v}", f.name), "-version"])? {
                    check(refused_for_range(&theirs, &f.name, v), || format!("java accepts {}={v}", f.name))?;
                    with_java += 1;
                }
            }
        }
    }
    let doubles = check_doubles(&java_ranges)?;
    println!("{valid} valid and {invalid} invalid values checked ({with_java} invalid ones against java as well); {doubles} double values");
    Ok(())
}

/// The double flags with a range: the bounds and the midpoint are accepted, half a unit
/// outside is refused with HotSpot's message (values printed with six decimals) — by java too.
fn check_doubles(java_ranges: &str) -> Result<usize, TestFailure> {
    let out = ProcessTools::execute_limited_test_vm(&[UNLOCK[0], UNLOCK[1], "-XX:+PrintFlagsRanges", "-version"])?;
    let mut checked = 0;
    for line in out.stdout.lines().filter(|l| l.trim_start().starts_with("double ")) {
        let (Some(open), Some(close)) = (line.find('['), line.find(']')) else { continue };
        let name = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
        let bounds: Vec<f64> = line[open + 1..close].split("...").filter_map(|b| b.trim().parse().ok()).collect();
        let [min, max] = bounds[..] else { continue };
        for v in [min, max, (min + max) / 2.0] {
            let opt = format!("-XX:{name}={v:.1}");
            let out = ProcessTools::execute_limited_test_vm(&[&opt, "-version"])?;
            check(!out.stderr.contains("is outside the allowed range") && !out.stderr.contains("Improperly specified"), || format!("{opt} refused: {}", out.stderr))?;
            checked += 1;
        }
        for v in [min - 0.5, max + 0.5] {
            let opt = format!("-XX:{name}={v:.1}");
            let expected = format!("double {name}={v:.6} is outside the allowed range [ {min:.6} ... {max:.6} ]");
            ProcessTools::execute_limited_test_vm(&[&opt, "-version"])?.should_have_exit_value(1)?.stderr_should_contain(&expected)?;
            if java_ranges.lines().any(|l| l.split_whitespace().nth(1) == Some(name.as_str())) {
                if let Some(java) = JavaTools::execute(&[&opt, "-version"])? {
                    java.should_have_exit_value(1)?.stderr_should_contain(&expected)?;
                }
            }
            checked += 1;
        }
    }
    check(checked > 0, || "no ranged double flag listed".into())?;
    Ok(checked)
}
