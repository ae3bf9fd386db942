/*
 * collector_test.c — what a collector relies on, from C. One mode per process:
 *
 *   collector_test <mode>   prints "PASS <mode>" and exits 0, or says what failed and exits 1
 *
 *   malloc-stops     4 VM mutators and an attached one in tight malloc/free loops that never
 *                    poll, 2 collector threads that malloc, free and count all the time:
 *                    1,500 stops begun on a collector thread (rtvm_world_stop) and ended on
 *                    another, and 500 rtvm_stop_the_world callbacks, all of which malloc,
 *                    snprintf and free while the world is stopped. No deadlock; the stopped
 *                    set never contains a collector thread; mutators' counters are frozen
 *                    while stopped and collectors' go on.
 *   handoff          a world stopped on one thread and resumed on another, 200 times; the
 *                    stopping thread may stop again once the other resumed it; a stop from
 *                    the thread that holds one is refused.
 *   blocked-libc     a mutator blocked in read() outside a safe region cannot be stopped: the
 *                    timeout names it with its /proc state and system call; once it returns
 *                    to its own code it is stopped.
 *   handshake-region a handshake operation that enters and leaves a safe region, run by the
 *                    target at its poll, ends.
 *   handshake-stray  a stray stop signal reaching the target while it runs its handshake
 *                    operation at its poll: the handshake ends.
 *   handshake-malloc a target in a malloc loop that never polls: 300 handshakes whose
 *                    operation (run by the requester) allocates and formats; none hangs.
 *   poll-in-region   (-Xrs) a poll inside a safe region while the world stops leaves the
 *                    thread safe: the next stops find it safe while it spins in the region
 *                    without polling, with no signal to help.
 *   fiber            a mutator that polls on a fiber (makecontext) — declared with
 *                    rtvm_set_current_fiber, and not — and one that polls inside an SA_ONSTACK
 *                    handler: the stop reports the stack it runs on, where its pointer is.
 *   inherited-mask   VM threads started from a thread that blocks every signal are stopped
 *                    by the signal; an attached thread that blocks everything has the stop
 *                    signal unblocked while attached and its own mask back after detaching.
 *   overflow-masked  a VM thread started from a thread that blocks every signal overflows
 *                    its stack: the overflow is reported (not a silent kill).
 *   blocked-signal   an attached thread that blocks the stop signal: 50 stops time out naming
 *                    the blocked signal, at most one stop signal is ever pending for it, and
 *                    after rtvm_destroy it unblocks the signal and lives on.
 *   eagain           the user's pending-signal queue is full (RLIMIT_SIGPENDING): the stop
 *                    times out saying so instead of failing silently.
 *   vanished         an attached thread that ends without detaching and without its exit
 *                    hooks (a raw exit system call): the next stop forgets it and says so;
 *                    later stops do not wait for it.
 *   fork-in-region   a mutator in a safe region forks while another thread holds the world
 *                    stopped: in the child, leaving the region returns RTVM_EFORK at once and
 *                    a poll returns; nothing hangs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "check.h"

static rtvm_vm *vm;
static atomic_int stop_all;

#define create check_create

#define sleep_us check_sleep_us

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Ends the process if a mode takes longer than `seconds`: a hang is a failure, not a stall. */
static void deadline(unsigned seconds) {
    signal(SIGALRM, SIG_DFL);
    alarm(seconds);
}

/* ---- malloc-stops ---- */

#define N_MALLOC 5
#define N_COLLECTORS 2

struct counted {
    _Atomic uint64_t counter;
    _Atomic uint64_t id;
    _Atomic int tid;
    rtvm_thread *thread;
    pthread_t host;
};

static struct counted mutators[N_MALLOC], collectors[N_COLLECTORS];

/* Never polls: allocates and frees in a tight loop (most of its time inside the C library). */
static void malloc_loop(struct counted *c) {
    atomic_store(&c->id, rtvm_current_thread_id(vm));
    while (!atomic_load_explicit(&stop_all, memory_order_relaxed)) {
        void *p = malloc(16 + (atomic_load_explicit(&c->counter, memory_order_relaxed) & 255));
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
        atomic_fetch_add_explicit(&c->counter, 1, memory_order_relaxed);
    }
}

static void malloc_main(void *arg) {
    malloc_loop(arg);
}

static void *attached_malloc_main(void *arg) {
    OKAY(rtvm_attach_current_thread(vm, "C-AttachedMalloc"));
    malloc_loop(arg);
    OKAY(rtvm_detach_current_thread(vm));
    return NULL;
}

static void collector_main(void *arg) {
    struct counted *c = arg;
    atomic_store(&c->id, rtvm_current_thread_id(vm));
    while (!atomic_load_explicit(&stop_all, memory_order_relaxed)) {
        char *p = malloc(4096);
        snprintf(p, 4096, "collector %llu", (unsigned long long)atomic_load(&c->counter));
        free(p);
        atomic_fetch_add_explicit(&c->counter, 1, memory_order_relaxed);
    }
}

static int is_collector(uint64_t id) {
    for (int k = 0; k < N_COLLECTORS; k++)
        if (atomic_load(&collectors[k].id) == id) return 1;
    return 0;
}

