/*
 * rtvm.h — the C API of rtvm, the memory-and-threads core of a managed runtime.
 *
 * Finding and linking it: `pkg-config --cflags --libs rtvm` (shared library) or
 * `pkg-config --static --cflags --libs rtvm` (static), after `tools/install-c.sh <prefix>`.
 *
 * Versions
 *   The ABI is versioned like JNI's: rtvm_init_args starts with a version field, which must
 *   be RTVM_VERSION_1 (rtvm_get_default_init_args fills in the rest for a version). A
 *   library that does not know the version answers RTVM_EVERSION and reads nothing else.
 *   Later versions only append fields and functions.
 *
 * Conventions
 *   - Functions return RTVM_OK (0) or a negative JNI-style code; on failure
 *     rtvm_last_error() returns a message for the calling thread.
 *   - rtvm never exits or aborts the host process (the exceptions: a VM thread that
 *     overflows its stack into its guard zone is reported and the process aborts, as it
 *     would crash anyway; a SIGTERM, SIGINT or SIGHUP that was at SIG_DFL ends it by its
 *     default action once the VM's files are removed — see below). Rust panics never cross this boundary: they become RTVM_ERR.
 *   - One VM per process at a time (RTVM_EEXIST otherwise). A new VM may be created once
 *     rtvm_destroy has returned.
 *   - Options are the `java`-style options of the rtvm launcher: "-Xms64m", "-Xmx1g",
 *     "-XX:+AlwaysPreTouch", "-Xlog:pagesize", ... The environment variable RTVM_OPTIONS is
 *     read too, before the options, as JAVA_TOOL_OPTIONS is by JNI_CreateJavaVM.
 *   - The library may be dlopen()ed and dlclose()d; it stays loaded once loaded (it is
 *     linked -z nodelete: thread-exit hooks and signal handlers point into it).
 *
 * Thread-safety, in one place (each function repeats its own):
 *   - rtvm_create: concurrent calls are serialized — one that finds another create under way
 *     waits for its outcome, and gets RTVM_EEXIST only if a VM exists then (a create that
 *     fails, on a bad option say, leaves the slot free for the next). rtvm_destroy must not
 *     race with any other call on the same VM except from the VM's own threads (which it
 *     waits for).
 *   - Everything else taking a VM may be called from any thread, concurrently, while the VM
 *     lives (from rtvm_create's return to rtvm_destroy's call).
 *   - An rtvm_tlab and an rtvm_thread handle belong to one thread at a time.
 *   - After rtvm_destroy returns, the VM pointer is dangling: no thread may pass it again.
 *     Threads still attached then are simply forgotten (do not detach them afterwards).
 *
 * The output hook
 *   It is called from rtvm_create until rtvm_destroy returns, and never after: a call in
 *   flight when rtvm_destroy starts (a host thread growing a memory with -Xlog:os=debug, say)
 *   finishes before rtvm_destroy returns, so the host may free the hook's context then.
 *   Memories outlive their VM but log nothing through its hook once it is destroyed (their
 *   lines go to whatever logging a later VM configured, or nowhere). The hook must not call
 *   back into rtvm: every call from inside it fails with RTVM_EINVAL (it would wait for locks
 *   the printing thread holds), and what rtvm would log from there is dropped.
 *
 * Signals (SIGSEGV and SIGBUS; none at all with -Xrs)
 *   rtvm's handler reports guard-zone hits of VM threads and passes every other fault to the
 *   handler that was installed before it, delivered as the kernel would have delivered it:
 *     - the signature its SA_SIGINFO asks for, with the kernel's siginfo and ucontext;
 *     - the mask: the interrupted code's mask plus its sa_mask plus the signal itself (unless
 *       SA_NODEFER), restored when it returns; SA_RESETHAND makes it SIG_DFL after one call;
 *     - the stack: a handler installed with SA_ONSTACK runs on the alternate signal stack; one
 *       installed without it runs on the interrupted code's own stack, below its stack pointer
 *       and red zone (x86-64), as the kernel would have run it — not on rtvm's 16 KiB signal
 *       stack, so a handler that needs a large frame works on a VM thread as on a host thread;
 *     - SIG_DFL ends the process with the signal, SIG_IGN ignores a sent signal (a hardware
 *       fault cannot be ignored); a handler may recover with siglongjmp.
 *   Order does not matter and a new VM may be created any number of times: a host handler
 *   installed after a VM (chaining to what it found, as Wasmtime's does) stays on top when the
 *   VM is destroyed, rtvm's handler staying below it; a later VM keeps that order instead of
 *   saving the host's handler as its own "previous" (the two would call each other); a host
 *   that removes its handler by putting back the rtvm handler it saw gets rtvm's handler,
 *   still chaining to the handler before it. Handlers a host installs on top of rtvm's are
 *   the host's to chain: rtvm's reports only faults that reach it.
 *
 * SIGQUIT
 *   rtvm installs a SIGQUIT handler with the others (not with -Xrs) that only counts the
 *   signal and wakes the VM's "Signal Dispatcher" thread, which decides what it meant: with
 *   an attach trigger file (.attach_pid<pid> in the working directory or /tmp, owned by the
 *   VM's user or root) it starts the attach listener (jcmd, jstack, jinfo then work) and
 *   nothing else happens; otherwise it prints a thread dump through the output hook (stdout
 *   without one) and then calls the SIGQUIT handler the host had installed before the VM, if
 *   any — on the dispatcher thread, not in signal context, with the last SIGQUIT's siginfo
 *   and a zeroed ucontext. rtvm_destroy gives SIGQUIT back with the rules of the Signals
 *   section (a handler the host installed after the VM stays on top) — except over SIG_DFL:
 *   there rtvm's handler stays installed and only counts, as HotSpot's stays for the life of
 *   the process, so that a late kill -3 (or an attach client that found the VM a moment
 *   before) cannot end the host with a core dump; the next VM takes it over. A host that
 *   wants SIG_DFL back sets it after rtvm_destroy. Note that system() ignores SIGQUIT in
 *   its caller while the command runs: jcmd cannot attach meanwhile.
 *   -XX:+DisableAttachMechanism: SIGQUIT always dumps, no listener ever starts.
 *
 * SIGTERM, SIGINT, SIGHUP (HotSpot's shutdown signals; none with -Xrs)
 *   rtvm_create takes those of the three whose action is SIG_DFL: a handler the host
 *   installed stays the host's, and an ignored signal stays ignored (nohup). On one of
 *   them the Signal Dispatcher removes the VM's files (/tmp/.java_pid<pid>, the perf data),
 *   prints the NMT statistics with -XX:+PrintNMTStatistics, and ends the process by the
 *   signal's default action — what SIG_DFL would have done, without the files left behind.
 *   (The Rust API's InitArgs::exit_hook can end it with java's status instead; the rtvm
 *   launcher does.) rtvm_destroy puts SIG_DFL back. A host with its own handlers removes
 *   rtvm's files by calling rtvm_destroy.
 *
 * fork()
 *   In a child created by fork() after rtvm_create, the VM belongs to the parent: its
 *   threads (workers, VM threads) do not exist in the child. Calls that would start, join or
 *   wait for threads, or tear the VM down — rtvm_destroy, rtvm_thread_start,
 *   rtvm_thread_join, rtvm_heap_expand, rtvm_heap_shrink, rtvm_memory_reserve,
 *   rtvm_release_pretouch, rtvm_attach_current_thread, rtvm_detach_current_thread,
 *   rtvm_current_stack_bounds, rtvm_trim_current_stack, rtvm_nmt_summary,
 *   rtvm_diagnostic_command, rtvm_register_diagnostic_command — return
 *   RTVM_EFORK at once and change nothing (an atexit hook or a pre-fork server that calls
 *   rtvm_destroy in the child gets RTVM_EFORK, not a hang). The child's copy of the heap
 *   (rtvm_heap_allocate, the TLAB, rtvm_heap_get_stats, rtvm_heap_resident, rtvm_with_nursery) and its memories
 *   (rtvm_memory_*, pretouched by the calling thread) keep working. As POSIX says, exec or
 *   _exit soon.
 */
