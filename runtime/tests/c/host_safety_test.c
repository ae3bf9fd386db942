/* host_safety_test.c — what a language runtime embedding librtvm.so does to it, and what it
 * must be able to rely on (issue 23): signal chaining across VM generations and handler
 * orders, chained delivery's stack, mask and flags, the output hook's lifetime, per-VM NMT
 * snapshots, background reservations that never block (nor wait for a held heap pretouch), the
 * nursery from C, fork(), racing
 * creates, a hook that calls back, the soft limit of HotSpot's smallest stack, and a host's
 * own SIGQUIT handler next to rtvm's (and jcmd) — issue 25; SIGTERM, SIGINT and SIGHUP in an
 * embedder — issue 32.
 *
 * One mode per process: host_safety_test <mode>. Prints "PASS <mode>" and exits 0, or
 * prints "FAIL file:line: ..." and exits 1. A handler chain that loops exits 4; a fault that
 * falls through to SIG_DFL exits 3 (both with a message on stderr). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static rtvm_vm *create_with(const char **options, size_t n, rtvm_output_fn hook) {
    rtvm_init_args args = {.version = RTVM_VERSION_1};
    OKAY(rtvm_get_default_init_args(&args));
    args.n_options = n;
    args.options = options;
    args.output = hook;
    rtvm_vm *vm = NULL;
    OKAY(rtvm_create(&args, &vm));
    return vm;
}

static rtvm_vm *create(const char **options, size_t n) { return create_with(options, n, NULL); }

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void say(const char *text) { (void)!write(2, text, strlen(text)); }

static void noop_body(void *arg) { (void)arg; }

/* ---- host handlers: a stack of chaining SIGSEGV handlers, as language runtimes install ---- */

#define MAX_HOSTS 16

typedef struct {
    struct sigaction prev; /* what it found when it installed itself: it chains there */
    int active;            /* installed and not removed (a removed one it could not take off
                            * the top stays in the chain and passes faults on) */
} host_t;

static host_t hosts[MAX_HOSTS];
static int nhosts;
static volatile sig_atomic_t visits[64];
static volatile sig_atomic_t nvisits;
static volatile sig_atomic_t depth;
static volatile sig_atomic_t recoverer = -1;
static sigjmp_buf recover_jb;

/* Calls what a handler found before it, as its chaining code would. */
static void chain_to(const struct sigaction *p, int sig, siginfo_t *si, void *uc) {
    void *h = (void *)p->sa_sigaction;
    if (h == (void *)SIG_DFL || h == (void *)SIG_IGN) {
        say("host_safety_test: a fault fell through to SIG_DFL: a handler in the chain was lost\n");
        _exit(3);
    }
    if (p->sa_flags & SA_SIGINFO)
        p->sa_sigaction(sig, si, uc);
    else
        p->sa_handler(sig);
}

static void host_common(int k, int sig, siginfo_t *si, void *uc) {
    if (++depth > 64) {
        say("host_safety_test: the handler chain loops\n");
        _exit(4);
    }
    if (hosts[k].active) {
        if (nvisits < 64) visits[nvisits++] = k;
        if (k == recoverer) {
            depth = 0;
            siglongjmp(recover_jb, 1);
        }
    }
    chain_to(&hosts[k].prev, sig, si, uc);
    depth--;
}

#define HOST(k) \
    static void h##k(int s, siginfo_t *i, void *u) { host_common(k, s, i, u); }
HOST(0) HOST(1) HOST(2) HOST(3) HOST(4) HOST(5) HOST(6) HOST(7)
HOST(8) HOST(9) HOST(10) HOST(11) HOST(12) HOST(13) HOST(14) HOST(15)
static void (*const host_fns[MAX_HOSTS])(int, siginfo_t *, void *) = {
    h0, h1, h2, h3, h4, h5, h6, h7, h8, h9, h10, h11, h12, h13, h14, h15};

/* Installs host handler k on top of whatever is there, chaining to it. */
static int install_host(int flags) {
    EXPECT(nhosts < MAX_HOSTS, "too many host handlers");
    int k = nhosts++;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = host_fns[k];
    sa.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&sa.sa_mask);
    EXPECT(sigaction(SIGSEGV, &sa, &hosts[k].prev) == 0, "sigaction: %s", strerror(errno));
    hosts[k].active = 1;
    return k;
}

/* Removes host handler k as a library does: on top, it puts back what it found (maybe
 * rtvm's handler); below another, it cannot, and stays in the chain passing faults on. */
static void remove_host(int k) {
    struct sigaction cur;
    sigaction(SIGSEGV, NULL, &cur);
    if ((void *)cur.sa_sigaction == (void *)host_fns[k]) sigaction(SIGSEGV, &hosts[k].prev, NULL);
    hosts[k].active = 0;
}

static void reset_hosts(void) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGSEGV, &dfl, NULL);
    memset(hosts, 0, sizeof hosts);
    nhosts = 0;
}

static int active_hosts(void) {
    int n = 0;
    for (int k = 0; k < nhosts; k++) n += hosts[k].active;
    return n;
}

/* A NULL dereference on this thread, recovered by the oldest active host handler; every
 * active handler must have seen it, newest first. Returns 1 if the visits were right. */
