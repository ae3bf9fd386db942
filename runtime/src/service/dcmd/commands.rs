//! The diagnostic commands rtvm has, with HotSpot 17's names, help texts and outputs.
//! Commands whose subject rtvm lacks (`GC.*`, `JFR.*`, `Compiler.*`, ...) are not here, so
//! they are unknown, as a command is in a VM built without its subject.

use std::fmt::Write as _;

use rtvm_flags::{print_command_line_flags, print_flags, PrintWhich, Source};

use super::{catalog, help_for, lookup, specs, Args, DcmdType, Param, Reply, Spec};
use crate::nmt::NmtScale;
use crate::service::context::Context;
use crate::service::properties::{store_format, system_properties};
use crate::service::threaddump::{thread_dump, DumpOptions};
use crate::service::trim::trim_native_heap;
use crate::version::{profile, VERSION, VM_NAME};

const MONITOR: Option<&str> = Some("java.lang.management.ManagementPermission(monitor)");
const CONTROL: Option<&str> = Some("java.lang.management.ManagementPermission(control)");

const fn option(
    name: &'static str,
    description: &'static str,
    ty: DcmdType,
    default: Option<&'static str>,
) -> Param {
    Param {
        name,
        description,
        ty,
        mandatory: false,
        default,
    }
}

/// Every command, sorted by name as `help` lists them.
pub(super) static SPECS: &[Spec] = &[
    Spec {
        name: "System.trim_native_heap",
        description: "Attempts to free up memory by trimming the C-heap.",
        impact: "Low",
        permission: CONTROL,
        arguments: &[],
        options: &[],
        run: trim,
    },
    Spec {
        name: "Thread.print",
        description: "Print all threads with stacktraces.",
        impact: "Medium: Depends on the number of threads.",
        permission: MONITOR,
        arguments: &[],
        options: &[
            option("-l", "print java.util.concurrent locks", DcmdType::Boolean, Some("false")),
            option("-e", "print extended thread information", DcmdType::Boolean, Some("false")),
        ],
        run: thread_print,
    },
    Spec {
        name: "VM.command_line",
        description: "Print the command line used to start this VM instance.",
        impact: "Low",
        permission: MONITOR,
        arguments: &[],
        options: &[],
        run: command_line,
    },
    Spec {
        name: "VM.flags",
        description: "Print VM flag options and their current values.",
        impact: "Low",
        permission: MONITOR,
        arguments: &[],
        options: &[option("-all", "Print all flags supported by the VM", DcmdType::Boolean, Some("false"))],
        run: vm_flags,
    },
    Spec {
        name: "VM.info",
        description: "Print information about JVM environment and status.",
        impact: "Low",
        permission: MONITOR,
        arguments: &[],
        options: &[],
        run: super::super::info::vm_info,
    },
    Spec {
        name: "VM.log",
        description: "Lists current log configuration, enables/disables/configures a log output, or rotates all logs.",
        impact: "Low: No impact",
        permission: CONTROL,
        arguments: &[],
        options: &[
            option("output", "The name or index (#<index>) of output to configure.", DcmdType::String, None),
            option("output_options", "Options for the output.", DcmdType::String, None),
            option("what", "Configures what tags to log.", DcmdType::String, None),
            option("decorators", "Configures which decorators to use. Use 'none' or an empty value to remove all.", DcmdType::String, None),
            option("disable", "Turns off all logging and clears the log configuration.", DcmdType::Boolean, None),
            option("list", "Lists current log configuration.", DcmdType::Boolean, None),
            option("rotate", "Rotates all logs.", DcmdType::Boolean, None),
        ],
        run: vm_log,
    },
    Spec {
        name: "VM.native_memory",
        description: "Print native memory usage",
        impact: "Medium",
        permission: MONITOR,
        arguments: &[],
        options: &[
            option("summary", "request runtime to report current memory summary, which includes total reserved and committed memory, along with memory usage summary by each subsytem.", DcmdType::Boolean, Some("false")),
            option("detail", "request runtime to report memory allocation >= 1K by each callsite.", DcmdType::Boolean, Some("false")),
            option("baseline", "request runtime to baseline current memory usage, so it can be compared against in later time.", DcmdType::Boolean, Some("false")),
            option("summary.diff", "request runtime to report memory summary comparison against previous baseline.", DcmdType::Boolean, Some("false")),
            option("detail.diff", "request runtime to report memory detail comparison against previous baseline, which shows the memory allocation activities at different callsites.", DcmdType::Boolean, Some("false")),
            option("shutdown", "deprecated.", DcmdType::Boolean, Some("false")),
            option("statistics", "print tracker statistics for tuning purpose.", DcmdType::Boolean, Some("false")),
            option("scale", "Memory usage in which scale, KB, MB or GB", DcmdType::String, Some("KB")),
        ],
        run: native_memory,
    },
    Spec {
        name: "VM.set_flag",
        description: "Sets VM flag option using the provided value.",
        impact: "Low",
        permission: CONTROL,
        arguments: &[
            Param {
                name: "flag name",
                description: "The name of the flag we want to set",
                ty: DcmdType::String,
                mandatory: true,
                default: None,
            },
            Param {
                name: "string value",
                description: "The value we want to set",
                ty: DcmdType::String,
                mandatory: false,
                default: None,
            },
        ],
        options: &[],
        run: set_flag,
    },
    Spec {
        name: "VM.system_properties",
        description: "Print system properties.",
        impact: "Low",
        permission: Some("java.util.PropertyPermission(*, read)"),
        arguments: &[],
        options: &[],
        run: properties,
    },
    Spec {
        name: "VM.uptime",
        description: "Print VM uptime.",
        impact: "Low",
        permission: None,
        arguments: &[],
        options: &[option("-date", "Add a prefix with current date", DcmdType::Boolean, Some("false"))],
        run: uptime,
    },
    Spec {
        name: "VM.version",
        description: "Print JVM version information.",
        impact: "Low",
        permission: Some("java.util.PropertyPermission(java.vm.version, read)"),
        arguments: &[],
        options: &[],
        run: version,
    },
    Spec {
        name: "help",
        description: "For more information about a specific command use 'help <command>'. With no argument this will show a list of available commands. 'help all' will show help for all commands.",
        impact: "Low",
        permission: None,
        arguments: &[Param {
            name: "command name",
            description: "The name of the command for which we want help",
            ty: DcmdType::String,
            mandatory: false,
            default: None,
        }],
        options: &[option("-all", "Show help for all commands", DcmdType::Boolean, Some("false"))],
        run: help,
    },
];

