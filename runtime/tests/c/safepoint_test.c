/*
 * safepoint_test.c — stopping the world and handshakes, from C. One mode per process:
 *
 *   safepoint_test <mode>   prints "PASS <mode>" and exits 0, or says what failed and exits 1
 *
 *   world      8 mutators (VM threads and an attached host thread) in tight loops that poll,
 *              loops that never poll, and reads blocked in a safe region, each holding a
 *              pointer to its own malloc'd block only in a deep frame's locals and registers:
 *              200 stops find every pointer in its thread's scan range (or, in a safe region,
 *              in the registers it published); the counters do not move while stopped and
 *              move again after. Built twice by c_api.rs: -O0 (the pointer lives in the
 *              frame) and -O2 (it lives in registers).
 *   world-nodelay  the same with -XX:SafepointSignalDelay=0: the stop signal reaches the
 *              threads while they enter and leave their safe regions, and what they
 *              published there (a value held only in a callee-saved register) must survive.
 *   enter-flood 20,000 stops (signal at once) of threads that enter and leave safe regions in
 *              a tight loop with a value only in r12: every stop finds the value.
 *   churn      500 stops while VM threads start and exit and host threads attach and detach:
 *              no thread lost, none hung, nothing left registered.
 *   refusals   from the callback: stop, handshake and destroy are refused (RTVM_EINVAL); a
 *              thread in a safe region that stops the world is refused, and its leave waits
 *              for the world to resume.
 *   handshake  rtvm_handshake for a thread at its poll (run by it), in a safe region and by
 *              the signal (run by the caller); an unknown thread is refused.
 *   xrs        -Xrs: polls and safe regions stop threads; one that never polls times out with
 *              RTVM_ETIMEDOUT and a message that names it and says why.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

enum kind { POLLS, NEVER_POLLS, BLOCKED_READ };

struct mutator {
    enum kind kind;
    int attached; /* a host thread that attaches itself, not rtvm_thread_start */
    _Atomic uint64_t counter;
    _Atomic uintptr_t expect; /* the block's address: the test's expectation, not scanned */
    _Atomic uint64_t id;
    int pipe[2];
    char name[32];
    rtvm_thread *thread;
    pthread_t host;
};

static int named; /* mutators started so far: names are unique */

static rtvm_vm *vm;
static atomic_int stop_all;

#define create check_create

#define sleep_us check_sleep_us

/* The loop at the bottom: `p` is the only copy of the block's address (the expectation is
 * stored from it first). The empty asm keeps it live, in a register at -O2. */
__attribute__((noinline)) static void work(struct mutator *m, void *p) {
    atomic_store(&m->expect, (uintptr_t)p);
    switch (m->kind) {
    case POLLS:
        while (!atomic_load_explicit(&stop_all, memory_order_relaxed)) {
            atomic_fetch_add_explicit(&m->counter, 1, memory_order_relaxed);
            rtvm_safepoint_poll();
            __asm__ volatile("" : "+r"(p));
        }
        break;
    case NEVER_POLLS:
        while (!atomic_load_explicit(&stop_all, memory_order_relaxed)) {
            atomic_fetch_add_explicit(&m->counter, 1, memory_order_relaxed);
            __asm__ volatile("" : "+r"(p));
        }
        break;
    case BLOCKED_READ:
        while (!atomic_load_explicit(&stop_all, memory_order_relaxed)) {
            char byte = 0;
            OKAY(rtvm_enter_safe_region(vm));
            ssize_t n = read(m->pipe[0], &byte, 1);
            OKAY(rtvm_leave_safe_region(vm));
            __asm__ volatile("" : "+r"(p));
            if (n == 1 && byte == 1) atomic_fetch_add_explicit(&m->counter, 1, memory_order_relaxed);
        }
        break;
    }
    free(p);
}

/* Sixteen frames with locals of their own above the loop. */
__attribute__((noinline)) static void deep(struct mutator *m, int depth) {
    volatile char pad[128];
    pad[0] = (char)depth;
    if (depth > 0) {
        deep(m, depth - 1);
    } else {
        work(m, malloc(64));
    }
    pad[1] = pad[0];
}

static void mutator_main(void *arg) {
    struct mutator *m = arg;
    atomic_store(&m->id, rtvm_current_thread_id(vm));
    deep(m, 16);
}

static void *attached_main(void *arg) {
    OKAY(rtvm_attach_current_thread(vm, ((struct mutator *)arg)->name));
    mutator_main(arg);
    OKAY(rtvm_detach_current_thread(vm));
    return NULL;
}