static int fault_here(char *why, size_t why_len) {
    int oldest = -1;
    for (int k = 0; k < nhosts; k++)
        if (hosts[k].active) {
            oldest = k;
            break;
        }
    if (oldest < 0) return 1;
    recoverer = oldest;
    nvisits = 0;
    depth = 0;
    if (sigsetjmp(recover_jb, 1) == 0) {
        *(volatile int *)(uintptr_t)8 = 1;
        snprintf(why, why_len, "the fault was not recovered");
        return 0;
    }
    int want = 0;
    for (int k = nhosts - 1; k >= 0; k--) {
        if (!hosts[k].active) continue;
        if (want >= nvisits || visits[want] != k) {
            int n = snprintf(why, why_len, "visits:");
            for (int i = 0; i < nvisits && n < (int)why_len; i++) n += snprintf(why + n, why_len - n, " %d", (int)visits[i]);
            n += snprintf(why + n, why_len - n, "; expected the %d active handlers, newest first", active_hosts());
            return 0;
        }
        want++;
    }
    if (want != nvisits) {
        snprintf(why, why_len, "%d visits for %d active handlers", (int)nvisits, want);
        return 0;
    }
    return 1;
}

struct fault_on_vm {
    int ok;
    char why[256];
};

static void vm_fault_body(void *arg) {
    struct fault_on_vm *f = arg;
    f->ok = fault_here(f->why, sizeof f->why);
}

/* The fault on a VM thread (rtvm's handler runs on its alternate signal stack there). */
static int fault_on_vm_thread(rtvm_vm *vm, char *why, size_t why_len) {
    struct fault_on_vm f = {0, ""};
    rtvm_thread *t;
    OKAY(rtvm_thread_start(vm, "faulting", vm_fault_body, &f, &t));
    OKAY(rtvm_thread_join(t));
    if (!f.ok) snprintf(why, why_len, "on a VM thread: %s", f.why);
    return f.ok;
}

static const char *small_vm[] = {"-Xmx16m", "-XX:ParallelGCThreads=1"};

/* The two sequences that killed the host before, over five generations each:
 * H1, VM, H2 (chaining), destroy, new VM — with H2 kept, and with H2 removed first. */
static void mode_chain_generations(void) {
    char why[512];
    for (int variant = 0; variant < 2; variant++) {
        reset_hosts();
        int h1 = install_host(0);
        (void)h1;
        for (int gen = 0; gen < 5; gen++) {
            rtvm_vm *vm = create(small_vm, 2);
            EXPECT(fault_here(why, sizeof why), "variant %d, generation %d, VM alive: %s", variant, gen, why);
            int h2 = install_host(gen % 2 ? SA_ONSTACK : 0);
            EXPECT(fault_here(why, sizeof why), "variant %d, generation %d, H2 on top: %s", variant, gen, why);
            EXPECT(fault_on_vm_thread(vm, why, sizeof why), "variant %d, generation %d: %s", variant, gen, why);
            OKAY(rtvm_destroy(vm));
            EXPECT(fault_here(why, sizeof why), "variant %d, generation %d, after destroy: %s", variant, gen, why);
            if (variant == 1) {
                remove_host(h2); /* puts back the rtvm handler it saw */
                EXPECT(fault_here(why, sizeof why), "variant %d, generation %d, H2 removed: %s", variant, gen, why);
            }
        }
        rtvm_vm *vm = create(small_vm, 2);
        EXPECT(fault_here(why, sizeof why), "variant %d, generation 6: %s", variant, why);
        EXPECT(fault_on_vm_thread(vm, why, sizeof why), "variant %d, generation 6: %s", variant, why);
        OKAY(rtvm_destroy(vm));
    }
    reset_hosts();
    printf("H1 recovers a NULL dereference after every re-creation, with H2 kept and H2 removed, 5 generations each\n");
}

static uint64_t rng_state;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Random orders of host handler installs and removals and VM creates and destroys (up to 5
 * generations per sequence), each step followed by a fault that every active host handler
 * must see, newest first, recovered by the oldest — on the main thread and on a VM thread. */
static void mode_chain_property(void) {
    char why[512];
    int sequences = 300, faults = 0, vms = 0;
    for (int seq = 0; seq < sequences; seq++) {
        rng_state = 0x9E3779B97F4A7C15ull ^ (uint64_t)(seq + 1) * 0xBF58476D1CE4E5B9ull;
        reset_hosts();
        rtvm_vm *vm = NULL;
        int generations = 0;
        char trace[256] = "";
        size_t tl = 0;
        for (int step = 0; step < 14; step++) {
            int op = (int)(rnd() % 4);
            if (op == 0 && !vm && generations < 5) {
                vm = create(small_vm, 2);
                generations++;
                vms++;
                tl += snprintf(trace + tl, sizeof trace - tl, " create");
            } else if (op == 1 && vm) {
                OKAY(rtvm_destroy(vm));
                vm = NULL;
                tl += snprintf(trace + tl, sizeof trace - tl, " destroy");
            } else if (op == 2 && nhosts < MAX_HOSTS) {
                int k = install_host(rnd() % 2 ? SA_ONSTACK : 0);
                tl += snprintf(trace + tl, sizeof trace - tl, " +H%d", k);
            } else if (op == 3 && active_hosts() > 0) {
                int pick = (int)(rnd() % (uint64_t)active_hosts());
                for (int k = 0; k < nhosts; k++)
                    if (hosts[k].active && pick-- == 0) {
                        remove_host(k);
                        tl += snprintf(trace + tl, sizeof trace - tl, " -H%d", k);
                        break;
                    }
            }
            if (tl >= sizeof trace) tl = sizeof trace - 1;
            EXPECT(fault_here(why, sizeof why), "sequence %d:%s: %s", seq, trace, why);
            faults++;
            if (vm && active_hosts() > 0) {
                EXPECT(fault_on_vm_thread(vm, why, sizeof why), "sequence %d:%s: %s", seq, trace, why);
                faults++;
            }
        }
        if (vm) OKAY(rtvm_destroy(vm));
    }
    reset_hosts();
    printf("%d random sequences, %d VMs, %d faults: every active handler saw each, newest first\n", sequences,
           vms, faults);
}

