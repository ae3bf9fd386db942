/*
 * @test
 * @bug 8129855
 * @summary HotSpot's IgnoreUnrecognizedVMOptions table, side by side with java: with the flag,
 *          unknown -XX: and -X options (and commented-out ones) are skipped silently; a locked
 *          diagnostic flag, a bad value, a value out of range, a +/- on a number and a missing
 *          +/- on a bool still fail; -XX:-IgnoreUnrecognizedVMOptions after it (or before it)
 *          takes effect by position as the last one wins
 * @requires vm.flagless
 * @run driver IgnoreUnrecognizedVMOptions
 */

use rtvm_jtreg::testlib::*;

const IGNORE: &str = "-XX:+IgnoreUnrecognizedVMOptions";

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    let cases: [(&[&str], i32); 18] = [
        // Unknown options: fatal without the flag, skipped with it.
        (&["-XX:+NoSuchFlag"], 1),
        (&[IGNORE, "-XX:+NoSuchFlag"], 0),
        (&[IGNORE, "-XX:NoSuchFlag=17"], 0),
        (&[IGNORE, "-Xnosuchoption"], 0),
        (&[IGNORE, "-XX:#+AlwaysPreTouch"], 0),
        (&["-XX:#+AlwaysPreTouch"], 0),
        // Known flags used wrongly: never skipped.
        (&[IGNORE, "-XX:+PrintNMTStatistics"], 1),
        (&[IGNORE, "-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintNMTStatistics"], 0),
        (&[IGNORE, "-XX:ParallelGCThreads=abc"], 1),
        (&[IGNORE, "-XX:PreTouchParallelChunkSize=1"], 1),
        (&[IGNORE, "-XX:+ParallelGCThreads"], 1),
        (&[IGNORE, "-XX:AlwaysPreTouch"], 1),
        (&[IGNORE, "-XX:+AlwaysPreTouch=1"], 1),
        (&[IGNORE, "-XX:ParallelGCThreads:=1"], 0),
        // The last of +/- wins, wherever it stands.
        (&[IGNORE, "-XX:-IgnoreUnrecognizedVMOptions", "-XX:+NoSuchFlag"], 1),
        (&["-XX:-IgnoreUnrecognizedVMOptions", "-XX:+NoSuchFlag", IGNORE], 0),
        (&["-XX:+NoSuchFlag", IGNORE], 0),
        (&[IGNORE, "-XX:+PrintVMOptions", "-XX:+NoSuchFlag"], 0),
    ];
    for (args, status) in cases {
        let mut all = args.to_vec();
        all.push("-version");
        let out = same_as_java(&SideBySide { args: &all, env: None, expect: &[] })?;
        check(out.exit == status, || format!("{args:?}: exit {}, HotSpot exits {status}", out.exit))?;
    }
    // From the environment variable too.
    same_as_java(&SideBySide { args: &["-version"], env: Some("-XX:+IgnoreUnrecognizedVMOptions -XX:+NoSuchFlag"), expect: &[] })?;
    println!("{} cases the same as java", cases.len() + 1);
    Ok(())
}