#ifndef RTVM_H
#define RTVM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Versions (major << 16 | minor). */
#define RTVM_VERSION_1 0x00010000

/* Result codes: JNI's values, then rtvm's. */
#define RTVM_OK         0   /* success */
#define RTVM_ERR       (-1) /* unknown error; an unrecognized non -XX option; a thread ended badly */
#define RTVM_EDETACHED (-2) /* the calling thread is not attached to the VM */
#define RTVM_EVERSION  (-3) /* rtvm_init_args.version is not one this library knows */
#define RTVM_ENOMEM    (-4) /* not enough memory: heap reservation, commit or pretouch */
#define RTVM_EEXIST    (-5) /* a VM already exists in this process; a diagnostic command of
                               that name exists */
#define RTVM_EINVAL    (-6) /* invalid arguments: a bad -XX flag or value, a NULL pointer */
#define RTVM_EEXITED   (-7) /* the options asked to print and stop (-version, -Xlog:help,
                               -XX:+PrintFlagsInitial): the output went to the output hook
                               (or stdout/stderr) and no VM was created */
#define RTVM_EAGAIN    (-8) /* a system limit: threads, processes or mappings */
#define RTVM_ESHUTDOWN (-9) /* the VM is being destroyed: no new threads */
#define RTVM_EFORK    (-10) /* called in a child of fork(): the VM belongs to the parent */
#define RTVM_ETIMEDOUT (-11) /* a stop of the world or a handshake timed out: rtvm_last_error()
                                names the threads that did not stop */

/* Streams passed to the output hook. */
#define RTVM_STDOUT 1
#define RTVM_STDERR 2

/* An opaque VM. */
typedef struct rtvm_vm rtvm_vm;

/* An opaque handle of a VM thread started with rtvm_thread_start. */
typedef struct rtvm_thread rtvm_thread;
typedef struct rtvm_memory rtvm_memory;

/* The output hook (JNI's "vfprintf" option): receives every piece of text the VM prints —
 * flag listings, the NMT report, warnings, -Xlog output for stdout/stderr, -Xlog:help,
 * -version — with the stream it would have gone to. `text` is NUL-terminated, `len` bytes
 * long (without the NUL), valid only during the call. It may be called from any thread,
 * concurrently, from rtvm_create until rtvm_destroy returns, never after (see "The output
 * hook" above). It must not call back into rtvm: such calls fail with RTVM_EINVAL. (The one
 * exception to the hook: a stack-overflow report is written to fd 2 from a signal handler,
 * where no hook can run.) */
typedef void (*rtvm_output_fn)(void *context, int stream, const char *text, size_t len);

/* Creation arguments, in the spirit of JavaVMInitArgs. Set version first, then call
 * rtvm_get_default_init_args, then fill in what you need. */
typedef struct rtvm_init_args {
    int version;                 /* RTVM_VERSION_1 */
    size_t n_options;
    const char *const *options;  /* n_options NUL-terminated option strings (copied) */
    /* Non-zero: skip options that are not recognized (unknown -XX and -X options), as
     * JNI's ignoreUnrecognized does in HotSpot. Locked flags and bad values still fail. */
    int ignore_unrecognized;
    rtvm_output_fn output;       /* NULL: file descriptors 1 and 2 */
    void *output_context;        /* passed to output, untouched */
} rtvm_init_args;

/* Heap figures, in bytes, read from counters (cheap; no system call). */
typedef struct rtvm_heap_stats {
    size_t reserved;   /* MaxHeapSize, aligned */
    size_t committed;  /* committed so far */
    size_t used;       /* handed out (TLAB buffers count whole when taken); never above
                        * committed, and never the figure of a shrink half done */
} rtvm_heap_stats;

/* A thread's stack, for a GC scanning it and an interpreter guarding its recursion.
 * The stack grows down from base; limit is the lowest usable address; [guard_start,
 * guard_end) is the protected zone below it (empty for the process's first thread);
 * soft_limit is the address to compare the stack pointer with before going deeper: below it,
 * throw your own stack-overflow error — the space between it and the guard is left for native
 * calls. It is HotSpot's stack overflow limit: the guard and shadow zones (-XX:StackShadowPages)
 * above the stack's end, so for a VM thread the shadow zone above limit (the guard zone, part of
 * -Xss, lies below it: -Xss136k leaves HotSpot's 40K above the soft limit), for an attached
 * thread both zones above limit. */
typedef struct rtvm_stack_bounds {
    uintptr_t base;
    uintptr_t limit;
    uintptr_t guard_start;
    uintptr_t guard_end;
    uintptr_t soft_limit;
} rtvm_stack_bounds;

/* A thread-local allocation buffer (HotSpot's TLAB): one thread bump-allocates inside a
 * buffer taken from the heap, with no atomic operation; rtvm_tlab_allocate is inline. Set
 * up with rtvm_tlab_init; used by one thread at a time; nothing to free (the memory is the
 * heap's). The fields are for the inline fast path: do not write them. */
typedef struct rtvm_tlab {
    char *top;           /* next free byte of the current buffer */
    char *end;           /* end of the current buffer */
    rtvm_vm *vm;
    size_t buffer_size;  /* bytes taken from the heap per refill */
} rtvm_tlab;

/* Memory of the embedder's own (a language runtime's linear memory, code cache or arena),
 * mapped through rtvm_memory_reserve. Sizes are in bytes. */
