//! rtvm-wasmtime-host: Wasmtime, a language runtime someone else wrote, embedding rtvm.
//!
//! Wasmtime's linear memories come from rtvm (`Config::with_host_memory` → a
//! `MemoryCreator` whose memories are `VmHandle::reserve_memory` regions: reserved with
//! Wasmtime's guard, committed as wasm grows them, pretouched and THP-advised per the VM's
//! flags, counted by NMT as "Wasm Memory"), and wasm runs on rtvm VM threads and on a host
//! thread attached to the VM.
//!
//! ```text
//! rtvm-wasmtime-host [rtvm options] [--engine-first] <command>
//!   demo              a module on two VM threads and an attached host thread; NMT
//!   traps             out-of-bounds load, division by zero, deep recursion: wasmtime::Trap
//!                     values on a VM thread, the process goes on
//!   native-overflow   a real overflow of a VM thread's native stack, outside wasm, after
//!                     wasm ran on that thread: rtvm's report and abort
//!   stop              100 stops of the world while wasm spins on two VM threads, one calling
//!                     an imported `rtvm.poll` at its loop's back-edge, one never: each is
//!                     stopped (at the poll, by the signal inside JIT code), the counters the
//!                     loops keep in linear memory freeze; with -Xrs the spinner that never
//!                     polls makes the stop time out and says why
//!   bench [rounds]    rtvm memories against Wasmtime's default allocator (child processes,
//!                     interleaved, medians)
//! ```
//!
//! rtvm options are the `rtvm` launcher's (`-Xlog:os`, `-XX:+AlwaysPreTouch`,
//! `-XX:+UseTransparentHugePages`, `-Xrs`, `-XX:NativeMemoryTracking=summary`, ...).
//! `--engine-first` creates a Wasmtime engine (which installs Wasmtime's signal handlers)
//! before the VM (which installs rtvm's), the other order of installation.

use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtvm::{InitArgs, MemoryRequest, Vm, VmHandle, VmMemory};
use wasmtime::{
    Config, Engine, Instance, LinearMemory, Linker, MemoryCreator, MemoryType, Module, Store, Trap,
    TypedFunc,
};

/// Wasmtime's linear memories, served by rtvm.
struct RtvmMemoryCreator {
    vm: VmHandle,
}

/// One linear memory: an rtvm [`VmMemory`].
struct RtvmLinearMemory(VmMemory);

// SAFETY: every memory is a fresh zero-filled reservation of `reserved_size_in_bytes` (or the
// maximum) plus `guard_size_in_bytes` of PROT_NONE guard after it, exactly as asked; its
// base never moves (`VmMemory` grows in place up to its capacity and refuses beyond); it is
// unmapped only when Wasmtime drops the `LinearMemory`.
unsafe impl MemoryCreator for RtvmMemoryCreator {
    fn new_memory(
        &self,
        _ty: MemoryType,
        minimum: usize,
        maximum: Option<usize>,
        reserved_size_in_bytes: Option<usize>,
        guard_size_in_bytes: usize,
    ) -> Result<Box<dyn LinearMemory>, String> {
        // With a reservation size Wasmtime relies on growth in place up to it; without one we
        // choose: the maximum, or 4 GiB (a 32-bit memory's whole index space).
        let capacity = reserved_size_in_bytes
            .or(maximum)
            .unwrap_or(4 << 30)
            .max(minimum);
        let memory = self
            .vm
            .reserve_memory(
                MemoryRequest::new("Wasm Memory", capacity)
                    .guard(guard_size_in_bytes)
                    .initial(minimum),
            )
            .map_err(|e| e.to_string())?;
        Ok(Box::new(RtvmLinearMemory(memory)))
    }
}

// SAFETY: `as_ptr` is the base of a mapping of `byte_capacity` bytes plus the guard that
// lives as long as `self`; `byte_size` bytes from it are committed read-write; `grow_to`
// commits more without moving the base, or fails and changes nothing.
unsafe impl LinearMemory for RtvmLinearMemory {
    fn byte_size(&self) -> usize {
        self.0.size()
    }

    fn byte_capacity(&self) -> usize {
        self.0.capacity()
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        self.0.grow_to(new_size).map_err(wasmtime::Error::new)
    }

    fn as_ptr(&self) -> *mut u8 {
        self.0.base()
    }
}