/* What a collector does while the world is stopped: checks, allocates, formats, frees. */
static void while_stopped(const rtvm_stopped_thread *ts, size_t n, size_t *by_signal) {
    EXPECT(n == N_MALLOC, "%zu threads stopped, not %d", n, N_MALLOC);
    uint64_t frozen[N_MALLOC], moving[N_COLLECTORS];
    for (int k = 0; k < N_MALLOC; k++) frozen[k] = atomic_load(&mutators[k].counter);
    for (int k = 0; k < N_COLLECTORS; k++) moving[k] = atomic_load(&collectors[k].counter);
    char **names = malloc(n * sizeof *names);
    for (size_t i = 0; i < n; i++) {
        EXPECT(!is_collector(ts[i].id), "collector thread %s was stopped", ts[i].name);
        names[i] = malloc(64);
        snprintf(names[i], 64, "%s/%d", ts[i].name, ts[i].tid);
        *by_signal += ts[i].how == RTVM_STOPPED_SIGNAL;
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    /* The collectors run meanwhile (they are never stopped); the mutators do not. */
    for (int spins = 0;; spins++) {
        int moved = 0;
        for (int k = 0; k < N_COLLECTORS; k++) moved += atomic_load(&collectors[k].counter) > moving[k];
        if (moved == N_COLLECTORS) break;
        EXPECT(spins < 1000000, "the collector threads did not run while the world was stopped");
        sleep_us(10);
    }
    for (int k = 0; k < N_MALLOC; k++)
        EXPECT(atomic_load(&mutators[k].counter) == frozen[k], "mutator %d moved while stopped", k);
}

static size_t callback_signals;

static void malloc_callback(void *ctx, const rtvm_stopped_thread *ts, size_t n) {
    (void)ctx;
    while_stopped(ts, n, &callback_signals);
}

/* The stopping collector thread: stops, hands the world to the resumer, waits for it. */
static pthread_mutex_t hand_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hand_cv = PTHREAD_COND_INITIALIZER;
static rtvm_world *handed;
static int hand_rounds, hand_done;
static size_t handed_signals;
static double hand_max_ms;

static void stopper_main(void *arg) {
    (void)arg;
    for (int r = 0; r < hand_rounds; r++) {
        double t0 = now_ms();
        rtvm_world *w = NULL;
        OKAY(rtvm_world_stop(vm, "CollectorStop", 10000, &w));
        double took = now_ms() - t0;
        if (took > hand_max_ms) hand_max_ms = took;
        pthread_mutex_lock(&hand_lock);
        handed = w;
        pthread_cond_broadcast(&hand_cv);
        while (handed) pthread_cond_wait(&hand_cv, &hand_lock);
        pthread_mutex_unlock(&hand_lock);
    }
    pthread_mutex_lock(&hand_lock);
    hand_done = 1;
    pthread_cond_broadcast(&hand_cv);
    pthread_mutex_unlock(&hand_lock);
}

static void resumer_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&hand_lock);
    for (;;) {
        while (!handed && !hand_done) pthread_cond_wait(&hand_cv, &hand_lock);
        if (!handed) break;
        rtvm_world *w = handed;
        pthread_mutex_unlock(&hand_lock);
        const rtvm_stopped_thread *ts;
        size_t n;
        OKAY(rtvm_world_threads(w, &ts, &n));
        while_stopped(ts, n, &handed_signals);
        OKAY(rtvm_world_resume(w));
        pthread_mutex_lock(&hand_lock);
        handed = NULL;
        pthread_cond_broadcast(&hand_cv);
    }
    pthread_mutex_unlock(&hand_lock);
}

static void mode_malloc_stops(void) {
    deadline(240);
    const char *opts[] = {"-Xmx16m"};
    vm = create(opts, 1);
    for (int k = 0; k < N_COLLECTORS; k++)
        OKAY(rtvm_collector_thread_start(vm, "C-Collector", collector_main, &collectors[k],
                                         &collectors[k].thread));
    for (int k = 0; k < N_MALLOC - 1; k++)
        OKAY(rtvm_thread_start(vm, "C-Malloc", malloc_main, &mutators[k], &mutators[k].thread));
    EXPECT(pthread_create(&mutators[N_MALLOC - 1].host, NULL, attached_malloc_main,
                          &mutators[N_MALLOC - 1]) == 0, "pthread_create");
    for (int k = 0; k < N_MALLOC; k++)
        while (!atomic_load(&mutators[k].id)) sleep_us(100);
    for (int k = 0; k < N_COLLECTORS; k++)
        while (!atomic_load(&collectors[k].id)) sleep_us(100);
    /* Stops begun on a collector thread, ended on another. */
    hand_rounds = 1500;
    rtvm_thread *stopper, *resumer;
    double t0 = now_ms();
    OKAY(rtvm_collector_thread_start(vm, "C-Stopper", stopper_main, NULL, &stopper));
    OKAY(rtvm_collector_thread_start(vm, "C-Resumer", resumer_main, NULL, &resumer));
    OKAY(rtvm_thread_join(stopper));
    OKAY(rtvm_thread_join(resumer));
    double handed_ms = now_ms() - t0;
    /* Stops with a callback, from the main thread (not a VM thread). */
    t0 = now_ms();
    for (int r = 0; r < 500; r++) OKAY(rtvm_stop_the_world(vm, "CMalloc", 10000, malloc_callback, NULL));
    double callback_ms = now_ms() - t0;
    atomic_store(&stop_all, 1);
    for (int k = 0; k < N_MALLOC - 1; k++) OKAY(rtvm_thread_join(mutators[k].thread));
    EXPECT(pthread_join(mutators[N_MALLOC - 1].host, NULL) == 0, "pthread_join");
    for (int k = 0; k < N_COLLECTORS; k++) OKAY(rtvm_thread_join(collectors[k].thread));
    OKAY(rtvm_destroy(vm));
    printf("1500 stops on a collector thread resumed on another in %.0f ms (slowest to reach %.2f "
           "ms; %zu thread stops by the signal), 500 callbacks in %.0f ms (%zu by the signal); all "
           "allocating while the world was stopped\n",
           handed_ms, hand_max_ms, handed_signals, callback_ms, callback_signals);
    EXPECT(handed_signals + callback_signals > 0, "no mutator was ever stopped by the signal");
}