/* ---- chained delivery: the stack, the mask and the flags the kernel would have given ---- */

struct delivery {
    int on_alt_stack;  /* SS_ONSTACK during the handler */
    uintptr_t frame;   /* a local of the handler */
    int segv_blocked;  /* SIGSEGV in the mask during the handler */
    int usr2_blocked;  /* SIGUSR2 (in the handler's sa_mask) blocked during it */
};

static struct delivery seen;
static sigjmp_buf stack_jb;
static struct sigaction stack_prev;

static void record(void) {
    stack_t ss;
    sigaltstack(NULL, &ss);
    seen.on_alt_stack = (ss.ss_flags & SS_ONSTACK) != 0;
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    seen.segv_blocked = sigismember(&cur, SIGSEGV);
    seen.usr2_blocked = sigismember(&cur, SIGUSR2);
}

/* A crash reporter's frame: 64 KiB of locals, more than a signal stack holds. */
static void big_handler(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    volatile char frame[64 * 1024];
    memset((char *)frame, 0x5a, sizeof frame);
    seen.frame = (uintptr_t)&frame[0];
    record();
    siglongjmp(stack_jb, 1);
}

static void small_handler(int sig) {
    (void)sig;
    volatile char local = 0;
    seen.frame = (uintptr_t)&local;
    record();
    siglongjmp(stack_jb, 1);
}

struct stack_case {
    rtvm_vm *vm;
    rtvm_stack_bounds bounds;
    int recovered;
};

static void stack_case_body(void *arg) {
    struct stack_case *c = arg;
    if (c->vm) OKAY(rtvm_current_stack_bounds(c->vm, &c->bounds));
    memset(&seen, 0, sizeof seen);
    if (sigsetjmp(stack_jb, 1) == 0) {
        *(volatile int *)(uintptr_t)8 = 1;
        return;
    }
    c->recovered = 1;
}

static void *stack_case_host(void *arg) {
    stack_case_body(arg);
    return NULL;
}

static void use_handler(void (*info)(int, siginfo_t *, void *), void (*plain)(int), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    if (info) {
        sa.sa_sigaction = info;
        sa.sa_flags = SA_SIGINFO | flags;
    } else {
        sa.sa_handler = plain;
        sa.sa_flags = flags;
    }
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    EXPECT(sigaction(SIGSEGV, &sa, &stack_prev) == 0, "sigaction");
}

static void mode_chain_stack(void) {
    /* The host's handlers go in first: rtvm's chains to them. */
    for (int with_vm = 0; with_vm < 2; with_vm++) {
        /* 1. No SA_ONSTACK, a 64 KiB frame: on the thread's own stack, SIGSEGV and SIGUSR2 blocked. */
        use_handler(big_handler, NULL, 0);
        rtvm_vm *vm = create(small_vm, 2);
        struct stack_case c = {with_vm ? vm : NULL, {0}, 0};
        if (with_vm) {
            rtvm_thread *t;
            OKAY(rtvm_thread_start(vm, "big-handler", stack_case_body, &c, &t));
            OKAY(rtvm_thread_join(t));
            EXPECT(c.recovered, "VM thread: the 64 KiB handler did not recover");
            EXPECT(!seen.on_alt_stack, "VM thread: a handler without SA_ONSTACK ran on the signal stack");
            EXPECT(c.bounds.limit <= seen.frame && seen.frame < c.bounds.base,
                   "VM thread: the handler's frame %#lx is not on the thread's stack [%#lx, %#lx)",
                   (unsigned long)seen.frame, (unsigned long)c.bounds.limit, (unsigned long)c.bounds.base);
        } else {
            pthread_t t;
            pthread_create(&t, NULL, stack_case_host, &c);
            pthread_join(t, NULL);
            EXPECT(c.recovered && !seen.on_alt_stack, "host thread: not recovered on its own stack");
        }
        EXPECT(seen.segv_blocked == 1 && seen.usr2_blocked == 1, "%s: mask: SIGSEGV %d, SIGUSR2 %d",
               with_vm ? "VM thread" : "host thread", seen.segv_blocked, seen.usr2_blocked);
        OKAY(rtvm_destroy(vm));
        sigaction(SIGSEGV, &stack_prev, NULL);
    }
    /* 2. SA_ONSTACK: on the alternate signal stack, as the kernel would run it. */
    use_handler(NULL, small_handler, SA_ONSTACK);
    rtvm_vm *vm = create(small_vm, 2);
    struct stack_case c = {vm, {0}, 0};
    rtvm_thread *t;
    OKAY(rtvm_thread_start(vm, "onstack-handler", stack_case_body, &c, &t));
    OKAY(rtvm_thread_join(t));
    EXPECT(c.recovered && seen.on_alt_stack, "SA_ONSTACK: recovered %d, on the signal stack %d", c.recovered,
           seen.on_alt_stack);
    EXPECT(seen.segv_blocked == 1, "SA_ONSTACK: SIGSEGV not blocked");
    OKAY(rtvm_destroy(vm));
    sigaction(SIGSEGV, &stack_prev, NULL);
    /* 3. SA_NODEFER: the signal itself is not blocked during the handler. */
    use_handler(NULL, small_handler, SA_NODEFER);
    vm = create(small_vm, 2);
    struct stack_case d = {vm, {0}, 0};
    OKAY(rtvm_thread_start(vm, "nodefer-handler", stack_case_body, &d, &t));
    OKAY(rtvm_thread_join(t));
    EXPECT(d.recovered && seen.segv_blocked == 0 && seen.usr2_blocked == 1, "SA_NODEFER: SIGSEGV %d, SIGUSR2 %d",
           seen.segv_blocked, seen.usr2_blocked);
    OKAY(rtvm_destroy(vm));
    sigaction(SIGSEGV, &stack_prev, NULL);
    printf("a 64 KiB handler without SA_ONSTACK recovers on the VM thread's own stack; SA_ONSTACK runs on the "
           "signal stack; masks as the kernel sets them (sa_mask, SA_NODEFER)\n");
}