/// The module every command uses; its memory starts at `pages` 64 KiB pages.
fn module_text(pages: u32) -> String {
    format!(
        r#"(module
  (memory (export "memory") {pages})
  ;; Stores 1 into every 4 KiB page of [from, from + bytes).
  (func (export "touch") (param $from i32) (param $bytes i32)
    (local $p i32) (local $end i32)
    (local.set $p (local.get $from))
    (local.set $end (i32.add (local.get $from) (local.get $bytes)))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
      (i32.store8 (local.get $p) (i32.const 1))
      (local.set $p (i32.add (local.get $p) (i32.const 4096)))
      (br $next))))
  ;; The sum of the first byte of every 4 KiB page of [0, bytes).
  (func (export "sum") (param $bytes i32) (result i64)
    (local $p i32) (local $s i64)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $p) (local.get $bytes)))
      (local.set $s (i64.add (local.get $s) (i64.load8_u (local.get $p))))
      (local.set $p (i32.add (local.get $p) (i32.const 4096)))
      (br $next)))
    (local.get $s))
  (func (export "load") (param $addr i32) (result i32)
    (i32.load (local.get $addr)))
  (func (export "div") (param $a i32) (param $b i32) (result i32)
    (i32.div_s (local.get $a) (local.get $b)))
  (func $recurse (export "recurse") (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 0))
      (else (i32.add (i32.const 1) (call $recurse (i32.sub (local.get $n) (i32.const 1)))))))
  (func (export "grow") (param $pages i32) (result i32)
    (memory.grow (local.get $pages)))
  ;; $n random 8-byte loads in [0, $size) ($size a power of two) at xorshift64 addresses,
  ;; each address depending on the value the previous load returned: a chain of loads that
  ;; measures the latency of a random access (TLB miss and page walk included), not how many
  ;; independent misses the core overlaps.
  (func (export "walk") (param $n i32) (param $size i32) (param $seed i64) (result i64)
    (local $x i64) (local $v i64) (local $sum i64) (local $i i32)
    (local.set $x (local.get $seed))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $x (i64.xor (local.get $x) (local.get $v)))
      (local.set $x (i64.xor (local.get $x) (i64.shl (local.get $x) (i64.const 13))))
      (local.set $x (i64.xor (local.get $x) (i64.shr_u (local.get $x) (i64.const 7))))
      (local.set $x (i64.xor (local.get $x) (i64.shl (local.get $x) (i64.const 17))))
      (local.set $v
        (i64.load (i32.and (i32.and (i32.wrap_i64 (local.get $x))
                                    (i32.sub (local.get $size) (i32.const 1)))
                           (i32.const -8))))
      (local.set $sum (i64.add (local.get $sum) (local.get $v)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (local.get $sum)))"#
    )
}

type Error = Box<dyn std::error::Error + Send + Sync>;

/// `println!` that never panics: a closed or full stdout (`| head`) loses the text, it does
/// not take the host down.
macro_rules! out {
    () => { out!("") };
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `eprintln!` that never panics.
macro_rules! err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Wasmtime's default limit on the stack wasm may use below its entry point.
const DEFAULT_MAX_WASM_STACK: usize = 512 << 10;
/// Room left on a VM thread's stack for the host's frames: the thread's entry, the closure,
/// Wasmtime's entry trampolines and any host function wasm calls.
const HOST_FRAMES: usize = 64 << 10;
/// Less wasm stack than this is not worth running with.
const MIN_WASM_STACK: usize = 32 << 10;

/// Wasmtime's `max_wasm_stack` for wasm on this VM's threads: its default when an `-Xss`
/// stack has room for it, else what fits. Wasmtime turns a recursion that reaches its limit
/// into a trap; a limit beyond the stack's soft limit would let the recursion reach rtvm's
/// guard zone first — a fatal stack overflow, not a trap. Measured on a VM thread: the room
/// between a frame near its entry and its soft limit (guard and shadow zones excluded).
fn max_wasm_stack(vm: &VmHandle) -> Result<usize, Error> {
    let probe = vm.clone();
    let room = on_vm_thread(vm, "stack-probe", move || {
        let bounds = probe
            .current_stack_bounds()
            .ok_or("a VM thread without stack bounds")?;
        let here = std::hint::black_box(&bounds) as *const _ as usize;
        Ok(here.saturating_sub(bounds.soft_limit))
    })?;
    let fits = room.saturating_sub(HOST_FRAMES);
    if fits < MIN_WASM_STACK {
        return Err(format!(
            "a VM thread's stack leaves {} KiB for wasm below the host's frames; run with a larger -Xss",
            fits >> 10
        )
        .into());
    }
    if fits < DEFAULT_MAX_WASM_STACK {
        err!(
            "rtvm-wasmtime-host: max_wasm_stack {} KiB (Wasmtime's default, {} KiB, does not fit this -Xss)",
            fits >> 10,
            DEFAULT_MAX_WASM_STACK >> 10
        );
    }
    Ok(fits.min(DEFAULT_MAX_WASM_STACK))
}

/// An engine whose memories rtvm serves, its wasm stack limit fitted to the VM's threads (or
/// Wasmtime's defaults throughout).
fn engine(vm: Option<&VmHandle>) -> Result<Engine, Error> {
    let mut config = Config::new();
    if let Some(vm) = vm {
        config.with_host_memory(Arc::new(RtvmMemoryCreator { vm: vm.clone() }));
        config.max_wasm_stack(max_wasm_stack(vm)?);
    }
    Ok(Engine::new(&config)?)
}

/// An instance of the module in a new store.
fn instantiate(engine: &Engine, module: &Module) -> Result<(Store<()>, Instance), Error> {
    let mut store = Store::new(engine, ());
    let instance = Instance::new(&mut store, module, &[])?;
    Ok((store, instance))
}

fn func<P: wasmtime::WasmParams, R: wasmtime::WasmResults>(
    store: &mut Store<()>,
    instance: &Instance,
    name: &str,
) -> Result<TypedFunc<P, R>, Error> {
    Ok(instance.get_typed_func::<P, R>(&mut *store, name)?)
}

/// The memory's base address and size.
fn memory_of(store: &mut Store<()>, instance: &Instance) -> Result<(usize, usize), Error> {
    let memory = instance
        .get_memory(&mut *store, "memory")
        .ok_or("no exported memory")?;
    Ok((memory.data_ptr(&*store) as usize, memory.data_size(&*store)))
}

/// Runs `f` on a new VM thread named `name` and returns its result.
fn on_vm_thread<T: Send + 'static>(
    vm: &VmHandle,
    name: &str,
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = vm.spawn(name, move || {
        let _ = tx.send(f());
    })?;
    t.join()?;
    rx.recv()
        .map_err(|_| format!("thread {name} ended without a result"))?
}

