/*
 * embed.c — a language runtime embedding rtvm through its C API.
 *
 *   tools/install-c.sh --prefix "$HOME/.local"
 *   export PKG_CONFIG_PATH="$HOME/.local/lib/pkgconfig"
 *   cc -o embed runtime/examples/embed.c $(pkg-config --cflags --libs rtvm) && ./embed
 *
 * It passes a bad option first and gets an error code and message back without the process
 * exiting; then creates a VM whose output goes to a hook, attaches its own main thread and
 * reads its stack bounds, allocates from the heap and from a thread-local allocation buffer,
 * grows the heap, runs four VM threads that fill their part of the heap and stop a recursion
 * at their soft stack limit, prints the native memory summary, and destroys the VM.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtvm.h"

#define THREADS 4
#define SLICE (1u << 20)

static int check(int rc, const char *what) {
    if (rc != RTVM_OK) {
        fprintf(stderr, "%s failed (%d): %s\n", what, rc, rtvm_last_error());
        exit(1);
    }
    return rc;
}

/* The output hook: the VM's text, tagged with its stream, and counted. */
struct sink {
    pthread_mutex_t lock;
    size_t lines;
    size_t bytes;
};

static void on_output(void *context, int stream, const char *text, size_t len) {
    struct sink *s = context;
    pthread_mutex_lock(&s->lock);
    s->bytes += len;
    for (size_t i = 0; i < len; i++) s->lines += text[i] == '\n';
    fprintf(stream == RTVM_STDERR ? stderr : stdout, "[vm] %.*s", (int)len, text);
    pthread_mutex_unlock(&s->lock);
}

/* A recursive "interpreter": it checks its stack pointer against the soft limit before
 * each call and raises its own overflow error instead of hitting the guard zone. */
static int recurse(uintptr_t soft_limit, int depth) {
    volatile char frame[512];
    frame[0] = (char)depth;
    if ((uintptr_t)__builtin_frame_address(0) < soft_limit) return depth; /* "StackOverflowError" */
    return recurse(soft_limit, depth + 1) + frame[0] * 0;
}

struct work {
    rtvm_vm *vm;
    uint64_t *words;
    size_t count;
    uint64_t tag;
    int depth;
};

static void fill(void *arg) {
    struct work *w = arg;
    for (size_t i = 0; i < w->count; i++) w->words[i] = w->tag ^ i;
    rtvm_stack_bounds b;
    if (rtvm_current_stack_bounds(w->vm, &b) == RTVM_OK) w->depth = recurse(b.soft_limit, 0);
}

