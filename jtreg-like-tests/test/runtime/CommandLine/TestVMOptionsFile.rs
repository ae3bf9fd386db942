/*
 * @test
 * @bug 8061999 8135195
 * @summary -XX:VMOptionsFile splices a file's options where it stands; -XX:Flags reads bare
 *          settings; errors are HotSpot's
 * @requires vm.flagless
 * @run driver TestVMOptionsFile
 */

/*
 * @test id=corpus
 * @bug 8061999
 * @summary HotSpot's TestVMOptionsFile corpus, each case run through the test VM and java and
 *          compared line by line: empty and blank files, relative and absolute paths,
 *          -XX:Flags inside an options file, quoting (double, single, a quote inside a token,
 *          unmatched), a long option and a big file, an options file named in the environment
 *          variable, ordering with PrintVMOptions, a directory, an unreadable file, an empty
 *          name, two options files (in one container and across containers), a file that
 *          names itself
 * @requires vm.flagless
 * @run driver TestVMOptionsFile corpus
 */

use rtvm_jtreg::testlib::*;

fn write(name: &str, text: &str) -> Result<String, TestFailure> {
    std::fs::write(name, text).map_err(|e| TestFailure(format!("cannot write {name}: {e}")))?;
    Ok(std::fs::canonicalize(name).map_err(|e| TestFailure(e.to_string()))?.display().to_string())
}

/// HotSpot's corpus, side by side with java.
fn corpus() -> TestResult {
    let long_value = "x".repeat(8000);
    let big: String = (0..3000).map(|i| format!("-XX:ParallelGCThreads={}\n", 1 + i % 4)).collect();
    let files: Vec<(&str, String)> = vec![
        ("empty.opts", String::new()),
        ("blank.opts", "  \n\t \n\n".into()),
        ("plain.opts", "-Xmx64m -XX:+AlwaysPreTouch\n-XX:ParallelGCThreads=1\n".into()),
        ("flags-inside.opts", "-XX:Flags=plain.flags -Xmx48m\n".into()),
        ("plain.flags", "+AlwaysPreTouch\nParallelGCThreads=2\n".into()),
        ("print.flags", "+PrintVMOptions\n+AlwaysPreTouch\nParallelGCThreads=1\n".into()),
        ("late-print.flags", "+AlwaysPreTouch\n+PrintVMOptions\nParallelGCThreads=1\n".into()),
        ("quoted.flags", "\"+AlwaysPreTouch\"\n".into()),
        ("double-quotes.opts", "\"-XX:ParallelGCThreads=1\" -Xmx\"64m\"\n".into()),
        ("single-quotes.opts", "'-XX:ParallelGCThreads=1' '-Xmx64m'\n".into()),
        ("mixed-quotes.opts", "\"-XX:NativeMemoryTracking=summary\" '-XX:+PrintVMOptions'\n".into()),
        ("unmatched.opts", "-Xmx64m \"-XX:+AlwaysPreTouch\n".into()),
        ("unmatched-single.opts", "-Xmx64m '-XX:+AlwaysPreTouch\n".into()),
        ("long.opts", format!("-XX:NativeMemoryTracking={long_value}\n")),
        ("big.opts", big),
        ("print.opts", "-XX:+PrintVMOptions -XX:+AlwaysPreTouch\n".into()),
        ("bad.opts", "-XX:+NoSuchFlag\n".into()),
        ("self.opts", "-XX:VMOptionsFile=self.opts\n".into()),
        ("unreadable.opts", "-Xmx64m\n".into()),
    ];
    for (name, text) in &files {
        std::fs::write(name, text).map_err(|e| TestFailure(format!("cannot write {name}: {e}")))?;
    }
    std::fs::create_dir_all("a-directory")?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions("unreadable.opts", std::fs::Permissions::from_mode(0o000))?;
    let absolute = std::fs::canonicalize("plain.opts")?.display().to_string();
    let abs_arg = format!("-XX:VMOptionsFile={absolute}");
    let cases: Vec<(Vec<&str>, Option<&str>)> = vec![
        (vec!["-XX:VMOptionsFile=empty.opts", "-version"], None),
        (vec!["-XX:VMOptionsFile=blank.opts", "-version"], None),
        (vec!["-XX:VMOptionsFile=plain.opts", "-XX:+PrintVMOptions", "-version"], None),
        (vec![&abs_arg, "-XX:+PrintVMOptions", "-version"], None),
        (vec!["-XX:VMOptionsFile=flags-inside.opts", "-XX:+PrintVMOptions", "-version"], None),
        (vec!["-XX:VMOptionsFile=double-quotes.opts", "-XX:+PrintVMOptions", "-version"], None),
        (vec!["-XX:VMOptionsFile=single-quotes.opts", "-XX:+PrintVMOptions", "-version"], None),
        (vec!["-XX:VMOptionsFile=mixed-quotes.opts", "-version"], None),
        (vec!["-XX:VMOptionsFile=unmatched.opts", "-version"], None),
        (vec!["-XX:VMOptionsFile=unmatched-single.opts", "-version"], None),
        (vec!["-XX:VMOptionsFile=long.opts", "-version"], None),
        (vec!["-XX:VMOptionsFile=big.opts", "-XX:+PrintVMOptions", "-version"], None),
        (vec!["-XX:+AlwaysPreTouch", "-XX:VMOptionsFile=print.opts", "-XX:ParallelGCThreads=1", "-version"], None),
        (vec!["-XX:VMOptionsFile=bad.opts", "-version"], None),
        (vec!["-XX:VMOptionsFile=self.opts", "-version"], None),
        (vec!["-XX:VMOptionsFile=a-directory", "-version"], None),
        (vec!["-XX:VMOptionsFile=unreadable.opts", "-version"], None),
        (vec!["-XX:VMOptionsFile=", "-version"], None),
        (vec!["-XX:Flags=print.flags", "-XX:ParallelGCThreads=2", "-version"], None),
        (vec!["-XX:Flags=late-print.flags", "-XX:ParallelGCThreads=2", "-version"], None),
        (vec!["-XX:+PrintVMOptions", "-XX:Flags=late-print.flags", "-version"], None),
        (vec!["-XX:Flags=quoted.flags", "-version"], None),
        (vec!["-XX:+PrintVMOptions", "-XX:+NoSuchFlag", "-version"], None),
        (vec!["-XX:VMOptionsFile=does-not-exist.opts", "-version"], None),
        (vec!["-XX:VMOptionsFile=plain.opts", "-XX:VMOptionsFile=empty.opts", "-version"], None),
        (vec!["-XX:+PrintVMOptions", "-version"], Some("-XX:VMOptionsFile=plain.opts")),
        (vec!["-XX:VMOptionsFile=plain.opts", "-version"], Some("-XX:VMOptionsFile=print.opts")),
        (vec!["-version"], Some("-XX:VMOptionsFile=plain.opts -XX:VMOptionsFile=print.opts")),
    ];
    for (args, env) in &cases {
        same_as_java(&SideBySide { args, env: *env, expect: &[] })?;
    }
    println!("{} cases the same as java", cases.len());
    Ok(())
}

