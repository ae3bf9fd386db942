//! What the operator asked for, read once from rtvm's flags: the plan, the heap trigger, the
//! GC worker count, THP.

use std::fmt;

use rtvm::flags::{flag, Flags, Source};

/// The plans the binding runs: those whose roots may be pinning (conservative) roots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Plan {
    /// Mark-region with opportunistic defragmentation (objects found from a stack are pinned).
    Immix,
    /// Immix with a sticky mark bit: nursery collections without a copying nursery.
    StickyImmix,
    /// Mark-sweep on segregated free lists.
    MarkSweep,
    /// Allocation only: the heap is never collected.
    NoGC,
}

/// The names `-XX:MMTkPlan` accepts, in the order messages list them.
pub const ACCEPTED_PLANS: &str = "Immix, StickyImmix, MarkSweep, NoGC";

impl Plan {
    /// The plan's name, as `-XX:MMTkPlan` spells it and `-Xlog:gc` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Plan::Immix => "Immix",
            Plan::StickyImmix => "StickyImmix",
            Plan::MarkSweep => "MarkSweep",
            Plan::NoGC => "NoGC",
        }
    }

    /// Parses `-XX:MMTkPlan=<name>` (case as written).
    pub fn parse(name: &str) -> Result<Plan, ConfigError> {
        Ok(match name {
            "Immix" => Plan::Immix,
            "StickyImmix" => Plan::StickyImmix,
            "MarkSweep" => Plan::MarkSweep,
            "NoGC" => Plan::NoGC,
            _ => {
                let why = match name {
                    "SemiSpace" | "GenCopy" => "it copies every object it reaches",
                    "GenImmix" => "its nursery copies every object it reaches",
                    "MarkCompact" | "Compressor" => "it slides every object it reaches",
                    "PageProtect" => {
                        "it is MMTk's debugging plan (a page per object, freed pages protected)"
                    }
                    "ConcurrentImmix" => {
                        "it marks while mutators run, which rtvm's stop-the-world roots do not support"
                    }
                    _ => return Err(ConfigError::UnknownPlan(name.to_owned())),
                };
                return Err(ConfigError::RefusedPlan {
                    plan: name.to_owned(),
                    why,
                });
            }
        })
    }

    pub(crate) fn selector(self) -> mmtk::util::options::PlanSelector {
        use mmtk::util::options::PlanSelector;
        match self {
            Plan::Immix => PlanSelector::Immix,
            Plan::StickyImmix => PlanSelector::StickyImmix,
            Plan::MarkSweep => PlanSelector::MarkSweep,
            Plan::NoGC => PlanSelector::NoGC,
        }
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The smallest heap the binding accepts: MMTk's spaces each take whole 4 MiB chunks, and
/// StickyImmix was measured to crash MMTk with 4–6 MiB heaps (a panic in its allocator).
pub const MIN_HEAP: usize = 8 << 20;

/// How MMTk decides when to collect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// A heap of this many bytes (`-Xmx` alone, or `-Xms` equal to `-Xmx`).
    Fixed(usize),
    /// Between `-Xms` and `-Xmx`, by MMTk's heuristics.
    Dynamic {
        /// `-Xms`.
        min: usize,
        /// `-Xmx`.
        max: usize,
    },
}

impl Trigger {
    /// The most the heap may grow to.
    pub fn max(self) -> usize {
        match self {
            Trigger::Fixed(n) => n,
            Trigger::Dynamic { max, .. } => max,
        }
    }
}

/// Everything MMTk is built with. A process has one MMTk: a second VM must ask for the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// `-XX:MMTkPlan`.
    pub plan: Plan,
    /// `-Xmx`/`-Xms`.
    pub trigger: Trigger,
    /// `-XX:ParallelGCThreads` (ergonomics when not given: rtvm's worker count).
    pub threads: usize,
    /// `-XX:+UseTransparentHugePages`.
    pub transparent_hugepages: bool,
}

