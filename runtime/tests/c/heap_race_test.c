/* heap_race_test.c — the heap's races from C (issue 30): allocations and figures racing
 * rtvm_heap_shrink, what a failed allocation says while the heap shrinks and grows, and a
 * held background pretouch (-XX:+HoldBackgroundPreTouch) that must hold nothing but itself.
 *
 * One mode per process: heap_race_test <mode>. Prints "PASS <mode>" and exits 0, or prints
 * "FAIL file:line: ..." and exits 1. Races are bounded by counts and a few seconds; a call
 * that hangs is ended by alarm() (the process dies of SIGALRM: a failure, not a timeout of
 * the harness). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
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

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- allocations and figures racing shrinks ---- */

static rtvm_vm *race_vm;
static atomic_int race_stop, race_running;
static pthread_barrier_t race_start;

struct allocator {
    int tlab;
    size_t done;
    char failure[512];
};

/* 8-byte blocks, 32 MiB in all, shared or through 4 KiB TLABs; the first word of every
 * 8192nd block is written and read back. A NULL ends the thread with the message. */
static void *allocate_small(void *arg) {
    struct allocator *a = arg;
    rtvm_tlab tlab;
    OKAY(rtvm_tlab_init(race_vm, &tlab, 4096));
    pthread_barrier_wait(&race_start);
    while (a->done < 32 * MiB && !atomic_load(&race_stop)) {
        uint64_t *p = a->tlab ? rtvm_tlab_allocate(&tlab, 8) : rtvm_heap_allocate(race_vm, 8);
        if (!p) {
            snprintf(a->failure, sizeof a->failure, "%s failed after %zu bytes: %s",
                     a->tlab ? "rtvm_tlab_allocate" : "rtvm_heap_allocate", a->done, rtvm_last_error());
            break;
        }
        if (a->done % 65536 == 0) {
            *p = (uint64_t)(uintptr_t)p;
            EXPECT(*p == (uint64_t)(uintptr_t)p, "a block does not keep what was written");
        }
        a->done += 8;
    }
    atomic_fetch_sub(&race_running, 1);
    return NULL;
}

static void *read_figures(void *arg) {
    size_t *reads = arg;
    pthread_barrier_wait(&race_start);
    while (!atomic_load(&race_stop)) {
        rtvm_heap_stats s;
        OKAY(rtvm_heap_get_stats(race_vm, &s));
        EXPECT(s.committed >= 512 * MiB && s.committed - s.used >= 440 * MiB,
               "figures read during a shrink: %zu used of %zu committed (at most 66 MiB are used)", s.used,
               s.committed);
        (*reads)++;
    }
    return NULL;
}

/* Two allocators (shared; TLAB) and a reader of the figures while the main thread shrinks a
 * 1 GiB heap to 512 MiB and grows it back as long as they allocate (at most 50,000 times or
 * 4 s): no allocation fails, the figures never show less than 440 MiB of room. */
static void mode_shrink_race(void) {
    const char *options[] = {"-Xms1g", "-Xmx1g", "-XX:MinHeapSize=16m"};
    race_vm = create(options, 3);
    pthread_barrier_init(&race_start, NULL, 4);
    atomic_store(&race_running, 2);
    struct allocator a[2] = {{.tlab = 0}, {.tlab = 1}};
    size_t reads = 0;
    pthread_t t[3];
    for (int i = 0; i < 2; i++) EXPECT(pthread_create(&t[i], NULL, allocate_small, &a[i]) == 0, "pthread_create");
    EXPECT(pthread_create(&t[2], NULL, read_figures, &reads) == 0, "pthread_create");
    pthread_barrier_wait(&race_start);
    double deadline = now_s() + 4;
    int rounds = 0;
    while (atomic_load(&race_running) > 0 && rounds < 50000 && now_s() < deadline) {
        size_t committed = 0;
        OKAY(rtvm_heap_shrink(race_vm, 512 * MiB, &committed));
        EXPECT(committed == 512 * MiB, "shrunk to %zu", committed);
        OKAY(rtvm_heap_expand(race_vm, 512 * MiB, &committed));
        EXPECT(committed == 1024 * MiB, "grown to %zu", committed);
        rounds++;
    }
    atomic_store(&race_stop, 1);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        EXPECT(a[i].failure[0] == 0, "%s — while the heap shrank to 512 MiB, of which at most 66 MiB were used",
               a[i].failure);
    EXPECT(rounds > 50 && reads > 50, "the race did not happen: %d rounds, %zu reads", rounds, reads);
    printf("%d shrinks and regrowths raced %zu + %zu bytes of 8-byte allocations and %zu reads of the figures: "
           "no failure, never full\n",
           rounds, a[0].done, a[1].done, reads);
    OKAY(rtvm_destroy(race_vm));
}