pub fn main(_vm: &Vm, args: &[String]) -> TestResult {
    if args.first().map(String::as_str) == Some("corpus") {
        return corpus();
    }
    let opts = write("options.txt", "-Xmx48m\n  \"-XX:+AlwaysPreTouch\" -XX:PreTouchParallelChunkSize=64k\n")?;
    let arg = format!("-XX:VMOptionsFile={opts}");
    let out = ProcessTools::execute_limited_test_vm(&[&arg, "-XX:+PrintFlagsFinal", "-version"])?;
    out.should_have_exit_value(0)?
        .should_match("size_t MaxHeapSize += 50331648 .*\\{command line\\}")?
        .should_match("bool AlwaysPreTouch += true .*\\{command line\\}")?
        .should_match("size_t PreTouchParallelChunkSize += 65536 ")?;
    // Options after the file override it; options before are overridden by it.
    ProcessTools::execute_limited_test_vm(&["-Xmx32m", &arg, "-XX:+PrintCommandLineFlags", "-version"])?
        .stdout_should_contain("-XX:MaxHeapSize=50331648 ")?;
    ProcessTools::execute_limited_test_vm(&[&arg, "-Xmx32m", "-XX:+PrintCommandLineFlags", "-version"])?
        .stdout_should_contain("-XX:MaxHeapSize=33554432 ")?;

    ProcessTools::execute_limited_test_vm(&["-XX:VMOptionsFile=does-not-exist.txt", "-version"])?
        .stderr_should_contain("Could not open options file 'does-not-exist.txt'")?
        .should_have_exit_value(1)?;
    let nested = write("nested.txt", &format!("{arg}\n"))?;
    let outer = format!("-XX:VMOptionsFile={nested}");
    ProcessTools::execute_limited_test_vm(&[&outer, "-version"])?
        .stderr_should_contain(&format!(
            "A VM options file may not refer to a VM options file. Specification of '-XX:VMOptionsFile=<file-name>' in the options file '{outer}' in options container 'cmd_line_args' is an error."
        ))?
        .should_have_exit_value(1)?;
    let unmatched = write("unmatched.txt", "-Xmx64m \"-XX:+AlwaysPreTouch\n")?;
    ProcessTools::execute_limited_test_vm(&[&format!("-XX:VMOptionsFile={unmatched}"), "-version"])?
        .stderr_should_contain(&format!("Unmatched quote in {unmatched}"))?
        .should_have_exit_value(1)?;
    let bad = write("bad-option.txt", "-XX:+NoSuchFlag\n")?;
    ProcessTools::execute_limited_test_vm(&[&format!("-XX:VMOptionsFile={bad}"), "-version"])?
        .stderr_should_contain("Unrecognized VM option 'NoSuchFlag'")?
        .should_have_exit_value(1)?;

    // -XX:Flags: bare settings, comments, origin {config file}; the command line wins.
    let flags = write("settings.txt", "# settings\n+AlwaysPreTouch\nMaxHeapSize=40m # trailing\n")?;
    ProcessTools::execute_limited_test_vm(&[&format!("-XX:Flags={flags}"), "-XX:+PrintFlagsFinal", "-version"])?
        .should_have_exit_value(0)?
        .should_match("bool AlwaysPreTouch += true .*\\{config file\\}")?
        .should_match("size_t MaxHeapSize += 41943040 .*\\{config file\\}")?;
    ProcessTools::execute_limited_test_vm(&[&format!("-XX:Flags={flags}"), "-Xmx24m", "-XX:+PrintCommandLineFlags", "-version"])?
        .stdout_should_contain("-XX:MaxHeapSize=25165824 ")?;
    ProcessTools::execute_limited_test_vm(&["-XX:Flags=does-not-exist.txt", "-version"])?
        .stderr_should_contain("Could not open settings file does-not-exist.txt")?
        .should_have_exit_value(1)?;
    let dashed = write("dashed.txt", "-XX:+AlwaysPreTouch\n")?;
    ProcessTools::execute_limited_test_vm(&[&format!("-XX:Flags={dashed}"), "-version"])?
        .stderr_should_contain("Unrecognized VM option 'XX:+AlwaysPreTouch'")?
        .should_have_exit_value(1)?;
    Ok(())
}