/* ---- the output hook's lifetime against memories ---- */

static atomic_int destroyed;
static atomic_int late_calls;
static atomic_int hook_calls;

static void slow_hook(void *ctx, int stream, const char *text, size_t len) {
    (void)ctx, (void)stream, (void)text, (void)len;
    atomic_fetch_add(&hook_calls, 1);
    usleep(300);
    if (atomic_load(&destroyed)) atomic_fetch_add(&late_calls, 1);
}

static atomic_int stop_grow;

static void *grower(void *arg) {
    rtvm_memory *m = arg;
    size_t size = 0;
    while (!atomic_load(&stop_grow)) {
        size += 4096;
        if (size > (64u << 20)) size = 4096; /* keeps growing calls coming; smaller is a no-op */
        rtvm_memory_grow(m, size);
    }
    return NULL;
}

static void mode_hook_after_destroy(void) {
    const char *options[] = {"-Xmx16m", "-Xlog:os=debug", "-XX:ParallelGCThreads=1"};
    for (int round = 0; round < 30; round++) {
        atomic_store(&destroyed, 0);
        atomic_store(&stop_grow, 0);
        rtvm_vm *vm = create_with(options, 3, slow_hook);
        rtvm_memory *m;
        OKAY(rtvm_memory_reserve(vm, "Arena", 64u << 20, 0, 0, &m));
        pthread_t g;
        pthread_create(&g, NULL, grower, m);
        usleep(3000);
        OKAY(rtvm_destroy(vm));
        atomic_store(&destroyed, 1);
        usleep(3000); /* the memory goes on growing, after its VM */
        atomic_store(&stop_grow, 1);
        pthread_join(g, NULL);
        OKAY(rtvm_memory_release(m));
    }
    EXPECT(atomic_load(&hook_calls) > 30, "the hook was hardly called (%d): the test tests nothing",
           atomic_load(&hook_calls));
    EXPECT(atomic_load(&late_calls) == 0, "%d hook calls after rtvm_destroy returned", atomic_load(&late_calls));
    printf("30 rounds, %d hook calls from a memory growing during and after rtvm_destroy, none after it returned\n",
           atomic_load(&hook_calls));
}

/* ---- NMT snapshots belong to their VM ---- */

static void mode_nmt_snapshot(void) {
    const char *with64[] = {"-Xmx64m", "-XX:NativeMemoryTracking=summary"};
    const char *off128[] = {"-Xmx128m"};
    const char *with128[] = {"-Xmx128m", "-XX:NativeMemoryTracking=summary"};
    static char buf[1 << 16];
    size_t n = 0;
    rtvm_vm *a = create(with64, 2);
    EXPECT(rtvm_nmt_summary(a, NULL, 0, &n) == RTVM_EINVAL && n > 0, "size query");
    uintptr_t where_a = (uintptr_t)a;
    OKAY(rtvm_destroy(a)); /* the fetch never comes */
    rtvm_vm *b = create(off128, 1);
    int rc = rtvm_nmt_summary(b, buf, sizeof buf, &n);
    EXPECT(rc == RTVM_EINVAL && strstr(rtvm_last_error(), "not enabled"),
           "NMT off in the next VM: code %d, %s", rc, rtvm_last_error());
    int same_place = (uintptr_t)b == where_a;
    OKAY(rtvm_destroy(b));
    a = create(with64, 2);
    EXPECT(rtvm_nmt_summary(a, NULL, 0, &n) == RTVM_EINVAL, "size query");
    OKAY(rtvm_destroy(a));
    rtvm_vm *c = create(with128, 2);
    OKAY(rtvm_nmt_summary(c, buf, sizeof buf, NULL));
    EXPECT(strstr(buf, "Java Heap (reserved=134217728") != NULL, "the next VM got another report:\n%s", buf);
    OKAY(rtvm_destroy(c));
    printf("a size query whose fetch never came: the next VM (%s address) gets RTVM_EINVAL with NMT off and its own "
           "report with NMT on\n",
           same_place ? "at the same" : "at another");
}

/* ---- background reservations never pretouch on the caller ---- */

static size_t resident(void *p, size_t len) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = len / page, r = 0;
    unsigned char *vec = malloc(pages);
    EXPECT(mincore(p, len, vec) == 0, "mincore: %s", strerror(errno));
    for (size_t i = 0; i < pages; i++) r += vec[i] & 1;
    free(vec);
    return r * page;
}

