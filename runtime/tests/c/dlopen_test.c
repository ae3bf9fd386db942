/*
 * dlopen_test.c — a host that loads rtvm at run time, as a plugin host or a language's FFI
 * does: 100 rounds of dlopen, create, use, destroy, dlclose. The host has its own SIGSEGV
 * handler, which recovers from a NULL dereference with siglongjmp before, during and after
 * each VM's life: rtvm chains to it while a VM runs and gives it back at destroy.
 *
 *   dlopen_test <path to librtvm.so>     prints "PASS dlopen" and exits 0
 *
 * Checked each round: the host's handler is installed again after the destroy; the number
 * of mappings and of threads is what it was before the round (nothing leaked).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_LAST_ERROR() "(not linked: see the message)"
#include "check.h"


static sigjmp_buf recover;
static volatile sig_atomic_t faults;

static void host_handler(int sig, siginfo_t *info, void *uc) {
    (void)sig;
    (void)uc;
    if (info->si_addr == NULL) {
        faults++;
        siglongjmp(recover, 1);
    }
    /* Not ours: die as the default would. */
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
}

/* A NULL dereference the host handler turns into a return of 1. */
static int null_deref_recovered(void) {
    if (sigsetjmp(recover, 1) == 0) {
        volatile int *volatile p = NULL;
        *p = 42;
        return 0;
    }
    return 1;
}

static int count_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

static int thread_count(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1) break;
    if (f) fclose(f);
    return n;
}

/* Every thread of this process as "tid name state", for a failure message. */
static const char *describe_threads(void) {
    static char out[4096];
    size_t used = 0;
    out[0] = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[300], stat[512] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(stat, sizeof stat, f)) stat[0] = 0;
            fclose(f);
        }
        /* "tid (comm) S ...": the name and the state letter after it. */
        char *open = strchr(stat, '('), *close = strrchr(stat, ')');
        int n = open && close && close > open
                    ? snprintf(out + used, sizeof out - used, "%s%s %.*s %c", used ? ", " : "", e->d_name,
                               (int)(close - open + 1), open, close[1] ? close[2] : '?')
                    : snprintf(out + used, sizeof out - used, "%s%s (gone)", used ? ", " : "", e->d_name);
        if (n < 0 || (size_t)n >= sizeof out - used) break;
        used += (size_t)n;
    }
    if (d) closedir(d);
    return out;
}

static void *current_handler(void) {
    struct sigaction sa;
    sigaction(SIGSEGV, NULL, &sa);
    return (void *)sa.sa_sigaction;
}

struct api {
    int (*get_default_init_args)(rtvm_init_args *);
    int (*create)(const rtvm_init_args *, rtvm_vm **);
    int (*destroy)(rtvm_vm *);
    void *(*heap_allocate)(rtvm_vm *, size_t);
    int (*thread_start)(rtvm_vm *, const char *, rtvm_thread_fn, void *, rtvm_thread **);
    int (*thread_join)(rtvm_thread *);
    const char *(*last_error)(void);
};

static void load(void *lib, struct api *a) {
#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)&a->field = dlsym(lib, name);                                                    \
        EXPECT(a->field != NULL, "dlsym %s: %s", name, dlerror());                                 \
    } while (0)
    SYM(get_default_init_args, "rtvm_get_default_init_args");
    SYM(create, "rtvm_create");
    SYM(destroy, "rtvm_destroy");
    SYM(heap_allocate, "rtvm_heap_allocate");
    SYM(thread_start, "rtvm_thread_start");
    SYM(thread_join, "rtvm_thread_join");
    SYM(last_error, "rtvm_last_error");
#undef SYM
}

static void body(void *arg) { *(uint64_t *)arg = 7; }

int main(int argc, char **argv) {
    EXPECT(argc == 2, "usage: dlopen_test <librtvm.so>");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = host_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    EXPECT(sigaction(SIGSEGV, &sa, NULL) == 0, "sigaction");
    EXPECT(null_deref_recovered(), "the host handler does not work before any VM");

    int maps_before = -1, threads_before = -1;
    for (int round = 0; round < 100; round++) {
        void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        EXPECT(lib != NULL, "dlopen: %s", dlerror());
        struct api api;
        load(lib, &api);
        rtvm_init_args args = {.version = RTVM_VERSION_1};
        EXPECT(api.get_default_init_args(&args) == RTVM_OK, "defaults");
        const char *options[] = {"-Xms8m", "-Xmx32m", "-XX:ParallelGCThreads=2"};
        args.options = options;
        args.n_options = 3;
        rtvm_vm *vm = NULL;
        EXPECT(api.create(&args, &vm) == RTVM_OK, "round %d: create: %s", round, api.last_error());
        EXPECT(current_handler() != (void *)host_handler, "rtvm did not install its handler");
        /* During the VM's life a host fault still reaches the host's handler (chained). */
        EXPECT(null_deref_recovered(), "round %d: the host handler was not chained while the VM runs", round);
        uint64_t *word = api.heap_allocate(vm, 8);
        EXPECT(word != NULL, "allocate");
        rtvm_thread *t;
        EXPECT(api.thread_start(vm, "plugin-thread", body, word, &t) == RTVM_OK, "thread: %s", api.last_error());
        EXPECT(api.thread_join(t) == RTVM_OK && *word == 7, "thread body");
        EXPECT(api.destroy(vm) == RTVM_OK, "destroy: %s", api.last_error());
        EXPECT(current_handler() == (void *)host_handler, "round %d: the host handler was not given back", round);
        EXPECT(dlclose(lib) == 0, "dlclose: %s", dlerror());
        EXPECT(null_deref_recovered(), "round %d: the host handler does not work after dlclose", round);
        int maps = count_lines("/proc/self/maps"), threads = thread_count();
        if (round == 1) {
            maps_before = maps;
            threads_before = threads;
        } else if (round > 1) {
            EXPECT(maps <= maps_before + 2, "round %d: %d mappings, %d after round 1", round, maps, maps_before);
            EXPECT(threads == threads_before, "round %d: %d threads, %d after round 1: %s", round, threads, threads_before,
                   describe_threads());
        }
    }
    printf("100 rounds of dlopen/create/destroy/dlclose; %d host faults recovered; %d mappings, %d threads\n",
           (int)faults, maps_before, threads_before);
    printf("PASS dlopen\n");
    return 0;
}
