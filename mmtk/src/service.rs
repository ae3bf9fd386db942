//! What an operator reaches with `jcmd`: `GC.heap_info` and `GC.run`, registered as the
//! embedder's diagnostic commands. The handlers hold no `VmHandle` (the VM owns them: a
//! handle would keep it alive).

use std::sync::atomic::Ordering;

use rtvm::DiagnosticCommand;

use crate::config::Plan;
use crate::{state, Language, Mmtk};

pub(crate) fn register<L: Language>(mmtk: &Mmtk<L>) {
    let config = *mmtk.config();
    let info = DiagnosticCommand::new(
        "GC.heap_info",
        "Provide generic Java heap info.",
        move |_args, out| {
            out.push_str(&heap_info::<L>(&config));
            Ok(())
        },
    )
    .impact("Medium")
    .permission("java.lang.management.ManagementPermission(monitor)");
    let run = DiagnosticCommand::new(
        "GC.run",
        "Call java.lang.System.gc().",
        move |_args, _out| {
            if config.plan != Plan::NoGC {
                let tls = mmtk::util::opaque_pointer::VMMutatorThread(
                    mmtk::util::opaque_pointer::VMThread::UNINITIALIZED,
                );
                state::request_collection::<L>(tls);
            }
            Ok(())
        },
    )
    .impact("Medium: Depends on Java heap size and content.");
    for command in [info, run] {
        let name = command.name().to_owned();
        if let Err(e) = mmtk.vm().register_diagnostic_command(command) {
            log::warn!(target: "gc", "{name} is not available: {e}");
        }
    }
}

/// `GC.heap_info`'s text.
pub(crate) fn heap_info<L: Language>(config: &crate::Config) -> String {
    let f = state::heap_figures::<L>(config);
    let collections = state::COLLECTIONS.load(Ordering::Acquire);
    let pauses = state::PAUSE_NANOS.load(Ordering::Acquire) as f64 / 1e6;
    format!(
        " MMTk {} heap   total {}K, used {}K [{:#018x}, {:#018x})\n  \
         trigger {}, max {}K, {} GC threads{}\n  \
         collections {collections}, total pause {pauses:.3}ms\n",
        config.plan,
        f.total >> 10,
        f.used >> 10,
        f.range.start,
        f.range.end,
        config.trigger_text(),
        f.reserved >> 10,
        config.threads,
        if config.transparent_hugepages {
            ", transparent huge pages"
        } else {
            ""
        },
    )
}
