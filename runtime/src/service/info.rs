//! `jcmd VM.info`: HotSpot's sections, with what rtvm has in them — the summary (command
//! line, host, time), the process (heap, threads, VM arguments, flags, signal handlers,
//! native memory) and the system (OS, kernel, libc, limits, memory, CPUs, container).

use std::fmt::Write as _;

use rtvm_flags::print_command_line_flags;

use super::context::Context;
use super::dcmd::{Args, Reply};
use crate::version::{profile, VERSION, VM_NAME};

fn os_pretty_name() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_owned())
        })
        .unwrap_or_else(|| "Linux".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned())
}

fn elapsed_words(secs: f64) -> String {
    let s = secs as u64;
    format!(
        "elapsed time: {secs:.6} seconds ({}d {}h {}m {}s)",
        s / 86400,
        s % 86400 / 3600,
        s % 3600 / 60,
        s % 60
    )
}

/// The `VM.info` text.
pub(crate) fn vm_info(ctx: &Context, _: &Args) -> Reply {
    let mut s = String::new();
    let arch = std::env::consts::ARCH;
    let _ = writeln!(s, "#");
    let _ = writeln!(
        s,
        "# JRE version: rtvm Runtime Environment ({VERSION}) (build {VERSION}, {})",
        profile()
    );
    let _ = writeln!(
        s,
        "# Java VM: {VM_NAME} ({VERSION}, {}, linux-{arch})",
        profile()
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "---------------  S U M M A R Y ------------");
    let _ = writeln!(s);
    let mut cmd = ctx.command.jvm_args.join(" ");
    if let Some(c) = &ctx.command.java_command {
        if !cmd.is_empty() {
            cmd.push(' ');
        }
        cmd.push_str(c);
    }
    let _ = writeln!(s, "Command Line: {cmd}");
    let _ = writeln!(s);
    let mem_g = rtvm_os_linux::system::physical_memory().unwrap_or(0) >> 30;
    let _ = writeln!(
        s,
        "Host: {}, {} cores, {mem_g}G, {}",
        cpu_model(),
        rtvm_os_linux::system::configured_processors(),
        os_pretty_name()
    );
    let _ = writeln!(
        s,
        "Time: {} {}",
        rtvm_os_linux::system::strftime_now("%a %b %e %H:%M:%S %Y %Z"),
        elapsed_words(ctx.uptime_secs())
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "---------------  P R O C E S S  ---------------");
    let _ = writeln!(s);
    let heap = &ctx.heap;
    let stats = heap.stats();
    let _ = writeln!(
        s,
        "Heap address: {:#018x}, size: {} MB, on {}",
        heap.base(),
        stats.reserved >> 20,
        heap.page_description()
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "Heap:");
    let _ = writeln!(
        s,
        " rtvm heap   total {}K, used {}K [{:#018x}, {:#018x})",
        stats.committed >> 10,
        stats.used >> 10,
        heap.base(),
        heap.base() + stats.reserved
    );
    let _ = writeln!(s);
    let threads = ctx.registry.list();
    let _ = writeln!(s, "Threads: {}", threads.len());
    for t in &threads {
        let l = &t.layout;
        let _ = writeln!(
            s,
            "  \"{}\" {} tid={} stack [{:#018x}, {:#018x})",
            t.name,
            t.kind,
            t.tid(),
            l.usable.start,
            l.usable.end
        );
    }
    let _ = writeln!(s);
    s.push_str(&super::dcmd::vm_arguments(ctx));
    let _ = writeln!(s);
    let _ = writeln!(s, "[Global flags]");
    let mut flags = Vec::new();
    let _ = print_command_line_flags(&mut flags, &ctx.flags.snapshot());
    let _ = writeln!(s, "{}", String::from_utf8_lossy(&flags).trim_end());
    let _ = writeln!(s);
    let _ = writeln!(s, "Signal Handlers:");
    for line in rtvm_os_linux::signals::describe_actions() {
        let _ = writeln!(s, "{line:>8}");
    }
    let _ = writeln!(s);
    match ctx.native_memory() {
        Some(n) => s.push_str(&n.report_for_jcmd(crate::nmt::NmtScale::Kilobytes)),
        None => {
            let _ = writeln!(s, "Native Memory Tracking:");
            let _ = writeln!(s, "Native memory tracking is not enabled");
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "---------------  S Y S T E M  ---------------");
    let _ = writeln!(s);
    let _ = writeln!(s, "OS:");
    let _ = writeln!(s, "{}", os_pretty_name());
    let kernel = std::fs::read_to_string("/proc/version").unwrap_or_default();
    let _ = writeln!(s, "uname: {}", kernel.trim());
    let _ = writeln!(s, "rlimit (soft/hard): {}", rlimits());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let _ = writeln!(
        s,
        "load average: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "/proc/meminfo:");
    s.push_str(&std::fs::read_to_string("/proc/meminfo").unwrap_or_default());
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "CPU: total {} (initial active {})",
        rtvm_os_linux::system::configured_processors(),
        rtvm_os_linux::system::available_processors()
    );
    let _ = writeln!(s, "{}", cpu_model());
    let _ = writeln!(s);
    let phys = rtvm_os_linux::system::physical_memory().unwrap_or(0);
    let _ = writeln!(
        s,
        "Memory: {}k page, physical {}k",
        rtvm_os_linux::base_page_size() >> 10,
        phys >> 10
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "vm_info: {VM_NAME} ({VERSION}) for linux-{arch}, built {}",
        profile()
    );
    Reply::Ok(s)
}

fn rlimits() -> String {
    use rtvm_os_linux::system::{soft_limit, Limit};
    let show = |l: Limit| {
        soft_limit(l).map_or("infinity".to_owned(), |v| {
            if v == u64::MAX {
                "infinity".to_owned()
            } else {
                format!("{}k", v >> 10)
            }
        })
    };
    format!(
        "AS {}, DATA {}, NPROC {}, NOFILE {}",
        show(Limit::AddressSpace),
        show(Limit::Data),
        soft_limit(Limit::Processes).map_or("infinity".into(), |v| if v == u64::MAX {
            "infinity".into()
        } else {
            v.to_string()
        }),
        soft_limit(Limit::OpenFiles).map_or("infinity".into(), |v| if v == u64::MAX {
            "infinity".into()
        } else {
            v.to_string()
        }),
    )
}