fn help(ctx: &Context, a: &Args) -> Reply {
    let mut s = String::new();
    if a.flag("-all") {
        for c in catalog(ctx) {
            let _ = write!(s, "{}\n\t{}\n\n", c.name(), c.description());
        }
    } else if let Some(name) = a.get("command name") {
        match lookup(ctx, name) {
            Some(c) => s = c.help(),
            None => {
                let _ = writeln!(s, "Help unavailable : '{name}' : No such command");
            }
        }
    } else {
        let _ = writeln!(s, "The following commands are available:");
        for c in catalog(ctx) {
            let _ = writeln!(s, "{}", c.name());
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "For more information about a specific command use 'help <command>'."
        );
    }
    Reply::Ok(s)
}

fn version(_: &Context, _: &Args) -> Reply {
    Reply::Ok(format!(
        "{VM_NAME} version {VERSION} ({})\nrtvm {VERSION}\n",
        profile()
    ))
}

fn uptime(ctx: &Context, a: &Args) -> Reply {
    let up = ctx.uptime_secs();
    if a.flag("-date") {
        let now = rtvm_os_linux::system::calendar_now(false).iso8601();
        Reply::Ok(format!("{now}: {up:.3} s\n"))
    } else {
        Reply::Ok(format!("{up:.3} s\n"))
    }
}

/// HotSpot's `VM Arguments:` block (`VM.command_line`, `VM.info`, `jinfo`).
pub(crate) fn vm_arguments(ctx: &Context) -> String {
    let c = &ctx.command;
    let mut s = String::from("VM Arguments:\n");
    if !c.jvm_args.is_empty() {
        let _ = writeln!(s, "jvm_args: {} ", c.jvm_args.join(" "));
    }
    let _ = writeln!(
        s,
        "java_command: {}",
        c.java_command.as_deref().unwrap_or("<unknown>")
    );
    let _ = writeln!(s, "java_class_path (initial): <not set>");
    let _ = writeln!(s, "Launcher Type: {}", c.launcher);
    s
}

fn command_line(ctx: &Context, _: &Args) -> Reply {
    Reply::Ok(vm_arguments(ctx))
}

fn vm_flags(ctx: &Context, a: &Args) -> Reply {
    let settings = ctx.flags.snapshot();
    let mut out = Vec::new();
    let _ = if a.flag("-all") {
        print_flags(&mut out, &settings, PrintWhich::Final)
    } else {
        print_command_line_flags(&mut out, &settings)
    };
    Reply::Ok(String::from_utf8_lossy(&out).into_owned())
}

fn set_flag(ctx: &Context, a: &Args) -> Reply {
    let name = a.get("flag name").unwrap_or_default();
    match ctx
        .flags
        .set_writeable(name, a.get("string value"), Source::Management)
    {
        Ok(()) => {
            log::info!(target: "attach", "Flag {name} set by VM.set_flag");
            ctx.flags_changed();
            Reply::Ok(String::new())
        }
        Err(e) => Reply::Ok(format!("{e}\n")),
    }
}

fn properties(ctx: &Context, _: &Args) -> Reply {
    Reply::Ok(store_format(&system_properties(ctx)))
}