static pthread_mutex_t os_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char os_log[256 * 1024];
static size_t os_log_len;

static void collect_hook(void *ctx, int stream, const char *text, size_t len) {
    (void)ctx, (void)stream;
    pthread_mutex_lock(&os_log_lock);
    size_t n = len < sizeof os_log - 1 - os_log_len ? len : sizeof os_log - 1 - os_log_len;
    memcpy(os_log + os_log_len, text, n);
    os_log_len += n;
    os_log[os_log_len] = 0;
    pthread_mutex_unlock(&os_log_lock);
}

static size_t count(const char *text, const char *what) {
    size_t n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

static void mode_background_reserve(void) {
    const size_t MiB = 1u << 20, len = 256 * MiB;
    const char *options[] = {"-Xms64m",
                             "-Xmx64m",
                             "-XX:+AlwaysPreTouch",
                             "-XX:+UnlockExperimentalVMOptions",
                             "-XX:+BackgroundPreTouch",
                             "-XX:+HoldBackgroundPreTouch",
                             "-XX:ParallelGCThreads=2",
                             "-Xlog:os=debug"};
    rtvm_vm *vm = create_with(options, 8, collect_hook);
    /* The heap's pretouch is held: its workers are free for the memories. */
    double t0 = now_ms();
    rtvm_memory *m1, *m2;
    OKAY(rtvm_memory_reserve(vm, "Wasm Memory", len, 0, len, &m1));
    OKAY(rtvm_memory_reserve(vm, "Wasm Memory", len, 0, len, &m2));
    double took = now_ms() - t0;
    rtvm_memory_info i1, i2;
    OKAY(rtvm_memory_get_info(m1, &i1));
    OKAY(rtvm_memory_get_info(m2, &i2));
    /* Pretouched by the gang while the heap's pretouch stays held. */
    double t1 = now_ms();
    while ((resident(i1.base, len) < len || resident(i2.base, len) < len) && now_ms() - t1 < 60000) usleep(1000);
    EXPECT(resident(i1.base, len) == len && resident(i2.base, len) == len, "the memories' pretouches did not run");
    double pretouched = now_ms() - t1;
    size_t heap = 1;
    OKAY(rtvm_heap_resident(vm, &heap));
    EXPECT(heap == 0, "%zu bytes of the held heap pretouched", heap);
    OKAY(rtvm_memory_release(m1));
    OKAY(rtvm_memory_release(m2));
    pthread_mutex_lock(&os_log_lock);
    size_t on_gang = count(os_log, "Running PreTouch task with 1 workers for 64 work units pre-touching 268435456B of Wasm Memory") +
                     count(os_log, "Running PreTouch task with 2 workers for 64 work units pre-touching 268435456B of Wasm Memory");
    size_t on_caller = count(os_log, "Running PreTouch task pre-touching 268435456B of Wasm Memory");
    pthread_mutex_unlock(&os_log_lock);
    EXPECT(on_gang == 2 && on_caller == 0, "pretouched on the gang %zu times, on the caller %zu times:\n%s", on_gang,
           on_caller, os_log);
    OKAY(rtvm_release_pretouch(vm));
    OKAY(rtvm_destroy(vm));
    printf("two 256 MiB background reservations while the heap's pretouch was held returned in %.2f ms; the gang "
           "pretouched them (%.0f ms), the heap's pretouch stayed held\n",
           took, pretouched);
}

/* ---- the nursery from C ---- */

struct nursery_use {
    size_t blocks, used, capacity;
    int nested;
    rtvm_vm *vm;
};

static void inner_nursery(void *ctx, rtvm_nursery *n) {
    (void)ctx, (void)n;
}

static void use_nursery(void *ctx, rtvm_nursery *n) {
    struct nursery_use *u = ctx;
    while (rtvm_nursery_allocate(n, 1u << 20)) u->blocks++;
    OKAY(rtvm_nursery_get_usage(n, &u->used, &u->capacity));
    u->nested = rtvm_with_nursery(u->vm, inner_nursery, NULL);
}

static void mode_nursery(void) {
    const size_t MiB = 1u << 20;
    const char *options[] = {"-Xms16m", "-Xmx16m", "-Xmn8m"};
    rtvm_vm *vm = create(options, 3);
    size_t shared = 0;
    while (rtvm_heap_allocate(vm, 65536)) shared += 65536;
    EXPECT(shared == 8 * MiB, "the shared heap handed out %zu bytes of 16 MiB with an 8 MiB nursery", shared);
    EXPECT(strstr(rtvm_last_error(), "8388608 bytes are the nursery") != NULL &&
               strstr(rtvm_last_error(), "rtvm_with_nursery") != NULL,
           "the message does not say where the memory is: %s", rtvm_last_error());
    struct nursery_use u = {0, 0, 0, 0, vm};
    OKAY(rtvm_with_nursery(vm, use_nursery, &u));
    EXPECT(u.blocks == 8 && u.used == 8 * MiB && u.capacity == 8 * MiB, "nursery: %zu blocks, %zu of %zu",
           u.blocks, u.used, u.capacity);
    EXPECT(u.nested == RTVM_EINVAL, "a nested scope was not refused (%d)", u.nested);
    struct nursery_use again = {0, 0, 0, 0, vm};
    OKAY(rtvm_with_nursery(vm, use_nursery, &again));
    EXPECT(again.blocks == 8, "the nursery was not empty again after its scope (%zu blocks)", again.blocks);
    OKAY(rtvm_destroy(vm));
    const char *plain[] = {"-Xmx16m"};
    vm = create(plain, 1);
    EXPECT(rtvm_with_nursery(vm, use_nursery, &u) == RTVM_EINVAL && strstr(rtvm_last_error(), "-Xmn"),
           "without a nursery: %s", rtvm_last_error());
    OKAY(rtvm_destroy(vm));
    printf("-Xms16m -Xmn8m: 8 MiB shared, 8 MiB through rtvm_with_nursery (twice), the full heap's message names "
           "the nursery\n");
}

/* ---- fork ---- */

static rtvm_vm *fork_vm;
static int report_fd = -1;

static void at_exit_destroys(void) {
    int rc = rtvm_destroy(fork_vm);
    (void)!write(report_fd, &rc, sizeof rc);
}

static void mode_fork(void) {
    const char *options[] = {"-Xms32m", "-Xmx64m", "-XX:+AlwaysPreTouch", "-XX:ParallelGCThreads=2"};
    fork_vm = create(options, 4);
    int fds[2];
    EXPECT(pipe(fds) == 0, "pipe");
    pid_t child = fork();
    EXPECT(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        close(fds[0]);
        report_fd = fds[1];
        alarm(20); /* a hang ends the child with SIGALRM */
        size_t committed;
        EXPECT(rtvm_heap_expand(fork_vm, 4u << 20, &committed) == RTVM_EFORK, "expand in the child");
        EXPECT(strstr(rtvm_last_error(), "fork()") != NULL, "message: %s", rtvm_last_error());
        rtvm_memory *m;
        EXPECT(rtvm_memory_reserve(fork_vm, "x", 1u << 20, 0, 1u << 20, &m) == RTVM_EFORK, "reserve in the child");
        rtvm_thread *t;
        EXPECT(rtvm_thread_start(fork_vm, "x", noop_body, NULL, &t) == RTVM_EFORK,
               "thread start in the child");
        EXPECT(rtvm_heap_allocate(fork_vm, 64) != NULL, "the child's copy of the heap allocates");
        atexit(at_exit_destroys); /* as a pre-fork server's cleanup does */
        exit(0);
    }
    close(fds[1]);
    int status = 0, rc = 0;
    double t0 = now_ms();
    EXPECT(waitpid(child, &status, 0) == child, "waitpid");
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child %s %d", WIFEXITED(status) ? "exited" : "died of signal",
           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    EXPECT(read(fds[0], &rc, sizeof rc) == sizeof rc && rc == RTVM_EFORK, "rtvm_destroy in the child's atexit: %d", rc);
    OKAY(rtvm_destroy(fork_vm)); /* the parent's VM is as it was */
    printf("in a child of fork(): expand, reserve and thread start RTVM_EFORK, allocation works, rtvm_destroy from "
           "atexit RTVM_EFORK; the child exited in %.1f ms\n",
           now_ms() - t0);
}

/* ---- racing creates ---- */

struct racer {
    int good, rc;
    rtvm_vm *vm;
    pthread_barrier_t *start;
};

static void *race(void *arg) {
    struct racer *r = arg;
    const char *good[] = {"-Xmx16m", "-XX:ParallelGCThreads=1"};
    const char *bad[] = {"-Xmx16m", "-XX:+NoSuchFlag"};
    rtvm_init_args args = {.version = RTVM_VERSION_1};
    rtvm_get_default_init_args(&args);
    args.n_options = 2;
    args.options = r->good ? good : bad;
    args.output = NULL;
    pthread_barrier_wait(r->start);
    r->rc = rtvm_create(&args, &r->vm);
    return NULL;
}

static void mode_create_race(void) {
    enum { RACERS = 6, ROUNDS = 100 };
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, RACERS);
        struct racer r[RACERS];
        pthread_t t[RACERS];
        for (int i = 0; i < RACERS; i++) {
            r[i] = (struct racer){i % 2 == 0, 0, NULL, &start};
            pthread_create(&t[i], NULL, race, &r[i]);
        }
        int created = 0;
        rtvm_vm *vm = NULL;
        for (int i = 0; i < RACERS; i++) {
            pthread_join(t[i], NULL);
            if (r[i].rc == RTVM_OK) {
                created++;
                vm = r[i].vm;
            } else if (r[i].good) {
                EXPECT(r[i].rc == RTVM_EEXIST, "round %d: a good create got %d", round, r[i].rc);
            } else {
                /* EINVAL for its option, or EEXIST if a VM existed when it started (JNI checks
                 * for an existing VM first). */
                EXPECT(r[i].rc == RTVM_EINVAL || r[i].rc == RTVM_EEXIST, "round %d: a bad create got %d", round,
                       r[i].rc);
            }
        }
        pthread_barrier_destroy(&start);
        EXPECT(created == 1, "round %d: %d VMs created", round, created);
        OKAY(rtvm_destroy(vm));
    }
    printf("%d rounds of 3 good and 3 bad racing creates: exactly one VM each\n", ROUNDS);
}

