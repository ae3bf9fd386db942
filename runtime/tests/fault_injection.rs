//! Faults at VM creation, each in a child process so this one is unharmed: an `-Xmx` that
//! cannot be reserved (low `RLIMIT_AS`), an `-Xms` that cannot be committed (low
//! `RLIMIT_DATA`). Each fails with HotSpot's wording and a JNI-style code, and leaves nothing
//! mapped: the workers started before the heap are joined, their stacks unmapped. Embedder
//! memory under the same limits: a failed growth keeps its size and gives back its commit.

mod common;

use common::*;
use rtvm::{ErrorCode, ErrorKind, InitArgs, Vm};
use rtvm_os_linux::procfs;
use rtvm_os_linux::system::{set_soft_limit, Limit};

fn check_child(test: &str, role: &str) {
    let out = run_child(test, role);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("CHILD OK"),
        "{}\n{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn unreservable_heap() {
    if child_role().is_none() {
        return check_child("unreservable_heap", "as");
    }
    // Warm up what any first VM sets up once per process.
    drop(Vm::create(InitArgs::new(["-Xmx16m"])).unwrap());
    let before = procfs::read_maps().unwrap();
    set_soft_limit(
        Limit::AddressSpace,
        procfs::read_status().unwrap().vm_size_kb * 1024 + (1 << 30),
    )
    .unwrap();
    let e = Vm::create(InitArgs::new(["-Xmx4g", "-XX:ParallelGCThreads=2"])).unwrap_err();
    assert_eq!(
        (e.code, e.kind),
        (ErrorCode::NoMem, ErrorKind::Initialization),
        "{e}"
    );
    assert_eq!(
        e.message,
        "Could not reserve enough space for 4194304KB object heap\n"
    );
    let leaked = new_mappings_besides_arenas(&before);
    assert!(
        leaked.is_empty(),
        "left mapped after a failed creation: {leaked:#?}"
    );
    println!("CHILD OK");
}

#[test]
fn uncommittable_heap() {
    if child_role().is_none() {
        return check_child("uncommittable_heap", "data");
    }
    drop(Vm::create(InitArgs::new(["-Xmx16m"])).unwrap());
    let before = procfs::read_maps().unwrap();
    set_soft_limit(
        Limit::Data,
        procfs::read_status().unwrap().vm_data_kb * 1024 + (128 << 20),
    )
    .unwrap();
    let e = Vm::create(InitArgs::new([
        "-Xms512m",
        "-Xmx1g",
        "-XX:ParallelGCThreads=2",
    ]))
    .unwrap_err();
    assert_eq!(
        (e.code, e.code.code(), e.kind),
        (ErrorCode::NoMem, -4, ErrorKind::OutOfMemory),
        "JNI_ENOMEM: {e}"
    );
    assert_eq!(
        e.message,
        "#\n# There is insufficient memory for the rtvm Runtime Environment to continue.\n\
         # Native memory allocation (mmap) failed to map 536870912 bytes. Error detail: committing reserved memory.\n"
    );
    let leaked = new_mappings_besides_arenas(&before);
    assert!(
        leaked.is_empty(),
        "left mapped after a failed creation: {leaked:#?}"
    );
    // With the limit lifted the VM can be created again.
    set_soft_limit(Limit::Data, u64::MAX).unwrap();
    Vm::create(InitArgs::new(["-Xms512m", "-Xmx1g"]))
        .unwrap()
        .shutdown()
        .unwrap();
    println!("CHILD OK");
}

/// Embedder memory when the system says no: a growth whose commit exceeds `RLIMIT_DATA`
/// fails with HotSpot's wording and ENOMEM, keeps the memory's size and gives back what it
/// committed (VmData as before; the memory grows once the limit is lifted); a reservation
/// beyond `RLIMIT_AS` fails and leaves nothing mapped; a VM shutting down refuses new
/// memory; a memory outlives its VM and still grows (pretouched by the caller).
#[test]
fn embedder_memory_faults() {
    if child_role().is_none() {
        return check_child("embedder_memory_faults", "memory");
    }
    const MIB: usize = 1 << 20;
    let vm = Vm::create(InitArgs::new([
        "-Xmx16m",
        "-XX:+AlwaysPreTouch",
        "-XX:ParallelGCThreads=2",
    ]))
    .unwrap();
    let mut m = vm
        .reserve_memory(rtvm::MemoryRequest::new("Wasm Memory", 1024 * MIB).initial(MIB))
        .unwrap();
    let data_before = procfs::read_status().unwrap().vm_data_kb;
    set_soft_limit(Limit::Data, data_before * 1024 + 64 * MIB as u64).unwrap();
    let e = m.grow_to(512 * MIB).unwrap_err();
    assert!(e.is_out_of_memory(), "{e}");
    assert!(
        e.to_string()
            .ends_with(", 535822336, 0) failed; error='Not enough space' (errno=12)"),
        "{e}"
    );
    assert_eq!(m.size(), MIB, "a failed growth keeps the size");
    assert_eq!(
        procfs::read_status().unwrap().vm_data_kb,
        data_before,
        "a failed growth gives back what it committed"
    );
    m.grow_to(32 * MIB).unwrap();
    assert_eq!(m.resident_bytes(), 32 * MIB);
    set_soft_limit(Limit::Data, u64::MAX).unwrap();
    m.grow_to(512 * MIB).unwrap();
    assert_eq!(m.size(), 512 * MIB);

    let before = procfs::read_maps().unwrap();
    set_soft_limit(
        Limit::AddressSpace,
        procfs::read_status().unwrap().vm_size_kb * 1024 + (256 << 20),
    )
    .unwrap();
    let e = vm
        .reserve_memory(rtvm::MemoryRequest::new("Big", 1 << 30))
        .unwrap_err();
    assert!(e.is_out_of_memory(), "{e}");
    assert!(e.to_string().contains("errno=12"), "{e}");
    let leaked = new_mappings_besides_arenas(&before);
    assert!(leaked.is_empty(), "left mapped: {leaked:#?}");
    set_soft_limit(Limit::AddressSpace, u64::MAX).unwrap();

    let h = vm.handle();
    vm.shutdown().unwrap();
    let e = h
        .reserve_memory(rtvm::MemoryRequest::new("Late", MIB))
        .unwrap_err();
    assert!(matches!(e, rtvm::MemoryError::ShuttingDown { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "cannot reserve memory for Late: the VM is shutting down"
    );
    drop(vm);
    // The memory outlives its VM: it grows, pretouched by this thread.
    m.grow_to(600 * MIB).unwrap();
    assert_eq!(m.resident_bytes(), 600 * MIB);
    println!("CHILD OK");
}