/* ---- handoff ---- */

static void count_threads(void *ctx, const rtvm_stopped_thread *ts, size_t n) {
    (void)ts;
    *(size_t *)ctx = n;
}

static void *resume_on_another(void *arg) {
    OKAY(rtvm_world_resume(arg));
    return NULL;
}

static struct counted spinner;

static void spin_main(void *arg) {
    struct counted *c = arg;
    atomic_store(&c->tid, (int)syscall(SYS_gettid));
    atomic_store(&c->id, rtvm_current_thread_id(vm));
    while (!atomic_load_explicit(&stop_all, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&c->counter, 1, memory_order_relaxed);
        rtvm_safepoint_poll();
    }
}

static void mode_handoff(void) {
    deadline(120);
    vm = create(NULL, 0);
    OKAY(rtvm_thread_start(vm, "C-Spinner", spin_main, &spinner, &spinner.thread));
    while (!atomic_load(&spinner.id)) sleep_us(100);
    for (int r = 0; r < 200; r++) {
        rtvm_world *w = NULL;
        OKAY(rtvm_world_stop(vm, "Handoff", 10000, &w));
        const rtvm_stopped_thread *ts;
        size_t n;
        OKAY(rtvm_world_threads(w, &ts, &n));
        EXPECT(n == 1 && ts[0].id == atomic_load(&spinner.id), "%zu threads stopped", n);
        uint64_t frozen = atomic_load(&spinner.counter);
        if (r == 0) {
            /* The thread that holds the world may not stop it again. */
            size_t got = 0;
            EXPECT(rtvm_stop_the_world(vm, "Nested", 1000, count_threads, &got) == RTVM_EINVAL,
                   "a nested stop was not refused");
            rtvm_world *again = NULL;
            EXPECT(rtvm_world_stop(vm, "Nested", 1000, &again) == RTVM_EINVAL, "nested world_stop");
        }
        sleep_us(200);
        EXPECT(atomic_load(&spinner.counter) == frozen, "the spinner moved while stopped");
        pthread_t t;
        EXPECT(pthread_create(&t, NULL, resume_on_another, w) == 0, "pthread_create");
        EXPECT(pthread_join(t, NULL) == 0, "pthread_join");
        /* Resumed by the other thread: this one may stop again at once. */
        size_t got = 0;
        OKAY(rtvm_stop_the_world(vm, "AfterHandoff", 10000, count_threads, &got));
        EXPECT(got == 1, "%zu threads stopped after the handoff", got);
    }
    atomic_store(&stop_all, 1);
    OKAY(rtvm_thread_join(spinner.thread));
    OKAY(rtvm_destroy(vm));
    printf("200 worlds stopped on one thread and resumed on another; nested stops refused\n");
}

/* ---- blocked-libc ---- */

static int blocked_pipe[2];
static atomic_int blocked_ready;

static void blocked_main(void *arg) {
    struct counted *c = arg;
    atomic_store(&c->id, rtvm_current_thread_id(vm));
    char byte;
    atomic_store(&blocked_ready, 1);
    /* Blocked inside the C library, outside any safe region: a stop cannot take it here. */
    EXPECT(read(blocked_pipe[0], &byte, 1) == 1, "read");
    while (!atomic_load_explicit(&stop_all, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&c->counter, 1, memory_order_relaxed);
        __asm__ volatile("" ::: "memory");
    }
}

static void mode_blocked_libc(void) {
    deadline(60);
    vm = create(NULL, 0);
    EXPECT(pipe(blocked_pipe) == 0, "pipe");
    struct counted c = {0};
    OKAY(rtvm_thread_start(vm, "C-BlockedInRead", blocked_main, &c, &c.thread));
    while (!atomic_load(&blocked_ready)) sleep_us(100);
    sleep_us(20000);
    size_t got = 0;
    EXPECT(rtvm_stop_the_world(vm, "Blocked", 300, count_threads, &got) == RTVM_ETIMEDOUT,
           "a thread blocked in read() outside a safe region was stopped");
    const char *e = rtvm_last_error();
    printf("blocked in read(): %s\n", e);
    EXPECT(strstr(e, "\"C-BlockedInRead\"") && strstr(e, "S (sleeping)") &&
               strstr(e, "in system call") && strstr(e, "libc.so"),
           "the timeout does not say where the thread is: %s", e);
    /* Back in its own code (a loop that never polls): the signal stops it there. */
    EXPECT(write(blocked_pipe[1], "x", 1) == 1, "write");
    while (!atomic_load(&c.counter)) sleep_us(100);
    OKAY(rtvm_stop_the_world(vm, "Unblocked", 10000, count_threads, &got));
    EXPECT(got == 1, "%zu stopped", got);
    atomic_store(&stop_all, 1);
    OKAY(rtvm_thread_join(c.thread));
    OKAY(rtvm_destroy(vm));
}