/* ---- a hook that calls back into rtvm ---- */

static rtvm_vm *reentry_vm;
static atomic_int nested_rc = 1;
static char nested_message[256];

static void calling_hook(void *ctx, int stream, const char *text, size_t len) {
    (void)ctx, (void)stream, (void)text, (void)len;
    if (reentry_vm && atomic_load(&nested_rc) == 1) {
        rtvm_thread *t;
        int rc = rtvm_thread_start(reentry_vm, "from-the-hook", noop_body, NULL, &t);
        snprintf(nested_message, sizeof nested_message, "%s", rtvm_last_error());
        atomic_store(&nested_rc, rc);
    }
}

static void mode_hook_reentry(void) {
    const char *options[] = {"-Xmx16m", "-Xlog:os+thread=info", "-XX:ParallelGCThreads=1"};
    alarm(30); /* a deadlock ends the test with SIGALRM */
    reentry_vm = create_with(options, 3, calling_hook);
    rtvm_thread *t;
    OKAY(rtvm_thread_start(reentry_vm, "outer", noop_body, NULL, &t));
    OKAY(rtvm_thread_join(t));
    EXPECT(atomic_load(&nested_rc) == RTVM_EINVAL && strstr(nested_message, "output hook"),
           "the nested call: code %d, %s", atomic_load(&nested_rc), nested_message);
    rtvm_vm *vm = reentry_vm;
    reentry_vm = NULL;
    OKAY(rtvm_destroy(vm));
    alarm(0);
    printf("rtvm_thread_start from the output hook: RTVM_EINVAL (%s), no deadlock\n", nested_message);
}

