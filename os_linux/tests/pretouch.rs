//! Pretouch: residency through `VmRSS`/`mincore`, huge pages through `AnonHugePages`,
//! contents through concurrent writers, fallbacks through seccomp fault injection.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;

use common::*;
use rtvm_os_linux::pages::PageInfo;
use rtvm_os_linux::pretouch::{populate_write_disabled, populate_write_supported};
use rtvm_os_linux::{
    base_page_size, procfs, Errno, HugePageAdvice, PretouchRequest, Primitive, Reservation,
};
use rtvm_testkit::{kernel, skip, Outcome};
use serial_test::serial;

rtvm_testkit::tests!(
    pretouch_one_gib_with_populate_write,
    pretouch_one_gib_with_atomic_add,
    pretouch_keeps_concurrent_writes_populate_write,
    pretouch_keeps_concurrent_writes_atomic_add,
    madv_hugepage_then_pretouch_gives_huge_pages,
    madv_nohugepage_refuses_collapse_while_unadvised_memory_collapses,
    populate_write_refusals_fall_back_and_still_populate,
    misaligned_pretouch_is_an_error_not_a_kernel_verdict,
    populate_write_hard_errors_name_the_range,
    pretouch_of_uncommitted_memory_is_refused,
);

/// `MADV_POPULATE_WRITE` as the kernel's own facts predict it (release, seccomp), checked
/// against what rtvm's probe found; a skip where the kernel cannot do it.
fn populate_write_here() -> Outcome {
    let expected = kernel::expects_populate_write();
    if expected {
        assert!(
            populate_write_supported(),
            "kernel {:?} without seccomp has MADV_POPULATE_WRITE, rtvm's probe says no",
            kernel::release()
        );
        return Ok(());
    }
    if populate_write_supported() {
        return Ok(());
    }
    skip(format!(
        "MADV_POPULATE_WRITE is not usable here (kernel {:?}, seccomp mode {})",
        kernel::release(),
        kernel::seccomp_mode()
    ))
}

fn request(populate: bool) -> PretouchRequest {
    PretouchRequest {
        page_size: base_page_size(),
        use_populate_write: populate,
    }
}

/// In a child process of its own (RSS is process-wide: nothing else may run meanwhile), a
/// 1 GiB pretouch raises VmRSS by at least 1 GiB and mincore finds every page.
fn pretouch_gib_with(populate: bool) -> Outcome {
    let test = if populate {
        "pretouch_one_gib_with_populate_write"
    } else {
        "pretouch_one_gib_with_atomic_add"
    };
    if child_role().is_none() {
        let out = run_child(test, "gib");
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("GIB OK"),
            "{}",
            describe(&out)
        );
        return Ok(());
    }
    let r = Reservation::reserve(GIB, 0).unwrap();
    r.commit(0, GIB).unwrap();
    let before = rss();
    let done = r.pretouch(0, GIB, &request(populate)).unwrap();
    let grown = rss().saturating_sub(before);
    let expected = if populate {
        Primitive::PopulateWrite
    } else {
        Primitive::AtomicAdd
    };
    assert_eq!(done.primitive, expected);
    assert_eq!(done.bytes, GIB);
    assert!(
        grown >= GIB as u64,
        "RSS rose by {grown} bytes, less than 1 GiB ({expected})"
    );
    assert_eq!(
        r.resident_bytes(0, GIB).unwrap(),
        GIB,
        "mincore: every page resident"
    );
    println!("{expected}: 1 GiB in {:?}; GIB OK", done.elapsed);
    Ok(())
}

#[serial]
fn pretouch_one_gib_with_populate_write() -> Outcome {
    populate_write_here()?;
    pretouch_gib_with(true)
}

#[serial]
fn pretouch_one_gib_with_atomic_add() -> Outcome {
    pretouch_gib_with(false)
}