/// What the kernel says about this process (`/proc/self`): the host needs three figures, read
/// here with the standard library — rtvm's public API is all it links besides Wasmtime.
mod kernel {
    /// The `[start, end)` of the mapping holding `addr` (`/proc/self/maps`), if any.
    pub fn mapping_at(addr: usize) -> Option<(usize, usize)> {
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        maps.lines().find_map(|l| {
            let (start, end) = l.split_whitespace().next()?.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (start <= addr && addr < end).then_some((start, end))
        })
    }

    /// The value in kB of `key:` in a `/proc/self` file (`status`, `smaps_rollup`); 0 if
    /// the file or the line cannot be read.
    pub fn kb(file: &str, key: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/self/{file}"))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                    .and_then(|v| v.split_whitespace().next()?.parse().ok())
            })
            .unwrap_or(0)
    }
}

/// A live memory is an rtvm reservation: its mapping starts at the memory's base.
fn own_mapping(base: usize) -> Result<(), Error> {
    match kernel::mapping_at(base) {
        Some((start, _)) if start == base => Ok(()),
        other => {
            Err(format!("memory {base:#x} is not the start of its own mapping ({other:x?})").into())
        }
    }
}

fn demo(vm: &Vm) -> Result<(), Error> {
    let handle = vm.handle();
    let engine = engine(Some(&handle))?;
    let module = Module::new(&engine, module_text(16))?;
    let mut bases: Vec<usize> = Vec::new();
    for i in 0..2 {
        let (engine, module) = (engine.clone(), module.clone());
        let (base, size, sum) = on_vm_thread(&handle, &format!("wasm-{i}"), move || {
            let (mut store, instance) = instantiate(&engine, &module)?;
            let touch = func::<(i32, i32), ()>(&mut store, &instance, "touch")?;
            let grow = func::<i32, i32>(&mut store, &instance, "grow")?;
            let sum = func::<i32, i64>(&mut store, &instance, "sum")?;
            touch.call(&mut store, (0, 1 << 20))?;
            let old = grow.call(&mut store, 16)?;
            if old != 16 {
                return Err(format!("memory.grow returned {old}, expected 16").into());
            }
            touch.call(&mut store, (1 << 20, 1 << 20))?;
            let s = sum.call(&mut store, 2 << 20)?;
            let (base, size) = memory_of(&mut store, &instance)?;
            own_mapping(base)?;
            Ok((base, size, s))
        })?;
        out!("wasm-{i}: memory at {base:#x}, {size} bytes after memory.grow, {sum} pages touched (on an rtvm VM thread)");
        if sum != 512 || size != 2 << 20 {
            return Err(format!("wasm-{i}: sum {sum}, size {size}").into());
        }
        bases.push(base);
    }
    // A host thread the VM did not start, attached for the call.
    let (engine2, module2, handle2) = (engine.clone(), module.clone(), handle.clone());
    let host = std::thread::spawn(move || -> Result<(usize, i64), Error> {
        let _attached = handle2.attach_current_thread("wasm-host")?;
        let (mut store, instance) = instantiate(&engine2, &module2)?;
        let touch = func::<(i32, i32), ()>(&mut store, &instance, "touch")?;
        let sum = func::<i32, i64>(&mut store, &instance, "sum")?;
        touch.call(&mut store, (0, 1 << 20))?;
        let s = sum.call(&mut store, 1 << 20)?;
        let base = memory_of(&mut store, &instance)?.0;
        own_mapping(base)?;
        Ok((base, s))
    });
    let (base, sum) = host.join().map_err(|_| "the host thread panicked")??;
    out!("wasm-host: memory at {base:#x}, {sum} pages touched (on an attached host thread)");
    bases.push(base);
    // One instance alive on the VM's creating thread while NMT is asked: its memory (1 MiB
    // committed of a 4 GiB reservation plus Wasmtime's guard) is what NMT must count.
    let (mut store, instance) = instantiate(&engine, &module)?;
    let touch = func::<(i32, i32), ()>(&mut store, &instance, "touch")?;
    touch.call(&mut store, (0, 1 << 20))?;
    let (base, size) = memory_of(&mut store, &instance)?;
    own_mapping(base)?;
    out!("main: memory at {base:#x}, {size} bytes (on the thread that created the VM)");
    if let Some(n) = vm.native_memory_summary() {
        let wasm = n
            .memory_categories()
            .into_iter()
            .find(|(c, _)| c == "Wasm Memory")
            .map(|(_, usage)| usage)
            .ok_or("NMT has no Wasm Memory category while a wasm memory is alive")?;
        out!(
            "NMT Wasm Memory: reserved={}KB, committed={}KB",
            wasm.reserved / 1024,
            wasm.committed / 1024
        );
        if wasm.committed != size as u64 || wasm.reserved < size as u64 {
            return Err(format!("NMT counts {wasm:?} for one live memory of {size} bytes").into());
        }
        {
            use std::io::Write as _;
            let _ = std::io::stdout().write_all(n.report().as_bytes());
        }
    }
    drop(store);
    if let Some(n) = vm.native_memory_summary() {
        let left = n.memory_categories();
        if !left.is_empty() {
            return Err(
                format!("NMT still counts {left:?} after the last store was dropped").into(),
            );
        }
    }
    out!("demo: ok");
    Ok(())
}