typedef struct rtvm_memory_info {
    void *base;        /* the first byte: the memory's address for its whole life */
    size_t size;       /* bytes usable now (committed read-write), from base */
    size_t capacity;   /* bytes it can grow into in place */
    size_t guard;      /* bytes after the capacity that fault (PROT_NONE) */
    size_t page_size;  /* the transparent huge page size when advised, else the base page */
} rtvm_memory_info;

/* A thread body. Runs on a VM thread whose stack rtvm mapped, guarded and protected from
 * transparent huge pages before the thread started. It may end its thread with
 * pthread_exit(): the VM learns of it as of a return. It must not longjmp out of the body
 * (there is no frame of the caller's to jump to). */
typedef void (*rtvm_thread_fn)(void *arg);

/* The newest rtvm_init_args version this library knows (RTVM_VERSION_1). Any thread, any
 * time. */
int rtvm_get_version(void);

/* Fills *args with the defaults for args->version (no options, ignore_unrecognized 0, no
 * output hook). RTVM_EVERSION if the version is unknown (nothing written). Any thread. */
int rtvm_get_default_init_args(rtvm_init_args *args);

/* Creates the VM. On success stores it in *vm_out and returns RTVM_OK; on failure returns a
 * negative code (RTVM_EEXITED for options that print and stop), leaves *vm_out untouched
 * and nothing behind (no thread, no mapping, no signal handler). The options are copied.
 * Concurrent calls are serialized (see Thread-safety): RTVM_EEXIST only while a VM exists. */
int rtvm_create(const rtvm_init_args *args, rtvm_vm **vm_out);

/* Destroys the VM, as DestroyJavaVM: waits for a background pretouch and for the VM's own
 * threads (those rtvm_thread_start started, and the threads they start meanwhile) to
 * finish, joins them, prints the native memory report with -XX:+PrintNMTStatistics, stops
 * the workers, gives back the signal handlers, releases all memory and frees the VM. It does
 * not wait for attached threads. Returns RTVM_OK, or RTVM_ERR if a thread or the background
 * pretouch had failed (the VM is destroyed regardless). Called on one of the VM's own threads
 * it refuses with RTVM_ERR and changes nothing; an attached thread may call it. NULL is a
 * no-op. Unjoined rtvm_thread handles stay valid: rtvm_thread_join then only frees them.
 * When it returns no output hook call is in flight and none comes, and none of the VM's
 * threads exists any more (the kernel has released them: /proc/self/status counts the host's
 * threads only). In a child of fork():
 * RTVM_EFORK, nothing done. */
int rtvm_destroy(rtvm_vm *vm);

/* The message of the last failed call on this thread ("" if none). Valid until the next
 * rtvm call on this thread. Any thread, any time (also after rtvm_destroy). */
const char *rtvm_last_error(void);

/* Allocates `bytes` (rounded up to 8; 0 gives a unique 8-byte block) from the committed
 * heap, 8-byte aligned, lock-free (one atomic add in the common case). Returns NULL when
 * the committed part cannot hold it — as cheaply as a success; grow it with
 * rtvm_heap_expand. rtvm_last_error then gives the figures the allocator saw when it gave up
 * (the bytes free at the heap's end, fewer than asked for; used; committed). A shrink or an
 * expansion running meanwhile never makes it fail while the heap it leaves can hold the
 * block. The memory is zero-filled, stays valid until rtvm_destroy returns, and
 * may be used while a background pretouch runs. Any thread. */
void *rtvm_heap_allocate(rtvm_vm *vm, size_t bytes);

/* Sets up *tlab for the calling thread (no memory is taken yet): buffers of `buffer_size`
 * bytes (0: 256 KiB; at least 4 KiB). Any thread; the TLAB is then that thread's. */
int rtvm_tlab_init(rtvm_vm *vm, rtvm_tlab *tlab, size_t buffer_size);

/* The slow path of rtvm_tlab_allocate: takes a fresh buffer (the rest of the old one stays
 * unused) or, for blocks over half a buffer, allocates from the heap directly. NULL when the
 * heap cannot hold the block. Only through rtvm_tlab_allocate. */
void *rtvm_tlab_allocate_slow(rtvm_tlab *tlab, size_t bytes);

/* Allocates `bytes` (rounded up to 8; 0 gives a unique 8-byte block) from the TLAB: a
 * compare and an add, no atomic operation, unless the buffer is used up. NULL when the heap
 * cannot hold the block (rtvm_last_error says why). The memory is as rtvm_heap_allocate's. */
static inline void *rtvm_tlab_allocate(rtvm_tlab *tlab, size_t bytes) {
    size_t size = bytes <= 8 ? 8 : (bytes + 7) & ~(size_t)7;
    if (size >= bytes && (size_t)(tlab->end - tlab->top) >= size) {
        void *p = tlab->top;
        tlab->top += size;
        return p;
    }
    return rtvm_tlab_allocate_slow(tlab, bytes);
}

/* Commits `bytes` more of the heap (rounded up to its page size; pretouched with
 * -XX:+AlwaysPreTouch, without waiting for a background pretouch) and stores the new
 * committed size in *committed_out if it is not NULL. On failure (RTVM_ENOMEM: beyond
 * MaxHeapSize, or the commit or pretouch failed) the heap keeps its size, what was committed
 * for it is given back, and the message says why. Any thread; expansions are serialized. */
int rtvm_heap_expand(rtvm_vm *vm, size_t bytes, size_t *committed_out);

/* Shrinks the heap's committed part to `target` bytes (rounded up to its page size) and
 * gives the pages above it back to the kernel (RSS and the committed figures drop; the range
 * stays mapped, so the kernel's commit charge for it stays), storing the committed size in
 * *committed_out if not NULL. Refused with RTVM_EINVAL, nothing changed, below what is
 * allocated, below MinHeapSize or on explicit huge pages. A background pretouch, held or not,
 * is not waited for: it skips the part given back (a chunk in flight there finishes first).
 * Safe while other threads allocate, expand and read the figures: allocation never waits for
 * its system calls (an allocation that does not fit may take a lock the shrink holds for a
 * few loads and stores) and never fails because of it while the heap it leaves has room; a block handed out is
 * never given back; rtvm_heap_get_stats shows the heap before or after it, nothing between.
 * rtvm_heap_expand makes the part usable again. Any thread, concurrently with any heap call;
 * not after rtvm_destroy (the VM pointer is dangling then, as for every call taking it). */
int rtvm_heap_shrink(rtvm_vm *vm, size_t target, size_t *committed_out);

/* Trims the C heap (glibc malloc_trim(0), as `jcmd System.trim_native_heap`): the free parts
 * of every arena go back to the kernel. Stores RSS+Swap before and after, in bytes, where
 * the pointers are not NULL. RTVM_EINVAL where glibc is not the allocator. Periodic trims:
 * -XX:TrimNativeHeapInterval=<ms>. Any thread, concurrently with the periodic trimmer (glibc
 * serializes the trims); not after rtvm_destroy. */