/* ---- handshake-region, handshake-stray ---- */

static atomic_int op_runs, op_in_progress, stray_sent, sender_stop;

static void op_with_region(void *ctx, const rtvm_stopped_thread *t) {
    (void)ctx;
    (void)t;
    /* Run by the target at its poll: a safe region inside the operation must not wait for
     * the target's own hold. */
    if (rtvm_current_thread_id(vm) == atomic_load(&spinner.id)) {
        OKAY(rtvm_enter_safe_region(vm));
        sleep_us(200);
        OKAY(rtvm_leave_safe_region(vm));
    }
    atomic_fetch_add(&op_runs, 1);
}

static void op_slow(void *ctx, const rtvm_stopped_thread *t) {
    (void)ctx;
    (void)t;
    atomic_store(&op_in_progress, 1);
    double t0 = now_ms();
    while (!atomic_load(&stray_sent) && now_ms() - t0 < 1000) {
    }
    EXPECT(atomic_load(&stray_sent), "no stray signal was sent during the operation");
    double t1 = now_ms();
    while (now_ms() - t1 < 5) {
        /* the stray signal is handled here, inside the operation */
    }
    atomic_fetch_add(&op_runs, 1);
}

/* Sends the stop signal to the target whenever its operation is in progress, once each. */
static void *stray_sender(void *arg) {
    (void)arg;
    while (!atomic_load(&sender_stop)) {
        if (atomic_load(&op_in_progress) && !atomic_load(&stray_sent)) {
            EXPECT(syscall(SYS_tgkill, getpid(), atomic_load(&spinner.tid), SIGRTMIN + 4) == 0,
                   "tgkill");
            atomic_store(&stray_sent, 1);
        }
        sleep_us(50);
    }
    return NULL;
}

static void mode_handshake(int stray) {
    deadline(60);
    vm = create(NULL, 0);
    OKAY(rtvm_thread_start(vm, "C-Target", spin_main, &spinner, &spinner.thread));
    while (!atomic_load(&spinner.id)) sleep_us(100);
    uint64_t id = atomic_load(&spinner.id);
    pthread_t sender;
    if (stray) EXPECT(pthread_create(&sender, NULL, stray_sender, NULL) == 0, "pthread_create");
    int rounds = stray ? 50 : 500;
    for (int r = 0; r < rounds; r++) {
        atomic_store(&op_in_progress, 0);
        atomic_store(&stray_sent, 0);
        OKAY(rtvm_handshake(vm, id, stray ? op_slow : op_with_region, NULL));
    }
    EXPECT(atomic_load(&op_runs) == rounds, "%d operations ran for %d handshakes",
           atomic_load(&op_runs), rounds);
    if (stray) {
        atomic_store(&sender_stop, 1);
        EXPECT(pthread_join(sender, NULL) == 0, "pthread_join");
    }
    atomic_store(&stop_all, 1);
    OKAY(rtvm_thread_join(spinner.thread));
    OKAY(rtvm_destroy(vm));
    printf("%d handshakes %s: every operation ran once, none hung\n", rounds,
           stray ? "with a stray stop signal during the operation"
                 : "whose operation enters and leaves a safe region");
}

/* ---- handshake-malloc ---- */

static void op_that_allocates(void *ctx, const rtvm_stopped_thread *t) {
    (void)ctx;
    /* Run by the requester while the target is stopped (by the signal, never inside the C
     * library) or safe: the operation formats, allocates and frees. */
    char *copy = malloc(128);
    snprintf(copy, 128, "%s/%d", t->name, t->tid);
    free(copy);
    atomic_fetch_add(&op_runs, 1);
}

static void mode_handshake_malloc(void) {
    deadline(120);
    vm = create(NULL, 0);
    struct counted c = {0};
    OKAY(rtvm_thread_start(vm, "C-MallocTarget", malloc_main, &c, &c.thread));
    while (!atomic_load(&c.id)) sleep_us(100);
    for (int r = 0; r < 300; r++) OKAY(rtvm_handshake(vm, atomic_load(&c.id), op_that_allocates, NULL));
    EXPECT(atomic_load(&op_runs) == 300, "%d operations ran", atomic_load(&op_runs));
    atomic_store(&stop_all, 1);
    OKAY(rtvm_thread_join(c.thread));
    OKAY(rtvm_destroy(vm));
    printf("300 handshakes with a target in a malloc loop that never polls, each operation "
           "allocating and formatting: none hung\n");
}

/* ---- poll-in-region ---- */

static atomic_int region_phase, poll_go, poll_about;

static void region_main(void *arg) {
    struct counted *c = arg;
    atomic_store(&c->id, rtvm_current_thread_id(vm));
    OKAY(rtvm_enter_safe_region(vm));
    atomic_store(&region_phase, 1);
    /* Polls once while the first stop holds the world, then spins in its region without
     * another poll: only its being safe lets the later stops through (-Xrs: no signal). */
    while (!atomic_load(&poll_go)) {
    }
    atomic_store(&poll_about, 1);
    rtvm_safepoint_poll();
    while (!atomic_load_explicit(&stop_all, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&c->counter, 1, memory_order_relaxed);
        __asm__ volatile("" ::: "memory");
    }
    OKAY(rtvm_leave_safe_region(vm));
}

static void let_it_poll(void *ctx, const rtvm_stopped_thread *ts, size_t n) {
    (void)ctx;
    (void)ts;
    EXPECT(n == 1, "%zu stopped", n);
    atomic_store(&poll_go, 1);
    while (!atomic_load(&poll_about)) {
    }
    sleep_us(20000); /* its poll runs during the stop */
}

