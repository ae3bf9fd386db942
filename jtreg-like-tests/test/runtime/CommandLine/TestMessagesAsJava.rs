/*
 * @test
 * @summary Operator-visible behaviour side by side with java 17: 116 command lines — flag forms
 *          and their messages (a flag's name before '=', +/- on the wrong type, locked and unlock
 *          flags, commented-out options, suggestions), sizes and their floors (-Xmx0, -Xmn0, Too
 *          small initial/minimum heap, stack minimums), values that wrap to a flag's width, hex
 *          and suffixes, -Xlog selections, levels, decorators, outputs and their errors, double flags' two forms (fraction, integer) and the RAM-based heap
 *          sizing's floors — each
 *          run through the test VM and java, and the outputs compared after normalizing only
 *          the version banner, the VM's name and addresses. Differences kept on purpose are in
 *          the README's list, not here.
 * @requires vm.flagless
 * @run driver TestMessagesAsJava
 */

use rtvm_jtreg::testlib::*;

const CASES: &[&[&str]] = &[
        &["-XX:+AlwaysPreTouch=1"],
        &["-XX:-AlwaysPreTouch=0"],
        &["-XX:-ParallelGCThreads=1"],
        &["-XX:+ParallelGCThreads"],
        &["-XX:+MaxHeapSize"],
        &["-XX:AlwaysPreTouch"],
        &["-XX:AlwaysPreTouch=1"],
        &["-XX:AlwaysPreTouch=true"],
        &["-XX:ParallelGCThreads"],
        &["-XX:ParallelGCThreads="],
        &["-XX:ParallelGCThreads=abc"],
        &["-XX:ParallelGCThreads=-1"],
        &["-XX:ParallelGCThreads=0x10"],
        &["-XX:ParallelGCThreads=1k"],
        &["-XX:ParallelGCThreads:=2"],
        &["-XX:MaxHeapSize:=64m"],
        &["-XX:NativeMemoryTracking:=summary"],
        &["-XX:+IgnoreUnrecognizedVMOptions", "-XX:#+AlwaysPreTouch"],
        &["-XX:+IgnoreUnrecognizedVMOptions", "-XX:+NoSuchFlag"],
        &["-XX:+IgnoreUnrecognizedVMOptions", "-XX:+PrintNMTStatistics"],
        &["-XX:+IgnoreUnrecognizedVMOptions", "-Xfoo"],
        &["-XX:UnlockExperimentalVMOptions"],
        &["-XX:UnlockDiagnosticVMOptions"],
        &["-XX:+UnlockDiagnosticVMOptions", "-XX:UnlockDiagnosticVMOptions"],
        &["-Xmx0"],
        &["-XX:MaxHeapSize=0"],
        &["-Xmn0"],
        &["-Xms0"],
        &["-Xms0", "-Xmx64m"],
        &["-Xss0"],
        &["-Xmx1"],
        &["-Xmx1m"],
        &["-Xms1m", "-Xmx64m"],
        &["-Xms512k", "-Xmx64m"],
        &["-Xms1023k", "-Xmx64m"],
        &["-XX:MinHeapSize=512k"],
        &["-XX:MinHeapSize=1m"],
        &["-XX:InitialHeapSize=512k"],
        &["-Xms128m", "-Xmx64m"],
        &["-XX:MinHeapSize=128m", "-Xmx64m"],
        &["-Xss100k"],
        &["-Xss135k"],
        &["-Xss136k"],
        &["-XX:ThreadStackSize=100"],
        &["-XX:VMThreadStackSize=10"],
        &["-XX:VMThreadStackSize=63"],
        &["-XX:VMThreadStackSize=64"],
        &["-Xmx1q"],
        &["-Xmx"],
        &["-Xms"],
        &["-Xss"],
        &["-Xmn"],
        &["-Xmxabc"],
        &["-XX:MaxHeapSize=abc"],
        &["-XX:ThreadStackSize=abc"],
        &["-XX:PreTouchParallelChunkSize=1"],
        &["-XX:ParallelGCThreads=5000"],
        &["-XX:+NoSuchFlag"],
        &["-XX:NoSuchFlag=1"],
        &["-XX:"],
        &["-XX:+"],
        &["-XX:-"],
        &["-Xfoo"],
        &["-XX:+UseLargePages"],
        &["-XX:+UseTransparentHugePages"],
        &["-XX:+CreateCoredumpOnCrash"],
        &["-XX:-CreateCoredumpOnCrash"],
        &["-XX:ActiveProcessorCount=2"],
        &["-XX:+PrintVMOptions", "-XX:+NoSuchFlag"],
        &["-XX:+PrintVMOptions", "-XX:+AlwaysPreTouch", "-XX:ParallelGCThreads=1"],
        &["-XX:ActiveProcessorCount=4294967297"],
        &["-XX:ActiveProcessorCount=2147483648"],
        &["-XX:ParallelGCThreads=4294967297"],
        &["-XX:ParallelGCThreads=-1"],
        &["-XX:ThreadStackSize=9223372036854775808"],
        &["-XX:PreTouchParallelChunkSize=18446744073709551616"],
        &["-XX:PreTouchParallelChunkSize=0x100000"],
        &["-XX:PreTouchParallelChunkSize=100000h"],
        &["-XX:PreTouchParallelChunkSize=0X100000"],
        &["-XX:PreTouchParallelChunkSize=1M"],
        &["-XX:PreTouchParallelChunkSize=1m"],
        &["-XX:PreTouchParallelChunkSize=0x1m"],
        &["-XX:PreTouchParallelChunkSize=16777216t"],
        &["-XX:ActiveProcessorCount=1k"],
        &["-Xlog:gc+ergo"],
        &["-Xlog:safepoint"],
        &["-Xlog:os=nosuchlevel"],
        &["-Xlog:os:foo=bar"],
        &["-Xlog:os:file=\"q.log"],
        &["-Xlog:os:file=x.log::filecount=-1"],
        &["-Xlog:os:file=x.log::filesize=1q"],
        &["-Xlog:os:file=x.log::foo=1"],
        &["-Xlog:os:file=adir"],
        &["-Xlog:os:stdout:uptime,foo"],
        &["-Xlogfoo"],
        &["-Xlog:disable"],
        &["-Xlog:all=off"],
        &["-XX:+NoSuchFlag", "-Xlog:help"],
        &["-Xlog:os*=warning:stderr"],
        &["-Xlog:os+thread=off"],
        &["-XX:MaxRAMPercentage=50.5"],
        &["-XX:MaxRAMPercentage=1e1"],
        &["-XX:MaxRAMPercentage=.5"],
        &["-XX:MaxRAMPercentage=5."],
        &["-XX:MaxRAMPercentage=abc"],
        &["-XX:MaxRAMPercentage=-1.5"],
        &["-XX:MaxRAMPercentage=-1"],
        &["-XX:MaxRAMPercentage=0x10"],
        &["-XX:MaxRAMPercentage=1k"],
        &["-XX:MaxRAMPercentage=100.0001"],
        &["-XX:+MaxRAMPercentage"],
        &["-XX:MaxRAM=abc"],
        &["-XX:MaxRAM=1m"],
        &["-XX:MaxRAM=4m", "-Xms8m"],
        &["-XX:MaxRAM=1g", "-XX:MinRAMPercentage=0"],
        &["-XX:+UseContainerSupport=1"],
];

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    std::fs::create_dir_all("adir")?;
    for case in CASES {
        let mut args = case.to_vec();
        if !args.iter().any(|a| *a == "-version" || *a == "-Xlog:help" || a.starts_with("-XX:+PrintFlagsInitial")) {
            args.push("-version");
        }
        same_as_java(&SideBySide { args: &args, env: None, expect: &[] })?;
    }
    println!("{} command lines behave as with java", CASES.len());
    Ok(())
}