static void start(struct mutator *ms, size_t n) {
    for (size_t k = 0; k < n; k++) {
        struct mutator *m = &ms[k];
        EXPECT(pipe(m->pipe) == 0, "pipe");
        snprintf(m->name, sizeof m->name, "C-Mutator#%d", named++);
        if (m->attached) {
            EXPECT(pthread_create(&m->host, NULL, attached_main, m) == 0, "pthread_create");
        } else {
            OKAY(rtvm_thread_start(vm, m->name, mutator_main, m, &m->thread));
        }
    }
    for (size_t k = 0; k < n; k++) {
        while (atomic_load(&ms[k].expect) == 0 || atomic_load(&ms[k].id) == 0) sleep_us(1000);
    }
}

static void feed(struct mutator *ms, size_t n) {
    for (size_t k = 0; k < n; k++) {
        if (ms[k].kind == BLOCKED_READ) EXPECT(write(ms[k].pipe[1], "\1", 1) == 1, "write");
    }
}

static void finish(struct mutator *ms, size_t n) {
    atomic_store(&stop_all, 1);
    feed(ms, n);
    for (size_t k = 0; k < n; k++) {
        if (ms[k].attached) {
            EXPECT(pthread_join(ms[k].host, NULL) == 0, "pthread_join");
        } else {
            OKAY(rtvm_thread_join(ms[k].thread));
        }
    }
    atomic_store(&stop_all, 0);
}

static struct mutator *by_id(struct mutator *ms, size_t n, uint64_t id) {
    for (size_t k = 0; k < n; k++) {
        if (atomic_load(&ms[k].id) == id) return &ms[k];
    }
    return NULL;
}

static int range_holds(uintptr_t start, uintptr_t end, uintptr_t value) {
    for (uintptr_t a = start & ~(uintptr_t)7; a + 8 <= end; a += 8) {
        if (*(volatile uintptr_t *)a == value) return 1;
    }
    return 0;
}

static int regs_hold(const rtvm_stopped_thread *t, uintptr_t value) {
    for (size_t i = 0; i < t->n_registers; i++) {
        if (t->registers[i] == value) return 1;
    }
    return 0;
}

/* ---- world ---- */

#define N_WORLD 8

struct world_check {
    struct mutator *ms;
    size_t calls, in_stack, in_regs_only, by_poll, by_signal, by_region;
};

static void check_world(void *ctx, const rtvm_stopped_thread *ts, size_t n) {
    struct world_check *c = ctx;
    /* No malloc, no stdio here unless failing: a thread may be stopped inside malloc. */
    EXPECT(n == N_WORLD, "%zu threads stopped, not %d", n, N_WORLD);
    uint64_t frozen[N_WORLD];
    for (size_t k = 0; k < N_WORLD; k++) frozen[k] = atomic_load(&c->ms[k].counter);
    for (size_t i = 0; i < n; i++) {
        const rtvm_stopped_thread *t = &ts[i];
        struct mutator *m = by_id(c->ms, N_WORLD, t->id);
        EXPECT(m != NULL, "a stopped thread #%llu that is no mutator", (unsigned long long)t->id);
        EXPECT(t->tid > 0 && t->name != NULL && t->scan_start < t->scan_end, "thread %s", t->name);
        uintptr_t p = atomic_load(&m->expect);
        int in_stack = range_holds(t->scan_start, t->scan_end, p);
        int in_regs = regs_hold(t, p);
        switch (m->kind) {
        case POLLS:
            EXPECT(t->how == RTVM_STOPPED_POLL || t->how == RTVM_STOPPED_SIGNAL, "%s: how %d", t->name, t->how);
            break;
        case NEVER_POLLS:
            EXPECT(t->how == RTVM_STOPPED_SIGNAL, "%s: how %d", t->name, t->how);
            break;
        case BLOCKED_READ:
            /* Between two reads it runs its own loop: on a loaded machine a stop may find it
             * there past the grace period and signal it. */
            EXPECT(t->how == RTVM_STOPPED_SAFE_REGION || t->how == RTVM_STOPPED_SIGNAL, "%s: how %d",
                   t->name, t->how);
            break;
        }
        EXPECT(in_stack || (t->how == RTVM_STOPPED_SAFE_REGION && in_regs),
               "%s (how %d) holds %#lx, not in [%#lx, %#lx) nor its registers", t->name, t->how,
               (unsigned long)p, (unsigned long)t->scan_start, (unsigned long)t->scan_end);
        c->in_stack += in_stack;
        c->in_regs_only += !in_stack && in_regs;
        c->by_poll += t->how == RTVM_STOPPED_POLL;
        c->by_signal += t->how == RTVM_STOPPED_SIGNAL;
        c->by_region += t->how == RTVM_STOPPED_SAFE_REGION;
    }
    sleep_us(2000);
    for (size_t k = 0; k < N_WORLD; k++) {
        EXPECT(atomic_load(&c->ms[k].counter) == frozen[k], "counter %zu moved while stopped", k);
    }
    c->calls++;
}

