/*
 * embed.c — a language runtime embedding rtvm through its C API.
 *
 *   cc -o embed runtime/examples/embed.c -Iruntime/include -Ltarget/release -lrtvm \
 *      -Wl,-rpath,$PWD/target/release && ./embed
 *
 * It passes a bad option first and gets an error code and message back without the
 * process exiting; then creates a VM with a pretouched heap and native memory tracking,
 * allocates from the heap, grows it, runs four VM threads that fill their part of the heap,
 * prints the native memory summary, and destroys the VM.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtvm.h"

#define THREADS 4
#define SLICE (1u << 20)

struct work {
    uint64_t *words;
    size_t count;
    uint64_t tag;
};

static void fill(void *arg) {
    struct work *w = arg;
    for (size_t i = 0; i < w->count; i++) {
        w->words[i] = w->tag ^ i;
    }
}

static int check(int rc, const char *what) {
    if (rc != RTVM_OK) {
        fprintf(stderr, "%s failed (%d): %s\n", what, rc, rtvm_last_error());
        exit(1);
    }
    return rc;
}

int main(void) {
    rtvm_vm *vm = NULL;

    /* A bad option: an error value and a message, and we are still running. */
    const char *bad[] = {"-XX:+NoSuchFlag"};
    rtvm_init_args bad_args = {bad, 1, 0};
    int rc = rtvm_create(&bad_args, &vm);
    printf("bad option: code %d, message: %s\n", rc, rtvm_last_error());
    if (rc != RTVM_EINVAL || vm != NULL || strstr(rtvm_last_error(), "Unrecognized VM option 'NoSuchFlag'") == NULL) {
        fprintf(stderr, "unexpected result for a bad option\n");
        return 1;
    }
    /* The same option is skipped when asked to ignore unrecognized ones. */
    bad_args.ignore_unrecognized = 1;
    check(rtvm_create(&bad_args, &vm), "rtvm_create (ignoring unrecognized options)");
    check(rtvm_destroy(vm), "rtvm_destroy");
    vm = NULL;

    const char *options[] = {"-Xms16m", "-Xmx64m", "-XX:+AlwaysPreTouch", "-XX:NativeMemoryTracking=summary"};
    rtvm_init_args args = {options, sizeof options / sizeof options[0], 0};
    check(rtvm_create(&args, &vm), "rtvm_create");

    /* A second VM in the same process is refused. */
    rtvm_vm *second = NULL;
    rc = rtvm_create(&args, &second);
    printf("second VM: code %d (%s)\n", rc, rtvm_last_error());
    if (rc != RTVM_EEXIST) return 1;

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
        work[t] = (struct work){words, SLICE / sizeof(uint64_t), 0x5eed0000u + (uint64_t)t};
        char name[16];
        snprintf(name, sizeof name, "filler-%d", t);
        check(rtvm_thread_start(vm, name, fill, &work[t], &threads[t]), "rtvm_thread_start");
    }
    for (int t = 0; t < THREADS; t++) {
        check(rtvm_thread_join(threads[t]), "rtvm_thread_join");
    }
    for (int t = 0; t < THREADS; t++) {
        for (size_t i = 0; i < work[t].count; i += 4096) {
            if (work[t].words[i] != (work[t].tag ^ i)) {
                fprintf(stderr, "slice %d word %zu lost its value\n", t, i);
                return 1;
            }
        }
    }

    rtvm_heap_stats stats;
    check(rtvm_heap_get_stats(vm, &stats), "rtvm_heap_get_stats");
    printf("heap: reserved %zu, committed %zu, used %zu, resident %zu\n", stats.reserved, stats.committed,
           stats.used, stats.resident);
    if (stats.resident != stats.committed) {
        fprintf(stderr, "AlwaysPreTouch left %zu bytes non-resident\n", stats.committed - stats.resident);
        return 1;
    }

    size_t needed = 0;
    rc = rtvm_nmt_summary(vm, NULL, 0, &needed);
    char *report = malloc(needed);
    check(rtvm_nmt_summary(vm, report, needed, NULL), "rtvm_nmt_summary");
    fputs(report, stdout);
    free(report);

    check(rtvm_destroy(vm), "rtvm_destroy");
    printf("embed: ok\n");
    return 0;
}