/* ---- -Xss136k keeps HotSpot's 40K above the soft limit ---- */

static int recurse_1k(uintptr_t soft_limit, int depth) {
    volatile char frame[1024];
    frame[0] = (char)depth;
    if ((uintptr_t)__builtin_frame_address(0) < soft_limit) return depth;
    return recurse_1k(soft_limit, depth + 1) + frame[0] * 0;
}

struct smallest {
    rtvm_vm *vm;
    rtvm_stack_bounds b;
    int depth;
};

static void smallest_body(void *arg) {
    struct smallest *s = arg;
    OKAY(rtvm_current_stack_bounds(s->vm, &s->b));
    s->depth = recurse_1k(s->b.soft_limit, 0);
}

static void mode_soft_limit_136k(void) {
    const char *options[] = {"-Xmx16m", "-Xss136k"};
    rtvm_vm *vm = create(options, 2);
    struct smallest s = {vm, {0}, 0};
    rtvm_thread *t;
    OKAY(rtvm_thread_start(vm, "smallest", smallest_body, &s, &t));
    OKAY(rtvm_thread_join(t));
    size_t above = s.b.base - s.b.soft_limit, stack = s.b.base - s.b.guard_start;
    EXPECT(stack == 136 * 1024, "the stack is %zu KiB", stack / 1024);
    EXPECT(above == 40 * 1024, "%zu KiB above the soft limit (HotSpot: 40K)", above / 1024);
    EXPECT(s.b.soft_limit - s.b.limit == 80 * 1024, "the shadow zone is %lu KiB",
           (unsigned long)(s.b.soft_limit - s.b.limit) / 1024);
    EXPECT(s.depth >= 24, "only %d frames of 1 KiB above the soft limit", s.depth);
    OKAY(rtvm_destroy(vm));
    printf("-Xss136k: 40 KiB above the soft limit (the shadow zone 80 KiB above the guard zone), %d frames of 1 KiB "
           "used\n",
           s.depth);
}

/* SIGQUIT with a host handler installed before the VM: without a trigger file the host's
 * handler runs (called by rtvm's Signal Dispatcher, after its thread dump); the attach
 * mechanism's SIGQUIT (jcmd's) is rtvm's and does not reach it; destroy gives SIGQUIT back. */
static volatile sig_atomic_t host_quits;
static void host_quit_handler(int sig) {
    (void)sig;
    host_quits++;
}

static int wait_for_quits(int n) {
    for (int i = 0; i < 500 && host_quits < n; i++) usleep(10000);
    return host_quits;
}