impl Config {
    /// Reads the configuration from the VM's flags.
    ///
    /// * `-Xmx` (`MaxHeapSize`, ergonomic when not given) is the heap's limit; with `-Xms`
    ///   (`InitialHeapSize`) given on the command line and below it, the heap varies between
    ///   the two (MMTk's `DynamicHeapSize`); otherwise it is fixed at `-Xmx`
    ///   (`FixedHeapSize`): an ergonomic initial size is no request for a growing heap.
    /// * `-XX:ParallelGCThreads`: the GC workers (not given: rtvm's ergonomic count, as for
    ///   its worker gang); 0 is refused (MMTk needs a worker).
    pub fn from_flags(flags: &Flags) -> Result<Config, ConfigError> {
        let plan = Plan::parse(flags.get(flag::MMTkPlan))?;
        let max = flags.get(flag::MaxHeapSize);
        let initial = flags.get(flag::InitialHeapSize);
        if max < MIN_HEAP {
            return Err(ConfigError::HeapTooSmall { max });
        }
        let initial_given = matches!(
            flags.origin(flag::InitialHeapSize).source,
            Source::CommandLine | Source::Environment | Source::ConfigFile
        );
        let trigger = if initial_given && initial < max {
            Trigger::Dynamic {
                min: initial.max(MIN_HEAP),
                max,
            }
        } else {
            Trigger::Fixed(max)
        };
        // Ergonomics set it from the processors when it was not given: 0 was asked for.
        let threads = flags.get(flag::ParallelGCThreads) as usize;
        if threads == 0 {
            return Err(ConfigError::NoWorkers);
        }
        Ok(Config {
            plan,
            trigger,
            threads,
            transparent_hugepages: flags.get(flag::UseTransparentHugePages),
        })
    }

    /// `FixedHeapSize 64M` / `DynamicHeapSize 16M..64M`, for logs and messages.
    pub fn trigger_text(&self) -> String {
        match self.trigger {
            Trigger::Fixed(n) => format!("FixedHeapSize {}", size_text(n)),
            Trigger::Dynamic { min, max } => {
                format!("DynamicHeapSize {}..{}", size_text(min), size_text(max))
            }
        }
    }
}

/// `64M`, `1G`, `1536K`: the largest unit that divides the size exactly, as `-Xmx` is written.
pub(crate) fn size_text(n: usize) -> String {
    for (unit, shift) in [("G", 30), ("M", 20), ("K", 10)] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    format!("{n}B")
}

/// Why the configuration cannot start MMTk: each one sentence naming the option.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// `-XX:MMTkPlan=<name>` names no MMTk plan.
    UnknownPlan(String),
    /// A real MMTk plan that cannot take conservative roots.
    RefusedPlan {
        /// The plan.
        plan: String,
        /// Why it cannot.
        why: &'static str,
    },
    /// `-Xmx` below [`MIN_HEAP`].
    HeapTooSmall {
        /// `MaxHeapSize`.
        max: usize,
    },
    /// `-XX:ParallelGCThreads=0`.
    NoWorkers,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::UnknownPlan(name) => write!(
                f,
                "Improperly specified VM option 'MMTkPlan={name}': unknown plan; accepted plans are {ACCEPTED_PLANS}"
            ),
            ConfigError::RefusedPlan { plan, why } => write!(
                f,
                "Improperly specified VM option 'MMTkPlan={plan}': the MMTk plan {plan} cannot take the conservative (pinning) roots rtvm's stacks give: {why}; use one of {ACCEPTED_PLANS}"
            ),
            ConfigError::HeapTooSmall { max } => write!(
                f,
                "Too small maximum heap for MMTk: MaxHeapSize={max} ({}); the MMTk heap needs at least {}",
                size_text(*max),
                size_text(MIN_HEAP)
            ),
            ConfigError::NoWorkers => f.write_str(
                "Improperly specified VM option 'ParallelGCThreads=0': MMTk needs at least one GC worker thread",
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_parse_refuse_and_reject() {
        for p in [Plan::Immix, Plan::StickyImmix, Plan::MarkSweep, Plan::NoGC] {
            assert_eq!(Plan::parse(p.name()), Ok(p));
        }
        for refused in [
            "SemiSpace",
            "GenCopy",
            "GenImmix",
            "MarkCompact",
            "Compressor",
            "PageProtect",
            "ConcurrentImmix",
        ] {
            let e = Plan::parse(refused).unwrap_err();
            assert!(matches!(e, ConfigError::RefusedPlan { .. }), "{e}");
            assert!(e.to_string().contains(refused), "{e}");
        }
        let e = Plan::parse("immix").unwrap_err();
        assert_eq!(e, ConfigError::UnknownPlan("immix".into()));
        assert!(e.to_string().ends_with(ACCEPTED_PLANS), "{e}");
    }

    #[test]
    fn sizes_print_as_written() {
        assert_eq!(size_text(64 << 20), "64M");
        assert_eq!(size_text(1 << 30), "1G");
        assert_eq!(size_text(1536 << 10), "1536K");
        assert_eq!(size_text(1000), "1000B");
    }
}
