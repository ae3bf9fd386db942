//! Kernel-level fault injection for tests: make a system call fail with a chosen errno in
//! this process, with a seccomp filter.
//!
//! This is how rtvm's tests show that a fallback really runs — `MADV_POPULATE_WRITE`
//! answering `EINVAL` as on a kernel before 5.14 — without a special build or a hook in the
//! code under test. A seccomp filter cannot be removed: call these only in a child process
//! made for the test.

use nix::errno::Errno;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64

const SECCOMP_DATA_NR: u32 = 0;
const SECCOMP_DATA_ARCH: u32 = 4;
/// Low 32 bits of `args[2]` (little endian).
const SECCOMP_DATA_ARG2_LO: u32 = 16 + 2 * 8;

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// Makes every `madvise(_, _, advice)` in this process (all threads, present and future)
/// fail with `errno` from now on. Irreversible.
pub fn deny_madvise_advice(advice: i32, errno: Errno) -> Result<(), Errno> {
    let ld = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let jeq = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
    let ret = libc::BPF_RET | libc::BPF_K;
    let program = [
        stmt(ld, SECCOMP_DATA_ARCH),
        jump(jeq, AUDIT_ARCH, 0, 5),
        stmt(ld, SECCOMP_DATA_NR),
        jump(jeq, libc::SYS_madvise as u32, 0, 3),
        stmt(ld, SECCOMP_DATA_ARG2_LO),
        jump(jeq, advice as u32, 0, 1),
        stmt(
            ret,
            libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA),
        ),
        stmt(ret, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes plain integers. seccomp(SECCOMP_SET_MODE_FILTER)
    // reads `prog`, which points at `program`, alive for the call; the filter only makes
    // matching madvise calls fail.
    unsafe {
        Errno::result(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        Errno::result(libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
            &prog as *const libc::sock_fprog,
        ))?;
    }
    log::warn!(target: "os", "fault injection: madvise advice {advice} now fails with {errno:?}");
    Ok(())
}
