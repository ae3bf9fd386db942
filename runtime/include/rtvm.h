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
 *   rtvm_current_stack_bounds, rtvm_trim_current_stack, rtvm_nmt_summary — return
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
#define RTVM_EEXIST    (-5) /* a VM already exists in this process */
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
    size_t used;       /* handed out (TLAB buffers count whole when taken) */
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
 * When it returns no output hook call is in flight and none comes. In a child of fork():
 * RTVM_EFORK, nothing done. */
int rtvm_destroy(rtvm_vm *vm);

/* The message of the last failed call on this thread ("" if none). Valid until the next
 * rtvm call on this thread. Any thread, any time (also after rtvm_destroy). */
const char *rtvm_last_error(void);

/* Allocates `bytes` (rounded up to 8; 0 gives a unique 8-byte block) from the committed
 * heap, 8-byte aligned, lock-free (one atomic add in the common case). Returns NULL when
 * the committed part cannot hold it — as cheaply as a success; grow it with
 * rtvm_heap_expand. The memory is zero-filled, stays valid until rtvm_destroy returns, and
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
 * allocated, below MinHeapSize, on explicit huge pages, or over a held background pretouch
 * (a running one is waited for). Safe while other threads allocate and expand: an
 * allocation racing the shrink waits for it, a block handed out is never given back.
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
 * (the flag not given, or released already). A shutdown releases it too. Any thread. */
int rtvm_release_pretouch(rtvm_vm *vm);

/* Reserves memory for the embedder with the VM's policies: `capacity` bytes it can grow into
 * in place followed by `guard` bytes that fault, at an address that never moves, with
 * `initial` bytes committed (sizes round up to the base page). Under
 * -XX:+UseTransparentHugePages (THP mode madvise) the reservation is aligned to the huge page
 * size and advised for huge pages; with -XX:+AlwaysPreTouch the committed part is pretouched
 * by the worker gang (-XX:+BackgroundPreTouch: in the background, so the call returns at once
 * and the memory is usable meanwhile — the work waits in the gang's queue if the gang is busy,
 * held or pretouching another memory; it never runs on the calling thread). NMT counts it under `category` (summary, virtual
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
 * "Thread.print", "VM.log what=gc", "help") and writes what it printed (NUL-terminated) into
 * buf, with the size-query idiom of rtvm_nmt_summary (the text a query made is kept for the
 * same thread's next call with the same command and a big enough buffer). Returns RTVM_OK,
 * or RTVM_EINVAL for an unknown command or argument (rtvm_last_error() has HotSpot's words:
 * "java.lang.IllegalArgumentException: Unknown diagnostic command"), a NULL command, or a
 * buffer that is NULL or too small. Any thread; not from inside the output hook. */
int rtvm_diagnostic_command(rtvm_vm *vm, const char *command, char *buf, size_t len,
                            size_t *needed);

/* ---- Stopping threads for a collector ----
 *
 * Mutators are the VM's application threads (rtvm_thread_start) and attached threads: the
 * threads the embedder's code runs on. Each is running (the embedder's code), in a safe
 * region (it published its stack pointer and registers and blocks before it runs the
 * embedder's code again), stopped, or gone. rtvm's own threads (the worker gang, the
 * dispatcher, the attach listener, the trimmer) run only rtvm's code, never touch the
 * embedder's objects, and are not stopped.
 *
 * A stop of the world (rtvm_stop_the_world) arms every other mutator's poll, counts those in
 * a safe region at once, waits for the rest to reach a poll (rtvm_safepoint_poll) or a safe
 * region, and sends the stop signal (-XX:SafepointSignal, a real-time signal, SIGRTMIN+4 by
 * default) to those still running after -XX:SafepointSignalDelay (200 us): its handler runs on the
 * thread's own stack (never SA_ONSTACK), so the kernel saves the thread's whole register file
 * inside its scan range; it allocates nothing and takes no lock. The callback then runs with
 * every other mutator stopped, and the world resumes when it returns.
 *
 * What a thread in a safe region may do: block, sleep, call foreign code or the kernel, and
 * anything that does not touch the collector's objects. Leaving the region waits while the
 * world is stopped. rtvm's own waits (thread start and join, attach and detach, waiting for
 * the gang, for a stop or a handshake, destroy) are safe regions already; a thread starts in
 * one and leaves it when its function begins.
 *
 * The callback may read memory (the stacks, the heap), record and compute; it must not
 * allocate with malloc if a thread may have been stopped by the signal (it may be stopped
 * inside malloc, holding the allocator's lock), nor start, join, attach or detach threads,
 * stop the world, handshake or destroy the VM (those are refused with RTVM_EINVAL or wait for
 * the world to resume). A thread that starts during a stop stops before its function; a
 * thread that ends, detaches or attaches waits until the world resumes (its stack stays
 * mapped while the callback may scan it).
 *
 * Signals: the stop signal may interrupt a system call: with SA_RESTART most restart, those
 * that never restart (poll, epoll_wait, nanosleep, sem_timedwait, ...) return EINTR as they do
 * for any handled signal. A thread that blocks the stop signal is stopped only by polls and
 * safe regions. rtvm's SIGSEGV handler is unaffected: a stack overflow during a stop is still
 * reported as an overflow (the stop handler's frame on a nearly full stack faults into the
 * guard zone like any other frame). A thread found on its alternate signal stack (inside a
 * handler installed with SA_ONSTACK) reports that range, and its whole usable stack as its
 * scan range. With -Xrs no signal is installed: only polls and safe regions stop threads, and
 * a thread that never polls makes the stop time out (the message says so). The embedder's own
 * signals are its own: choose -XX:SafepointSignal if SIGRTMIN+4 is taken (rtvm refuses a
 * signal that already has a handler, and then stops threads without it).
 */

