//! Mutator records: one per VM thread and attached thread, for the life of the process.
//!
//! A record is reached from its thread through a thread-local `&'static` (the poll's fast
//! path, the stop signal's handler), so records are never freed: a thread's record goes back
//! to the pool when the thread is forgotten and serves the next one. They are allocated 64 at
//! a time, so a stopper walking 10,000 threads reads memory that lies together.

use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use rtvm_os_linux::safepoint::StopRecord;

use super::handshake::HandshakeSlot;

/// A thread's part in stops and handshakes.
#[derive(Debug)]
pub(crate) struct Mutator {
    /// The OS layer's record: state, poll word, hold, published stack pointer and registers.
    pub(crate) record: StopRecord,
    /// A handshake operation waiting for the thread.
    pub(crate) slot: HandshakeSlot,
    /// Where the thread is in its VM's member list.
    pub(super) index: AtomicUsize,
    /// The VM thread id.
    pub(super) id: AtomicU64,
    /// Safe regions entered and not yet left (the outermost one publishes).
    pub(super) depth: AtomicU32,
}

impl Mutator {
    const fn new() -> Mutator {
        Mutator {
            record: StopRecord::new(),
            slot: HandshakeSlot::new(),
            index: AtomicUsize::new(0),
            id: AtomicU64::new(0),
            depth: AtomicU32::new(0),
        }
    }

    /// The VM thread id.
    pub(crate) fn id(&self) -> u64 {
        self.id.load(Ordering::Relaxed)
    }
}

const CHUNK: usize = 64;

static FREE: Mutex<Vec<&'static Mutator>> = Mutex::new(Vec::new());

/// A fresh record for thread `id` on `stack` ([`SAFE`](rtvm_os_linux::safepoint::SAFE),
/// nothing published).
pub(super) fn take(id: u64, stack: Range<usize>) -> &'static Mutator {
    let mut free = super::lock(&FREE);
    if free.is_empty() {
        let chunk: &'static [Mutator; CHUNK] =
            Box::leak(Box::new([const { Mutator::new() }; CHUNK]));
        free.extend(chunk.iter().rev());
    }
    let m = free.pop().expect("a chunk was just added");
    drop(free);
    m.record.reset(0, stack);
    m.slot.reset();
    m.id.store(id, Ordering::Relaxed);
    m.depth.store(0, Ordering::Relaxed);
    m
}

/// Returns a record whose thread is forgotten.
pub(super) fn give_back(m: &'static Mutator) {
    super::lock(&FREE).push(m);
}
