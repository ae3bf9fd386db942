/* heap_race_test.c — the heap's races from C (issue 30): a held background pretouch
 * (-XX:+HoldBackgroundPreTouch) must hold nothing but itself.
 *
 * One mode per process: heap_race_test <mode>. Prints "PASS <mode>" and exits 0, or prints
 * "FAIL file:line: ..." and exits 1. A call that hangs is ended by alarm() (the process dies
 * of SIGALRM: a failure, not a timeout of the harness). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define MiB ((size_t)1 << 20)

static rtvm_vm *create(const char **options, size_t n) {
    rtvm_init_args args = {.version = RTVM_VERSION_1};
    OKAY(rtvm_get_default_init_args(&args));
    args.n_options = n;
    args.options = options;
    rtvm_vm *vm = NULL;
    OKAY(rtvm_create(&args, &vm));
    return vm;
}

/* ---- a held pretouch holds nothing else ---- */

/* With the heap's background pretouch held, a memory is reserved (pretouched by the gang) and
 * released (its pretouch waited for), another shrunk, the heap shrunk below its initial size
 * and grown again: all return, and the heap's pretouch is still held (nothing of what it
 * covers is resident) until released. alarm() turns a hang into a failure. */
static void mode_hold(void) {
    const char *options[] = {"-Xms64m",
                             "-Xmx64m",
                             "-XX:MinHeapSize=8m",
                             "-XX:+AlwaysPreTouch",
                             "-XX:+UnlockExperimentalVMOptions",
                             "-XX:+BackgroundPreTouch",
                             "-XX:+HoldBackgroundPreTouch",
                             "-XX:ParallelGCThreads=2"};
    rtvm_vm *vm = create(options, 8);
    alarm(60);
    size_t resident = 1;
    OKAY(rtvm_heap_resident(vm, &resident));
    EXPECT(resident == 0, "%zu bytes of the heap resident under the hold", resident);
    rtvm_memory *m;
    OKAY(rtvm_memory_reserve(vm, "Wasm Memory", 32 * MiB, 0, 32 * MiB, &m));
    OKAY(rtvm_memory_release(m)); /* waits for the memory's own pretouch */
    OKAY(rtvm_memory_reserve(vm, "Wasm Memory", 16 * MiB, 0, 16 * MiB, &m));
    OKAY(rtvm_memory_shrink(m, 4 * MiB));
    rtvm_memory_info info;
    OKAY(rtvm_memory_get_info(m, &info));
    EXPECT(info.size == 4 * MiB, "shrunk to %zu", info.size);
    OKAY(rtvm_memory_release(m));
    size_t committed = 0;
    OKAY(rtvm_heap_shrink(vm, 16 * MiB, &committed));
    EXPECT(committed == 16 * MiB, "shrunk to %zu", committed);
    OKAY(rtvm_heap_expand(vm, 48 * MiB, &committed));
    EXPECT(committed == 64 * MiB, "grown to %zu", committed);
    OKAY(rtvm_heap_resident(vm, &resident));
    EXPECT(resident == 48 * MiB, "%zu bytes resident: the expansion pretouches its 48 MiB, the held pretouch nothing",
           resident);
    OKAY(rtvm_release_pretouch(vm));
    while (resident < 64 * MiB) {
        usleep(1000);
        OKAY(rtvm_heap_resident(vm, &resident));
    }
    alarm(0);
    printf("held: memories reserved, released and shrunk, the heap shrunk to 16 MiB and grown; released: the heap "
           "pretouched\n");
    OKAY(rtvm_destroy(vm));
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc != 2) {
        fprintf(stderr, "usage: heap_race_test <mode>\n");
        return 2;
    }
    const char *m = argv[1];
    if (!strcmp(m, "hold")) mode_hold();
    else {
        fprintf(stderr, "unknown mode %s\n", m);
        return 2;
    }
    printf("PASS %s\n", m);
    return 0;
}