static void mode_quit_host(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = host_quit_handler;
    sigemptyset(&sa.sa_mask);
    EXPECT(sigaction(SIGQUIT, &sa, NULL) == 0, "sigaction");
    const char *opts[] = {"-Xmx32m"};
    rtvm_vm *vm = create(opts, 1);
    struct sigaction now;
    sigaction(SIGQUIT, NULL, &now);
    EXPECT(now.sa_handler != host_quit_handler, "rtvm's handler is installed over the host's");
    kill(getpid(), SIGQUIT);
    EXPECT(wait_for_quits(1) == 1, "the host's handler ran %d times after one SIGQUIT", (int)host_quits);
    /* Not system(): it ignores SIGQUIT in the caller while the command runs. */
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    pid_t child = fork();
    if (child == 0) {
        execlp("jcmd", "jcmd", pid, "VM.uptime", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "jcmd against the host ended with status %d", status);
    usleep(200000);
    EXPECT(host_quits == 1, "the attach SIGQUIT reached the host's handler (%d)", (int)host_quits);
    /* The same commands from C, with the size-query idiom. */
    size_t n = 0;
    EXPECT(rtvm_diagnostic_command(vm, "Thread.print", NULL, 0, &n) == RTVM_EINVAL && n > 0,
           "a size query answers EINVAL and the size (%zu)", n);
    char *text = malloc(n);
    OKAY(rtvm_diagnostic_command(vm, "Thread.print", text, n, NULL));
    EXPECT(strstr(text, "\"Attach Listener\"") != NULL, "the dump lists the listener:\n%s", text);
    free(text);
    char small[256];
    EXPECT(rtvm_diagnostic_command(vm, "No.such", small, sizeof small, NULL) == RTVM_EINVAL &&
               strstr(rtvm_last_error(), "Unknown diagnostic command") != NULL,
           "an unknown command: %s", rtvm_last_error());
    OKAY(rtvm_destroy(vm));
    sigaction(SIGQUIT, NULL, &now);
    EXPECT(now.sa_handler == host_quit_handler, "destroy gave SIGQUIT back to the host");
    kill(getpid(), SIGQUIT);
    EXPECT(wait_for_quits(2) == 2, "after destroy SIGQUIT goes to the host's handler directly");
    printf("host SIGQUIT handler: ran for kill -3, not for jcmd (answered), given back at destroy\n");
}

/* SIGTERM, SIGINT and SIGHUP in an embedder (issue 32): a host handler installed before the
 * VM stays the host's (rtvm takes only signals at SIG_DFL), rtvm's handler is on the others
 * while the VM lives and SIG_DFL is back after destroy; SIGQUIT, at SIG_DFL before the VM,
 * stays absorbed after destroy (a late kill -3 must not dump the host's core). */
static volatile sig_atomic_t host_terms;
static void host_term_handler(int sig) {
    (void)sig;
    host_terms++;
}

static void set_default(int sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    EXPECT(sigaction(sig, &sa, NULL) == 0, "sigaction");
}

static void *handler_of(int sig) {
    struct sigaction now;
    sigaction(sig, NULL, &now);
    return (now.sa_flags & SA_SIGINFO) ? (void *)now.sa_sigaction : (void *)now.sa_handler;
}

static void mode_terminate_host(void) {
    set_default(SIGINT);
    set_default(SIGHUP);
    set_default(SIGQUIT);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = host_term_handler;
    sigemptyset(&sa.sa_mask);
    EXPECT(sigaction(SIGTERM, &sa, NULL) == 0, "sigaction");
    const char *opts[] = {"-Xmx32m"};
    rtvm_vm *vm = create(opts, 1);
    EXPECT(handler_of(SIGTERM) == (void *)host_term_handler, "the host's SIGTERM handler was replaced");
    EXPECT(handler_of(SIGINT) != (void *)SIG_DFL && handler_of(SIGHUP) != (void *)SIG_DFL,
           "rtvm handles neither SIGINT nor SIGHUP (at SIG_DFL before the VM)");
    kill(getpid(), SIGTERM);
    for (int i = 0; i < 500 && host_terms == 0; i++) usleep(10000);
    EXPECT(host_terms == 1, "the host's SIGTERM handler ran %d times", (int)host_terms);
    OKAY(rtvm_destroy(vm));
    EXPECT(handler_of(SIGTERM) == (void *)host_term_handler, "destroy changed the host's SIGTERM handler");
    EXPECT(handler_of(SIGINT) == (void *)SIG_DFL && handler_of(SIGHUP) == (void *)SIG_DFL,
           "destroy did not put SIG_DFL back for SIGINT and SIGHUP");
    EXPECT(handler_of(SIGQUIT) != (void *)SIG_DFL, "SIGQUIT is SIG_DFL again after destroy");
    kill(getpid(), SIGQUIT);
    usleep(100000);
    /* A second VM takes the handlers over again, and gives them back the same way. */
    vm = create(opts, 1);
    EXPECT(handler_of(SIGINT) != (void *)SIG_DFL, "the second VM does not handle SIGINT");
    OKAY(rtvm_destroy(vm));
    EXPECT(handler_of(SIGINT) == (void *)SIG_DFL, "the second destroy left SIGINT handled");
    printf("host SIGTERM handler kept and run; SIGINT/SIGHUP rtvm's while the VM lives; a SIGQUIT after "
           "destroy absorbed\n");
}

/* SIGINT to an embedder without a handler of its own: rtvm removes the VM's socket and perf
 * data, then the signal's default action ends the process (no exit hook in C). */
static void mode_terminate_default(void) {
    set_default(SIGINT);
    const char *opts[] = {"-Xmx32m", "-XX:+StartAttachListener"};
    rtvm_vm *vm = create(opts, 1);
    (void)vm;
    printf("VM UP %d\n", (int)getpid());
    kill(getpid(), SIGINT);
    for (;;) pause();
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc != 2) {
        fprintf(stderr, "usage: host_safety_test <mode>\n");
        return 2;
    }
    const char *m = argv[1];
    if (!strcmp(m, "chain-generations")) mode_chain_generations();
    else if (!strcmp(m, "chain-property")) mode_chain_property();
    else if (!strcmp(m, "chain-stack")) mode_chain_stack();
    else if (!strcmp(m, "hook-after-destroy")) mode_hook_after_destroy();
    else if (!strcmp(m, "nmt-snapshot")) mode_nmt_snapshot();
    else if (!strcmp(m, "background-reserve")) mode_background_reserve();
    else if (!strcmp(m, "nursery")) mode_nursery();
    else if (!strcmp(m, "fork")) mode_fork();
    else if (!strcmp(m, "create-race")) mode_create_race();
    else if (!strcmp(m, "hook-reentry")) mode_hook_reentry();
    else if (!strcmp(m, "soft-limit-136k")) mode_soft_limit_136k();
    else if (!strcmp(m, "quit-host")) mode_quit_host();
    else if (!strcmp(m, "terminate-host")) mode_terminate_host();
    else if (!strcmp(m, "terminate-default")) mode_terminate_default();
    else {
        fprintf(stderr, "unknown mode %s\n", m);
        return 2;
    }
    printf("PASS %s\n", m);
    return 0;
}
