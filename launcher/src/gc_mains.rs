//! The MMTk workloads as launcher mains: `BinaryTrees` and `GCBench` (in `rtvm_mmtk::workloads`,
//! where debug builds optimize MMTk's code), their endings in java's words.

use std::io::Write as _;

use rtvm::Vm;
use rtvm_mmtk::workloads::{self, WorkloadError};
use rtvm_mmtk::StartError;

use crate::{Exit, MainResult, CREATE_FAILED};

fn ending(e: WorkloadError) -> Box<dyn std::error::Error + Send + Sync> {
    match e {
        // What java refuses while it initializes its heap (`-XX:ParallelGCThreads=0`, a heap
        // below the collector's minimum): java's two lines on stdout, exit 1, nothing more.
        WorkloadError::Refused(StartError::Config(c)) if c.is_initialization_error() => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "Error occurred during initialization of VM\n{c}")
                .and_then(|()| out.flush());
            Exit {
                status: 1,
                message: None,
            }
            .into()
        }
        // A refused plan or heap is a bad option: java's creation-failure lines follow.
        WorkloadError::Refused(e) => Exit {
            status: 1,
            message: Some(format!("{e}\n{}", CREATE_FAILED.trim_end())),
        }
        .into(),
        // `Exception in thread "<name>" java.lang.OutOfMemoryError: Java heap space`, exit 1.
        e @ WorkloadError::OutOfMemory { .. } => Exit {
            status: 1,
            message: Some(e.to_string()),
        }
        .into(),
        WorkloadError::Failed(e) => e,
    }
}

/// `BinaryTrees <depth> [<mutator threads>]`: the Benchmarks Game's binary-trees.
pub fn binary_trees(vm: &Vm, args: &[String]) -> MainResult {
    workloads::binary_trees(vm, args).map_err(ending)
}

/// `GCBench [<mutator threads>]`: Ellis, Kovac and Boehm's GCBench.
pub fn gcbench(vm: &Vm, args: &[String]) -> MainResult {
    workloads::gcbench(vm, args).map_err(ending)
}