/* extra: one more option (world-nodelay: -XX:SafepointSignalDelay=0, so the signal arrives
 * while the threads enter and leave their safe regions), or NULL. */
static void mode_world(const char *extra) {
    const char *opts[] = {"-Xmx16m", "-Xss512k", extra};
    vm = create(opts, extra ? 3 : 2);
    struct mutator ms[N_WORLD] = {
        {.kind = POLLS},        {.kind = POLLS},       {.kind = POLLS, .attached = 1},
        {.kind = NEVER_POLLS},  {.kind = NEVER_POLLS}, {.kind = NEVER_POLLS},
        {.kind = BLOCKED_READ}, {.kind = BLOCKED_READ},
    };
    start(ms, N_WORLD);
    struct world_check c = {.ms = ms};
    for (int round = 0; round < 200; round++) {
        feed(ms, N_WORLD);
        sleep_us(500);
        OKAY(rtvm_stop_the_world(vm, "CWorld", 10000, check_world, &c));
    }
    EXPECT(c.calls == 200, "the callback ran %zu times", c.calls);
    EXPECT(c.by_poll > 0, "no polling thread stopped at its poll");
    EXPECT(c.by_region > 0, "no blocked reader was found in its safe region");
    /* Everything moves again after the stops. */
    uint64_t after[N_WORLD];
    for (size_t k = 0; k < N_WORLD; k++) after[k] = atomic_load(&ms[k].counter);
    for (int waited = 0;; waited++) {
        feed(ms, N_WORLD);
        sleep_us(5000);
        size_t moved = 0;
        for (size_t k = 0; k < N_WORLD; k++) moved += atomic_load(&ms[k].counter) > after[k];
        if (moved == N_WORLD) break;
        EXPECT(waited < 2000, "only %zu of %d counters move after the stops", moved, N_WORLD);
    }
    finish(ms, N_WORLD);
    OKAY(rtvm_destroy(vm));
    printf("200 stops of 8 mutators: every pointer found (%zu in the scan range, %zu only in the "
           "published registers); stopped at a poll %zu, in a safe region %zu, by the signal %zu\n",
           c.in_stack, c.in_regs_only, c.by_poll, c.by_region, c.by_signal);
}

/* ---- churn ---- */

static atomic_ulong started, joined, attaches;

static void churn_body(void *arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++) rtvm_safepoint_poll();
}

static void *spawner(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_all)) {
        rtvm_thread *t = NULL;
        OKAY(rtvm_thread_start(vm, "C-Churn", churn_body, NULL, &t));
        atomic_fetch_add(&started, 1);
        OKAY(rtvm_thread_join(t));
        atomic_fetch_add(&joined, 1);
    }
    return NULL;
}

static void *attacher(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_all)) {
        OKAY(rtvm_attach_current_thread(vm, "C-Attacher"));
        for (int i = 0; i < 100; i++) rtvm_safepoint_poll();
        atomic_fetch_add(&attaches, 1);
        OKAY(rtvm_detach_current_thread(vm));
        sleep_us(100);
    }
    return NULL;
}

static size_t most;

static void count_world(void *ctx, const rtvm_stopped_thread *ts, size_t n) {
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        EXPECT(ts[i].scan_start <= ts[i].scan_end, "%s: scan [%#lx, %#lx)", ts[i].name,
               (unsigned long)ts[i].scan_start, (unsigned long)ts[i].scan_end);
    }
    if (n > most) most = n;
}

