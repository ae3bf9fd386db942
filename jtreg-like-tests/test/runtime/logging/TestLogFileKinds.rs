/*
 * @test
 * @summary -Xlog file outputs and rotation, as HotSpot 17: rotation onto anything that is not
 *          a regular file (a device node, a directory) is refused with HotSpot's message and
 *          the node is left as it was; with filecount=0 a device works; a FIFO is written
 *          without rotation; compared with java where it is installed
 * @requires os.family == "linux"
 * @run driver TestLogFileKinds
 */

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::process::Command;

use rtvm_jtreg::testlib::*;

/// Both VMs with `args` + `-version`: our output checked against `lines`, and java's too.
fn both(args: &[&str], status: i32, lines: &[&str]) -> TestResult {
    let mut all: Vec<&str> = args.to_vec();
    all.push("-version");
    let ours = ProcessTools::execute_limited_test_vm(&all)?;
    ours.should_have_exit_value(status)?;
    for l in lines {
        ours.should_contain(l)?;
    }
    if let Some(theirs) = JavaTools::execute(&all)? {
        theirs.should_have_exit_value(status)?;
        for l in lines {
            theirs.should_contain(l)?;
        }
    }
    Ok(())
}

fn make_node(path: &std::path::Path) -> Result<bool, TestFailure> {
    // A character device with /dev/null's numbers, made in our own directory.
    let made = Command::new("mknod")
        .arg(path)
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|s| s.success());
    Ok(made)
}

pub fn main(_vm: &Vm, _args: &[String]) -> TestResult {
    both(
        &["-Xlog:os:file=/dev/null"],
        1,
        &[
            "[error][logging] Unable to log to file /dev/null with log file rotation: /dev/null is not a regular file",
            "[error][logging] Initialization of output 'file=/dev/null' using options '(null)' failed.",
            "Invalid -Xlog option '-Xlog:os:file=/dev/null', see error log for details.",
        ],
    )?;
    both(&["-Xlog:os:file=/dev/null::filecount=0"], 0, &[])?;
    both(
        &["-Xlog:os:file=."],
        1,
        &["Unable to log to file . with log file rotation: . is not a regular file"],
    )?;

    let dir = std::env::current_dir()?;
    let node = dir.join("node");
    if make_node(&node)? {
        let arg = format!("-Xlog:os=debug:file={}::filesize=1k", node.display());
        let out = ProcessTools::execute_limited_test_vm(&[&arg, "-version"])?;
        out.should_have_exit_value(1)?
            .should_contain(&format!("Unable to log to file {0} with log file rotation: {0} is not a regular file", node.display()))?;
        let arg = format!("-Xlog:all=trace:file={}::filecount=0", node.display());
        ProcessTools::execute_limited_test_vm(&[&arg, "-Xms64m", "IdleThreads", "4"])?.should_have_exit_value(0)?;
        let kind = std::fs::metadata(&node)?.file_type();
        check(kind.is_char_device(), || format!("the device node became {kind:?}"))?;
        let archives: Vec<_> = std::fs::read_dir(&dir)?
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("node."))
            .collect();
        check(archives.is_empty(), || format!("rotation made {} archive files", archives.len()))?;
    } else {
        println!("mknod is not permitted here: the device-node case is covered by /dev/null only");
    }

    // A FIFO, read by a thread of ours: written without rotation, whatever the file size.
    let fifo = dir.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());
    check(made, || "mkfifo failed".into())?;
    let reader_path = fifo.clone();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::fs::File::open(&reader_path).and_then(|mut f| f.read_to_string(&mut text));
        text
    });
    let arg = format!("-Xlog:os*=debug:file={}::filesize=1k", fifo.display());
    ProcessTools::execute_limited_test_vm(&[&arg, "IdleThreads", "8"])?.should_have_exit_value(0)?;
    let text = reader.join().map_err(|_| TestFailure("reader panicked".into()))?;
    println!("read {} bytes through the FIFO", text.len());
    check(text.len() > 1024, || format!("only {} bytes came through the FIFO", text.len()))?;
    check(std::fs::metadata(&fifo)?.file_type().is_fifo(), || "the FIFO was replaced".into())?;
    Ok(())
}
