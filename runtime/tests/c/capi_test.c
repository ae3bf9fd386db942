/*
 * capi_test.c — the C API's behaviour, checked from C. One mode per process:
 *
 *   capi_test <mode>      prints "PASS <mode>" and exits 0, or says what failed and exits 1
 *
 * Built by runtime/tests/c_api.rs against an install made by tools/install-c.sh, with
 * `pkg-config --cflags --libs rtvm`, and compiled with -O0 -fno-stack-clash-protection (the
 * soft-limit recursions must really use their frames).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"


/* ---- helpers ---- */

static rtvm_init_args make_args(const char *const *options, size_t n) {
    rtvm_init_args a = {.version = RTVM_VERSION_1};
    OKAY(rtvm_get_default_init_args(&a));
    a.options = options;
    a.n_options = n;
    return a;
}

static rtvm_vm *create(const char *const *options, size_t n) {
    rtvm_init_args a = make_args(options, n);
    rtvm_vm *vm = NULL;
    OKAY(rtvm_create(&a, &vm));
    return vm;
}

/* An output hook that collects everything into a buffer. */
struct collected {
    pthread_mutex_t lock;
    char *text;
    size_t len;
    size_t calls[3];
};

static void collect(void *context, int stream, const char *text, size_t len) {
    struct collected *c = context;
    pthread_mutex_lock(&c->lock);
    if (strlen(text) != len) {
        fprintf(stderr, "FAIL: the hook's text is not NUL-terminated at len\n");
        exit(1);
    }
    char *grown = realloc(c->text, c->len + len + 1);
    if (grown == NULL) exit(1);
    c->text = grown;
    memcpy(c->text + c->len, text, len);
    c->len += len;
    c->text[c->len] = 0;
    if (stream == RTVM_STDOUT || stream == RTVM_STDERR) c->calls[stream]++;
    pthread_mutex_unlock(&c->lock);
}

static void noop(void *arg) { (void)arg; }

static int contains(const struct collected *c, const char *s) { return c->text != NULL && strstr(c->text, s) != NULL; }

/* How many times `s` occurs in what the hook collected. */
static size_t occurrences(const struct collected *c, const char *s) {
    size_t n = 0;
    for (const char *p = c->text; p != NULL && (p = strstr(p, s)) != NULL; p += strlen(s)) n++;
    return n;
}

static void glibc_stack(uintptr_t *low, uintptr_t *high, size_t *guard) {
    pthread_attr_t attr;
    void *addr;
    size_t size;
    EXPECT(pthread_getattr_np(pthread_self(), &attr) == 0, "pthread_getattr_np");
    EXPECT(pthread_attr_getstack(&attr, &addr, &size) == 0, "pthread_attr_getstack");
    EXPECT(pthread_attr_getguardsize(&attr, guard) == 0, "pthread_attr_getguardsize");
    pthread_attr_destroy(&attr);
    *low = (uintptr_t)addr;
    *high = (uintptr_t)addr + size;
}

/* A recursion with 4 KiB frames that checks the soft limit before going deeper: what an
 * interpreter does to throw its own StackOverflowError. Returns the depth reached. */
static int recurse(uintptr_t soft_limit, int depth) {
    volatile char frame[4096];
    frame[0] = (char)depth;
    frame[sizeof frame - 1] = (char)depth;
    if ((uintptr_t)__builtin_frame_address(0) < soft_limit) return depth;
    int d = recurse(soft_limit, depth + 1);
    return d + (frame[0] - (char)depth);
}

/* ---- modes ---- */

static void mode_version(void) {
    EXPECT(rtvm_get_version() == RTVM_VERSION_1, "rtvm_get_version() = %#x", rtvm_get_version());
    rtvm_init_args a = {.version = 0x00090000};
    EXPECT(rtvm_get_default_init_args(&a) == RTVM_EVERSION, "an unknown version was accepted");
    EXPECT(strstr(rtvm_last_error(), "not supported") != NULL, "no version message");
    rtvm_vm *vm = NULL;
    EXPECT(rtvm_create(&a, &vm) == RTVM_EVERSION && vm == NULL, "rtvm_create took version %#x", a.version);
    EXPECT(rtvm_get_default_init_args(NULL) == RTVM_EINVAL, "NULL args");
    EXPECT(rtvm_create(NULL, &vm) == RTVM_EINVAL, "NULL args to rtvm_create");
    a = make_args(NULL, 0);
    EXPECT(a.version == RTVM_VERSION_1 && a.n_options == 0 && a.options == NULL && a.output == NULL,
           "defaults not filled in");
    a.n_options = 2;
    EXPECT(rtvm_create(&a, &vm) == RTVM_EINVAL, "options NULL with n_options 2");
    vm = create(NULL, 0);
    OKAY(rtvm_destroy(vm));
}

static void mode_exit_requests(void) {
    const char *cases[][2] = {
        {"-XX:+PrintFlagsInitial", "bool AlwaysPreTouch"},
        {"-Xlog:help", "Available log levels:"},
        {"-version", "rtvm version"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct collected c = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, {0}};
        rtvm_init_args a = make_args(&cases[i][0], 1);
        a.output = collect;
        a.output_context = &c;
        rtvm_vm *vm = NULL;
        int rc = rtvm_create(&a, &vm);
        EXPECT(rc == RTVM_EEXITED && vm == NULL, "%s: code %d", cases[i][0], rc);
        EXPECT(strstr(rtvm_last_error(), "asked to print and stop") != NULL, "%s: no message", cases[i][0]);
        EXPECT(contains(&c, cases[i][1]), "%s: the hook did not get '%s'", cases[i][0], cases[i][1]);
        printf("%s: RTVM_EEXITED, %zu bytes through the hook\n", cases[i][0], c.len);
        free(c.text);
    }
    /* The slot is free: a VM can be created after each of them. */
    OKAY(rtvm_destroy(create(NULL, 0)));
}