/* ---- failures racing shrinks say what happened ---- */

#define MAX_BLOCKS 100000

struct filler {
    int id;
    atomic_size_t tries;
    size_t nblocks, bytes, failures;
    uintptr_t (*blocks)[2];
};

static size_t number_before(const char *text, const char *suffix) {
    const char *at = strstr(text, suffix);
    if (!at) return (size_t)-1;
    while (at > text && at[-1] == ' ') at--;
    const char *digits = at;
    while (digits > text && digits[-1] >= '0' && digits[-1] <= '9') digits--;
    return digits == at ? (size_t)-1 : strtoull(digits, NULL, 10);
}

/* Mixed sizes (the fetch-and-add path and, at 1.5 MiB, the compare-and-swap one) until
 * stopped. Every failure's message must explain it: the free bytes at the heap's end it
 * names, and the largest gap if it names one, are fewer than asked for. */
static void *fill(void *arg) {
    struct filler *f = arg;
    static const size_t sizes[] = {24, 4096, 64 * 1024, 3 * MiB / 2, 200, 40 * 1024};
    size_t i = f->id;
    pthread_barrier_wait(&race_start);
    while (!atomic_load(&race_stop)) {
        size_t size = sizes[i++ % 6];
        atomic_fetch_add(&f->tries, 1);
        uint64_t *p = rtvm_heap_allocate(race_vm, size);
        if (p) {
            EXPECT(f->nblocks < MAX_BLOCKS, "too many blocks");
            p[0] = ((uint64_t)f->id << 56) | f->nblocks;
            p[size / 8 - 1] = ~p[0];
            f->blocks[f->nblocks][0] = (uintptr_t)p;
            f->blocks[f->nblocks][1] = size;
            f->nblocks++;
            f->bytes += size;
            continue;
        }
        f->failures++;
        sched_yield(); /* as an allocator would, before it tries again */
        const char *e = rtvm_last_error();
        size_t asked = number_before(e, "bytes do not fit the committed heap");
        size_t free_at_end = number_before(e, "bytes free at its end");
        EXPECT(asked == size && free_at_end != (size_t)-1 && free_at_end < size,
               "the message of a failed %zu-byte allocation does not say why: %s", size, e);
        if (strstr(e, "largest gap")) {
            size_t gap = strtoull(strstr(e, "holds ") + 6, NULL, 10);
            EXPECT(gap < size, "a %zu-byte allocation failed next to a %zu-byte gap: %s", size, gap, e);
        }
    }
    return NULL;
}

static int by_address(const void *a, const void *b) {
    uintptr_t x = ((const uintptr_t *)a)[0], y = ((const uintptr_t *)b)[0];
    return x < y ? -1 : x > y;
}

/* Four allocators fill a heap of up to 48 MiB while the main thread shrinks it to just above
 * what is used and grows it back, until each has tried 20,000 times and it has done 100
 * rounds (at most 4 s). Every failure's
 * message explains it; afterwards `used` is the sum of the blocks to the byte, no two blocks
 * overlap and each keeps its tags. */