static void mode_poll_in_region(void) {
    deadline(60);
    const char *opts[] = {"-Xrs"};
    vm = create(opts, 1);
    struct counted c = {0};
    OKAY(rtvm_thread_start(vm, "C-PollsInRegion", region_main, &c, &c.thread));
    while (!atomic_load(&region_phase)) sleep_us(100);
    OKAY(rtvm_stop_the_world(vm, "PollInRegion", 2000, let_it_poll, NULL));
    for (int r = 0; r < 100; r++) {
        size_t got = 0;
        OKAY(rtvm_stop_the_world(vm, "AfterThePoll", 2000, count_threads, &got));
        EXPECT(got == 1, "%zu stopped", got);
    }
    atomic_store(&stop_all, 1);
    OKAY(rtvm_thread_join(c.thread));
    OKAY(rtvm_destroy(vm));
    printf("a poll inside a safe region during a stop left the thread safe: 100 more stops under "
           "-Xrs while it spins in the region without polling\n");
}

/* ---- fiber ---- */

#define FIBER_STACK (256 * 1024)

static ucontext_t fiber_ctx, fiber_return;
static char *fiber_stack;
static atomic_int fiber_declared, fiber_running, altstack_running, fiber_done;
static _Atomic uintptr_t fiber_value, altstack_value;

__attribute__((noinline)) static void fiber_body(void) {
    if (atomic_load(&fiber_declared))
        OKAY(rtvm_set_current_fiber(vm, (uintptr_t)fiber_stack, (uintptr_t)fiber_stack + FIBER_STACK));
    /* The value lives in this frame, on the fiber's stack, and nowhere else scanned. */
    volatile uintptr_t here[4];
    here[0] = atomic_load(&fiber_value) ^ 0xff;
    here[0] ^= 0xff;
    atomic_store(&fiber_running, 1);
    while (!atomic_load(&fiber_done)) {
        rtvm_safepoint_poll();
        __asm__ volatile("" : : "r"(&here[0]) : "memory");
    }
    if (atomic_load(&fiber_declared)) OKAY(rtvm_set_current_fiber(vm, 0, 0));
    swapcontext(&fiber_ctx, &fiber_return);
}

static void fiber_main(void *arg) {
    (void)arg;
    getcontext(&fiber_ctx);
    fiber_ctx.uc_stack.ss_sp = fiber_stack;
    fiber_ctx.uc_stack.ss_size = FIBER_STACK;
    fiber_ctx.uc_link = &fiber_return;
    makecontext(&fiber_ctx, fiber_body, 0);
    EXPECT(swapcontext(&fiber_return, &fiber_ctx) == 0, "swapcontext");
}

static void on_usr1(int sig) {
    (void)sig;
    volatile uintptr_t here[4];
    here[0] = atomic_load(&altstack_value) ^ 0xff;
    here[0] ^= 0xff;
    atomic_store(&altstack_running, 1);
    while (!atomic_load(&fiber_done)) {
        rtvm_safepoint_poll();
        __asm__ volatile("" : : "r"(&here[0]) : "memory");
    }
}

static void altstack_main(void *arg) {
    (void)arg;
    /* The VM thread's alternate signal stack is rtvm's; this handler runs on it. */
    struct sigaction a = {0};
    a.sa_handler = on_usr1;
    a.sa_flags = SA_ONSTACK;
    sigemptyset(&a.sa_mask);
    EXPECT(sigaction(SIGUSR1, &a, NULL) == 0, "sigaction");
    raise(SIGUSR1);
}

struct where {
    int kind;
    int found;
};

static void find_other(void *ctx, const rtvm_stopped_thread *ts, size_t n) {
    struct where *w = ctx;
    uintptr_t want = w->kind == RTVM_STACK_SIGNAL ? atomic_load(&altstack_value) : atomic_load(&fiber_value);
    for (size_t i = 0; i < n; i++) {
        if (ts[i].other_kind == 0) continue;
        w->kind = ts[i].other_kind;
        for (uintptr_t a = ts[i].altstack_start & ~(uintptr_t)7; a + 8 <= ts[i].altstack_end; a += 8)
            if (*(const uintptr_t *)a == want) w->found = 1;
    }
}

static void fiber_round(int declared) {
    atomic_store(&fiber_declared, declared);
    atomic_store(&fiber_running, 0);
    atomic_store(&fiber_done, 0);
    atomic_store(&fiber_value, (uintptr_t)0x1234567812345670ull + declared);
    rtvm_thread *t;
    OKAY(rtvm_thread_start(vm, "C-Fiber", fiber_main, NULL, &t));
    while (!atomic_load(&fiber_running)) sleep_us(100);
    struct where w = {0, 0};
    OKAY(rtvm_stop_the_world(vm, "Fiber", 10000, find_other, &w));
    EXPECT(w.kind == (declared ? RTVM_STACK_FIBER : RTVM_STACK_UNKNOWN),
           "a thread polling on a %s fiber reported stack kind %d", declared ? "declared" : "undeclared",
           w.kind);
    EXPECT(w.found, "the value on the %s fiber's stack is not in the range reported",
           declared ? "declared" : "undeclared");
    atomic_store(&fiber_done, 1);
    OKAY(rtvm_thread_join(t));
}