static void mode_output_hook(void) {
    struct collected c = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, {0}};
    const char *options[] = {"-Xmx64m", "-XX:+PrintFlagsFinal", "-XX:NativeMemoryTracking=summary",
                             "-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintNMTStatistics",
                             "-Xlog:os+thread=info:stderr"};
    rtvm_init_args a = make_args(options, 6);
    a.output = collect;
    a.output_context = &c;
    rtvm_vm *vm = NULL;
    OKAY(rtvm_create(&a, &vm));
    EXPECT(occurrences(&c, "[Global flags]") == 1 && contains(&c, "MaxHeapSize"), "PrintFlagsFinal not in the hook exactly once");
    rtvm_thread *t;
    OKAY(rtvm_thread_start(vm, "logged", noop, NULL, &t));
    OKAY(rtvm_thread_join(t));
    OKAY(rtvm_destroy(vm));
    EXPECT(occurrences(&c, "Native Memory Tracking:") == 1 && contains(&c, "(thread #"),
           "the NMT report of the destroy is not in the hook exactly once (%zu)",
           occurrences(&c, "Native Memory Tracking:"));
    EXPECT(contains(&c, "Thread \"logged\""), "-Xlog output to stderr is not in the hook");
    EXPECT(c.calls[RTVM_STDOUT] > 0 && c.calls[RTVM_STDERR] > 0, "streams: %zu stdout, %zu stderr calls",
           c.calls[RTVM_STDOUT], c.calls[RTVM_STDERR]);
    printf("hook: %zu bytes (%zu stdout, %zu stderr calls)\n", c.len, c.calls[RTVM_STDOUT], c.calls[RTVM_STDERR]);
    free(c.text);
}

/* Allocation from 4 threads: shared path or TLAB, every word written and checked. */
#define ALLOC_THREADS 4
#define ALLOC_BYTES (24u << 20)

struct alloc_work {
    rtvm_vm *vm;
    int id;
    int use_tlab;
    uint64_t **blocks;
    size_t *sizes;
    size_t n;
};

static size_t size_for(int id, size_t n) {
    uint64_t x = (n + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)id << 29);
    switch (x % 64) {
        case 0: return 0;
        case 1: return (1u << 20) + 8 * ((x >> 40) & 0xffff);
        case 2: return 65536 + ((x >> 44) & 0xfff8);
        default: return 8 + ((x >> 50) & 0x3f8);
    }
}

static uint64_t pattern(int id, size_t block, size_t word) {
    return ((uint64_t)id << 56) ^ ((uint64_t)block << 28) ^ word ^ 0xa5a5000000000000ull;
}

static void *alloc_thread(void *arg) {
    struct alloc_work *w = arg;
    rtvm_tlab tlab;
    if (w->use_tlab) OKAY(rtvm_tlab_init(w->vm, &tlab, w->id % 2 ? 65536 : 0));
    size_t cap = 1 << 16, total = 0;
    w->blocks = malloc(cap * sizeof *w->blocks);
    w->sizes = malloc(cap * sizeof *w->sizes);
    while (total < ALLOC_BYTES) {
        size_t bytes = size_for(w->id, w->n);
        uint64_t *b = w->use_tlab ? rtvm_tlab_allocate(&tlab, bytes) : rtvm_heap_allocate(w->vm, bytes);
        EXPECT(b != NULL, "thread %d: allocation %zu of %zu bytes", w->id, w->n, bytes);
        EXPECT(((uintptr_t)b & 7) == 0, "unaligned block");
        size_t size = bytes < 8 ? 8 : (bytes + 7) & ~(size_t)7;
        for (size_t i = 0; i < size / 8; i++) b[i] = pattern(w->id, w->n, i);
        if (w->n == cap) {
            cap *= 2;
            w->blocks = realloc(w->blocks, cap * sizeof *w->blocks);
            w->sizes = realloc(w->sizes, cap * sizeof *w->sizes);
        }
        w->blocks[w->n] = b;
        w->sizes[w->n] = size;
        w->n++;
        total += size;
    }
    return NULL;
}

struct range {
    uintptr_t start, end;
};