/// The trap a call ended with.
fn trap_of<T: std::fmt::Debug>(r: wasmtime::Result<T>) -> Result<Trap, Error> {
    match r {
        Ok(v) => Err(format!("expected a trap, got {v:?}").into()),
        Err(e) => e
            .downcast_ref::<Trap>()
            .copied()
            .ok_or_else(|| format!("not a trap: {e:?}").into()),
    }
}

fn traps(vm: &Vm) -> Result<(), Error> {
    let handle = vm.handle();
    let engine = engine(Some(&handle))?;
    let module = Module::new(&engine, module_text(1))?;
    let got = on_vm_thread(&handle, "wasm-traps", move || {
        let (mut store, instance) = instantiate(&engine, &module)?;
        let load = func::<i32, i32>(&mut store, &instance, "load")?;
        let div = func::<(i32, i32), i32>(&mut store, &instance, "div")?;
        let recurse = func::<i32, i32>(&mut store, &instance, "recurse")?;
        let oob = trap_of(load.call(&mut store, -16))?;
        let zero = trap_of(div.call(&mut store, (1, 0)))?;
        let deep = trap_of(recurse.call(&mut store, 100_000_000))?;
        // The store still works after three traps.
        let fine = recurse.call(&mut store, 1000)?;
        Ok((oob, zero, deep, fine))
    })?;
    let (oob, zero, deep, fine) = got;
    out!("out-of-bounds load: {oob:?} ({oob})");
    out!("division by zero: {zero:?} ({zero})");
    out!("deep recursion: {deep:?} ({deep})");
    out!("recursion of 1000 afterwards: {fine}");
    if (oob, zero, deep)
        != (
            Trap::MemoryOutOfBounds,
            Trap::IntegerDivisionByZero,
            Trap::StackOverflow,
        )
        || fine != 1000
    {
        return Err("unexpected traps".into());
    }
    out!("traps: ok");
    Ok(())
}

