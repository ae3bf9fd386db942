/*
 * rtvm.h — the C API of rtvm, the memory-and-threads core of a managed runtime.
 *
 * Link with librtvm.so (cdylib) or librtvm.a (staticlib; then also -lpthread -ldl -lm).
 *
 * Conventions
 *   - Functions return RTVM_OK (0) or a negative JNI-style code. On failure,
 *     rtvm_last_error() returns a message for the calling thread.
 *   - rtvm never exits or aborts the host process (the one exception: a thread that
 *     overflows its stack into the guard zone is reported and the process aborts, as it
 *     would crash anyway). Rust panics never cross this boundary: they become RTVM_ERR.
 *   - One VM per process at a time (RTVM_EEXIST otherwise). rtvm_destroy() joins the VM's
 *     threads and releases every mapping; a new VM may then be created.
 *   - Options are the `java`-style VM options of the rtvm launcher: "-Xms64m", "-Xmx1g",
 *     "-XX:+AlwaysPreTouch", "-Xlog:pagesize", ... The environment variable RTVM_OPTIONS is
 *     read too, before the options, as JAVA_TOOL_OPTIONS is by JNI_CreateJavaVM.
 */
#ifndef RTVM_H
#define RTVM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Result codes (the JNI values). */
#define RTVM_OK      0   /* success */
#define RTVM_ERR    (-1) /* unknown error; an unrecognized non -XX option */
#define RTVM_ENOMEM (-4) /* not enough memory: heap reservation or commit failed */
#define RTVM_EEXIST (-5) /* a VM already exists in this process */
#define RTVM_EINVAL (-6) /* invalid arguments: a bad -XX flag, value, or heap sizes */

/* An opaque VM. */
typedef struct rtvm_vm rtvm_vm;

/* An opaque VM thread started with rtvm_thread_start. */
typedef struct rtvm_thread rtvm_thread;

/* Creation arguments, in the spirit of JavaVMInitArgs. */
typedef struct rtvm_init_args {
    const char *const *options;  /* n_options NUL-terminated option strings */
    size_t n_options;
    /* Non-zero: skip options that are not recognized (unknown -XX and -X options), as
     * JNI's ignoreUnrecognized does in HotSpot. Locked flags and bad values still fail. */
    int ignore_unrecognized;
} rtvm_init_args;

/* Heap figures, in bytes. */
typedef struct rtvm_heap_stats {
    size_t reserved;   /* MaxHeapSize, aligned */
    size_t committed;  /* committed so far */
    size_t used;       /* handed out by rtvm_heap_allocate */
    size_t resident;   /* committed and resident (mincore) */
} rtvm_heap_stats;

/* A thread body. Runs on a VM thread whose stack rtvm mapped, guarded and protected from
 * transparent huge pages before the thread started. */
typedef void (*rtvm_thread_fn)(void *arg);

/* Creates the VM. On success stores it in *vm_out and returns RTVM_OK; on failure returns
 * a negative code, leaves *vm_out untouched and nothing behind. */
int rtvm_create(const rtvm_init_args *args, rtvm_vm **vm_out);

/* Waits for a background pretouch, joins the VM's threads (prints the native memory report
 * with -XX:+PrintNMTStatistics), releases all memory and frees the VM. Returns RTVM_OK, or
 * RTVM_ERR if a thread had failed (the VM is destroyed regardless). NULL is a no-op. */
int rtvm_destroy(rtvm_vm *vm);

/* The message of the last failed call on this thread ("" if none). Valid until the next
 * rtvm call on this thread. */
const char *rtvm_last_error(void);

/* Allocates `bytes` (rounded up to 8) from the committed heap, 8-byte aligned. Returns NULL
 * when the committed part is exhausted: grow it with rtvm_heap_expand. The memory is
 * zero-filled, stays valid until rtvm_destroy, and may be used while a background pretouch
 * runs. Thread-safe. */
void *rtvm_heap_allocate(rtvm_vm *vm, size_t bytes);

/* Commits `bytes` more of the heap (pretouched with -XX:+AlwaysPreTouch) and stores the new
 * committed size in *committed_out if it is not NULL. On failure the heap keeps its size. */
int rtvm_heap_expand(rtvm_vm *vm, size_t bytes, size_t *committed_out);

/* Fills *out with the heap figures. */
int rtvm_heap_get_stats(rtvm_vm *vm, rtvm_heap_stats *out);

/* Starts a VM thread named `name` running fn(arg), with the stack size of -Xss. */
int rtvm_thread_start(rtvm_vm *vm, const char *name, rtvm_thread_fn fn, void *arg, rtvm_thread **thread_out);

/* Waits for the thread to finish and frees the handle. */
int rtvm_thread_join(rtvm_thread *thread);

/* Writes the native memory tracking summary (HotSpot's layout, NUL-terminated) into buf.
 * Stores the length it needs, including the NUL, in *needed if not NULL. Returns RTVM_OK,
 * RTVM_EINVAL if buf is too small (nothing useful written) or tracking is off
 * (-XX:NativeMemoryTracking=summary turns it on). */
int rtvm_nmt_summary(rtvm_vm *vm, char *buf, size_t len, size_t *needed);

#ifdef __cplusplus
}
#endif

#endif /* RTVM_H */