static void mode_fiber(void) {
    deadline(60);
    vm = create(NULL, 0);
    fiber_stack = mmap(NULL, FIBER_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(fiber_stack != MAP_FAILED, "mmap");
    fiber_round(1);
    fiber_round(0);
    /* Inside an SA_ONSTACK handler. */
    atomic_store(&fiber_done, 0);
    atomic_store(&altstack_value, (uintptr_t)0x0badc0de0badc0d8ull);
    rtvm_thread *t;
    OKAY(rtvm_thread_start(vm, "C-OnAltStack", altstack_main, NULL, &t));
    while (!atomic_load(&altstack_running)) sleep_us(100);
    struct where w = {RTVM_STACK_SIGNAL, 0};
    OKAY(rtvm_stop_the_world(vm, "AltStack", 10000, find_other, &w));
    EXPECT(w.kind == RTVM_STACK_SIGNAL && w.found,
           "a thread polling in an SA_ONSTACK handler: kind %d, value found %d", w.kind, w.found);
    atomic_store(&fiber_done, 1);
    OKAY(rtvm_thread_join(t));
    OKAY(rtvm_destroy(vm));
    munmap(fiber_stack, FIBER_STACK);
    printf("fibers (declared and not) and an SA_ONSTACK handler: the stop reported the stack each ran on\n");
}

/* ---- inherited-mask, overflow-masked ---- */

static void block_everything(sigset_t *old) {
    sigset_t all;
    sigfillset(&all);
    EXPECT(pthread_sigmask(SIG_BLOCK, &all, old) == 0, "pthread_sigmask");
}

static void never_polls_main(void *arg) {
    struct counted *c = arg;
    atomic_store(&c->id, rtvm_current_thread_id(vm));
    while (!atomic_load_explicit(&stop_all, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&c->counter, 1, memory_order_relaxed);
        __asm__ volatile("" ::: "memory");
    }
}

static void *attached_masked_main(void *arg) {
    struct counted *c = arg;
    sigset_t before, during, after;
    block_everything(&before);
    OKAY(rtvm_attach_current_thread(vm, "C-AttachedMasked"));
    EXPECT(pthread_sigmask(SIG_BLOCK, NULL, &during) == 0, "pthread_sigmask");
    EXPECT(!sigismember(&during, SIGRTMIN + 4) && !sigismember(&during, SIGSEGV),
           "attached: the stop signal or SIGSEGV is still blocked");
    never_polls_main(c);
    OKAY(rtvm_detach_current_thread(vm));
    EXPECT(pthread_sigmask(SIG_BLOCK, NULL, &after) == 0, "pthread_sigmask");
    EXPECT(sigismember(&after, SIGRTMIN + 4) && sigismember(&after, SIGSEGV) &&
               sigismember(&after, SIGTERM),
           "detached: the thread's own mask (everything blocked) is not back");
    return NULL;
}

static void mode_inherited_mask(void) {
    deadline(60);
    sigset_t old;
    block_everything(&old);
    vm = create(NULL, 0);
    struct counted a = {0}, b = {0};
    OKAY(rtvm_thread_start(vm, "C-FromMaskedParent", never_polls_main, &a, &a.thread));
    pthread_t host;
    EXPECT(pthread_create(&host, NULL, attached_masked_main, &b) == 0, "pthread_create");
    while (!atomic_load(&a.id) || !atomic_load(&b.id)) sleep_us(100);
    for (int r = 0; r < 50; r++) {
        size_t got = 0;
        OKAY(rtvm_stop_the_world(vm, "Masked", 5000, count_threads, &got));
        EXPECT(got == 2, "%zu stopped", got);
    }
    atomic_store(&stop_all, 1);
    OKAY(rtvm_thread_join(a.thread));
    EXPECT(pthread_join(host, NULL) == 0, "pthread_join");
    OKAY(rtvm_destroy(vm));
    printf("a VM thread started from a thread that blocks every signal, and an attached thread "
           "that blocks everything: 50 stops by the signal\n");
}

static volatile long recursion_limit = 1L << 40; /* never reached: the stack ends first */

__attribute__((noinline)) static long recurse(long depth) {
    volatile char frame[512];
    frame[0] = (char)depth;
    if (depth >= recursion_limit) return frame[0];
    return recurse(depth + 1) + frame[0];
}

static void overflow_main(void *arg) {
    (void)arg;
    printf("%ld\n", recurse(0));
}

static void mode_overflow_masked(void) {
    sigset_t old;
    block_everything(&old);
    vm = create(NULL, 0);
    rtvm_thread *t;
    OKAY(rtvm_thread_start(vm, "C-OverflowMasked", overflow_main, NULL, &t));
    rtvm_thread_join(t);
    FAIL("the overflow did not end the process");
}

/* ---- blocked-signal ---- */

static atomic_int blocker_phase, blocker_survived, blocker_drained = -1;

/* Takes every instance of the stop signal queued for this thread (it blocks it) and counts
 * them: how many rtvm queued. */
static int drain_stop_signals(void) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGRTMIN + 4);
    siginfo_t info;
    struct timespec zero = {0, 0};
    int n = 0;
    while (sigtimedwait(&s, &info, &zero) == SIGRTMIN + 4) n++;
    return n;
}