fn native_overflow(vm: &Vm) -> Result<(), Error> {
    let handle = vm.handle();
    let engine = engine(Some(&handle))?;
    let module = Module::new(&engine, module_text(1))?;
    on_vm_thread(&handle, "native", move || {
        // Wasm first, so Wasmtime's per-thread set-up (its signal stack) is in place.
        let (mut store, instance) = instantiate(&engine, &module)?;
        let recurse = func::<i32, i32>(&mut store, &instance, "recurse")?;
        out!("wasm on this thread: {}", recurse.call(&mut store, 100)?);
        // Recursion with 8 KiB frames that never stops on its own: only the guard zone ends it.
        #[inline(never)]
        fn deeper(n: u64) -> u64 {
            let frame = std::hint::black_box([n as u8; 8192]);
            if std::hint::black_box(n) == u64::MAX {
                return frame[0] as u64;
            }
            deeper(n + 1) + frame[8191] as u64
        }
        out!("not reached: {}", deeper(0));
        Ok(())
    })
}

/// The RSS of this process in kB (`/proc/self/status`).
/// The `stop` command's module: `spin(poll)` adds 1 to the i64 at address 0 until the i32 at
/// address 8 is non-zero, calling the imported `rtvm.poll` at the back-edge if `poll` is set.
const SPIN_WAT: &str = r#"(module
  (import "rtvm" "poll" (func $poll))
  (memory (export "memory") 1)
  (func (export "spin") (param $poll i32)
    (loop $next
      (i64.store (i32.const 0) (i64.add (i64.load (i32.const 0)) (i64.const 1)))
      (if (local.get $poll) (then (call $poll)))
      (br_if $next (i32.eqz (i32.load (i32.const 8)))))))"#;

/// A spinning wasm instance's memory, read and written from the main thread.
#[derive(Clone, Copy)]
struct Spinner {
    base: usize,
}

impl Spinner {
    fn count(self) -> u64 {
        // SAFETY: `base` is a live linear memory of at least one page (the instance runs
        // until `finish`); an aligned 8-byte atomic load of what wasm stores there.
        unsafe {
            (*(self.base as *const std::sync::atomic::AtomicU64))
                .load(std::sync::atomic::Ordering::Relaxed)
        }
    }

    fn finish(self) {
        // SAFETY: as in `count`; wasm reads this word at every back-edge.
        unsafe {
            (*((self.base + 8) as *const std::sync::atomic::AtomicU32))
                .store(1, std::sync::atomic::Ordering::Relaxed)
        }
    }
}