static int by_start(const void *a, const void *b) {
    const struct range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static void check_allocations(int use_tlab) {
    const char *options[] = {"-Xms160m", "-Xmx160m"};
    rtvm_vm *vm = create(options, 2);
    struct alloc_work w[ALLOC_THREADS];
    pthread_t t[ALLOC_THREADS];
    for (int i = 0; i < ALLOC_THREADS; i++) {
        w[i] = (struct alloc_work){vm, i, use_tlab, NULL, NULL, 0};
        EXPECT(pthread_create(&t[i], NULL, alloc_thread, &w[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < ALLOC_THREADS; i++) pthread_join(t[i], NULL);
    size_t total = 0, words = 0;
    for (int i = 0; i < ALLOC_THREADS; i++) total += w[i].n;
    struct range *r = malloc(total * sizeof *r);
    size_t k = 0;
    for (int i = 0; i < ALLOC_THREADS; i++) {
        for (size_t b = 0; b < w[i].n; b++) {
            for (size_t j = 0; j < w[i].sizes[b] / 8; j++) {
                EXPECT(w[i].blocks[b][j] == pattern(i, b, j), "thread %d block %zu word %zu overwritten", i, b, j);
            }
            words += w[i].sizes[b] / 8;
            r[k++] = (struct range){(uintptr_t)w[i].blocks[b], (uintptr_t)w[i].blocks[b] + w[i].sizes[b]};
        }
        free(w[i].blocks);
        free(w[i].sizes);
    }
    qsort(r, total, sizeof *r, by_start);
    for (size_t i = 1; i < total; i++) EXPECT(r[i - 1].end <= r[i].start, "blocks %zu and %zu overlap", i - 1, i);
    free(r);
    printf("%s: %zu blocks, %zu words checked\n", use_tlab ? "TLAB" : "shared", total, words);
    OKAY(rtvm_destroy(vm));
}

static void mode_alloc(void) {
    check_allocations(0);
    check_allocations(1);
    /* Zero bytes: unique 8-byte blocks inside the heap, from the heap and from a TLAB. */
    const char *options[] = {"-Xms8m", "-Xmx16m"};
    rtvm_vm *vm = create(options, 2);
    rtvm_tlab tlab;
    OKAY(rtvm_tlab_init(vm, &tlab, 4096));
    char *a = rtvm_heap_allocate(vm, 0), *b = rtvm_heap_allocate(vm, 0);
    char *c = rtvm_tlab_allocate(&tlab, 0), *d = rtvm_tlab_allocate(&tlab, 0);
    EXPECT(a && b && c && d, "allocate(0) returned NULL");
    EXPECT(b - a == 8 && d - c == 8 && a != c, "zero-byte blocks are not distinct 8-byte blocks");
    rtvm_heap_stats s;
    OKAY(rtvm_heap_get_stats(vm, &s));
    /* Fill the heap; failures are cheap and explain themselves only when asked. */
    EXPECT(rtvm_heap_allocate(vm, s.committed) == NULL, "the whole heap again");
    EXPECT(rtvm_heap_allocate(vm, (size_t)-1) == NULL && rtvm_tlab_allocate(&tlab, (size_t)-1) == NULL,
           "SIZE_MAX bytes");
    EXPECT(strstr(rtvm_last_error(), "18446744073709551615 bytes do not fit the committed heap") != NULL,
           "the lazy message");
    while (rtvm_heap_allocate(vm, 4096) != NULL) {
    }
    while (rtvm_tlab_allocate(&tlab, 8) != NULL) {
    }
    while (rtvm_heap_allocate(vm, 8) != NULL) {
    }
    OKAY(rtvm_heap_get_stats(vm, &s));
    EXPECT(s.used == s.committed, "used %zu of %zu after filling", s.used, s.committed);
    EXPECT(strstr(rtvm_last_error(), "rtvm_heap_allocate: 8 bytes do not fit") != NULL, "message: %s",
           rtvm_last_error());
    /* An expansion beyond MaxHeapSize fails and changes nothing. */
    size_t committed = 12345;
    EXPECT(rtvm_heap_expand(vm, 64u << 20, &committed) == RTVM_ENOMEM && committed == 12345,
           "an expansion beyond MaxHeapSize");
    EXPECT(strstr(rtvm_last_error(), "left below MaxHeapSize") != NULL, "its message");
    rtvm_heap_stats after;
    OKAY(rtvm_heap_get_stats(vm, &after));
    EXPECT(after.committed == s.committed, "committed %zu after a failed expansion, %zu before", after.committed,
           s.committed);
    OKAY(rtvm_heap_expand(vm, 1, &committed));
    EXPECT(rtvm_heap_allocate(vm, 8) != NULL && rtvm_tlab_allocate(&tlab, 8) != NULL, "no room after expanding");
    OKAY(rtvm_destroy(vm));
    printf("zero-byte, full-heap and expansion cases ok\n");
}

/* ---- stacks: attach, bounds, soft limit ---- */

struct attach_result {
    rtvm_vm *vm;
    int depth;
};

static void check_attached_bounds(rtvm_vm *vm, const char *who) {
    uintptr_t low, high;
    size_t guard;
    glibc_stack(&low, &high, &guard);
    rtvm_stack_bounds b;
    OKAY(rtvm_current_stack_bounds(vm, &b));
    EXPECT(b.base == high && b.limit == low, "%s: bounds [%#lx, %#lx), pthread_getattr_np [%#lx, %#lx)", who,
           (unsigned long)b.limit, (unsigned long)b.base, (unsigned long)low, (unsigned long)high);
    EXPECT(b.guard_end == low && b.guard_start == low - guard, "%s: guard [%#lx, %#lx), glibc's guard size %zu",
           who, (unsigned long)b.guard_start, (unsigned long)b.guard_end, guard);
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    EXPECT(b.limit < b.soft_limit && b.soft_limit < sp && sp < b.base, "%s: soft limit %#lx, sp %#lx", who,
           (unsigned long)b.soft_limit, (unsigned long)sp);
    printf("%s: bounds equal pthread_getattr_np's [%#lx, %#lx), guard %zu\n", who, (unsigned long)low,
           (unsigned long)high, guard);
}

static void *host_thread(void *arg) {
    struct attach_result *r = arg;
    EXPECT(rtvm_current_stack_bounds(r->vm, &(rtvm_stack_bounds){0}) == RTVM_EDETACHED, "bounds before attaching");
    EXPECT(rtvm_detach_current_thread(r->vm) == RTVM_EDETACHED, "detach before attaching");
    OKAY(rtvm_attach_current_thread(r->vm, "host-1"));
    OKAY(rtvm_attach_current_thread(r->vm, "again")); /* JNI: a no-op */
    check_attached_bounds(r->vm, "host thread");
    rtvm_stack_bounds b;
    OKAY(rtvm_current_stack_bounds(r->vm, &b));
    r->depth = recurse(b.soft_limit, 0);
    OKAY(rtvm_detach_current_thread(r->vm));
    EXPECT(rtvm_current_stack_bounds(r->vm, &b) == RTVM_EDETACHED, "bounds after detaching");
    return NULL;
}

static void *attached_exit(void *arg) {
    OKAY(rtvm_attach_current_thread(arg, "ends-attached"));
    return NULL; /* without detaching: the VM forgets it */
}

static void vm_body_detach(void *arg) {
    rtvm_vm *vm = arg;
    EXPECT(rtvm_attach_current_thread(vm, "x") == RTVM_OK, "a VM thread's attach is a no-op success");
    EXPECT(rtvm_detach_current_thread(vm) == RTVM_EINVAL, "a VM thread detached itself");
}

static size_t nmt_threads(rtvm_vm *vm) {
    size_t n = 0;
    rtvm_nmt_summary(vm, NULL, 0, &n);
    char *buf = malloc(n);
    OKAY(rtvm_nmt_summary(vm, buf, n, NULL));
    const char *p = strstr(buf, "(thread #");
    EXPECT(p != NULL, "no thread count in the NMT report");
    size_t count = strtoul(p + strlen("(thread #"), NULL, 10);
    free(buf);
    return count;
}

static void mode_attach(void) {
    const char *options[] = {"-Xmx64m", "-XX:NativeMemoryTracking=summary"};
    rtvm_vm *vm = create(options, 2);
    size_t before = nmt_threads(vm);
    /* The process's first thread. */
    OKAY(rtvm_attach_current_thread(vm, "main"));
    check_attached_bounds(vm, "main thread");
    EXPECT(nmt_threads(vm) == before + 1, "NMT does not count the attached main thread");
    /* A host thread with an 8 MiB stack: attach, bounds, a recursion stopped by the soft
     * limit (glibc's single guard page would not survive a 4 KiB frame), detach. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 8u << 20);
    struct attach_result r = {vm, 0};
    pthread_t t;
    EXPECT(pthread_create(&t, &attr, host_thread, &r) == 0, "pthread_create");
    pthread_join(t, NULL);
    EXPECT(r.depth > 1800, "the host thread's recursion stopped after %d 4 KiB frames", r.depth);
    printf("host thread: recursion stopped at depth %d by the soft limit\n", r.depth);
    /* A thread that ends attached is forgotten. */
    EXPECT(pthread_create(&t, NULL, attached_exit, vm) == 0, "pthread_create");
    pthread_join(t, NULL);
    EXPECT(nmt_threads(vm) == before + 1, "a thread that ended attached is still counted");
    /* The VM's own thread cannot detach. */
    rtvm_thread *vt;
    OKAY(rtvm_thread_start(vm, "vm-thread", vm_body_detach, vm, &vt));
    OKAY(rtvm_thread_join(vt));
    OKAY(rtvm_detach_current_thread(vm));
    EXPECT(nmt_threads(vm) == before, "NMT still counts the detached main thread");
    OKAY(rtvm_destroy(vm));
}

struct vm_recursion {
    rtvm_vm *vm;
    rtvm_stack_bounds bounds;
    int depth;
};

static void vm_recurse(void *arg) {
    struct vm_recursion *r = arg;
    OKAY(rtvm_current_stack_bounds(r->vm, &r->bounds));
    r->depth = recurse(r->bounds.soft_limit, 0);
}

static void mode_soft_limit(void) {
    const char *options[] = {"-Xmx64m", "-Xss2m"};
    rtvm_vm *vm = create(options, 2);
    struct vm_recursion r = {vm, {0}, 0};
    rtvm_thread *t;
    OKAY(rtvm_thread_start(vm, "recursive", vm_recurse, &r, &t));
    rtvm_stack_bounds by_handle;
    OKAY(rtvm_thread_stack_bounds(t, &by_handle));
    OKAY(rtvm_thread_join(t));
    EXPECT(memcmp(&by_handle, &r.bounds, sizeof r.bounds) == 0, "bounds by handle and from inside differ");
    EXPECT(r.bounds.guard_end == r.bounds.limit && r.bounds.guard_end - r.bounds.guard_start >= 4 * 4096,
           "guard zone [%#lx, %#lx)", (unsigned long)r.bounds.guard_start, (unsigned long)r.bounds.guard_end);
    size_t usable = r.bounds.base - r.bounds.soft_limit;
    EXPECT((size_t)r.depth * 4096 > usable * 8 / 10, "stopped after %d frames of %zu usable bytes", r.depth, usable);
    printf("VM thread: %d frames of 4 KiB above the soft limit, guard zone %lu KiB untouched\n", r.depth,
           (unsigned long)(r.bounds.guard_end - r.bounds.guard_start) / 1024);
    OKAY(rtvm_destroy(vm));
}

/* ---- NMT: the size-query idiom while the report changes ---- */

static atomic_int stop_malloc;

static void *malloc_loop(void *arg) {
    (void)arg;
    /* Fill 64 slots with blocks of up to 2 MiB, then empty them, again and again: the
     * process's malloc figures swing between a few KiB and ~64 MiB, so the report's length
     * changes whenever this thread runs (digits come and go). */
    void *keep[64] = {0};
    for (unsigned i = 0; !atomic_load(&stop_malloc); i++) {
        unsigned k = i % 64;
        if ((i / 64) % 2 == 0) {
            keep[k] = malloc(1 + (i * 7919u) % (2u << 20));
            if (keep[k]) memset(keep[k], 1, 1);
        } else {
            free(keep[k]);
            keep[k] = NULL;
        }
    }
    for (int k = 0; k < 64; k++) free(keep[k]);
    return NULL;
}

static atomic_int stop_waiter;

/* A VM thread that lives until told to stop: with -XX:NativeMemoryTracking=detail it adds
 * its stack's lines to the report while it runs. */
static void waits(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_waiter)) usleep(50);
}

/* Every round changes the report between the size query and the fetch — a VM thread starts
 * in between, which NMT lists (a handshake, not a hope that the scheduler interleaves) — and
 * the fetch must still return exactly the report that was measured, complete; a fresh report
 * then proves the live one had changed. A concurrent malloc loop adds unplanned changes. */
static void mode_nmt_idiom(void) {
    const char *options[] = {"-Xmx64m", "-XX:NativeMemoryTracking=detail"};
    rtvm_vm *vm = create(options, 2);
    pthread_t t;
    EXPECT(pthread_create(&t, NULL, malloc_loop, NULL) == 0, "pthread_create");
    const int rounds = 200;
    for (int i = 0; i < rounds; i++) {
        size_t needed = 0;
        EXPECT(rtvm_nmt_summary(vm, NULL, 0, &needed) == RTVM_EINVAL && needed > 0, "size query");
        atomic_store(&stop_waiter, 0);
        rtvm_thread *w;
        OKAY(rtvm_thread_start(vm, "nmt-disturber", waits, NULL, &w));
        char *buf = malloc(needed);
        size_t again = 0;
        EXPECT(rtvm_nmt_summary(vm, buf, needed, &again) == RTVM_OK, "round %d: the fetch failed", i);
        EXPECT(strlen(buf) + 1 == needed && again == needed, "round %d: fetched %zu bytes (needed %zu, again %zu)",
               i, strlen(buf) + 1, needed, again);
        EXPECT(strstr(buf, "nmt-disturber") == NULL, "round %d: the fetch is not the measured report", i);
        /* The live report lists the new thread (its size may not grow: a stack taken from the
         * stack cache moves from its "(cached)" line to the thread's own). */
        size_t live = 0;
        rtvm_nmt_summary(vm, NULL, 0, &live);
        char *now = malloc(live);
        OKAY(rtvm_nmt_summary(vm, now, live, NULL));
        EXPECT(strstr(now, "nmt-disturber") != NULL, "round %d: the live report does not list the new thread", i);
        free(now);
        free(buf);
        atomic_store(&stop_waiter, 1);
        OKAY(rtvm_thread_join(w));
    }
    atomic_store(&stop_malloc, 1);
    pthread_join(t, NULL);
    printf("NMT idiom: %d rounds, each fetch the measured report while the live one had changed\n", rounds);
    /* Tracking off: a clear error. */
    OKAY(rtvm_destroy(vm));
    vm = create(NULL, 0);
    size_t n = 0;
    EXPECT(rtvm_nmt_summary(vm, NULL, 0, &n) == RTVM_EINVAL &&
               strstr(rtvm_last_error(), "NativeMemoryTracking") != NULL,
           "tracking off");
    OKAY(rtvm_destroy(vm));
}

/* ---- threads: pthread_exit, error codes ---- */

static atomic_int after_exit;

static void exits_early(void *arg) {
    (void)arg;
    pthread_exit(NULL);
    atomic_store(&after_exit, 1);
}

static void mode_threads(void) {
    const char *options[] = {"-Xmx64m", "-XX:NativeMemoryTracking=summary"};
    rtvm_vm *vm = create(options, 2);
    size_t before = nmt_threads(vm);
    for (int i = 0; i < 20; i++) {
        rtvm_thread *t;
        OKAY(rtvm_thread_start(vm, "exits", exits_early, NULL, &t));
        OKAY(rtvm_thread_join(t));
    }
    EXPECT(atomic_load(&after_exit) == 0, "code after pthread_exit ran");
    EXPECT(nmt_threads(vm) == before, "threads that called pthread_exit are still counted");
    rtvm_thread *t = NULL;
    EXPECT(rtvm_thread_start(vm, "x", NULL, NULL, &t) == RTVM_EINVAL, "NULL fn");
    EXPECT(rtvm_thread_start(vm, NULL, noop, NULL, &t) == RTVM_EINVAL, "NULL name");
    EXPECT(rtvm_thread_start(NULL, "x", noop, NULL, &t) == RTVM_EINVAL, "NULL vm");
    /* A thread limit: RLIMIT_NPROC 0 for an unprivileged user (root drops to nobody, which
     * also makes the limit apply to it). */
    struct rlimit zero = {0, 0};
    EXPECT(setrlimit(RLIMIT_NPROC, &zero) == 0, "setrlimit: %s", strerror(errno));
    if (geteuid() == 0) EXPECT(setresuid(65534, 65534, 65534) == 0, "setresuid: %s", strerror(errno));
    int rc = rtvm_thread_start(vm, "limited", noop, NULL, &t);
    EXPECT(rc == RTVM_EAGAIN, "thread limit: code %d", rc);
    EXPECT(strstr(rtvm_last_error(), "pthread_create failed (EAGAIN)") != NULL, "the limit's message");
    printf("pthread_exit x20 ok; codes: NULL args RTVM_EINVAL, thread limit RTVM_EAGAIN (%s)\n", rtvm_last_error());
    OKAY(rtvm_destroy(vm));
}

static void mode_destroy_rules(void) {
    rtvm_vm *vm = create(NULL, 0);
    /* A handle outlives the destroy (which joins the thread); joining it then frees it. */
    rtvm_thread *t;
    OKAY(rtvm_thread_start(vm, "late-join", noop, NULL, &t));
    OKAY(rtvm_destroy(vm));
    OKAY(rtvm_thread_join(t));
    EXPECT(rtvm_destroy(NULL) == RTVM_OK, "destroy(NULL)");
    printf("handles outlive the destroy; destroy(NULL) is a no-op\n");
}

/* -XX:+HoldBackgroundPreTouch: the VM is up with nothing pretouched; the pretouch runs
 * once released (and only then); releasing twice, or a VM without the hold, is EINVAL. */
static void mode_pretouch_hold(void) {
    const char *options[] = {"-Xms64m", "-Xmx64m", "-XX:+AlwaysPreTouch", "-XX:+UnlockExperimentalVMOptions",
                             "-XX:+BackgroundPreTouch", "-XX:+HoldBackgroundPreTouch", "-XX:ParallelGCThreads=2"};
    rtvm_vm *vm = create(options, 7);
    size_t resident = 0;
    usleep(200 * 1000);
    OKAY(rtvm_heap_resident(vm, &resident));
    EXPECT(resident == 0, "held for 200 ms, yet %zu bytes of the heap are resident", resident);
    OKAY(rtvm_release_pretouch(vm));
    EXPECT(rtvm_release_pretouch(vm) == RTVM_EINVAL, "a second release is not EINVAL");
    /* The destroy waits for the pretouch: afterwards a new VM shows the other case. */
    OKAY(rtvm_destroy(vm));
    const char *plain[] = {"-Xmx64m"};
    vm = create(plain, 1);
    EXPECT(rtvm_release_pretouch(vm) == RTVM_EINVAL, "release without the hold is not EINVAL");
    EXPECT(rtvm_release_pretouch(NULL) == RTVM_EINVAL, "release(NULL) is not EINVAL");
    OKAY(rtvm_destroy(vm));
    printf("held: 0 bytes resident after 200 ms; released; EINVAL for the rest\n");
}

/* ---- embedder memory ---- */

/* The permissions of the /proc/self/maps mapping holding addr ("" if none), in perms[5]. */
static void perms_at(uintptr_t addr, char perms[5]) {
    perms[0] = '\0';
    FILE *f = fopen("/proc/self/maps", "r");
    EXPECT(f != NULL, "/proc/self/maps: %s", strerror(errno));
    char line[512];
    while (fgets(line, sizeof line, f)) {
        uintptr_t a, b;
        char p[5];
        if (sscanf(line, "%lx-%lx %4s", &a, &b, p) == 3 && a <= addr && addr < b) {
            memcpy(perms, p, 5);
            break;
        }
    }
    fclose(f);
}

/* Resident bytes of [p, p + len) by mincore (the kernel's view). */
static size_t resident(void *p, size_t len) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = len / page, n = 0;
    unsigned char *vec = malloc(pages);
    EXPECT(mincore(p, len, vec) == 0, "mincore: %s", strerror(errno));
    for (size_t i = 0; i < pages; i++) n += vec[i] & 1;
    free(vec);
    return n * page;
}

/* The NMT report's line for a category, or NULL (the buffer is the caller's to free). */
static char *nmt_report(rtvm_vm *vm) {
    size_t n = 0;
    rtvm_nmt_summary(vm, NULL, 0, &n);
    char *buf = malloc(n);
    OKAY(rtvm_nmt_summary(vm, buf, n, NULL));
    return buf;
}

/* rtvm_memory_*: reserve with a guard, pretouched initial part, growth in place, growth
 * beyond the capacity refused with the size kept, NMT's category, release unmaps, a memory
 * outlives its VM, and every bad argument is RTVM_EINVAL with a message. */
static void mode_memory(void) {
    const size_t MiB = 1 << 20;
    const char *options[] = {"-Xmx64m", "-XX:+AlwaysPreTouch", "-XX:NativeMemoryTracking=summary"};
    rtvm_vm *vm = create(options, 3);
    rtvm_memory *m = NULL;
    OKAY(rtvm_memory_reserve(vm, "Wasm Memory", 64 * MiB, 2 * MiB, MiB, &m));
    rtvm_memory_info info;
    OKAY(rtvm_memory_get_info(m, &info));
    EXPECT(info.base != NULL && info.size == MiB && info.capacity == 64 * MiB && info.guard == 2 * MiB &&
               info.page_size >= (size_t)sysconf(_SC_PAGESIZE),
           "info: base %p size %zu capacity %zu guard %zu page %zu", info.base, info.size, info.capacity,
           info.guard, info.page_size);
    char *base = info.base;
    char perms[5];
    EXPECT(resident(base, MiB) == MiB, "-XX:+AlwaysPreTouch: the initial MiB is not all resident");
    perms_at((uintptr_t)base, perms);
    EXPECT(!strcmp(perms, "rw-p"), "the usable part is %s", perms);
    perms_at((uintptr_t)base + MiB, perms);
    EXPECT(!strcmp(perms, "---p"), "beyond the size: %s", perms);
    perms_at((uintptr_t)base + 64 * MiB + MiB, perms);
    EXPECT(!strcmp(perms, "---p"), "the guard is %s", perms);
    base[MiB - 1] = 1;

    OKAY(rtvm_memory_grow(m, 8 * MiB));
    OKAY(rtvm_memory_get_info(m, &info));
    EXPECT(info.base == base && info.size == 8 * MiB, "after growth: base %p size %zu", info.base, info.size);
    EXPECT(resident(base, 8 * MiB) == 8 * MiB, "the growth was not pretouched");
    base[8 * MiB - 1] = 1;
    int rc = rtvm_memory_grow(m, 65 * MiB);
    EXPECT(rc == RTVM_ENOMEM && strstr(rtvm_last_error(), "cannot grow to 68157440 bytes") != NULL,
           "growth beyond the capacity: code %d", rc);
    OKAY(rtvm_memory_get_info(m, &info));
    EXPECT(info.size == 8 * MiB, "a refused growth changed the size to %zu", info.size);
    OKAY(rtvm_memory_grow(m, MiB)); /* smaller: nothing changes */

    char *report = nmt_report(vm);
    const char *line = strstr(report, "Wasm Memory (reserved=");
    EXPECT(line != NULL, "NMT has no Wasm Memory category:\n%s", report);
    EXPECT(strstr(line, "committed=8388608)") != NULL, "NMT's Wasm Memory line: %.80s", line);
    free(report);

    OKAY(rtvm_memory_release(m));
    perms_at((uintptr_t)base, perms);
    EXPECT(perms[0] == '\0', "released, yet still mapped (%s)", perms);
    report = nmt_report(vm);
    EXPECT(strstr(report, "Wasm Memory") == NULL, "NMT still counts a released memory");
    free(report);
    OKAY(rtvm_memory_release(NULL));

    /* Bad arguments. */
    EXPECT(rtvm_memory_reserve(NULL, "x", MiB, 0, 0, &m) == RTVM_EINVAL, "NULL vm");
    EXPECT(rtvm_memory_reserve(vm, NULL, MiB, 0, 0, &m) == RTVM_EINVAL, "NULL category");
    EXPECT(rtvm_memory_reserve(vm, "x", MiB, 0, 0, NULL) == RTVM_EINVAL, "NULL memory_out");
    EXPECT(rtvm_memory_reserve(vm, "x", 0, 0, 0, &m) == RTVM_EINVAL, "zero capacity");
    EXPECT(rtvm_memory_reserve(vm, "x", MiB, 0, 2 * MiB, &m) == RTVM_EINVAL &&
               strstr(rtvm_last_error(), "invalid memory request for x") != NULL,
           "initial beyond the capacity");
    EXPECT(rtvm_memory_reserve(vm, "x", SIZE_MAX, SIZE_MAX, 0, &m) == RTVM_EINVAL, "sizes that overflow");
    rc = rtvm_memory_reserve(vm, "x", (size_t)1 << 62, 0, 0, &m);
    EXPECT(rc == RTVM_ENOMEM && strstr(rtvm_last_error(), "errno=12") != NULL,
           "4 EiB of address space: code %d", rc);
    EXPECT(rtvm_memory_grow(NULL, MiB) == RTVM_EINVAL, "grow(NULL)");
    EXPECT(rtvm_memory_get_info(NULL, &info) == RTVM_EINVAL, "get_info(NULL)");

    /* A memory outlives its VM: growth is then pretouched by the caller. */
    OKAY(rtvm_memory_reserve(vm, "late", 16 * MiB, 0, MiB, &m));
    OKAY(rtvm_destroy(vm));
    OKAY(rtvm_memory_grow(m, 4 * MiB));
    OKAY(rtvm_memory_get_info(m, &info));
    EXPECT(resident(info.base, 4 * MiB) == 4 * MiB, "growth after the destroy was not pretouched");
    memset(info.base, 7, 4 * MiB);
    OKAY(rtvm_memory_release(m));
    printf("memory: reserve 64 MiB + 2 MiB guard, 1 MiB pretouched, grown to 8 MiB in place, "
           "beyond capacity RTVM_ENOMEM, NMT category, release unmaps, outlives its VM\n");
}

/* ---- giving memory back ---- */

static size_t vm_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    EXPECT(f != NULL, "/proc/self/status: %s", strerror(errno));
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

/* A VM thread's malloc: 32 MiB in 16 KiB blocks (its own arena), touched, 15 of 16 freed. */
static void *kept_blocks[16][128];

static void malloc_and_free(void *arg) {
    int t = (int)(intptr_t)arg;
    void **blocks = malloc(2048 * sizeof(void *));
    EXPECT(blocks != NULL, "malloc");
    for (int i = 0; i < 2048; i++) {
        blocks[i] = malloc(16 << 10);
        EXPECT(blocks[i] != NULL, "malloc");
        memset(blocks[i], 1, 16 << 10);
    }
    for (int i = 0; i < 2048; i++) {
        if (i % 16 == 0) kept_blocks[t][i / 16] = blocks[i];
        else free(blocks[i]);
    }
    free(blocks);
}

struct trimmed_stack {
    rtvm_vm *vm;
    size_t freed;
    size_t resident_after;
    int depth;
};

/* Recurses 1 MiB deep, comes back and gives the stack below its frame back. */
static void deep_then_trim(struct trimmed_stack *s) {
    rtvm_stack_bounds b;
    OKAY(rtvm_current_stack_bounds(s->vm, &b));
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    s->depth = recurse(here - (1 << 20), 0);
    OKAY(rtvm_trim_current_stack(s->vm, &s->freed));
    /* What the recursion used, less the 64 KiB below this frame the trim's call may use. */
    uintptr_t high = (here & ~(uintptr_t)4095) - 64 * 1024, low = (here & ~(uintptr_t)4095) - (1 << 20);
    s->resident_after = resident((void *)low, high - low);
}

static void deep_then_trim_thread(void *arg) { deep_then_trim(arg); }

/* rtvm_trim_native_heap after VM threads malloc 512 MB and free most of it (RSS down by
 * 300 MB at least); rtvm_heap_shrink (RSS, committed and resident drop, bad targets refused
 * with nothing changed, expansion and allocation work afterwards); rtvm_memory_discard
 * (zeroes, frees, the range stays usable) and rtvm_memory_shrink (the tail is inaccessible, a
 * growth recommits it zeroed; both also after rtvm_destroy); rtvm_trim_current_stack on a VM
 * thread and an attached one, RTVM_EDETACHED on any other. */
static void mode_give_back(void) {
    const size_t MiB = 1 << 20;
    const char *options[] = {"-Xms8m", "-Xmx256m", "-Xss2m", "-XX:+AlwaysPreTouch",
                             "-XX:NativeMemoryTracking=summary"};
    rtvm_vm *vm = create(options, 5);

    /* The C heap. */
    rtvm_thread *threads[16];
    for (int t = 0; t < 16; t++) OKAY(rtvm_thread_start(vm, "Malloc", malloc_and_free, (void *)(intptr_t)t, &threads[t]));
    for (int t = 0; t < 16; t++) OKAY(rtvm_thread_join(threads[t]));
    size_t rss0 = vm_rss(), before = 0, after = 0;
    OKAY(rtvm_trim_native_heap(vm, &before, &after));
    size_t rss1 = vm_rss();
    EXPECT(rss0 >= rss1 + 300 * MiB, "VmRSS %zu MB -> %zu MB after rtvm_trim_native_heap", rss0 / MiB, rss1 / MiB);
    EXPECT(before >= after + 300 * MiB, "the trim reported %zu -> %zu bytes", before, after);
    printf("trim: VmRSS %zu MB -> %zu MB, reported %zu -> %zu MB\n", rss0 / MiB, rss1 / MiB, before / MiB, after / MiB);
    for (int t = 0; t < 16; t++)
        for (int i = 0; i < 128; i++) free(kept_blocks[t][i]);
    EXPECT(rtvm_trim_native_heap(NULL, NULL, NULL) == RTVM_EINVAL, "NULL vm");

    /* The heap. */
    size_t committed = 0, resident_bytes = 0;
    OKAY(rtvm_heap_expand(vm, 248 * MiB, &committed));
    EXPECT(committed == 256 * MiB, "expanded to %zu", committed);
    OKAY(rtvm_heap_resident(vm, &resident_bytes));
    EXPECT(resident_bytes == 256 * MiB, "-XX:+AlwaysPreTouch: %zu resident", resident_bytes);
    char *block = rtvm_heap_allocate(vm, 20 * MiB);
    EXPECT(block != NULL, "20 MiB from the heap");
    memset(block, 0x5a, 20 * MiB);
    rss0 = vm_rss();
    int rc = rtvm_heap_shrink(vm, 16 * MiB, &committed);
    EXPECT(rc == RTVM_EINVAL && strstr(rtvm_last_error(), "bytes are allocated") != NULL,
           "shrinking below what is allocated: code %d", rc);
    rc = rtvm_heap_shrink(vm, 4 * MiB, NULL);
    EXPECT(rc == RTVM_EINVAL && strstr(rtvm_last_error(), "MinHeapSize") != NULL, "below MinHeapSize: code %d", rc);
    rtvm_heap_stats stats;
    OKAY(rtvm_heap_get_stats(vm, &stats));
    EXPECT(stats.committed == 256 * MiB, "a refused shrink changed the committed size to %zu", stats.committed);
    OKAY(rtvm_heap_shrink(vm, 32 * MiB, &committed));
    rss1 = vm_rss();
    OKAY(rtvm_heap_get_stats(vm, &stats));
    OKAY(rtvm_heap_resident(vm, &resident_bytes));
    EXPECT(committed == 32 * MiB && stats.committed == 32 * MiB, "committed %zu / %zu after the shrink", committed,
           stats.committed);
    EXPECT(resident_bytes <= 32 * MiB && rss0 >= rss1 + 200 * MiB, "resident %zu, VmRSS %zu MB -> %zu MB",
           resident_bytes, rss0 / MiB, rss1 / MiB);
    for (size_t i = 0; i < 20 * MiB; i += 4096) EXPECT(block[i] == 0x5a, "an allocated block lost its contents");
    char *report = nmt_report(vm);
    const char *line = strstr(report, "Java Heap (reserved=");
    EXPECT(line != NULL && strstr(line, "committed=33554432)") != NULL, "NMT's heap line: %.80s", line);
    free(report);
    OKAY(rtvm_heap_expand(vm, 32 * MiB, &committed));
    EXPECT(committed == 64 * MiB, "regrown to %zu", committed);
    char *more = rtvm_heap_allocate(vm, 30 * MiB);
    EXPECT(more != NULL && more[30 * MiB - 1] == 0, "allocation after the shrink");
    printf("heap shrink 256 MiB -> 32 MiB: VmRSS %zu MB -> %zu MB, resident %zu MiB; regrown\n", rss0 / MiB,
           rss1 / MiB, resident_bytes / MiB);

    /* An embedder memory. */
    rtvm_memory *m = NULL;
    OKAY(rtvm_memory_reserve(vm, "Wasm Memory", 64 * MiB, 0, 16 * MiB, &m));
    rtvm_memory_info info;
    OKAY(rtvm_memory_get_info(m, &info));
    char *base = info.base;
    memset(base, 0xab, 16 * MiB);
    OKAY(rtvm_memory_discard(m, 4 * MiB, 8 * MiB));
    EXPECT(resident(base + 4 * MiB, 8 * MiB) == 0, "the discarded range is resident");
    EXPECT(base[4 * MiB] == 0 && base[12 * MiB - 1] == 0 && (unsigned char)base[12 * MiB] == 0xab &&
               (unsigned char)base[4 * MiB - 1] == 0xab,
           "discard: the range reads zero, the rest is kept");
    base[5 * MiB] = 1; /* still usable */
    EXPECT(rtvm_memory_discard(m, 15 * MiB, 2 * MiB) == RTVM_EINVAL && strstr(rtvm_last_error(), "cannot discard"),
           "discarding beyond the size");
    EXPECT(rtvm_memory_discard(m, 1, 4096) == RTVM_EINVAL, "an unaligned discard");
    EXPECT(rtvm_memory_discard(NULL, 0, 4096) == RTVM_EINVAL, "discard(NULL)");
    EXPECT((unsigned char)base[15 * MiB] == 0xab, "a refused discard changed the memory");
    OKAY(rtvm_memory_shrink(m, 6 * MiB));
    OKAY(rtvm_memory_get_info(m, &info));
    char perms[5];
    perms_at((uintptr_t)base + 6 * MiB, perms);
    EXPECT(info.size == 6 * MiB && !strcmp(perms, "---p"), "after the shrink: size %zu, tail %s", info.size, perms);
    report = nmt_report(vm);
    line = strstr(report, "Wasm Memory (reserved=");
    EXPECT(line != NULL && strstr(line, "committed=6291456)") != NULL, "NMT's Wasm Memory line: %.80s", line);
    free(report);
    OKAY(rtvm_memory_grow(m, 10 * MiB));
    EXPECT(base[8 * MiB] == 0 && (unsigned char)base[3 * MiB] == 0xab, "a regrown tail reads zero, the rest stays");
    EXPECT(rtvm_memory_shrink(NULL, 0) == RTVM_EINVAL, "shrink(NULL)");

    /* The calling thread's stack. */
    struct trimmed_stack s = {vm, 0, 0, 0};
    size_t freed = 0;
    rc = rtvm_trim_current_stack(vm, &freed);
    EXPECT(rc == RTVM_EDETACHED && freed == 0, "the unattached main thread trimmed its stack: code %d", rc);
    rtvm_thread *t;
    OKAY(rtvm_thread_start(vm, "Deep", deep_then_trim_thread, &s, &t));
    OKAY(rtvm_thread_join(t));
    EXPECT(s.freed >= 900 * 1024 && s.resident_after == 0, "VM thread: %zu bytes freed, %zu still resident",
           s.freed, s.resident_after);
    printf("VM thread: %d frames deep, %zu KiB given back, none resident below its frame\n", s.depth, s.freed / 1024);
    OKAY(rtvm_attach_current_thread(vm, "main"));
    s.freed = 0;
    deep_then_trim(&s);
    EXPECT(s.freed >= 900 * 1024 && s.resident_after == 0, "attached thread: %zu bytes freed, %zu still resident",
           s.freed, s.resident_after);
    OKAY(rtvm_detach_current_thread(vm));
    EXPECT(rtvm_trim_current_stack(vm, NULL) == RTVM_EDETACHED, "after the detach");

    /* A memory outlives its VM: discard and shrink still work. */
    OKAY(rtvm_destroy(vm));
    memset(base, 0xcd, 10 * MiB);
    OKAY(rtvm_memory_discard(m, 0, 4 * MiB));
    EXPECT(base[0] == 0 && (unsigned char)base[4 * MiB] == 0xcd, "discard after the destroy");
    OKAY(rtvm_memory_shrink(m, 2 * MiB));
    OKAY(rtvm_memory_release(m));
    printf("memory: discard zeroes and frees, shrink uncommits the tail, regrowth zeroed, after destroy too\n");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: capi_test <mode>\n");
        return 2;
    }
    const char *m = argv[1];
    if (!strcmp(m, "version")) mode_version();
    else if (!strcmp(m, "exit-requests")) mode_exit_requests();
    else if (!strcmp(m, "output-hook")) mode_output_hook();
    else if (!strcmp(m, "alloc")) mode_alloc();
    else if (!strcmp(m, "attach")) mode_attach();
    else if (!strcmp(m, "soft-limit")) mode_soft_limit();
    else if (!strcmp(m, "nmt-idiom")) mode_nmt_idiom();
    else if (!strcmp(m, "threads")) mode_threads();
    else if (!strcmp(m, "destroy-rules")) mode_destroy_rules();
    else if (!strcmp(m, "pretouch-hold")) mode_pretouch_hold();
    else if (!strcmp(m, "memory")) mode_memory();
    else if (!strcmp(m, "give-back")) mode_give_back();
    else {
        fprintf(stderr, "unknown mode %s\n", m);
        return 2;
    }
    printf("PASS %s\n", m);
    return 0;
}