int rtvm_trim_native_heap(rtvm_vm *vm, size_t *rss_before, size_t *rss_after);

/* Fills *out with the heap figures (counters only). Any thread. */
int rtvm_heap_get_stats(rtvm_vm *vm, rtvm_heap_stats *out);

/* Stores in *out how many committed heap bytes are resident (mincore over the committed
 * heap: a system call that walks every page — not for a hot path). Any thread. */
int rtvm_heap_resident(rtvm_vm *vm, size_t *out);

/* The nursery (-Xmn, -XX:NewSize): the first NewSize bytes of the committed heap, an arena
 * whose allocations all end together. rtvm_heap_allocate and the TLAB never hand it out;
 * rtvm_with_nursery opens a scope — fn(ctx, nursery) runs, allocates with
 * rtvm_nursery_allocate, and when it returns every nursery allocation is over, the pages it
 * used are given back (MADV_DONTNEED) and the nursery is empty for the next scope. One scope at a time per VM (others wait); not nested on one
 * thread (RTVM_EINVAL); fn must return normally (no longjmp out of it). RTVM_EINVAL without
 * a nursery. Any thread. */
typedef struct rtvm_nursery rtvm_nursery;
int rtvm_with_nursery(rtvm_vm *vm, void (*fn)(void *ctx, rtvm_nursery *nursery), void *ctx);

/* Allocates `bytes` (rounded up to 8) in the nursery, zero-filled (a scope's end gives the
 * pages it used back to the kernel; on explicit huge pages, committed whole, a later scope
 * finds the memory as the previous one left it); NULL when the nursery is full
 * (rtvm_last_error says how full). Only during the rtvm_with_nursery call that lent it; from
 * any thread during that call. */
void *rtvm_nursery_allocate(rtvm_nursery *nursery, size_t bytes);

/* Stores the nursery's bytes used in this scope and its size (NewSize) where not NULL. */
int rtvm_nursery_get_usage(rtvm_nursery *nursery, size_t *used, size_t *capacity);

/* Releases the background pretouch that -XX:+HoldBackgroundPreTouch held at start-up, so
 * the heap is pretouched from now on. Returns RTVM_OK, or RTVM_EINVAL if it was not held
 * (the flag not given, or released already). A shutdown releases it too. The hold holds the
 * heap's pretouch only: its workers serve other work meanwhile (embedder memories are
 * pretouched, waited for, shrunk and released; the heap shrinks and grows). Any thread. */
int rtvm_release_pretouch(rtvm_vm *vm);

/* Reserves memory for the embedder with the VM's policies: `capacity` bytes it can grow into
 * in place followed by `guard` bytes that fault, at an address that never moves, with
 * `initial` bytes committed (sizes round up to the base page). Under
 * -XX:+UseTransparentHugePages (THP mode madvise) the reservation is aligned to the huge page
 * size and advised for huge pages; with -XX:+AlwaysPreTouch the committed part is pretouched
 * by the worker gang (-XX:+BackgroundPreTouch: in the background, so the call returns at once
 * and the memory is usable meanwhile — the work waits in the gang's queue if the gang is busy
 * pretouching another memory, never for a held heap pretouch (-XX:+HoldBackgroundPreTouch),
 * whose workers take it up meanwhile; it never runs on the calling thread). NMT counts it under `category` (summary, virtual
 * memory map and details). -Xlog:os reports each reservation and growth. Stores the handle
 * in *memory_out. Errors: RTVM_EINVAL (NULL arguments, zero capacity, initial beyond the
 * capacity, sizes that overflow), RTVM_ENOMEM (no address space or memory: reserve, commit
 * or pretouch), RTVM_ESHUTDOWN (the VM is being destroyed); rtvm_last_error names the
 * operation and the errno. The memory does not keep the VM alive and stays usable after
 * rtvm_destroy (a growth is then pretouched by the calling thread alone). Any thread. */
int rtvm_memory_reserve(rtvm_vm *vm, const char *category, size_t capacity, size_t guard, size_t initial, rtvm_memory **memory_out);

/* Grows the usable part to new_size bytes: commits (and with -XX:+AlwaysPreTouch
 * pretouches) the new part; a size at or below the current one changes nothing. On failure
 * the memory keeps its size and what was committed for the attempt is given back: RTVM_ENOMEM
 * (beyond the capacity, or the commit failed), RTVM_ERR (the pretouch failed). Any thread;
 * calls on one memory are serialized. */
int rtvm_memory_grow(rtvm_memory *memory, size_t new_size);

/* Gives back the pages of [offset, offset + len) (page-aligned, inside the usable part): they
 * read as zero afterwards and are no longer resident; the range stays usable (a write faults a
 * fresh page in) — how a runtime resets a linear memory for reuse. RTVM_EINVAL for a range
 * that is not page-aligned or not inside the usable part (nothing changes). Any thread; calls
 * on one memory are serialized. Also after rtvm_destroy (the memory outlives its VM). */
int rtvm_memory_discard(rtvm_memory *memory, size_t offset, size_t len);

/* Shrinks the usable part to new_size bytes (rounded up to the base page): the tail is
 * uncommitted — an access there faults, its memory and commit charge go back to the kernel —
 * and rtvm_memory_grow commits it again (zero-filled). A background pretouch is waited for
 * first; a size at or above the current one changes nothing. Any thread; calls on one
 * memory are serialized. Also after rtvm_destroy (the memory outlives its VM). */
int rtvm_memory_shrink(rtvm_memory *memory, size_t new_size);

/* Fills *out with the memory's figures. Any thread (waits for a growth in progress on it). */
int rtvm_memory_get_info(rtvm_memory *memory, rtvm_memory_info *out);

/* Unmaps the memory (after waiting for its background pretouch, if one runs) and frees the
 * handle; its pages must not be used afterwards. RTVM_OK, or the code of a background
 * pretouch that failed (the memory is unmapped anyway). NULL is a no-op. Once per handle,
 * with no other call on it running. */
int rtvm_memory_release(rtvm_memory *memory);

/* Gives back the calling thread's stack pages below its current frame — what a deep
 * recursion once made resident — keeping only what this call stands on (its frame and the
 * ABI's red zone); the stack stays mapped and the pages fault back in as zeroes when it grows
 * again. Stores the bytes given back in *freed_out if not NULL. For a VM thread or an
 * attached one; RTVM_EDETACHED for any other thread (nothing done). Only a thread trims its
 * own stack: rtvm never touches another thread's stack while it may run. rtvm's own threads
 * (the workers, the dispatcher, the attach listener, the trimmer) trim themselves when they
 * go idle after work. Not after rtvm_destroy (the VM pointer is dangling then). */