static void *blocker_main(void *arg) {
    struct counted *c = arg;
    OKAY(rtvm_attach_current_thread(vm, "C-BlocksStopSignal"));
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGRTMIN + 4);
    EXPECT(pthread_sigmask(SIG_BLOCK, &s, NULL) == 0, "pthread_sigmask");
    atomic_store(&c->id, rtvm_current_thread_id(vm));
    while (atomic_load(&blocker_phase) == 0) {
        atomic_fetch_add_explicit(&c->counter, 1, memory_order_relaxed);
        __asm__ volatile("" ::: "memory");
    }
    /* Phase 1: how many stop signals did 50 stops queue for this thread? */
    atomic_store(&blocker_drained, drain_stop_signals());
    while (atomic_load(&blocker_phase) == 1) {
        atomic_fetch_add_explicit(&c->counter, 1, memory_order_relaxed);
        __asm__ volatile("" ::: "memory");
    }
    /* Phase 3: the VM is gone. A stop signal left pending would now kill the process. */
    EXPECT(pthread_sigmask(SIG_UNBLOCK, &s, NULL) == 0, "pthread_sigmask");
    sleep_us(20000);
    atomic_store(&blocker_survived, 1);
    return NULL;
}

static void mode_blocked_signal(void) {
    deadline(60);
    vm = create(NULL, 0);
    struct counted c = {0};
    pthread_t host;
    EXPECT(pthread_create(&host, NULL, blocker_main, &c) == 0, "pthread_create");
    while (!atomic_load(&c.id)) sleep_us(100);
    for (int r = 0; r < 50; r++) {
        size_t got = 0;
        EXPECT(rtvm_stop_the_world(vm, "Blocked", 30, count_threads, &got) == RTVM_ETIMEDOUT,
               "a thread that blocks the stop signal and never polls was stopped");
        if (r == 0) {
            printf("%s\n", rtvm_last_error());
            EXPECT(strstr(rtvm_last_error(), "blocking the stop signal"),
                   "the timeout does not say the signal is blocked");
        }
    }
    atomic_store(&blocker_phase, 1);
    while (atomic_load(&blocker_drained) < 0) sleep_us(100);
    int queued = atomic_load(&blocker_drained);
    EXPECT(queued == 1, "%d stop signals queued for one thread by 50 stops", queued);
    /* The thread took it itself (sigtimedwait): rtvm sees nothing pending and sends again. */
    for (int r = 0; r < 5; r++) {
        size_t got = 0;
        EXPECT(rtvm_stop_the_world(vm, "Blocked", 30, count_threads, &got) == RTVM_ETIMEDOUT,
               "stopped");
    }
    OKAY(rtvm_destroy(vm));
    atomic_store(&blocker_phase, 2);
    EXPECT(pthread_join(host, NULL) == 0, "pthread_join");
    EXPECT(atomic_load(&blocker_survived), "the thread did not survive unblocking the signal");
    printf("55 stops of a thread that blocks the stop signal: one signal queued at a time, none "
           "left after rtvm_destroy\n");
}

/* ---- eagain ---- */

/* The SigQ line of /proc/self/status: signals queued for the process's user now. */
static long queued_signals(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long q = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "SigQ: %ld/", &q) == 1) break;
    if (f) fclose(f);
    return q;
}


/* Never polls, and blocks the stop signal once it runs: were a stop signal to get through a
 * queue another process freed meanwhile, it would stay pending, not stop the thread. */
static void no_room_main(void *arg) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGRTMIN + 4);
    EXPECT(pthread_sigmask(SIG_BLOCK, &s, NULL) == 0, "pthread_sigmask");
    never_polls_main(arg);
}

/* The pending-signal count RLIMIT_SIGPENDING limits is the user's, over all their
 * processes: other tests running meanwhile take and free slots, and one freed during the
 * stop would let the stop signal through. As root, this process becomes a user of its own
 * (real, effective and saved uid; every thread), so that only its own signals count. */
static void private_signal_queue(void) {
    if (geteuid() != 0) {
        printf("the pending-signal queue is shared with this user's other processes (not root)\n");
        return;
    }
    uid_t uid = (uid_t)0x70000000 + (uid_t)getpid();
    EXPECT(setresuid(uid, uid, uid) == 0, "setresuid(%u): %s", (unsigned)uid, strerror(errno));
    printf("a pending-signal queue of its own: uid %u, %ld queued\n", (unsigned)uid, queued_signals());
}

static void mode_eagain(void) {
    deadline(60);
    private_signal_queue();
    vm = create(NULL, 0);
    struct counted c = {0};
    OKAY(rtvm_thread_start(vm, "C-NoRoomForSignals", no_room_main, &c, &c.thread));
    while (!atomic_load(&c.id)) sleep_us(100);
    /* Fill the user's pending-signal queue: a lower limit, and signals queued to this thread,
     * which blocks them. */
    struct rlimit old, low;
    EXPECT(getrlimit(RLIMIT_SIGPENDING, &old) == 0, "getrlimit");
    long queued = queued_signals();
    low.rlim_cur = (rlim_t)(queued + 4);
    low.rlim_max = old.rlim_max;
    EXPECT(setrlimit(RLIMIT_SIGPENDING, &low) == 0, "setrlimit");
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGRTMIN + 6);
    EXPECT(pthread_sigmask(SIG_BLOCK, &s, NULL) == 0, "pthread_sigmask");
    union sigval v = {0};
    int filled = 0;
    int rc;
    while ((rc = pthread_sigqueue(pthread_self(), SIGRTMIN + 6, v)) == 0) {
        EXPECT(++filled < 1000, "the queue never filled");
    }
    EXPECT(rc == EAGAIN, "pthread_sigqueue: %s", strerror(rc));
    size_t got = 0;
    EXPECT(rtvm_stop_the_world(vm, "NoRoom", 300, count_threads, &got) == RTVM_ETIMEDOUT,
           "stopped without a signal");
    const char *e = rtvm_last_error();
    printf("queue full: %s\n", e);
    EXPECT(strstr(e, "EAGAIN") && strstr(e, "RLIMIT_SIGPENDING"), "the timeout does not say why");
    /* Drain and restore: the next stop works. */
    siginfo_t info;
    struct timespec zero = {0, 0};
    while (sigtimedwait(&s, &info, &zero) > 0) {
    }
    EXPECT(setrlimit(RLIMIT_SIGPENDING, &old) == 0, "setrlimit");
    atomic_store(&stop_all, 1);
    OKAY(rtvm_thread_join(c.thread));
    OKAY(rtvm_destroy(vm));
}