fn thread_print(ctx: &Context, a: &Args) -> Reply {
    let options = DumpOptions {
        locks: a.flag("-l"),
        extended: a.flag("-e"),
    };
    Reply::Ok(thread_dump(&ctx.registry, options))
}

fn trim(_: &Context, _: &Args) -> Reply {
    match trim_native_heap() {
        Some(t) => {
            log::info!(target: "trimnative", "Trim native heap: RSS+Swap: {}", t.change());
            Reply::Ok(format!("Trim native heap: RSS+Swap: {}\n", t.change()))
        }
        None => Reply::Ok("Not available.\n".into()),
    }
}

fn native_memory(ctx: &Context, a: &Args) -> Reply {
    const EXCLUSIVE: [&str; 6] = [
        "summary",
        "detail",
        "baseline",
        "summary.diff",
        "detail.diff",
        "shutdown",
    ];
    let chosen: Vec<&str> = EXCLUSIVE.iter().copied().filter(|o| a.flag(o)).collect();
    if chosen.len() > 1 {
        return Reply::Ok("At most one of the following option can be specified: summary, detail, metadata, baseline, summary.diff, detail.diff, shutdown\n".into());
    }
    let scale_name = a.get("scale").unwrap_or("KB");
    let Some(scale) = NmtScale::from_name(scale_name) else {
        return Reply::Ok(format!("Incorrect scale value: {scale_name}\n"));
    };
    let Some(now) = ctx.native_memory() else {
        return Reply::Ok("Native memory tracking is not enabled\n".into());
    };
    let detail = ctx.nmt_detail();
    let what = chosen.first().copied().unwrap_or(if a.flag("statistics") {
        "statistics"
    } else {
        "summary"
    });
    let mut baseline = ctx.baseline.lock().unwrap_or_else(|p| p.into_inner());
    let text = match what {
        "summary" => now.report_for_jcmd(scale),
        "detail" | "detail.diff" | "statistics" if !detail => "Detail tracking is not enabled\n".into(),
        "detail" => now.report_for_jcmd(scale),
        "statistics" => format!(
            "Native Memory Tracking Statistics:\nThreads tracked: {}\nEmbedder memories tracked: {}\n",
            now.thread_count,
            now.memories.len()
        ),
        "baseline" => {
            *baseline = Some(now);
            "Baseline taken\n".into()
        }
        "summary.diff" => match baseline.as_ref() {
            Some(b) => now.diff_report(b, scale),
            None => "No baseline for comparison\n".into(),
        },
        "detail.diff" => match baseline.as_ref() {
            Some(b) => now.detail_diff_report(b, scale),
            None => "No baseline for comparison\n".into(),
        },
        _ => "This option is deprecated and will be ignored.\n".into(),
    };
    Reply::Ok(text)
}

fn vm_log(ctx: &Context, a: &Args) -> Reply {
    let Some(log) = &ctx.log else {
        return Reply::Ok(
            "Log configuration is not available: another logger is installed in this process\n"
                .into(),
        );
    };
    let configure =
        a.has("output") || a.has("what") || a.has("decorators") || a.has("output_options");
    if !(configure || a.has("disable") || a.has("list") || a.has("rotate")) {
        // As HotSpot: the command's syntax and options.
        let help = specs()
            .iter()
            .find(|s| s.name == "VM.log")
            .map(help_for)
            .unwrap_or_default();
        let syntax = help.find("Syntax").map_or(help.as_str(), |i| &help[i..]);
        return Reply::Ok(syntax.to_owned());
    }
    let mut out = String::new();
    if a.flag("disable") {
        if let Err(e) = log.change(|c| c.disable()) {
            let _ = writeln!(out, "{e}");
        }
    }
    if configure {
        let output = a.get("output").unwrap_or("").to_owned();
        let what = a.get("what").unwrap_or("").to_owned();
        let decorators = a.get("decorators").map(str::to_owned);
        let options = a
            .get("output_options")
            .filter(|o| !o.is_empty())
            .map(str::to_owned);
        let changed = log.change(|c| {
            let r = c.apply_parts(
                &what,
                output.as_bytes(),
                decorators.as_deref(),
                options.as_deref(),
            );
            if let Ok(name) = &r {
                c.mark_reconfigured(name);
            }
            r
        });
        match changed {
            Ok((Ok(_), notices)) => {
                for n in notices {
                    let _ = writeln!(out, "{n}");
                }
            }
            Ok((Err(errors), _)) => {
                for e in errors {
                    let _ = writeln!(out, "{e}");
                }
            }
            Err(e) => {
                let _ = writeln!(out, "{e}");
            }
        }
    }
    if a.flag("list") {
        out.push_str(&crate::xlog::listing(&log.describe()));
    }
    if a.flag("rotate") {
        log.rotate();
    }
    Reply::Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_as_hotspot_lists_them() {
        let names: Vec<&str> = SPECS.iter().map(|s| s.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
    }
}