/// Two writers fill the range with patterns while it is pretouched; afterwards every word
/// holds exactly what its writer stored.
fn concurrent_writers_keep_their_patterns(populate: bool) {
    let len = GIB;
    let r = Reservation::reserve(len, 0).unwrap();
    r.commit(0, len).unwrap();
    let words = r.atomic_words(0, len).unwrap();
    let start = Barrier::new(3);
    let stop = AtomicBool::new(false);
    let pattern = |i: usize, pass: u64| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ pass;
    let passes = std::thread::scope(|s| {
        let writer = |parity: usize| {
            let (start, stop, words) = (&start, &stop, words);
            s.spawn(move || {
                start.wait();
                let mut pass = 0u64;
                // Interleaved words: writer 0 owns even indices, writer 1 odd ones. Each pass
                // strides by 4 KiB pages so the writers race the pretouch across the range.
                loop {
                    pass += 1;
                    for i in (parity..words.len()).step_by(2 * 64) {
                        words[i].store(pattern(i, pass), Ordering::Relaxed);
                    }
                    if stop.load(Ordering::Relaxed) {
                        return pass;
                    }
                }
            })
        };
        let a = writer(0);
        let b = writer(1);
        start.wait();
        let done = r.pretouch(0, len, &request(populate)).unwrap();
        assert_eq!(
            done.primitive,
            if populate {
                Primitive::PopulateWrite
            } else {
                Primitive::AtomicAdd
            }
        );
        stop.store(true, Ordering::Relaxed);
        (a.join().unwrap(), b.join().unwrap())
    });
    let mut checked = 0;
    for (i, w) in words.iter().enumerate() {
        let got = w.load(Ordering::Relaxed);
        if i % 128 == 0 {
            assert_eq!(got, pattern(i, passes.0), "word {i} lost a write");
            checked += 1;
        } else if i % 128 == 1 {
            assert_eq!(got, pattern(i, passes.1), "word {i} lost a write");
            checked += 1;
        } else {
            assert_eq!(got, 0, "word {i} was never written and must still be zero");
        }
    }
    assert_eq!(r.resident_bytes(0, len).unwrap(), len);
    println!("{checked} words verified after {passes:?} writer passes");
}

#[serial]
fn pretouch_keeps_concurrent_writes_populate_write() -> Outcome {
    populate_write_here()?;
    concurrent_writers_keep_their_patterns(true);
    Ok(())
}

#[serial]
fn pretouch_keeps_concurrent_writes_atomic_add() -> Outcome {
    concurrent_writers_keep_their_patterns(false);
    Ok(())
}

fn anon_huge_kb(r: &Reservation) -> u64 {
    procfs::totals(&procfs::smaps_overlapping(r.base(), r.base() + r.len()).unwrap()).anon_huge_kb
}

/// The THP mode and PMD size from sysfs (checked against rtvm's detection), or a skip where
/// huge pages cannot be asked for.
fn thp_here() -> Result<(String, usize), rtvm_testkit::Skip> {
    let (mode, pmd) = match (kernel::thp_mode(), kernel::thp_pmd_size()) {
        (Some(m), Some(p)) => (m, p),
        _ => {
            return Err(rtvm_testkit::Skip(
                "the kernel has no transparent huge pages".into(),
            ))
        }
    };
    let detected = PageInfo::detect().thp;
    assert_eq!(detected.mode.to_string(), mode, "rtvm's THP mode vs sysfs");
    assert_eq!(detected.pmd_size, Some(pmd), "rtvm's PMD size vs sysfs");
    if mode == "never" {
        return Err(rtvm_testkit::Skip(
            "THP mode is never: huge pages cannot be asked for".into(),
        ));
    }
    Ok((mode, pmd))
}