int rtvm_trim_current_stack(rtvm_vm *vm, size_t *freed_out);

/* Starts a VM thread named `name` running fn(arg), with the stack size of -Xss, and stores
 * its handle in *thread_out. Errors: RTVM_EAGAIN (a thread, process or mapping limit),
 * RTVM_ENOMEM (no memory for the stack), RTVM_EINVAL (NULL arguments), RTVM_ESHUTDOWN (the
 * VM is being destroyed). Any thread, also a VM thread during rtvm_destroy (the destroy then
 * waits for the new thread too). */
int rtvm_thread_start(rtvm_vm *vm, const char *name, rtvm_thread_fn fn, void *arg, rtvm_thread **thread_out);

/* Waits for the thread to finish, unmaps its stack and frees the handle (also after
 * rtvm_destroy, which joined it). RTVM_ERR if its guard zone could not be placed (its body
 * did not run). Once per handle; not from the thread itself. */
int rtvm_thread_join(rtvm_thread *thread);

/* The stack of a thread started with rtvm_thread_start, valid until it is joined. Any
 * thread. */
int rtvm_thread_stack_bounds(const rtvm_thread *thread, rtvm_stack_bounds *out);

/* The calling thread's stack, if it is one of the VM's threads (started by it or attached);
 * RTVM_EDETACHED otherwise. Call it once per thread and keep the result. */
int rtvm_current_stack_bounds(rtvm_vm *vm, rtvm_stack_bounds *out);

/* Attaches the calling thread — one the host created — to the VM under `name` (NULL:
 * "Thread-<tid>"), as JNI's AttachCurrentThread: it then appears in the NMT report, and
 * rtvm_current_stack_bounds answers for it (its stack as pthread_getattr_np reports it, the
 * guard being glibc's guard page). A thread already attached, or started by the VM, gets
 * RTVM_OK and stays as it is. A thread that ends while attached is forgotten by the VM.
 * RTVM_ESHUTDOWN once the VM is being destroyed. */
int rtvm_attach_current_thread(rtvm_vm *vm, const char *name);

/* Detaches the calling thread. RTVM_EDETACHED if it is not attached; RTVM_EINVAL for a
 * thread the VM started (it cannot be detached). Not after rtvm_destroy. */
int rtvm_detach_current_thread(rtvm_vm *vm);

/* Writes the native memory tracking summary (HotSpot's layout, NUL-terminated) into buf,
 * and the length it needs, including the NUL, into *needed if not NULL. Returns RTVM_OK, or
 * RTVM_EINVAL if tracking is off (-XX:NativeMemoryTracking=summary turns it on) or buf is
 * NULL or too small (nothing written to buf).
 * The size-query idiom works: a call with no buffer (or too small a one) keeps the report it
 * measured, and the same thread's next call with a buffer of at least *needed bytes receives
 * exactly that report — even if the process's memory changed in between (a report kept for
 * one VM is never given for another, even one created at the same address):
 *     size_t n; rtvm_nmt_summary(vm, NULL, 0, &n); char *b = malloc(n);
 *     rtvm_nmt_summary(vm, b, n, NULL);
 * Any thread. */
int rtvm_nmt_summary(rtvm_vm *vm, char *buf, size_t len, size_t *needed);

/* Runs a diagnostic command as `jcmd <pid> <command>` does ("VM.native_memory summary",
 * "Thread.print", "VM.log what=gc", "help", or one of the embedder's) and writes what it
 * printed (NUL-terminated) into buf, with the size-query idiom of rtvm_nmt_summary (the text
 * a query made is kept for the same thread's next call with the same command and a big
 * enough buffer: an embedder's command runs once). Returns RTVM_OK, or RTVM_EINVAL for an
 * unknown command or argument (rtvm_last_error() has HotSpot's words:
 * "java.lang.IllegalArgumentException: Unknown diagnostic command"), a NULL command, or a
 * buffer that is NULL or too small; RTVM_ERR for an embedder's command that failed
 * (rtvm_last_error() has what it printed, then "java.lang.RuntimeException: <its message>").
 * An embedder's command runs on a thread of its own while the caller waits (in a safe
 * region if the caller is a mutator). Any thread; not from inside the output hook. */
int rtvm_diagnostic_command(rtvm_vm *vm, const char *command, char *buf, size_t len,
                            size_t *needed);

/* ---- Diagnostic commands of the embedder ----
 *
 * A collector (or any embedder) adds its own commands — GC.heap_info, GC.run — to the VM's
 * table. `jcmd <pid> help` lists them among rtvm's own, sorted as HotSpot sorts them (by
 * bytes); `help <name>` prints HotSpot's block (name, description, Impact, Permission,
 * Syntax, Arguments, Options); `jcmd <pid> <name> <args>` and rtvm_diagnostic_command parse
 * the arguments with HotSpot's rules and messages ("java.lang.IllegalArgumentException:
 * Integer parsing error in command argument '-parallel'. Could not parse: abc.", "The
 * argument 'filename' is mandatory.", "Duplicates in diagnostic command arguments", ...)
 * and call the command's function only with a valid argument list.
 *
 * Parameters: arguments are positional (the first token that names no option is the first
 * argument; only its key counts: "GC.x a=b" gives "a"), options are `key` or `key=value`.
 * Types (the names help prints):
 *   RTVM_DCMD_STRING       STRING       the text (quotes removed); `key` alone: ""
 *   RTVM_DCMD_BOOLEAN      BOOLEAN      true/false in any case; `key` alone: true
 *   RTVM_DCMD_INT          INT          a signed 64-bit decimal
 *   RTVM_DCMD_MEMORY_SIZE  MEMORY SIZE  bytes, with an optional k/m/g suffix (kb/mb/gb too)
 *   RTVM_DCMD_NANOTIME     NANOTIME     a span with a unit ns, us, ms, s, m, h, d (or 0), in ns
 *
 * Where the function runs: on a VM service thread of its own, "DCmd <name>" (listed by
 * Thread.print/jstack), never on a mutator — whoever asked: the attach listener (jcmd) or a
 * thread calling rtvm_diagnostic_command. It is not stopped with the world and may block
 * (GC.run waiting for a collection). Runs may overlap: the function may be called on several
 * threads at once with the same ctx. It may call rtvm (rtvm_diagnostic_command included,
 * not rtvm_destroy: refused on a VM thread). It must return (no longjmp out of it, no
 * pthread_exit). A function that never returns holds up only its caller: for jcmd, the
 * function's thread answers its client itself and the attach listener goes on serving the
 * others. Running an embedder's
 * command starts a thread and waits for it: not from a stop-of-the-world callback or a
 * handshake operation.
 *
 * Destroy: rtvm_destroy first closes the table (no new run, no registration;
 * rtvm_dcmd_cancelled turns 1) and gives running functions 5 s to return — their callers
 * get their replies. A function still running after that is left running on its thread
 * (its thread, stack and argument view stay valid until it returns; it must not use the
 * vm pointer after rtvm_destroy returns), its caller gets a failure, and rtvm_destroy
 * returns RTVM_ERR naming it (the VM is destroyed regardless). Then each command's release
 * function is called once, with its ctx: at once for a command no run uses, or when its
 * last run returns. Without a release function, ctx must stay valid until rtvm_destroy has
 * returned RTVM_OK (or, if it reported a function still running, until that one returns).
 */