int main(void) {
    rtvm_vm *vm = NULL;
    rtvm_init_args args = {.version = RTVM_VERSION_1};
    check(rtvm_get_default_init_args(&args), "rtvm_get_default_init_args");

    /* A bad option: an error value and a message, and we are still running. */
    const char *bad[] = {"-XX:+NoSuchFlag"};
    args.options = bad;
    args.n_options = 1;
    int rc = rtvm_create(&args, &vm);
    printf("bad option: code %d, message: %s\n", rc, rtvm_last_error());
    if (rc != RTVM_EINVAL || vm != NULL || strstr(rtvm_last_error(), "Unrecognized VM option 'NoSuchFlag'") == NULL) {
        fprintf(stderr, "unexpected result for a bad option\n");
        return 1;
    }

    struct sink sink = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
    const char *options[] = {"-Xms16m", "-Xmx64m", "-XX:+AlwaysPreTouch", "-XX:NativeMemoryTracking=summary",
                             "-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintNMTStatistics"};
    args.options = options;
    args.n_options = sizeof options / sizeof options[0];
    args.output = on_output;
    args.output_context = &sink;
    check(rtvm_create(&args, &vm), "rtvm_create");

    /* A second VM in the same process is refused. */
    rtvm_vm *second = NULL;
    rc = rtvm_create(&args, &second);
    printf("second VM: code %d (%s)\n", rc, rtvm_last_error());
    if (rc != RTVM_EEXIST) return 1;

    /* The host's main thread joins the VM: its stack is the process's [stack]. */
    check(rtvm_attach_current_thread(vm, "main"), "rtvm_attach_current_thread");
    rtvm_stack_bounds main_stack;
    check(rtvm_current_stack_bounds(vm, &main_stack), "rtvm_current_stack_bounds");
    printf("main thread attached: stack %#lx-%#lx, soft limit %#lx\n", (unsigned long)main_stack.limit,
           (unsigned long)main_stack.base, (unsigned long)main_stack.soft_limit);

    /* Small objects from a TLAB: no atomics on this path. */
    rtvm_tlab tlab;
    check(rtvm_tlab_init(vm, &tlab, 0), "rtvm_tlab_init");
    uint64_t *list = NULL;
    for (int i = 0; i < 100000; i++) {
        uint64_t *cell = rtvm_tlab_allocate(&tlab, 2 * sizeof(uint64_t));
        if (cell == NULL) {
            fprintf(stderr, "rtvm_tlab_allocate: %s\n", rtvm_last_error());
            return 1;
        }
        cell[0] = (uint64_t)i;
        cell[1] = (uint64_t)(uintptr_t)list;
        list = cell;
    }
    uint64_t sum = 0;
    for (uint64_t *c = list; c != NULL; c = (uint64_t *)(uintptr_t)c[1]) sum += c[0];
    printf("TLAB: 100000 cells, sum %llu\n", (unsigned long long)sum);

    size_t committed = 0;
    check(rtvm_heap_expand(vm, 16u << 20, &committed), "rtvm_heap_expand");
    printf("heap committed after expansion: %zu bytes\n", committed);

    struct work work[THREADS];
    rtvm_thread *threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
        uint64_t *words = rtvm_heap_allocate(vm, SLICE);
        if (words == NULL) {
            fprintf(stderr, "rtvm_heap_allocate: %s\n", rtvm_last_error());
            return 1;
        }
        work[t] = (struct work){vm, words, SLICE / sizeof(uint64_t), 0x5eed0000u + (uint64_t)t, 0};
        char name[16];
        snprintf(name, sizeof name, "filler-%d", t);
        check(rtvm_thread_start(vm, name, fill, &work[t], &threads[t]), "rtvm_thread_start");
    }
    for (int t = 0; t < THREADS; t++) check(rtvm_thread_join(threads[t]), "rtvm_thread_join");
    for (int t = 0; t < THREADS; t++) {
        for (size_t i = 0; i < work[t].count; i += 4096) {
            if (work[t].words[i] != (work[t].tag ^ i)) {
                fprintf(stderr, "slice %d word %zu lost its value\n", t, i);
                return 1;
            }
        }
        if (work[t].depth < 100) {
            fprintf(stderr, "thread %d stopped its recursion after %d frames\n", t, work[t].depth);
            return 1;
        }
    }
    printf("4 VM threads filled their slices and stopped their recursion at the soft limit (depth %d)\n",
           work[0].depth);

    rtvm_heap_stats stats;
    size_t resident = 0;
    check(rtvm_heap_get_stats(vm, &stats), "rtvm_heap_get_stats");
    check(rtvm_heap_resident(vm, &resident), "rtvm_heap_resident");
    printf("heap: reserved %zu, committed %zu, used %zu, resident %zu\n", stats.reserved, stats.committed,
           stats.used, resident);
    if (resident != stats.committed) {
        fprintf(stderr, "AlwaysPreTouch left %zu bytes non-resident\n", stats.committed - resident);
        return 1;
    }

    /* The size-query idiom: the second call gets exactly the report the first measured. */
    size_t needed = 0;
    rtvm_nmt_summary(vm, NULL, 0, &needed);
    char *report = malloc(needed);
    if (report == NULL) return 1;
    check(rtvm_nmt_summary(vm, report, needed, NULL), "rtvm_nmt_summary");
    fputs(report, stdout);
    free(report);

    check(rtvm_detach_current_thread(vm), "rtvm_detach_current_thread");
    /* The destroy prints the NMT report again (-XX:+PrintNMTStatistics): through the hook. */
    check(rtvm_destroy(vm), "rtvm_destroy");
    printf("output hook: %zu lines, %zu bytes\n", sink.lines, sink.bytes);
    if (sink.lines == 0) return 1;
    printf("embed: ok\n");
    return 0;
}