/// Starts wasm `spin(poll)` on a new VM thread; returns its thread and its memory's base.
fn spinner(
    vm: &VmHandle,
    engine: &Engine,
    module: &Module,
    name: &str,
    poll: bool,
) -> Result<(rtvm::VmThread, Spinner), Error> {
    let (engine, module) = (engine.clone(), module.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    let t = vm.spawn(name, move || {
        let run = || -> Result<(), Error> {
            let mut linker = Linker::new(&engine);
            linker.func_wrap("rtvm", "poll", rtvm::safepoint_poll)?;
            let mut store = Store::new(&engine, ());
            let instance = linker.instantiate(&mut store, &module)?;
            let (base, _) = memory_of(&mut store, &instance)?;
            let spin = func::<i32, ()>(&mut store, &instance, "spin")?;
            let _ = tx.send(Ok(Spinner { base }));
            spin.call(&mut store, i32::from(poll))?;
            Ok(())
        };
        if let Err(e) = run() {
            let _ = tx.send(Err(e.to_string()));
        }
    })?;
    let spinner = rx
        .recv()
        .map_err(|_| format!("{name} ended before it ran"))??;
    Ok((t, spinner))
}

fn stop(vm: &Vm, xrs: bool) -> Result<(), Error> {
    let engine = engine(Some(&vm.handle()))?;
    let module = Module::new(&engine, SPIN_WAT)?;
    let (poller, polls) = spinner(&vm.handle(), &engine, &module, "wasm-polls", true)?;
    let (never, spins) = spinner(&vm.handle(), &engine, &module, "wasm-never-polls", false)?;
    let mut spinners = vec![(never, spins), (poller, polls)];
    if xrs {
        // No signal fallback: the thread that never polls cannot be stopped.
        match vm.stop_the_world("WasmXrs", Duration::from_millis(300)) {
            Ok(_) => return Err("with -Xrs a stop of wasm that never polls succeeded".into()),
            Err(e) => {
                let text = e.to_string();
                if !text.contains("wasm-never-polls") || text.contains("\"wasm-polls\"") {
                    return Err(format!("the timeout names the wrong threads: {text}").into());
                }
                out!("stop: -Xrs: {text}");
            }
        }
        let (never, spins) = spinners.remove(0);
        spins.finish();
        never.join()?;
    }
    let (mut by_poll, mut by_signal) = (0, 0);
    let mut longest = Duration::ZERO;
    for _ in 0..100 {
        let world = vm.stop_the_world("WasmStop", Duration::from_secs(10))?;
        longest = longest.max(world.time_to_stop());
        if world.len() != spinners.len() {
            return Err(format!("{} threads stopped, not {}", world.len(), spinners.len()).into());
        }
        for t in world.threads() {
            match t.how() {
                rtvm::StopHow::Poll => by_poll += 1,
                rtvm::StopHow::Signal => by_signal += 1,
                other => return Err(format!("{} stopped {other:?}", t.name()).into()),
            }
            if t.name() == "wasm-never-polls" && t.how() != rtvm::StopHow::Signal {
                return Err(format!("wasm that never polls stopped {:?}", t.how()).into());
            }
        }
        let frozen: Vec<u64> = spinners.iter().map(|(_, s)| s.count()).collect();
        std::thread::sleep(Duration::from_millis(2));
        let later: Vec<u64> = spinners.iter().map(|(_, s)| s.count()).collect();
        if frozen != later {
            return Err(
                format!("wasm ran while the world was stopped: {frozen:?} -> {later:?}").into(),
            );
        }
        drop(world);
        std::thread::sleep(Duration::from_micros(500));
    }
    let before: Vec<u64> = spinners.iter().map(|(_, s)| s.count()).collect();
    std::thread::sleep(Duration::from_millis(20));
    for ((_, s), b) in spinners.iter().zip(&before) {
        if s.count() <= *b {
            return Err("a wasm loop did not move again after the stops".into());
        }
    }
    for (t, s) in spinners {
        s.finish();
        t.join()?;
    }
    out!(
        "stop: 100 stops while wasm ran on VM threads: {by_poll} at the imported poll, {by_signal} by the signal; counters frozen while stopped; longest time to stop {:.3} ms",
        longest.as_secs_f64() * 1e3
    );
    out!("stop: ok");
    Ok(())
}

fn rss_kb() -> u64 {
    kernel::kb("status", "VmRSS")
}

/// Touches and frees 1.25 GiB right before a measurement: warm memory, not memory the host
/// just took back. The area is advised for transparent huge pages so that what it frees goes
/// back as whole 2 MiB blocks, warm for the THP variant as much as for the 4 KiB ones. (A
/// scratch mapping of the benchmark's own, not rtvm's: the "wasmtime default" variant runs
/// without a VM.)
fn warm() {
    const LEN: usize = (1 << 30) + (1 << 28);
    const HUGE: usize = 2 << 20;
    // SAFETY: a fresh private anonymous mapping of our own; nothing else refers to it.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            LEN + HUGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        err!(
            "rtvm-wasmtime-host: warming 1.25 GiB failed (mmap): this sample measures cold memory"
        );
        return;
    }
    let start = (raw as usize).next_multiple_of(HUGE);
    // SAFETY: [start, start + LEN) lies inside the mapping made above (it has HUGE bytes of
    // slack for the alignment); it is ours alone, and unmapped before anyone could see it.
    unsafe {
        let area = start as *mut libc::c_void;
        libc::madvise(area, LEN, libc::MADV_HUGEPAGE);
        // MADV_POPULATE_WRITE (Linux 5.14): one call; else a write per page.
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        if libc::madvise(area, LEN, MADV_POPULATE_WRITE) != 0 {
            for page in (0..LEN).step_by(4096) {
                std::ptr::write_volatile((start + page) as *mut u8, 1);
            }
        }
        libc::munmap(raw, LEN + HUGE);
    }
}