static void mode_shrink_race_full(void) {
    const char *options[] = {"-Xms16m", "-Xmx64m", "-XX:MinHeapSize=8m"};
    race_vm = create(options, 3);
    pthread_barrier_init(&race_start, NULL, 5);
    struct filler f[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        f[i] = (struct filler){.id = i};
        f[i].blocks = calloc(MAX_BLOCKS, sizeof *f[i].blocks);
        EXPECT(f[i].blocks != NULL, "calloc");
        EXPECT(pthread_create(&t[i], NULL, fill, &f[i]) == 0, "pthread_create");
    }
    pthread_barrier_wait(&race_start);
    double deadline = now_s() + 4;
    int rounds = 0, shrunk = 0;
    for (;;) {
        size_t slowest = SIZE_MAX;
        for (int i = 0; i < 4; i++) {
            size_t n = atomic_load(&f[i].tries);
            if (n < slowest) slowest = n;
        }
        if ((slowest >= 20000 && rounds >= 100) || now_s() > deadline) break;
        rtvm_heap_stats s;
        OKAY(rtvm_heap_get_stats(race_vm, &s));
        size_t committed = 0;
        if (rtvm_heap_shrink(race_vm, s.used + (rounds % 4) * MiB, &committed) == RTVM_OK && committed < s.committed)
            shrunk++;
        /* Below 48 MiB, so that the heap never fills up to MaxHeapSize (no shrink then). */
        OKAY(rtvm_heap_get_stats(race_vm, &s));
        if (s.committed < 48 * MiB) (void)rtvm_heap_expand(race_vm, (rounds % 3 + 1) * MiB, NULL);
        rounds++;
        sched_yield();
    }
    atomic_store(&race_stop, 1);
    size_t n = 0, bytes = 0, failures = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        n += f[i].nblocks;
        bytes += f[i].bytes;
        failures += f[i].failures;
    }
    uintptr_t(*all)[2] = calloc(n ? n : 1, sizeof *all);
    EXPECT(all != NULL, "calloc");
    size_t k = 0;
    for (int i = 0; i < 4; i++) {
        for (size_t j = 0; j < f[i].nblocks; j++) {
            uint64_t *p = (uint64_t *)f[i].blocks[j][0];
            size_t size = f[i].blocks[j][1];
            EXPECT(p[0] == (((uint64_t)i << 56) | j) && p[size / 8 - 1] == ~p[0], "block %p+%zu lost its contents",
                   (void *)p, size);
            all[k][0] = f[i].blocks[j][0];
            all[k][1] = size;
            k++;
        }
        free(f[i].blocks);
    }
    qsort(all, n, sizeof *all, by_address);
    for (size_t j = 1; j < n; j++)
        EXPECT(all[j - 1][0] + all[j - 1][1] <= all[j][0], "blocks handed out twice: %#lx+%lu and %#lx+%lu",
               (unsigned long)all[j - 1][0], (unsigned long)all[j - 1][1], (unsigned long)all[j][0],
               (unsigned long)all[j][1]);
    free(all);
    rtvm_heap_stats s;
    OKAY(rtvm_heap_get_stats(race_vm, &s));
    EXPECT(s.used == bytes, "the heap counts %zu bytes used, the allocators got %zu: bytes were lost", s.used, bytes);
    EXPECT(rounds >= 20 && failures > 0, "the race did not happen: %d rounds, %zu failures", rounds, failures);
    printf("%zu blocks (%zu bytes) and %zu failed allocations, each explained, raced %d rounds (%d shrinks); used "
           "%zu of %zu\n",
           n, bytes, failures, rounds, shrunk, s.used, s.committed);
    OKAY(rtvm_destroy(race_vm));
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
    if (!strcmp(m, "shrink-race")) mode_shrink_race();
    else if (!strcmp(m, "shrink-race-full")) mode_shrink_race_full();
    else if (!strcmp(m, "hold")) mode_hold();
    else {
        fprintf(stderr, "unknown mode %s\n", m);
        return 2;
    }
    printf("PASS %s\n", m);
    return 0;
}
