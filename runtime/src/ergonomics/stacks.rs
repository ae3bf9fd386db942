//! Thread stacks: sizes (`-Xss`, `VMThreadStackSize`), HotSpot's zones (in 4K pages), the
//! alternate signal stack, the THP mitigation, and HotSpot's too-small checks.

use rtvm_flags::value::{format_page_size, K, M};
use rtvm_flags::{flag, Settings};
use rtvm_os_linux::pages::PageInfo;
use rtvm_os_linux::{GuardZones, PretouchRequest};

use super::Machine;
use crate::error::CreateError;
use crate::threads::StackPolicy;

/// The stack policy and the sentence `-Xlog:pagesize` prints about the mitigation.
pub(super) fn decide(
    s: &Settings,
    pages: &PageInfo,
    machine: &Machine,
) -> Result<(StackPolicy, String), CreateError> {
    let page = machine.base_page;
    let system_default = machine.stack_rlimit.unwrap_or(8 * M).min(M * K) as usize;
    let k_to_bytes = |k: i64| match k {
        0 => system_default,
        k => k as usize * K as usize,
    };
    let pages_to_bytes = |n: i64| (n as usize * 4096).div_ceil(page) * page;
    let (mitigated, reason) = mitigation(s.get(flag::DisableTHPStackMitigation), pages);
    let policy = StackPolicy {
        mitigated,
        thp_page_size: pages.thp.pmd_size,
        page,
        min_usable: machine.min_usable_stack,
        delay_start: s.get(flag::DelayThreadStartALot),
        pretouch_stacks: s.get(flag::AlwaysPreTouchStacks),
        pretouch_request: PretouchRequest {
            page_size: page,
            use_populate_write: s.get(flag::UseMadvPopulateWrite),
        },
        java_stack_size: k_to_bytes(s.get(flag::ThreadStackSize)),
        vm_stack_size: k_to_bytes(s.get(flag::VMThreadStackSize)),
        zones: GuardZones {
            red: pages_to_bytes(s.get(flag::StackRedPages)),
            yellow: pages_to_bytes(s.get(flag::StackYellowPages)),
            reserved: pages_to_bytes(s.get(flag::StackReservedPages)),
        },
        shadow_zone: pages_to_bytes(s.get(flag::StackShadowPages)),
        alt_stack_size: machine.alt_stack_size,
        cache_size: s.get(flag::ThreadStackCacheSize),
    };
    // HotSpot's checks and words; printed on stdout with a leading empty line.
    let java_min = policy.minimum_java_stack_size();
    if s.get(flag::ThreadStackSize) != 0 && policy.java_stack_size < java_min {
        return Err(CreateError::args_stdout(format!(
            "\nThe Java thread stack size specified is too small. Specify at least {}k\n",
            java_min / 1024
        )));
    }
    let vm_min = policy.minimum_vm_stack_size();
    if s.get(flag::VMThreadStackSize) != 0 && policy.vm_stack_size < vm_min {
        return Err(CreateError::args_stdout(format!(
            "\nThe VMThreadStackSize specified is too small. Specify at least {}k\n",
            vm_min / 1024
        )));
    }
    Ok((policy, reason))
}

/// Whether the THP stack mitigation is on, with the sentence `-Xlog:pagesize` prints about
/// it. It does not depend on the THP mode at start-up: an operator can switch it to `always`
/// (or enable an mTHP size) at any time.
pub(super) fn mitigation(disable: bool, pages: &PageInfo) -> (bool, String) {
    let thp = &pages.thp;
    let always: Vec<String> = thp
        .mthp_always()
        .iter()
        .map(|&s| format_page_size(s as u64))
        .collect();
    let always = if always.is_empty() {
        "none".to_string()
    } else {
        always.join(", ")
    };
    let state = format!(
        "THP mode: {}; mTHP sizes effectively always: {always}",
        thp.mode
    );
    if disable {
        return (false, format!("{state}: stacks are mapped read-write and unadvised, their guards placed late by each thread (-XX:+DisableTHPStackMitigation)"));
    }
    (
        true,
        format!("{state}: stacks are MADV_NOHUGEPAGE with their guards in place before the thread starts, whatever the mode is now (it can change at run time)"),
    )
}