#define RTVM_DCMD_STRING      1
#define RTVM_DCMD_BOOLEAN     2
#define RTVM_DCMD_INT         3
#define RTVM_DCMD_MEMORY_SIZE 4
#define RTVM_DCMD_NANOTIME    5

/* An argument or option. For an option, name is its key (no space, '=' or quote): "-all",
 * "scale"; an argument's name appears in help only ("filename"). */
typedef struct rtvm_dcmd_param {
    const char *name;
    const char *description;    /* NULL: "" */
    int type;                   /* RTVM_DCMD_* */
    int mandatory;              /* non-zero: the command fails without it (no default then) */
    const char *default_value;  /* NULL: no default; else read as its type reads a value
                                   ("false", "0", "1m", "10s") and printed by help */
} rtvm_dcmd_param;

/* The values of one run, and its output: valid only during the call of the function, on
 * its thread. */
typedef struct rtvm_dcmd_args rtvm_dcmd_args;
typedef struct rtvm_dcmd_output rtvm_dcmd_output;

/* A command's function: writes its output with rtvm_dcmd_print/rtvm_dcmd_write and returns
 * 0, or non-zero to fail: the reply is then what it wrote followed by
 * "java.lang.RuntimeException: <message>" (the message of rtvm_dcmd_set_error, or
 * "diagnostic command <name> failed (<code>)"), status -1 for jcmd. */
typedef int (*rtvm_dcmd_fn)(void *ctx, const rtvm_dcmd_args *args, rtvm_dcmd_output *out);

typedef struct rtvm_dcmd_desc {
    int version;                       /* RTVM_VERSION_1 */
    const char *name;                  /* HotSpot's Area.name form: "GC.run" (letters,
                                          digits, '_'; at most 100 bytes) */
    const char *description;           /* help's second line */
    const char *impact;                /* NULL: "Low"; "Medium: Depends on Java heap size
                                          and content." */
    const char *permission;            /* NULL: no Permission line; "java.lang.management.
                                          ManagementPermission(monitor)" */
    size_t n_arguments;
    const rtvm_dcmd_param *arguments;  /* in order */
    size_t n_options;
    const rtvm_dcmd_param *options;
    rtvm_dcmd_fn fn;
    void *ctx;                         /* passed to fn and release, untouched */
    void (*release)(void *ctx);        /* NULL, or called once when rtvm no longer needs ctx
                                          (see Destroy above); not if the registration
                                          fails */
} rtvm_dcmd_desc;

/* Adds the command described by *desc (everything copied: the descriptor, its strings and
 * arrays may be freed on return). Errors, with nothing registered: RTVM_EVERSION (an
 * unknown desc->version), RTVM_EINVAL (NULL vm, desc, name, description or fn; a name not
 * of the Area.name form; a malformed parameter: NULL or duplicate name, an unknown type, a
 * default its type cannot read, a mandatory parameter with a default), RTVM_EEXIST (one of
 * rtvm's own commands, or one registered before), RTVM_ESHUTDOWN (rtvm_destroy has begun),
 * RTVM_EFORK (in a child of fork()); rtvm_last_error() says which. Any thread. */
int rtvm_register_diagnostic_command(rtvm_vm *vm, const rtvm_dcmd_desc *desc);

/* Reading the values, inside the function. The getters return 1 and store the value if
 * the parameter has one (given on the command line, or its default), 0 if it has none
 * (*value untouched), RTVM_EINVAL for NULL pointers, a name the command does not declare,
 * or a parameter of another type. A string stays valid during the call. */
int rtvm_dcmd_get_string(const rtvm_dcmd_args *args, const char *name, const char **value);
int rtvm_dcmd_get_boolean(const rtvm_dcmd_args *args, const char *name, int *value);
int rtvm_dcmd_get_int(const rtvm_dcmd_args *args, const char *name, int64_t *value);
int rtvm_dcmd_get_memory_size(const rtvm_dcmd_args *args, const char *name, uint64_t *value);
int rtvm_dcmd_get_nanotime(const rtvm_dcmd_args *args, const char *name, int64_t *value);

/* 1 if the parameter was given on the command line, 0 if not (its default, if any, applies),
 * RTVM_EINVAL for a name the command does not declare. */
int rtvm_dcmd_is_set(const rtvm_dcmd_args *args, const char *name);

/* 1 once rtvm_destroy has begun: a function that waits should return soon (see Destroy). */
int rtvm_dcmd_cancelled(const rtvm_dcmd_args *args);

/* Appends text (NUL-terminated) or len bytes to the command's output (bytes that are not
 * UTF-8 become U+FFFD). RTVM_OK, or RTVM_EINVAL for NULL pointers. */
int rtvm_dcmd_print(rtvm_dcmd_output *out, const char *text);
int rtvm_dcmd_write(rtvm_dcmd_output *out, const char *data, size_t len);

/* The message of the failure the function is about to return (copied; used only if it
 * returns non-zero). */
int rtvm_dcmd_set_error(rtvm_dcmd_output *out, const char *message);