#[serial]
fn madv_hugepage_then_pretouch_gives_huge_pages() -> Outcome {
    let (_, pmd) = thp_here()?;
    for populate in [true, false] {
        let len = 64 * MIB;
        let r = Reservation::reserve(len, pmd).unwrap();
        r.commit(0, len).unwrap();
        r.advise(0, len, HugePageAdvice::HugePage).unwrap();
        r.pretouch(0, len, &request(populate)).unwrap();
        let entries = procfs::smaps_overlapping(r.base(), r.base() + len).unwrap();
        assert!(entries.iter().all(|e| e.has_flag("hg")), "{entries:?}");
        let huge = anon_huge_kb(&r);
        assert!(
            huge * 1024 >= len as u64 * 9 / 10,
            "AnonHugePages {huge} kB < 90% of {len} (populate={populate})"
        );
    }
    Ok(())
}

#[serial]
fn madv_nohugepage_refuses_collapse_while_unadvised_memory_collapses() -> Outcome {
    let (mode, pmd) = thp_here()?;
    let len = 8 * MIB;

    // Advised NOHUGEPAGE: `nh`, no huge pages after pretouch, collapse refused.
    let nh = Reservation::reserve(len, pmd).unwrap();
    nh.commit(0, len).unwrap();
    nh.advise(0, len, HugePageAdvice::NoHugePage).unwrap();
    nh.pretouch(0, len, &request(true)).unwrap();
    let entries = procfs::smaps_overlapping(nh.base(), nh.base() + len).unwrap();
    assert!(entries.iter().all(|e| e.has_flag("nh")), "{entries:?}");
    assert_eq!(anon_huge_kb(&nh), 0);
    let refused = nh.collapse(0, len).unwrap_err();
    assert_eq!(refused.errno, Errno::EINVAL, "{refused}");
    assert_eq!(anon_huge_kb(&nh), 0);

    // Never advised, one resident page per 2 MiB region (like a fresh stack's top frame):
    // MADV_COLLAPSE ignores the sysfs mode and makes huge pages.
    let plain = Reservation::reserve(len, pmd).unwrap();
    plain.commit(0, len).unwrap();
    let words = plain.atomic_words(0, len).unwrap();
    for region in 0..len / pmd {
        words[(region * pmd + pmd - 4096) / 8].store(region as u64 + 1, Ordering::Relaxed);
    }
    let before = plain.resident_bytes(0, len).unwrap();
    assert_eq!(before, len / pmd * base_page_size());
    plain
        .collapse(0, len)
        .unwrap_or_else(|e| panic!("collapse in {mode} mode: {e}"));
    assert_eq!(
        anon_huge_kb(&plain) * 1024,
        len as u64,
        "every region collapsed"
    );
    assert_eq!(
        plain.resident_bytes(0, len).unwrap(),
        len,
        "collapse made all of it resident"
    );
    for region in 0..len / pmd {
        assert_eq!(
            words[(region * pmd + pmd - 4096) / 8].load(Ordering::Relaxed),
            region as u64 + 1
        );
    }
    Ok(())
}

/// `EINVAL` (a kernel before 5.14), `EPERM` (a seccomp profile that refuses advice it does
/// not know) and `ENOSYS` all mean "this process cannot use the primitive": before the probe
/// and after it, the fallback makes every page resident and the switch is remembered.
fn populate_write_refusals_fall_back_and_still_populate() -> Outcome {
    if let Some(role) = child_role() {
        let (when, errno) = role.split_once('-').unwrap();
        let errno = match errno {
            "einval" => Errno::EINVAL,
            "eperm" => Errno::EPERM,
            _ => Errno::ENOSYS,
        };
        let r = Reservation::reserve(256 * MIB, 0).unwrap();
        r.commit(0, 256 * MIB).unwrap();
        let supported_here = if when == "before" {
            rtvm_os_linux::fault::deny_madvise_advice(23, errno).unwrap();
            assert!(!populate_write_supported(), "the probe must see the denial");
            false
        } else {
            let s = populate_write_supported();
            rtvm_os_linux::fault::deny_madvise_advice(23, errno).unwrap();
            s
        };
        let done = r.pretouch(0, 128 * MIB, &request(true)).unwrap();
        assert_eq!(done.primitive, Primitive::AtomicAdd);
        assert_eq!(r.resident_bytes(0, 128 * MIB).unwrap(), 128 * MIB);
        if supported_here {
            assert!(populate_write_disabled(), "the first refusal is remembered");
        }
        let again = r.pretouch(128 * MIB, 128 * MIB, &request(true)).unwrap();
        assert_eq!(again.primitive, Primitive::AtomicAdd);
        assert_eq!(r.resident_bytes(0, 256 * MIB).unwrap(), 256 * MIB);
        println!("FALLBACK OK");
        return Ok(());
    }
    for role in [
        "before-einval",
        "after-einval",
        "before-eperm",
        "after-eperm",
        "before-enosys",
        "after-enosys",
    ] {
        let out = run_child("populate_write_refusals_fall_back_and_still_populate", role);
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("FALLBACK OK"),
            "{role}: {}",
            describe(&out)
        );
    }
    Ok(())
}