/* ---- vanished ---- */

static void *vanishing_main(void *arg) {
    struct counted *c = arg;
    OKAY(rtvm_attach_current_thread(vm, "C-Vanishes"));
    atomic_store(&c->id, rtvm_current_thread_id(vm));
    /* Gone without detaching and without its thread-exit hooks: the raw system call. */
    syscall(SYS_exit, 0);
    return NULL;
}

static void mode_vanished(void) {
    deadline(60);
    vm = create(NULL, 0);
    struct counted c = {0};
    pthread_t host;
    EXPECT(pthread_create(&host, NULL, vanishing_main, &c) == 0, "pthread_create");
    while (!atomic_load(&c.id)) sleep_us(100);
    sleep_us(50000);
    size_t got = 99;
    double t0 = now_ms();
    OKAY(rtvm_stop_the_world(vm, "Vanished", 10000, count_threads, &got));
    EXPECT(got == 0, "%zu threads stopped", got);
    for (int r = 0; r < 20; r++) OKAY(rtvm_stop_the_world(vm, "AfterVanished", 1000, count_threads, &got));
    printf("a thread that ended without detaching: forgotten by the first stop (%.1f ms), "
           "20 more stops did not wait for it\n", now_ms() - t0);
    OKAY(rtvm_destroy(vm));
}

/* ---- fork-in-region ---- */

static atomic_int fork_go, fork_status = -1;

static void forker_main(void *arg) {
    (void)arg;
    OKAY(rtvm_enter_safe_region(vm));
    atomic_store(&region_phase, 1);
    while (!atomic_load(&fork_go)) sleep_us(100);
    pid_t child = fork();
    if (child == 0) {
        alarm(5); /* a hang in the child ends it with SIGALRM, a failure */
        rtvm_safepoint_poll();
        int rc = rtvm_leave_safe_region(vm);
        rtvm_safepoint_poll();
        _exit(rc == RTVM_EFORK ? 0 : 3);
    }
    int status = 0;
    EXPECT(waitpid(child, &status, 0) == child, "waitpid");
    atomic_store(&fork_status, status);
    OKAY(rtvm_leave_safe_region(vm));
}

static void mode_fork_in_region(void) {
    deadline(60);
    vm = create(NULL, 0);
    rtvm_thread *t;
    OKAY(rtvm_thread_start(vm, "C-Forker", forker_main, NULL, &t));
    while (!atomic_load(&region_phase)) sleep_us(100);
    rtvm_world *w;
    OKAY(rtvm_world_stop(vm, "HeldDuringFork", 10000, &w));
    atomic_store(&fork_go, 1);
    while (atomic_load(&fork_status) == -1) sleep_us(1000);
    OKAY(rtvm_world_resume(w));
    OKAY(rtvm_thread_join(t));
    OKAY(rtvm_destroy(vm));
    int st = atomic_load(&fork_status);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "the child of a fork during a stop: %s %d (3: its leave did not return RTVM_EFORK)",
           WIFSIGNALED(st) ? "killed by signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    printf("a fork in a safe region while the world was stopped: the child's leave returned "
           "RTVM_EFORK at once\n");
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 2) FAIL("usage: collector_test <mode>");
    const char *mode = argv[1];
    if (!strcmp(mode, "malloc-stops")) {
        mode_malloc_stops();
    } else if (!strcmp(mode, "handoff")) {
        mode_handoff();
    } else if (!strcmp(mode, "blocked-libc")) {
        mode_blocked_libc();
    } else if (!strcmp(mode, "handshake-region")) {
        mode_handshake(0);
    } else if (!strcmp(mode, "handshake-stray")) {
        mode_handshake(1);
    } else if (!strcmp(mode, "handshake-malloc")) {
        mode_handshake_malloc();
    } else if (!strcmp(mode, "poll-in-region")) {
        mode_poll_in_region();
    } else if (!strcmp(mode, "fiber")) {
        mode_fiber();
    } else if (!strcmp(mode, "inherited-mask")) {
        mode_inherited_mask();
    } else if (!strcmp(mode, "overflow-masked")) {
        mode_overflow_masked();
    } else if (!strcmp(mode, "blocked-signal")) {
        mode_blocked_signal();
    } else if (!strcmp(mode, "eagain")) {
        mode_eagain();
    } else if (!strcmp(mode, "vanished")) {
        mode_vanished();
    } else if (!strcmp(mode, "fork-in-region")) {
        mode_fork_in_region();
    } else {
        FAIL("unknown mode %s", mode);
    }
    printf("PASS %s\n", mode);
    return 0;
}