/* ---- Stopping threads for a collector ----
 *
 * Mutators are the VM's application threads (rtvm_thread_start) and attached threads: the
 * threads the embedder's code runs on. Each is running (the embedder's code), in a safe
 * region (it published its stack pointer and registers and blocks before it runs the
 * embedder's code again), stopped, or gone. rtvm's own threads (the worker gang, the
 * dispatcher, the attach listener, the trimmer) and the collector's threads
 * (rtvm_collector_thread_start) are not mutators: they are never stopped, and may run and
 * allocate while the world is stopped.
 *
 * A stop of the world (rtvm_stop_the_world, or rtvm_world_stop ... rtvm_world_resume) arms
 * every other mutator's poll, counts those in a safe region at once, waits for the rest to
 * reach a poll (rtvm_safepoint_poll) or a safe region, and sends the stop signal
 * (-XX:SafepointSignal, a real-time signal, SIGRTMIN+4 by default) to those still running
 * after -XX:SafepointSignalDelay (200 us). Its handler runs on the stack the thread runs on
 * (never SA_ONSTACK), so the kernel saves the thread's whole register file inside its scan
 * range; it allocates nothing and takes no lock.
 *
 * Where the signal stops a thread: only where the interrupted instruction lies outside code
 * that may hold a process-wide lock — the C library (malloc's arenas, stdio, the atexit and
 * fork locks), the dynamic linker, libgcc_s, libstdc++, known allocators (jemalloc, tcmalloc,
 * mimalloc, libgc) and sanitizer runtimes, librtvm itself, ranges declared RTVM_CODE_NO_STOP
 * (rtvm_declare_code) — and outside a no-stop section (rtvm_async_stop_disable). Found
 * there, the thread is left to run and asked again a little later (20 us, doubling up to
 * 1 ms; a thread found blocked in a system call, up to 50 ms), at most one signal pending per
 * thread. So no thread is ever stopped holding malloc's, stdio's or the loader's lock: the
 * code that holds the world stopped, a handshake operation and the collector's threads may
 * malloc, print and log while the world is stopped. A non-polling loop in the embedder's own
 * code or in JIT code (anonymous executable memory) is stopped there. A thread blocked inside
 * a C library call outside a safe region cannot be stopped: the stop times out naming it with
 * what the kernel says of it (state, system call, signal mask) — put blocking calls in safe
 * regions.
 *
 * What a thread in a safe region may do: block, sleep, call foreign code or the kernel, and
 * anything that does not touch the collector's objects. Leaving the region waits while the
 * world is stopped; a poll inside a region leaves it safe. rtvm's own waits (thread start and
 * join, attach and detach, waiting for the gang, for a stop or a handshake, destroy) are safe
 * regions already; a thread starts in one and leaves it when its function begins.
 *
 * The code that holds the world stopped must not start, join, attach or detach threads, stop
 * the world again, handshake or destroy the VM (refused with RTVM_EINVAL on the thread that
 * stopped it; a thread it handed the world to would wait until the timeout), nor fork(): the
 * child gets only the forking thread, a copy of the stopped world that no other thread will
 * ever end (rtvm calls in the child return RTVM_EFORK; a leave or poll there does not wait).
 * A thread that starts during a stop stops before its function; a thread that ends, detaches
 * or attaches waits until the world resumes (its stack stays mapped while the collector may
 * scan it).
 *
 * Signals: the stop signal may interrupt a system call: with SA_RESTART most restart, those
 * that never restart (poll, epoll_wait, nanosleep, sem_timedwait, ...) return EINTR as they do
 * for any handled signal. VM threads unblock the stop signal and the synchronous faults
 * (SIGSEGV, SIGBUS, SIGILL, SIGFPE) whatever mask they inherit; an attached thread has them
 * unblocked while it is attached (its own mask is put back when it detaches). A thread that
 * blocks the stop signal anyway is stopped only by polls and safe regions (at most one signal
 * stays pending for it, and rtvm_destroy discards it: it never reaches the host after the VM
 * is gone). rtvm's SIGSEGV handler is unaffected: a stack overflow during a stop is still
 * reported as an overflow. A thread found on another stack than its own — its alternate
 * signal stack (inside a handler installed with SA_ONSTACK), a fiber it declared
 * (rtvm_set_current_fiber), or an unknown one (the readable mapping that holds its stack
 * pointer) — reports that stack's part in use (altstack_start/end, other_kind), and its whole
 * usable stack as its scan range. With -Xrs no signal is installed: only polls and safe
 * regions stop threads, and a thread that never polls makes the stop time out (the message
 * says so). The embedder's own signals are its own: choose -XX:SafepointSignal if SIGRTMIN+4
 * is taken (rtvm refuses a signal that already has a handler, and then stops threads without
 * it).
 *
 * Stress and diagnostics as in HotSpot (diagnostic flags): -XX:+SafepointALot and
 * -XX:+HandshakeALot stop the world / handshake every mutator each
 * -XX:GuaranteedSafepointInterval ms and verify each stop; -XX:+SafepointTimeout reports the
 * threads still running after -XX:SafepointTimeoutDelay ms, -XX:+AbortVMOnSafepointTimeout
 * then ends the process, -XX:HandshakeTimeout=<ms> makes a late handshake fatal.
 *
 * No rtvm function is async-signal-safe: do not call rtvm (nor stop the world) from a signal
 * handler — the handler may have interrupted rtvm_thread_start, malloc or rtvm's own locks
 * on that very thread, and would wait for them for ever. The exceptions are the inline
 * rtvm_safepoint_poll (a load) and the poll's slow path on a mutator.
 */

#define RTVM_STOPPED_POLL        1 /* at rtvm_safepoint_poll: its registers are in its scan range */
#define RTVM_STOPPED_SAFE_REGION 2 /* in a safe region: registers saved at its entry, `registers` */
#define RTVM_STOPPED_SIGNAL      3 /* by the stop signal: its context is in its scan range */

#define RTVM_STACK_SIGNAL  1 /* other_kind: the thread's alternate signal stack */
#define RTVM_STACK_FIBER   2 /* other_kind: a stack it declared with rtvm_set_current_fiber */
#define RTVM_STACK_UNKNOWN 3 /* other_kind: the readable mapping holding its stack pointer */

typedef struct rtvm_stopped_thread {
    uint64_t id;                            /* rtvm_current_thread_id() of that thread */
    int tid;                                /* the kernel thread id */
    const char *name;                       /* valid while the world is stopped */
    int how;                                /* RTVM_STOPPED_POLL, _SAFE_REGION, _SIGNAL */
    uintptr_t scan_start, scan_end;         /* [sp, base): holds every register value too
                                               (poll and signal stops); empty before the
                                               thread's function began */
    uintptr_t altstack_start, altstack_end; /* 0, 0 unless found on another stack
                                               (other_kind): then [sp, end) of it, and scan
                                               is the whole stack */
    const uintptr_t *registers;             /* the callee-saved registers as published (x86-64:
                                               rbx, rbp, r12-r15), valid while stopped */
    size_t n_registers;
    int other_kind;                         /* 0, RTVM_STACK_SIGNAL, _FIBER or _UNKNOWN */
} rtvm_stopped_thread;

typedef void (*rtvm_world_fn)(void *ctx, const rtvm_stopped_thread *threads, size_t n);

/* Stops every other mutator, calls fn(ctx, threads, n) while they are stopped, and resumes
 * them. timeout_ms bounds the wait for the threads to stop, and for another stop or handshake
 * to end first: RTVM_ETIMEDOUT if some did not stop (rtvm_last_error names them with their
 * /proc state; the others were let go, fn was not called) or another stop held the VM for the
 * whole time. RTVM_EINVAL from inside a callback or a handshake, from a thread in a safe
 * region while another thread holds the world stopped, or with a NULL vm or fn. fn may
 * malloc. -Xlog:safepoint logs each stop as HotSpot does ("Safepoint \"<reason>\", Time since
 * last: ... ns, Reaching safepoint: ... ns, ..."). Any thread; not after rtvm_destroy. */