/// A caller's mistake is the caller's error: a misaligned pretouch fails with `EINVAL` before
/// any system call, and the next aligned one still uses `MADV_POPULATE_WRITE`.
fn misaligned_pretouch_is_an_error_not_a_kernel_verdict() -> Outcome {
    if child_role().is_some() {
        let r = Reservation::reserve(16 * MIB, 0).unwrap();
        r.commit(0, 16 * MIB).unwrap();
        let expected = rtvm_os_linux::pretouch::primitive_for(&request(true));
        for (offset, len) in [(1, 8192), (4096, 100), (0, 0)] {
            assert_eq!(
                r.pretouch(offset, len, &request(true)).unwrap_err().errno,
                Errno::EINVAL
            );
        }
        // SAFETY: the arguments are rejected before the memory is touched.
        let raw =
            unsafe { rtvm_os_linux::pretouch::pretouch_range(r.base() + 1, 8192, &request(true)) };
        assert_eq!(raw.unwrap_err().errno, Errno::EINVAL);
        assert!(!populate_write_disabled(), "the latch was not tripped");
        let done = r.pretouch(0, 4 * MIB, &request(true)).unwrap();
        assert_eq!(
            done.primitive, expected,
            "the primitive in use is unchanged"
        );
        println!("PRIMITIVE {}", done.primitive);
        return Ok(());
    }
    let out = run_child(
        "misaligned_pretouch_is_an_error_not_a_kernel_verdict",
        "misaligned",
    );
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("PRIMITIVE "),
        "{}",
        describe(&out)
    );
    Ok(())
}

fn populate_write_hard_errors_name_the_range() -> Outcome {
    if child_role().is_none() {
        populate_write_here()?;
    } else {
        let r = Reservation::reserve(16 * MIB, 0).unwrap();
        r.commit(0, 16 * MIB).unwrap();
        assert!(populate_write_supported());
        rtvm_os_linux::fault::deny_madvise_advice(23, Errno::ENOMEM).unwrap();
        let err = r.pretouch(4 * MIB, 4 * MIB, &request(true)).unwrap_err();
        println!("ERROR: {err}");
        println!("BASE: {:#018x}", r.base() + 4 * MIB);
        return Ok(());
    }
    let out = run_child("populate_write_hard_errors_name_the_range", "deny-enomem");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", describe(&out));
    let base = value_after(&stdout, "BASE: ").unwrap();
    let err = value_after(&stdout, "ERROR: ").unwrap();
    assert!(
        err.starts_with(&format!(
            "os::pretouch_memory({base}, 4194304) failed: [{base}, "
        )),
        "{err}"
    );
    assert!(
        err.ends_with("was not made resident; error='Not enough space' (errno=12)"),
        "{err}"
    );
    Ok(())
}

fn pretouch_of_uncommitted_memory_is_refused() -> Outcome {
    let r = Reservation::reserve(4 * MIB, 0).unwrap();
    r.commit(0, MIB).unwrap();
    assert_eq!(
        r.pretouch(0, 2 * MIB, &request(true)).unwrap_err().errno,
        Errno::EINVAL
    );
    assert_eq!(r.pretouch(0, MIB, &request(true)).unwrap().bytes, MIB);
    Ok(())
}
