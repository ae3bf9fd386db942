//! Reservations, checked through `/proc/self/maps`, `VmRSS` and `mincore`.

mod common;

use common::*;
use rtvm_os_linux::system::{set_soft_limit, Limit};
use rtvm_os_linux::{base_page_size, Errno, Protection, Reservation};
use serial_test::serial;

/// VmRSS is process-wide: the round trip runs in a child of its own, where no other test
/// allocates or frees while it measures.
#[test]
fn reserve_commit_uncommit_release_round_trip() {
    if child_role().is_none() {
        let out = run_child("reserve_commit_uncommit_release_round_trip", "alone");
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ROUND TRIP OK"),
            "{}",
            describe(&out)
        );
        return;
    }
    let len = 256 * MIB;
    let mut r = Reservation::reserve(len, 2 * MIB).unwrap();
    let (start, end) = (r.base(), r.base() + len);
    assert_eq!(start % (2 * MIB), 0, "aligned as asked");

    // Reserved: one PROT_NONE mapping covering exactly the range, nothing resident.
    let maps = maps_in(start, end);
    assert_eq!(maps.len(), 1, "{maps:?}");
    assert_eq!((maps[0].start, maps[0].end), (start, end));
    assert!(maps[0].is_protected_none());
    assert_eq!(r.resident_bytes(0, len).unwrap(), 0);

    // Commit the first half: read-write in the kernel's view.
    r.commit(0, len / 2).unwrap();
    let maps = maps_in(start, end);
    assert_eq!(maps.len(), 2, "{maps:?}");
    assert_eq!(maps[0].perms, "rw-p");
    assert_eq!((maps[0].start, maps[0].end), (start, start + len / 2));
    assert!(maps[1].is_protected_none());

    // Touching it raises RSS by its size.
    let before = rss();
    let words = r.atomic_words(0, len / 2).unwrap();
    for w in words.iter().step_by(base_page_size() / 8) {
        w.store(1, std::sync::atomic::Ordering::Relaxed);
    }
    let grown = rss().saturating_sub(before);
    assert!(grown >= (len / 2) as u64 * 95 / 100, "RSS grew by {grown}");
    assert_eq!(r.resident_bytes(0, len / 2).unwrap(), len / 2);

    // Uncommit a quarter: RSS drops, the range is PROT_NONE again but still ours.
    let before = rss();
    r.uncommit(0, len / 4).unwrap();
    let dropped = before.saturating_sub(rss());
    assert!(
        dropped >= (len / 4) as u64 * 95 / 100,
        "RSS dropped by {dropped}"
    );
    let maps = maps_in(start, end);
    assert!(maps.iter().all(|m| m.start >= start && m.end <= end));
    assert!(maps
        .iter()
        .find(|m| m.start == start)
        .unwrap()
        .is_protected_none());
    assert_eq!(
        maps.iter().map(|m| m.len()).sum::<usize>(),
        len,
        "still fully reserved"
    );
    assert!(!r.is_committed(0, len / 4));
    assert!(r.is_committed(len / 4, len / 4));

    // Recommit gives fresh zero pages.
    r.commit(0, len / 4).unwrap();
    assert_eq!(
        r.atomic_words(0, 4096).unwrap()[0].load(std::sync::atomic::Ordering::Relaxed),
        0
    );

    // Release: nothing left in the range.
    drop(r);
    assert!(
        maps_in(start, end).is_empty(),
        "release leaves no mapping behind"
    );
    println!("ROUND TRIP OK");
}

#[test]
#[serial]
fn protect_changes_the_kernel_view() {
    let mut r = Reservation::reserve(4 * MIB, 0).unwrap();
    r.commit(0, 4 * MIB).unwrap();
    let page = base_page_size();
    r.protect(MIB, page, Protection::None).unwrap();
    let maps = maps_in(r.base(), r.base() + 4 * MIB);
    let guard = maps.iter().find(|m| m.start == r.base() + MIB).unwrap();
    assert!(guard.is_protected_none() && guard.len() == page);
    assert!(
        r.atomic_words(MIB, page).is_none(),
        "no access to protected memory"
    );
    r.protect(MIB, page, Protection::ReadWrite).unwrap();
    assert!(r.atomic_words(MIB, page).is_some());
    assert_eq!(r.protect(0, page, Protection::Read).map(|_| ()), Ok(()));
    let e = {
        let mut fresh = Reservation::reserve(MIB, 0).unwrap();
        fresh.protect(0, page, Protection::ReadWrite).unwrap_err()
    };
    assert_eq!(
        e.errno,
        Errno::EINVAL,
        "uncommitted memory cannot be protected into use"
    );
}