static void mode_churn(void) {
    const char *opts[] = {"-Xmx16m", "-Xss256k"};
    vm = create(opts, 2);
    struct mutator ms[2] = {{.kind = POLLS}, {.kind = NEVER_POLLS}};
    start(ms, 2);
    pthread_t s, a[2];
    EXPECT(pthread_create(&s, NULL, spawner, NULL) == 0, "pthread_create");
    for (int i = 0; i < 2; i++) EXPECT(pthread_create(&a[i], NULL, attacher, NULL) == 0, "pthread_create");
    for (int i = 0; i < 500; i++) {
        OKAY(rtvm_stop_the_world(vm, "CChurn", 10000, count_world, NULL));
        sleep_us(300);
    }
    atomic_store(&stop_all, 1);
    EXPECT(pthread_join(s, NULL) == 0, "join");
    for (int i = 0; i < 2; i++) EXPECT(pthread_join(a[i], NULL) == 0, "join");
    atomic_store(&stop_all, 0);
    finish(ms, 2);
    EXPECT(atomic_load(&started) == atomic_load(&joined), "started %lu, joined %lu", atomic_load(&started),
           atomic_load(&joined));
    EXPECT(atomic_load(&started) > 10 && atomic_load(&attaches) > 10, "started %lu, attaches %lu",
           atomic_load(&started), atomic_load(&attaches));
    /* Nothing is left to stop. */
    most = 0;
    OKAY(rtvm_stop_the_world(vm, "CChurnAfter", 1000, count_world, NULL));
    EXPECT(most == 0, "%zu threads left after the churn", most);
    OKAY(rtvm_destroy(vm));
    printf("500 stops while %lu VM threads started and exited and %lu attaches came and went\n",
           atomic_load(&started), atomic_load(&attaches));
}

/* ---- refusals ---- */

struct sleeper {
    int pipe[2];
    atomic_int refused; /* 0 none yet, else the code the stop returned */
    atomic_int left;
};

static void sleeper_main(void *arg) {
    struct sleeper *s = arg;
    char byte;
    OKAY(rtvm_enter_safe_region(vm));
    EXPECT(read(s->pipe[0], &byte, 1) == 1, "read");
    /* Woken by the callback: this thread counts as stopped, so it may not stop the world. */
    atomic_store(&s->refused, rtvm_stop_the_world(vm, "FromAStoppedThread", 1000, count_world, NULL));
    OKAY(rtvm_leave_safe_region(vm));
    atomic_store(&s->left, 1);
}

static void noop_handshake(void *ctx, const rtvm_stopped_thread *t) {
    (void)ctx;
    (void)t;
}

static void refuse_in_callback(void *ctx, const rtvm_stopped_thread *ts, size_t n) {
    struct sleeper *s = ctx;
    EXPECT(n == 1 && ts[0].how == RTVM_STOPPED_SAFE_REGION, "n %zu", n);
    EXPECT(rtvm_stop_the_world(vm, "Nested", 1000, count_world, NULL) == RTVM_EINVAL, "nested stop");
    EXPECT(rtvm_handshake(vm, ts[0].id, noop_handshake, NULL) == RTVM_EINVAL, "handshake in a callback");
    EXPECT(rtvm_destroy(vm) == RTVM_EINVAL, "destroy in a callback");
    EXPECT(strstr(rtvm_last_error(), "stopped") != NULL, "%s", rtvm_last_error());
    EXPECT(write(s->pipe[1], "\1", 1) == 1, "write");
    for (int i = 0; i < 2000 && atomic_load(&s->refused) == 0; i++) sleep_us(500);
    EXPECT(atomic_load(&s->refused) == RTVM_EINVAL, "a stop from a stopped thread: %d", atomic_load(&s->refused));
    sleep_us(50000);
    EXPECT(!atomic_load(&s->left), "the thread left its safe region during the stop");
}