/// One measurement in a child process: prints `bench: key=value ...`.
fn bench_child(vm: Option<&Vm>, what: &str) -> Result<(), Error> {
    const GIB: i32 = 1 << 30;
    let handle = vm.map(|v| v.handle());
    let engine = engine(handle.as_ref())?;
    warm();
    match what {
        "instantiate" => {
            let module = Module::new(&engine, module_text(16384))?;
            let start = Instant::now();
            let (mut store, instance) = instantiate(&engine, &module)?;
            let instantiated = start.elapsed();
            let touch = func::<(i32, i32), ()>(&mut store, &instance, "touch")?;
            let t = Instant::now();
            touch.call(&mut store, (0, GIB))?;
            let touched = t.elapsed();
            out!(
                "bench: instantiate_ms={:.2} touch_ms={:.2} total_ms={:.2} rss_kb={}",
                ms(instantiated),
                ms(touched),
                ms(start.elapsed()),
                rss_kb()
            );
        }
        "grow" => {
            let module = Module::new(&engine, module_text(1024))?;
            let (mut store, instance) = instantiate(&engine, &module)?;
            let grow = func::<i32, i32>(&mut store, &instance, "grow")?;
            let touch = func::<(i32, i32), ()>(&mut store, &instance, "touch")?;
            touch.call(&mut store, (0, 64 << 20))?;
            let start = Instant::now();
            for step in 1..16 {
                let old = grow.call(&mut store, 1024)?;
                if old != step * 1024 {
                    return Err(format!("memory.grow returned {old}").into());
                }
                touch.call(&mut store, (step << 26, 64 << 20))?;
            }
            out!(
                "bench: grow_ms={:.2} rss_kb={}",
                ms(start.elapsed()),
                rss_kb()
            );
        }
        walk if walk_gib(walk).is_some() => {
            let gib = walk_gib(walk).unwrap_or(1);
            let module = Module::new(&engine, module_text(gib * 16384))?;
            let (mut store, instance) = instantiate(&engine, &module)?;
            let touch = func::<(i32, i32), ()>(&mut store, &instance, "touch")?;
            let walk = func::<(i32, i32, i64), i64>(&mut store, &instance, "walk")?;
            for g in 0..gib {
                touch.call(&mut store, ((g << 30) as i32, GIB))?;
            }
            // The size as wasm's i32 sees it: 4 GiB wraps to 0, whose mask (size - 1) is
            // all ones.
            let size = (u64::from(gib) << 30) as u32 as i32;
            let loads = 1 << 24;
            walk.call(&mut store, (1 << 20, size, 88172645463325252))?;
            let start = Instant::now();
            walk.call(&mut store, (loads, size, 2463534242))?;
            let ns = start.elapsed().as_nanos() as f64 / loads as f64;
            let huge = anon_huge_kb();
            out!(
                "bench: walk_ns={ns:.2} anon_huge_kb={huge} rss_kb={}",
                rss_kb()
            );
        }
        other => return Err(format!("unknown measurement {other}").into()),
    }
    Ok(())
}

/// The memory size of a `walk<N>g` measurement, in GiB (1 to 4: a 32-bit memory).
fn walk_gib(what: &str) -> Option<u32> {
    let n = what.strip_prefix("walk")?.strip_suffix('g')?.parse().ok()?;
    (1..=4).contains(&n).then_some(n)
}