#define RTVM_STOPPED_POLL        1 /* at rtvm_safepoint_poll: its registers are in its scan range */
#define RTVM_STOPPED_SAFE_REGION 2 /* in a safe region: registers saved at its entry, `registers` */
#define RTVM_STOPPED_SIGNAL      3 /* by the stop signal: its context is in its scan range */

typedef struct rtvm_stopped_thread {
    uint64_t id;                            /* rtvm_current_thread_id() of that thread */
    int tid;                                /* the kernel thread id */
    const char *name;                       /* valid during the callback */
    int how;                                /* RTVM_STOPPED_POLL, _SAFE_REGION, _SIGNAL */
    uintptr_t scan_start, scan_end;         /* [sp, base): holds every register value too
                                               (poll and signal stops); empty before the
                                               thread's function began */
    uintptr_t altstack_start, altstack_end; /* 0, 0 unless stopped on the signal stack (then
                                               [sp, end) of it; scan is the whole stack) */
    const uintptr_t *registers;             /* the callee-saved registers as published (x86-64:
                                               rbx, rbp, r12-r15), valid during the callback */
    size_t n_registers;
} rtvm_stopped_thread;

typedef void (*rtvm_world_fn)(void *ctx, const rtvm_stopped_thread *threads, size_t n);

/* Stops every other mutator, calls fn(ctx, threads, n) while they are stopped, and resumes
 * them. timeout_ms bounds the wait for the threads to stop: RTVM_ETIMEDOUT if some did not
 * (rtvm_last_error names them; the others were let go, fn was not called). RTVM_EINVAL from
 * inside a callback or a handshake, from a thread in a safe region while another thread holds
 * the world stopped, or with a NULL vm or fn. -Xlog:safepoint logs each stop as HotSpot does
 * ("Safepoint \"<reason>\", Time since last: ... ns, Reaching safepoint: ... ns, ..."), and
 * -XX:+SafepointTimeout the stragglers after -XX:SafepointTimeoutDelay ms. One stop or
 * handshake at a time (others wait, in a safe region). Any thread; not after rtvm_destroy. */
int rtvm_stop_the_world(rtvm_vm *vm, const char *reason, int timeout_ms, rtvm_world_fn fn,
                        void *ctx);

/* Runs fn(ctx, t) for the mutator thread_id while only that thread is stopped: by that thread
 * at its next poll (t describes it there), or by the caller while it is in a safe region or
 * stopped by the signal (after -XX:SafepointSignalDelay without a poll). Waits up to 10 s for a thread that
 * neither polls nor is safe (RTVM_ETIMEDOUT, fn not called); RTVM_EINVAL for an unknown
 * thread, NULL fn, or from inside a callback. -Xlog:handshake logs it. fn must be callable
 * from either thread, must not stop the world or handshake, and must not malloc (run by the
 * caller, the target may be stopped by the signal inside malloc). Any thread. */
int rtvm_handshake(rtvm_vm *vm, uint64_t thread_id,
                   void (*fn)(void *ctx, const rtvm_stopped_thread *t), void *ctx);

/* The poll: put it at loop back-edges and other points a mutator may stop. One load of a
 * process-wide word; only while a stop or a handshake is pending anywhere does it call
 * rtvm_safepoint_poll_slow, which checks the calling thread's own poll word and stops there
 * (spilling its registers onto its stack) if the stop is for it. On any thread; it does
 * nothing on a thread that is not a mutator. */
extern const volatile uint32_t *const rtvm_safepoint_pending;
void rtvm_safepoint_poll_slow(void);
static inline void rtvm_safepoint_poll(void) {
    if (__builtin_expect(*rtvm_safepoint_pending != 0, 0)) rtvm_safepoint_poll_slow();
}

/* Enters a safe region on the calling thread (a mutator of this VM): until the matching
 * rtvm_leave_safe_region it counts as stopped. Publishes the caller's stack pointer and its
 * callee-saved registers exactly as the caller holds them at this call (the entry is a
 * trampoline that touches none of them): a value the caller keeps only in a register is in
 * `registers`, one it keeps in its frames is in the scan range. Regions nest. RTVM_EDETACHED
 * for any other thread. */
int rtvm_enter_safe_region(rtvm_vm *vm);

/* Leaves the innermost safe region (the outermost waits while the world is stopped).
 * RTVM_EINVAL if the thread is not in one, RTVM_EDETACHED for a thread that is not a mutator. */
int rtvm_leave_safe_region(rtvm_vm *vm);

/* The VM thread id of the calling thread (started by the VM or attached), 0 for a thread rtvm
 * does not know. Any thread. */
uint64_t rtvm_current_thread_id(rtvm_vm *vm);

#ifdef __cplusplus
}
#endif

#endif /* RTVM_H */