int rtvm_stop_the_world(rtvm_vm *vm, const char *reason, int timeout_ms, rtvm_world_fn fn,
                        void *ctx);

/* The same stop, handed between threads (a collector stops the mutators on one of its threads
 * and resumes them from another): rtvm_world_stop stops the world as rtvm_stop_the_world does
 * and returns it in *world_out; rtvm_world_threads gives its threads (valid until it is
 * resumed); rtvm_world_resume lets them go and frees the world — from any thread, once. The
 * thread that stopped it must not stop the world or handshake until it is resumed (that is
 * RTVM_EINVAL); another thread that does waits up to its timeout. */
typedef struct rtvm_world rtvm_world;
int rtvm_world_stop(rtvm_vm *vm, const char *reason, int timeout_ms, rtvm_world **world_out);
int rtvm_world_threads(const rtvm_world *world, const rtvm_stopped_thread **threads, size_t *n);
int rtvm_world_resume(rtvm_world *world);

/* Runs fn(ctx, t) for the mutator thread_id while only that thread is stopped: by that thread
 * at its next poll (t describes it there), or by the caller while it is in a safe region or
 * stopped by the signal. Waits up to 10 s for a thread that neither polls, nor is safe, nor
 * could be stopped by the signal (RTVM_ETIMEDOUT, fn not called; rtvm_last_error says why),
 * and up to 10 s for an fn the target runs to return (RTVM_ETIMEDOUT: fn goes on running on
 * the target, which is let go when it returns); RTVM_EINVAL for an unknown thread, NULL fn, or from inside a callback. -Xlog:handshake logs
 * it. fn must be callable from either thread and must not stop the world or handshake; it may
 * malloc, and enter and leave safe regions. Any thread. */
int rtvm_handshake(rtvm_vm *vm, uint64_t thread_id,
                   void (*fn)(void *ctx, const rtvm_stopped_thread *t), void *ctx);

/* The poll: put it at loop back-edges and other points a mutator may stop. One load of a
 * process-wide word; only while a stop or a handshake is pending anywhere does it call
 * rtvm_safepoint_poll_slow, which checks the calling thread's own poll word and stops there
 * (spilling its registers onto its stack) if the stop is for it. On any thread; it does
 * nothing on a thread that is not a mutator, nor inside a safe region (it stays safe), and
 * inside a no-stop section it leaves the stop to the section's end. */
extern const volatile uint32_t *const rtvm_safepoint_pending;
void rtvm_safepoint_poll_slow(void);
static inline void rtvm_safepoint_poll(void) {
    if (__builtin_expect(*rtvm_safepoint_pending != 0, 0)) rtvm_safepoint_poll_slow();
}

/* Enters a safe region on the calling thread (a mutator of this VM): until the matching
 * rtvm_leave_safe_region it counts as stopped. Publishes the caller's stack pointer and its
 * callee-saved registers exactly as the caller holds them at this call (the entry is a
 * trampoline that touches none of them; a stop signal arriving meanwhile cannot overwrite
 * them): a value the caller keeps only in a register is in `registers`, one it keeps in its
 * frames is in the scan range. Regions nest. RTVM_EDETACHED for any other thread. */
int rtvm_enter_safe_region(rtvm_vm *vm);

/* Leaves the innermost safe region (the outermost waits while the world is stopped).
 * RTVM_EINVAL if the thread is not in one, RTVM_EDETACHED for a thread that is not a mutator,
 * RTVM_EFORK in the child of fork() (at once, never a wait). */
int rtvm_leave_safe_region(rtvm_vm *vm);

/* The VM thread id of the calling thread (started by the VM or attached), 0 for a thread rtvm
 * does not know. Any thread. */
uint64_t rtvm_current_thread_id(rtvm_vm *vm);

/* ---- What a collector builds on ---- */

/* Starts a collector's thread: a VM thread like rtvm_thread_start's (named, guarded, listed by
 * jstack and NMT) that is not a mutator: never stopped, free to run and allocate while the
 * world is stopped. rtvm_destroy runs the shutdown hooks once the application threads are
 * done, then waits for the collector's threads: a hook must make them end. Join it with
 * rtvm_thread_join (or let rtvm_destroy wait for it and free the handle with
 * rtvm_thread_join after). Any thread. */
int rtvm_collector_thread_start(rtvm_vm *vm, const char *name, rtvm_thread_fn fn, void *arg,
                                rtvm_thread **thread_out);

/* Adds fn(ctx) to what rtvm_destroy runs, on the destroying thread and in the order added,
 * once every application thread has finished and before it waits for the collector's
 * threads: where a collector tells them to end. RTVM_ESHUTDOWN once the destroy has begun.
 * Any thread. */
int rtvm_add_shutdown_hook(rtvm_vm *vm, void (*fn)(void *ctx), void *ctx);

/* A no-stop section on the calling mutator: the stop signal does not stop the thread between
 * rtvm_async_stop_disable and the matching rtvm_async_stop_enable (they nest); a stop that
 * found it inside takes it at the enable, as at a poll. For code that holds a lock the
 * collector needs while the world is stopped, or that has allocated an object a conservative
 * scan cannot see yet (before its metadata is set). Keep them short: a stop waits for them.
 * Nothing on a thread that is not a mutator. */
void rtvm_async_stop_disable(void);
void rtvm_async_stop_enable(void);

#define RTVM_CODE_NO_STOP   1 /* the stop signal never stops a thread in this code */
#define RTVM_CODE_STOPPABLE 2 /* it may, whatever else covers the range */

/* Declares the code [start, end) as RTVM_CODE_NO_STOP (code of the embedder's that may hold a
 * lock a collector needs: a statically linked allocator) or RTVM_CODE_STOPPABLE (a declared
 * range wins over the system objects rtvm finds itself); process-wide, for every VM. The same
 * range declared again changes its kind; rtvm_forget_code takes it back (code unloaded, JIT
 * code freed). RTVM_EINVAL for an empty range, an unknown kind, a full table (256 ranges), or
 * a range never declared. Any thread. */
int rtvm_declare_code(uintptr_t start, uintptr_t end, int kind);
int rtvm_forget_code(uintptr_t start, uintptr_t end);

/* Declares that the calling mutator now runs on the stack [start, end) (a fiber or coroutine
 * of the embedder's; 0, 0: its own stack again): a stop reports the part of it in use
 * (RTVM_STACK_FIBER) besides the thread's own stack. RTVM_EDETACHED for a thread that is not a
 * mutator of vm. */
int rtvm_set_current_fiber(rtvm_vm *vm, uintptr_t start, uintptr_t end);

#ifdef __cplusplus
}
#endif

#endif /* RTVM_H */