static void mode_refusals(void) {
    const char *opts[] = {"-Xmx16m"};
    vm = create(opts, 1);
    struct sleeper s = {0};
    EXPECT(pipe(s.pipe) == 0, "pipe");
    rtvm_thread *t = NULL;
    OKAY(rtvm_thread_start(vm, "C-Sleeper", sleeper_main, &s, &t));
    /* Wait until it is in its region (then a stop finds it there at once). */
    for (;;) {
        most = 0;
        OKAY(rtvm_stop_the_world(vm, "Probe", 1000, count_world, NULL));
        if (most == 1) break;
        sleep_us(1000);
    }
    sleep_us(20000);
    OKAY(rtvm_stop_the_world(vm, "CRefusals", 10000, refuse_in_callback, &s));
    OKAY(rtvm_thread_join(t));
    EXPECT(atomic_load(&s.left), "the thread left its region after the stop");
    EXPECT(rtvm_stop_the_world(vm, "NoCallback", 1000, NULL, NULL) == RTVM_EINVAL, "NULL callback");
    EXPECT(rtvm_stop_the_world(NULL, "NoVm", 1000, count_world, NULL) == RTVM_EINVAL, "NULL vm");
    EXPECT(rtvm_enter_safe_region(vm) == RTVM_EDETACHED, "a safe region for a thread rtvm does not know");
    EXPECT(rtvm_leave_safe_region(vm) == RTVM_EDETACHED, "leave on a thread rtvm does not know");
    EXPECT(rtvm_current_thread_id(vm) == 0, "an id for a thread rtvm does not know");
    OKAY(rtvm_attach_current_thread(vm, "C-Main"));
    EXPECT(rtvm_current_thread_id(vm) != 0, "no id for an attached thread");
    EXPECT(rtvm_leave_safe_region(vm) == RTVM_EINVAL, "leave without a region");
    OKAY(rtvm_enter_safe_region(vm));
    OKAY(rtvm_enter_safe_region(vm));
    OKAY(rtvm_leave_safe_region(vm));
    OKAY(rtvm_leave_safe_region(vm));
    OKAY(rtvm_detach_current_thread(vm));
    OKAY(rtvm_destroy(vm));
    printf("refused in the callback: stop, handshake, destroy; refused from a stopped thread: a stop; "
           "its leave waited for the world\n");
}

/* ---- handshake ---- */

struct seen {
    int how, tid, runner;
    uintptr_t scan_start, scan_end;
};

static void record_handshake(void *ctx, const rtvm_stopped_thread *t) {
    struct seen *s = ctx;
    s->how = t->how;
    s->tid = t->tid;
    s->runner = (int)syscall(SYS_gettid);
    s->scan_start = t->scan_start;
    s->scan_end = t->scan_end;
}

static void mode_handshake(void) {
    /* Pollers get 50 ms before the signal: on 2 loaded CPUs a runnable thread may wait for a
     * CPU longer than the default 1 ms. */
    const char *opts[] = {"-Xmx16m", "-XX:SafepointSignalDelay=50000"};
    vm = create(opts, 2);
    struct mutator ms[3] = {{.kind = POLLS}, {.kind = NEVER_POLLS}, {.kind = BLOCKED_READ}};
    start(ms, 3);
    const int expected[3] = {RTVM_STOPPED_POLL, RTVM_STOPPED_SIGNAL, RTVM_STOPPED_SAFE_REGION};
    for (int k = 0; k < 3; k++) {
        struct seen s = {0};
        OKAY(rtvm_handshake(vm, atomic_load(&ms[k].id), record_handshake, &s));
        EXPECT(s.how == expected[k], "thread %d: how %d", k, s.how);
        EXPECT((s.runner == s.tid) == (s.how == RTVM_STOPPED_POLL), "thread %d ran by %d (target %d)", k,
               s.runner, s.tid);
        EXPECT(s.scan_start < s.scan_end, "thread %d: empty scan range", k);
    }
    EXPECT(rtvm_handshake(vm, UINT64_MAX, record_handshake, NULL) == RTVM_EINVAL, "unknown thread");
    EXPECT(rtvm_handshake(vm, atomic_load(&ms[0].id), NULL, NULL) == RTVM_EINVAL, "NULL fn");
    finish(ms, 3);
    OKAY(rtvm_destroy(vm));
    printf("handshakes: at the poll (by the target), by the signal and in a safe region (by the caller)\n");
}

/* ---- xrs ---- */

/* ---- enter-flood ---- */

#if defined(__x86_64__)
#define FLOOD_VALUE ((uintptr_t)0x5eed5eed5eed5ee0ull)
static atomic_ulong flood_rounds;
static atomic_int flood_started;

/* Enters and leaves safe regions in a tight loop with FLOOD_VALUE held only in r12 (a
 * callee-saved register) across every call: what a stop finds must hold it, whether the
 * thread is in its region (published registers) or was stopped by the signal (its saved
 * context, in its scan range). */
static void flood_main(void *arg) {
    (void)arg;
    register uintptr_t keep __asm__("r12") = FLOOD_VALUE;
    atomic_fetch_add(&flood_started, 1);
    while (!atomic_load_explicit(&stop_all, memory_order_relaxed)) {
        __asm__ volatile("" : "+r"(keep));
        rtvm_enter_safe_region(vm);
        __asm__ volatile("" : "+r"(keep));
        rtvm_leave_safe_region(vm);
        __asm__ volatile("" : "+r"(keep));
        atomic_fetch_add_explicit(&flood_rounds, 1, memory_order_relaxed);
    }
    __asm__ volatile("" : "+r"(keep));
}

