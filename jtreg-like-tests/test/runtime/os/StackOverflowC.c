/*
 * StackOverflowC.c — a C embedder whose VM thread overflows its stack with frames of a given
 * size, compiled by TestStackOverflowC.rs with -O0 -fno-stack-clash-protection: a frame is
 * one unprobed stack-pointer move, and its first touch is at its bottom, so a frame larger
 * than the guard zone would jump it.
 *
 *   StackOverflowC <frame KiB> [VM options...]
 *
 * The thread that overflows ("overflower") is started first; then "neighbour" threads until
 * one's stack lies directly below the overflower's guard zone (the kernel places mappings
 * top-down). That neighbour fills a canary in its thread-local storage — which glibc keeps at
 * the top of its stack, the first thing an overflow that jumped the guard would hit. The
 * overflower checks the canary at every level of its recursion: if it ever changes, it says
 * so and exits 0 (what the old layout did). The expected end is rtvm's overflow report and
 * an abnormal exit.
 */
#define _GNU_SOURCE
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rtvm.h"

#define CANARY_WORDS 512
#define PATTERN 0x5ca1ab1e00c0ffeeull

static __thread volatile uint64_t tls_canary[CANARY_WORDS];

static size_t frame_bytes;
static volatile uint64_t *volatile canary;
#define ATTEMPTS 16
static sem_t go[ATTEMPTS], published;
static volatile uint64_t *volatile published_canary;

static int canary_intact(void) {
    for (int i = 0; i < CANARY_WORDS; i++)
        if (canary[i] != (PATTERN ^ (uint64_t)i)) return 0;
    return 1;
}

static volatile int keep_going = 1;
static volatile char sink;

static void recurse(int depth) {
    volatile char frame[frame_bytes]; /* one unprobed move of the stack pointer */
    frame[0] = (char)depth;           /* its first touch: the bottom */
    if (!canary_intact()) {
        printf("CANARY CORRUPTED at depth %d: the overflow wrote into the neighbour's TLS\n", depth);
        fflush(stdout);
        _exit(0);
    }
    if (keep_going) recurse(depth + 1);
    sink = frame[0]; /* not a tail call */
}

static void overflower(void *arg) {
    sem_wait(arg); /* only the one chosen ever goes */
    printf("overflower: recursing with %zu-byte frames\n", frame_bytes);
    fflush(stdout);
    recurse(0);
}

static void neighbour(void *arg) {
    (void)arg;
    for (int i = 0; i < CANARY_WORDS; i++) tls_canary[i] = PATTERN ^ (uint64_t)i;
    published_canary = tls_canary;
    sem_post(&published);
    for (;;) pause(); /* the process ends with the overflow */
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: StackOverflowC <frame KiB> [VM options...]\n");
        return 2;
    }
    frame_bytes = (size_t)atoi(argv[1]) * 1024;
    for (int i = 0; i < ATTEMPTS; i++) sem_init(&go[i], 0, 0);
    sem_init(&published, 0, 0);
    rtvm_init_args args = {.version = RTVM_VERSION_1};
    rtvm_get_default_init_args(&args);
    args.options = (const char *const *)(argv + 2);
    args.n_options = (size_t)(argc - 2);
    rtvm_vm *vm = NULL;
    if (rtvm_create(&args, &vm) != RTVM_OK) {
        fprintf(stderr, "rtvm_create: %s\n", rtvm_last_error());
        return 2;
    }
    /* Overflower candidates and neighbours, alternately: once the kernel's top-down
     * placement runs without holes, a neighbour lands directly below the candidate started
     * just before it. */
    rtvm_stack_bounds b[ATTEMPTS];
    for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
        rtvm_thread *t;
        char name[32];
        snprintf(name, sizeof name, "overflower");
        if (rtvm_thread_start(vm, name, overflower, &go[attempt], &t) != RTVM_OK) {
            fprintf(stderr, "rtvm_thread_start: %s\n", rtvm_last_error());
            return 2;
        }
        rtvm_thread_stack_bounds(t, &b[attempt]);
        snprintf(name, sizeof name, "neighbour-%d", attempt);
        if (rtvm_thread_start(vm, name, neighbour, NULL, &t) != RTVM_OK) {
            fprintf(stderr, "rtvm_thread_start: %s\n", rtvm_last_error());
            return 2;
        }
        sem_wait(&published);
        uintptr_t at = (uintptr_t)published_canary;
        for (int o = 0; o <= attempt; o++) {
            /* Adjacent: the neighbour's TLS lies just below a candidate's guard zone (only
             * its own signal stack and that stack's guard page in between). */
            if (at < b[o].guard_start && b[o].guard_start - at < (256u << 10)) {
                canary = published_canary;
                printf("%s: TLS canary at %#lx, %lu bytes below the guard zone [%#lx, %#lx) of overflower %d\n",
                       name, (unsigned long)at, (unsigned long)(b[o].guard_start - at),
                       (unsigned long)b[o].guard_start, (unsigned long)b[o].guard_end, o);
                fflush(stdout);
                sem_post(&go[o]);
                for (;;) pause();
            }
        }
    }
    printf("NOT ADJACENT: no neighbour's stack was placed below the overflower's\n");
    return 4;
}