/// AnonHugePages of the whole process (`/proc/self/smaps_rollup`).
fn anon_huge_kb() -> u64 {
    kernel::kb("smaps_rollup", "AnonHugePages")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The variants of the benchmark: (name, rtvm options, whether rtvm serves the memories).
const VARIANTS: [(&str, &[&str], bool); 5] = [
    ("wasmtime default", &["-Xmx16m"], false),
    ("rtvm, no pretouch", &["-Xmx16m"], true),
    (
        "rtvm AlwaysPreTouch",
        &["-Xmx16m", "-XX:+AlwaysPreTouch", "-XX:ParallelGCThreads=2"],
        true,
    ),
    (
        "rtvm AlwaysPreTouch + THP",
        &[
            "-Xmx16m",
            "-XX:+AlwaysPreTouch",
            "-XX:ParallelGCThreads=2",
            "-XX:+UseTransparentHugePages",
        ],
        true,
    ),
    (
        "rtvm BackgroundPreTouch",
        &[
            "-Xmx16m",
            "-XX:+AlwaysPreTouch",
            "-XX:ParallelGCThreads=2",
            "-XX:+UnlockExperimentalVMOptions",
            "-XX:+BackgroundPreTouch",
        ],
        true,
    ),
];

fn field(line: &str, key: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn bench(rounds: usize) -> Result<(), Error> {
    let exe = std::env::current_exe()?;
    let whats = ["instantiate", "grow", "walk1g", "walk2g"];
    // samples[(variant, what)] = the child's bench line, per round
    let mut samples: std::collections::BTreeMap<(usize, &str), Vec<String>> = Default::default();
    for round in 0..rounds {
        for what in whats {
            for k in 0..VARIANTS.len() {
                let v = (k + round) % VARIANTS.len();
                let (_, opts, rtvm_memory) = VARIANTS[v];
                let mut c = Command::new(&exe);
                c.args(opts);
                c.arg(if rtvm_memory {
                    "bench-child-rtvm"
                } else {
                    "bench-child-default"
                });
                c.arg(what);
                let out = c.output()?;
                let stdout = String::from_utf8_lossy(&out.stdout);
                let line = stdout
                    .lines()
                    .find(|l| l.starts_with("bench: "))
                    .ok_or_else(|| {
                        format!(
                            "{what} {}: no result: {stdout}{}",
                            VARIANTS[v].0,
                            String::from_utf8_lossy(&out.stderr)
                        )
                    })?;
                samples.entry((v, what)).or_default().push(line.to_owned());
            }
        }
    }
    let med = |v: usize, what: &str, key: &str| -> f64 {
        median(
            samples[&(v, what)]
                .iter()
                .filter_map(|l| field(l, key))
                .collect(),
        )
    };
    out!("## Wasmtime on rtvm: {rounds} rounds, child process per sample, warm memory, medians");
    out!();
    out!("| memories | instantiate 1 GiB | touch 1 GiB | total | RSS | grow 64 MiB ×15 + touch | random load, 1 GiB | random load, 2 GiB | AnonHugePages (2 GiB) |");
    out!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (v, (name, _, _)) in VARIANTS.iter().enumerate() {
        out!(
            "| {name} | {:.1} ms | {:.1} ms | {:.1} ms | {:.0} MiB | {:.1} ms | {:.1} ns | {:.1} ns | {:.0} MiB |",
            med(v, "instantiate", "instantiate_ms"),
            med(v, "instantiate", "touch_ms"),
            med(v, "instantiate", "total_ms"),
            med(v, "instantiate", "rss_kb") / 1024.0,
            med(v, "grow", "grow_ms"),
            med(v, "walk1g", "walk_ns"),
            med(v, "walk2g", "walk_ns"),
            med(v, "walk2g", "anon_huge_kb") / 1024.0,
        );
    }
    let default_total = med(0, "instantiate", "total_ms");
    out!();
    out!(
        "instantiate + touch 1 GiB, against Wasmtime's default: rtvm AlwaysPreTouch {:.2}×, + THP {:.2}×, BackgroundPreTouch {:.2}× the speed",
        default_total / med(2, "instantiate", "total_ms"),
        default_total / med(3, "instantiate", "total_ms"),
        default_total / med(4, "instantiate", "total_ms"),
    );
    out!(
        "grow 64 MiB ×15 + touch, against Wasmtime's default: rtvm AlwaysPreTouch {:.2}×, + THP {:.2}×",
        med(0, "grow", "grow_ms") / med(2, "grow", "grow_ms"),
        med(0, "grow", "grow_ms") / med(3, "grow", "grow_ms"),
    );
    out!(
        "random walk, THP against 4 KiB pages (rtvm AlwaysPreTouch ± THP): {:.2}× the speed over 1 GiB, {:.2}× over 2 GiB",
        med(2, "walk1g", "walk_ns") / med(3, "walk1g", "walk_ns"),
        med(2, "walk2g", "walk_ns") / med(3, "walk2g", "walk_ns"),
    );
    Ok(())
}

fn run(args: &[String]) -> Result<(), Error> {
    let engine_first = args.iter().any(|a| a == "--engine-first");
    let args: Vec<&String> = args.iter().filter(|a| *a != "--engine-first").collect();
    let split = args
        .iter()
        .position(|a| !a.starts_with('-'))
        .unwrap_or(args.len());
    let (options, rest) = args.split_at(split);
    let command = rest.first().map(|s| s.as_str()).unwrap_or("demo");
    if command == "bench" {
        let rounds = rest.get(1).and_then(|r| r.parse().ok()).unwrap_or(5);
        return bench(rounds);
    }
    if command == "bench-child-default" {
        let what = rest.get(1).map(|s| s.as_str()).unwrap_or("instantiate");
        return bench_child(None, what);
    }
    // Wasmtime's handlers first (an engine installs them), then rtvm's — or the other way.
    let early = if engine_first {
        Some(Engine::default())
    } else {
        None
    };
    if ![
        "demo",
        "traps",
        "native-overflow",
        "stop",
        "bench-child-rtvm",
    ]
    .contains(&command)
    {
        return Err(format!(
            "unknown command {command} (demo, traps, native-overflow, stop, bench [rounds])"
        )
        .into());
    }
    let vm = match Vm::create(InitArgs::new(options.iter().map(|s| s.to_string()))) {
        Ok(vm) => vm,
        // -version, -Xlog:help, -XX:+PrintFlagsFinal -version...: printed, nothing to run.
        Err(e) if e.code == rtvm::ErrorCode::Exited => return Ok(()),
        Err(e) => return Err(e.message.trim_end().to_owned().into()),
    };
    let result = match command {
        "demo" => demo(&vm),
        "traps" => traps(&vm),
        "native-overflow" => native_overflow(&vm),
        "stop" => stop(&vm, options.iter().any(|o| *o == "-Xrs")),
        "bench-child-rtvm" => bench_child(
            Some(&vm),
            rest.get(1).map(|s| s.as_str()).unwrap_or("instantiate"),
        ),
        other => Err(format!("unknown command {other}").into()),
    };
    drop(early);
    vm.shutdown()?;
    result
}

fn main() -> ExitCode {
    // Arguments that are not UTF-8 are read lossily (rtvm then names them in its message).
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| rtvm::lossy(&a))
        .collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            err!("rtvm-wasmtime-host: {e}");
            ExitCode::FAILURE
        }
    }
}