static size_t flood_in_region, flood_by_signal;

static void check_flood(void *ctx, const rtvm_stopped_thread *ts, size_t n) {
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        const rtvm_stopped_thread *t = &ts[i];
        int found = regs_hold(t, FLOOD_VALUE) ||
                    range_holds(t->scan_start, t->scan_end, FLOOD_VALUE);
        EXPECT(found, "%s (how %d): r12's value is neither in the published registers nor in "
                      "[%#lx, %#lx)", t->name, t->how, (unsigned long)t->scan_start,
               (unsigned long)t->scan_end);
        flood_in_region += t->how == RTVM_STOPPED_SAFE_REGION;
        flood_by_signal += t->how == RTVM_STOPPED_SIGNAL;
    }
}

static void mode_enter_flood(void) {
    const char *opts[] = {"-XX:SafepointSignalDelay=0"};
    vm = create(opts, 1);
    rtvm_thread *ts[2];
    for (int k = 0; k < 2; k++) OKAY(rtvm_thread_start(vm, "C-Flood", flood_main, NULL, &ts[k]));
    while (atomic_load(&flood_started) < 2 || atomic_load(&flood_rounds) < 1000) sleep_us(100);
    for (int r = 0; r < 20000; r++) OKAY(rtvm_stop_the_world(vm, "Flood", 10000, check_flood, NULL));
    atomic_store(&stop_all, 1);
    for (int k = 0; k < 2; k++) OKAY(rtvm_thread_join(ts[k]));
    OKAY(rtvm_destroy(vm));
    printf("20000 stops of 2 threads entering and leaving safe regions with a value only in r12, "
           "signal at once: found %zu times in a region, %zu by the signal, always with the value\n",
           flood_in_region, flood_by_signal);
}
#else
static void mode_enter_flood(void) {
    printf("enter-flood: x86-64 only (the value is pinned to r12)\n");
}
#endif

static void mode_xrs(void) {
    const char *opts[] = {"-Xmx16m", "-Xrs"};
    vm = create(opts, 2);
    struct mutator ms[2] = {{.kind = POLLS}, {.kind = BLOCKED_READ}};
    start(ms, 2);
    most = 0;
    OKAY(rtvm_stop_the_world(vm, "XrsPolls", 10000, count_world, NULL));
    EXPECT(most == 2, "%zu stopped", most);
    struct mutator never[1] = {{.kind = NEVER_POLLS}};
    start(never, 1);
    int rc = rtvm_stop_the_world(vm, "XrsNeverPolls", 300, count_world, NULL);
    EXPECT(rc == RTVM_ETIMEDOUT, "rc %d", rc);
    const char *e = rtvm_last_error();
    EXPECT(strstr(e, never[0].name) && !strstr(e, ms[0].name) && strstr(e, "-Xrs"), "%s", e);
    /* The world was let go: the poller moves on. */
    uint64_t c = atomic_load(&ms[0].counter);
    sleep_us(20000);
    EXPECT(atomic_load(&ms[0].counter) > c, "the poller is still stopped after the timeout");
    finish(never, 1);
    finish(ms, 2);
    OKAY(rtvm_destroy(vm));
    printf("-Xrs: a thread that never polls: %s\n", e);
}

int main(int argc, char **argv) {
    if (argc != 2) FAIL("usage: safepoint_test world|world-nodelay|churn|refusals|handshake|xrs");
    const char *mode = argv[1];
    if (!strcmp(mode, "world")) {
        mode_world(NULL);
    } else if (!strcmp(mode, "world-nodelay")) {
        mode_world("-XX:SafepointSignalDelay=0");
    } else if (!strcmp(mode, "enter-flood")) {
        mode_enter_flood();
    } else if (!strcmp(mode, "churn")) {
        mode_churn();
    } else if (!strcmp(mode, "refusals")) {
        mode_refusals();
    } else if (!strcmp(mode, "handshake")) {
        mode_handshake();
    } else if (!strcmp(mode, "xrs")) {
        mode_xrs();
    } else {
        FAIL("unknown mode %s", mode);
    }
    printf("PASS %s\n", mode);
    return 0;
}