#[test]
fn commit_failure_leaves_the_range_reserved() {
    if let Some(role) = child_role() {
        assert_eq!(role, "low-rlimit-data");
        // RLIMIT_DATA counts writable private mappings: a reservation (PROT_NONE) is free,
        // a commit is not.
        let r = Reservation::reserve(GIB, 0).unwrap();
        let data_now = rtvm_os_linux::procfs::read_status().unwrap().vm_data_kb;
        set_soft_limit(Limit::Data, data_now * 1024 + 64 * MIB as u64).unwrap();
        let err = r.commit(0, 512 * MIB).unwrap_err();
        println!("ERROR: {err}");
        let maps = maps_in(r.base(), r.base() + GIB);
        println!("MAPS: {}", maps.len());
        assert_eq!(maps.len(), 1, "still one reservation: {maps:?}");
        assert!(maps[0].is_protected_none() && maps[0].start == r.base() && maps[0].len() == GIB);
        r.commit(0, 16 * MIB).unwrap();
        r.atomic_words(0, 16 * MIB).unwrap()[7].store(7, std::sync::atomic::Ordering::Relaxed);
        println!("SMALLER COMMIT OK");
        return;
    }
    let out = run_child(
        "commit_failure_leaves_the_range_reserved",
        "low-rlimit-data",
    );
    let text = describe(&out);
    assert!(out.status.success(), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = value_after(&stdout, "ERROR: ").expect(&text);
    let pattern = "failed; error='Not enough space' (errno=12)";
    assert!(
        line.starts_with("os::commit_memory(0x") && line.ends_with(pattern),
        "{line}"
    );
    assert!(line.contains(", 536870912, 0) failed"), "{line}");
    assert!(stdout.contains("SMALLER COMMIT OK"), "{text}");
}

#[test]
fn reservation_failure_under_rlimit_as() {
    if child_role().is_some() {
        set_soft_limit(Limit::AddressSpace, 8 << 30).unwrap();
        let err = Reservation::reserve(16 * GIB, 0).unwrap_err();
        println!("ERROR: {err}");
        return;
    }
    let out = run_child("reservation_failure_under_rlimit_as", "low-rlimit-as");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        value_after(&stdout, "ERROR: ")
            == Some("os::reserve_memory(17179869184) failed; error='Not enough space' (errno=12)"),
        "{}",
        describe(&out)
    );
}

#[test]
#[serial]
fn naming_is_best_effort() {
    let mut r = Reservation::reserve(MIB, 0).unwrap();
    let named = r.set_name("rtvm heap");
    let maps = maps_in(r.base(), r.base() + MIB);
    if named {
        assert_eq!(maps[0].name, "[anon:rtvm heap]");
    } else {
        println!("skipped name check: this kernel has no PR_SET_VMA_ANON_NAME");
        assert_eq!(maps[0].name, "");
    }
    r.commit(0, MIB).unwrap();
}

/// Addresses the kernel may have handed to someone else after a failed remap are refused by
/// every later operation, and left alone on drop.
#[test]
#[serial]
fn operations_over_a_lost_range_are_refused() {
    let page = rtvm_os_linux::base_page_size();
    let mut r = Reservation::reserve(16 * page, 0).unwrap();
    r.commit(0, 8 * page).unwrap();
    r.lose_range_for_test(4 * page, 4 * page).unwrap();
    let lost = |e: rtvm_os_linux::OsError| assert_eq!(e.errno, Errno::EFAULT, "{e}");
    lost(r.commit(4 * page, page).unwrap_err());
    lost(r.commit(2 * page, 4 * page).unwrap_err());
    lost(r.uncommit(4 * page, page).unwrap_err());
    lost(
        r.protect(4 * page, page, rtvm_os_linux::Protection::Read)
            .unwrap_err(),
    );
    lost(
        r.pretouch(4 * page, page, &rtvm_os_linux::PretouchRequest::default())
            .unwrap_err(),
    );
    lost(
        r.advise(4 * page, page, rtvm_os_linux::HugePageAdvice::NoHugePage)
            .unwrap_err(),
    );
    lost(r.resident_bytes(4 * page, page).unwrap_err());
    assert!(r.atomic_words(4 * page, 8).is_none());
    // The rest still works.
    r.commit(8 * page, page).unwrap();
    r.uncommit(0, page).unwrap();
    // Someone else maps the lost addresses; dropping the reservation leaves them alone.
    let other = r.base() + 4 * page;
    // SAFETY: MAP_FIXED_NOREPLACE onto the hole the test made; refused if anything is there.
    let got = unsafe {
        libc::mmap(
            other as *mut libc::c_void,
            page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    assert_eq!(got as usize, other);
    drop(r);
    assert_eq!(
        maps_in(other, other + page).len(),
        1,
        "the other mapping survived"
    );
    // SAFETY: the page mapped above.
    unsafe { libc::munmap(got, page) };
}
