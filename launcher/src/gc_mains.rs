//! The MMTk workloads as launcher mains: `BinaryTrees` and `GCBench` (in `rtvm_mmtk::workloads`,
//! where debug builds optimize MMTk's code), their endings in java's words.

use rtvm::Vm;
use rtvm_mmtk::workloads::{self, WorkloadError};

use crate::{Exit, MainResult, CREATE_FAILED};

fn ending(e: WorkloadError) -> Box<dyn std::error::Error + Send + Sync> {
    match e {
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
