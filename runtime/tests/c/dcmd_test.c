/* dcmd_test.c — the embedder's diagnostic commands from C, one mode per process:
 *
 *   api   registration (the descriptor copied, refusals with their codes), help and
 *         help <name> in HotSpot's layout, every type through the getters, HotSpot's
 *         messages for bad input, a failing function (RTVM_ERR, its output then
 *         java.lang.RuntimeException), release called once at destroy and never for a
 *         refused registration;
 *   jcmd  the real jcmd against this process: help lists the C commands among rtvm's,
 *         GC.run runs (Command executed successfully), GC.heap_info prints the C text,
 *         bad input gets HotSpot's exception and exit code 1, a failure too;
 *   hang  a function that waits for rtvm_dcmd_cancelled lets rtvm_destroy finish at once;
 *         one that never returns makes rtvm_destroy return RTVM_ERR after 5 s naming it,
 *         and its release runs only when it finally returns.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static rtvm_vm *create(const char **opts, size_t n) {
    rtvm_init_args args;
    args.version = RTVM_VERSION_1;
    OKAY(rtvm_get_default_init_args(&args));
    args.n_options = n;
    args.options = opts;
    rtvm_vm *vm = NULL;
    OKAY(rtvm_create(&args, &vm));
    return vm;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Runs a command in-process; returns the code, the text (or the error) in buf. */
static int dcmd(rtvm_vm *vm, const char *line, char *buf, size_t len) {
    int rc = rtvm_diagnostic_command(vm, line, buf, len, NULL);
    if (rc != RTVM_OK) snprintf(buf, len, "%s", rtvm_last_error());
    return rc;
}

static atomic_int released[8];
static void release_fn(void *ctx) { atomic_fetch_add(&released[(intptr_t)ctx], 1); }

static atomic_int gc_runs;

static int gc_run(void *ctx, const rtvm_dcmd_args *args, rtvm_dcmd_output *out) {
    (void)ctx;
    (void)args;
    (void)out;
    atomic_fetch_add(&gc_runs, 1);
    return 0;
}

static int heap_info(void *ctx, const rtvm_dcmd_args *args, rtvm_dcmd_output *out) {
    (void)ctx;
    (void)args;
    char name[32] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    char line[128];
    snprintf(line, sizeof line, " C heap: 42 regions, on \"%s\"\n", name);
    return rtvm_dcmd_print(out, line);
}

static int histogram(void *ctx, const rtvm_dcmd_args *args, rtvm_dcmd_output *out) {
    (void)ctx;
    int all = -1;
    int64_t parallel = -1;
    EXPECT(rtvm_dcmd_get_boolean(args, "-all", &all) == 1, "-all has its default");
    EXPECT(rtvm_dcmd_get_int(args, "-parallel", &parallel) == 1, "-parallel has its default");
    char line[128];
    snprintf(line, sizeof line, "all=%d parallel=%" PRId64 " set=%d\n", all, parallel,
             rtvm_dcmd_is_set(args, "-parallel"));
    return rtvm_dcmd_print(out, line);
}

static const rtvm_dcmd_param histogram_options[] = {
    {"-all", "Inspect all objects, including unreachable objects", RTVM_DCMD_BOOLEAN, 0, "false"},
    {"-parallel",
     "Number of parallel threads to use for heap inspection. 0 (the default) means let the VM "
     "determine the number of threads to use. 1 means use one thread (disable parallelism). For "
     "any other value the VM will try to use the specified number of threads, but might use fewer.",
     RTVM_DCMD_INT, 0, "0"},
};

static void register_gc_commands(rtvm_vm *vm) {
    /* The descriptors live on this frame only: rtvm copies them. */
    char name[32], description[64];
    strcpy(name, "GC.run");
    strcpy(description, "Call java.lang.System.gc().");
    rtvm_dcmd_desc run = {RTVM_VERSION_1, name, description,
                          "Medium: Depends on Java heap size and content.", NULL, 0, NULL, 0, NULL,
                          gc_run, (void *)(intptr_t)0, release_fn};
    OKAY(rtvm_register_diagnostic_command(vm, &run));
    memset(name, 'x', sizeof name - 1);
    memset(description, 'y', sizeof description - 1);
    rtvm_dcmd_desc info = {RTVM_VERSION_1, "GC.heap_info", "Provide generic Java heap information.",
                           "Medium", "java.lang.management.ManagementPermission(monitor)", 0, NULL,
                           0, NULL, heap_info, (void *)(intptr_t)1, release_fn};
    OKAY(rtvm_register_diagnostic_command(vm, &info));
    rtvm_dcmd_param options[2];
    memcpy(options, histogram_options, sizeof options);
    rtvm_dcmd_desc hist = {RTVM_VERSION_1, "GC.class_histogram",
                           "Provide statistics about the Java heap usage.",
                           "High: Depends on Java heap size and content.",
                           "java.lang.management.ManagementPermission(monitor)", 0, NULL, 2, options,
                           histogram, (void *)(intptr_t)2, release_fn};
    OKAY(rtvm_register_diagnostic_command(vm, &hist));
    memset(options, 0, sizeof options);
}

/* Every type, echoed. */
static int typed(void *ctx, const rtvm_dcmd_args *args, rtvm_dcmd_output *out) {
    (void)ctx;
    const char *s = NULL, *file = NULL;
    int b = -1;
    int64_t i = 0, t = 0;
    uint64_t m = 0;
    int hs = rtvm_dcmd_get_string(args, "s", &s);
    int hf = rtvm_dcmd_get_string(args, "file", &file);
    int hb = rtvm_dcmd_get_boolean(args, "b", &b);
    int hi = rtvm_dcmd_get_int(args, "i", &i);
    int hm = rtvm_dcmd_get_memory_size(args, "m", &m);
    int ht = rtvm_dcmd_get_nanotime(args, "t", &t);
    /* Misuse answers RTVM_EINVAL, not a crash. */
    EXPECT(rtvm_dcmd_get_int(args, "s", &i) == RTVM_EINVAL, "an int read of a string");
    EXPECT(rtvm_dcmd_get_int(args, "nope", &i) == RTVM_EINVAL, "an unknown name");
    EXPECT(rtvm_dcmd_get_int(args, "i", NULL) == RTVM_EINVAL, "a NULL value");
    EXPECT(rtvm_dcmd_is_set(args, "nope") == RTVM_EINVAL, "is_set of an unknown name");
    EXPECT(rtvm_dcmd_cancelled(args) == 0, "not cancelled");
    EXPECT(rtvm_dcmd_print(out, NULL) == RTVM_EINVAL, "print NULL");
    char line[512];
    snprintf(line, sizeof line,
             "file=%d:%s s=%d:%s b=%d:%d i=%d:%" PRId64 " m=%d:%" PRIu64 " t=%d:%" PRId64
             " set(m)=%d\n",
             hf, hf == 1 ? file : "-", hs, hs == 1 ? s : "-", hb, b, hi, i, hm, m, ht, t,
             rtvm_dcmd_is_set(args, "m"));
    OKAY(rtvm_dcmd_write(out, line, strlen(line)));
    return 0;
}

static int failing(void *ctx, const rtvm_dcmd_args *args, rtvm_dcmd_output *out) {
    (void)ctx;
    const char *how = NULL;
    rtvm_dcmd_get_string(args, "how", &how);
    rtvm_dcmd_print(out, "partial\n");
    if (how && !strcmp(how, "message")) {
        OKAY(rtvm_dcmd_set_error(out, "heap is not initialized"));
        return 1;
    }
    if (how && !strcmp(how, "code")) return 7;
    return 0;
}

static void expect_text(rtvm_vm *vm, const char *line, int code, const char *want) {
    char buf[8192];
    int rc = dcmd(vm, line, buf, sizeof buf);
    EXPECT(rc == code && !strcmp(buf, want), "%s: rc %d, got\n[%s]\nwanted\n[%s]", line, rc, buf,
           want);
}

static void mode_api(void) {
    const char *opts[] = {"-Xmx32m"};
    rtvm_vm *vm = create(opts, 1);
    register_gc_commands(vm);
    static const rtvm_dcmd_param typed_args[] = {{"file", "a file", RTVM_DCMD_STRING, 0, NULL}};
    static const rtvm_dcmd_param typed_opts[] = {
        {"s", "a string", RTVM_DCMD_STRING, 0, NULL},
        {"b", "a boolean", RTVM_DCMD_BOOLEAN, 0, NULL},
        {"i", "an int", RTVM_DCMD_INT, 0, "-3"},
        {"m", "a size", RTVM_DCMD_MEMORY_SIZE, 0, "1k"},
        {"t", "a time", RTVM_DCMD_NANOTIME, 0, "10ms"},
    };
    rtvm_dcmd_desc t = {RTVM_VERSION_1, "Test.typed", "Every type.", NULL, NULL, 1, typed_args, 5,
                        typed_opts, typed, (void *)(intptr_t)3, release_fn};
    OKAY(rtvm_register_diagnostic_command(vm, &t));
    static const rtvm_dcmd_param fail_args[] = {{"how", NULL, RTVM_DCMD_STRING, 1, NULL}};
    rtvm_dcmd_desc f = {RTVM_VERSION_1, "Test.fail", "Fails.", NULL, NULL, 1, fail_args, 0, NULL,
                        failing, (void *)(intptr_t)4, release_fn};
    OKAY(rtvm_register_diagnostic_command(vm, &f));

    /* Refusals, with nothing registered and no release. */
    rtvm_dcmd_desc bad = t;
    bad.ctx = (void *)(intptr_t)5;
    EXPECT(rtvm_register_diagnostic_command(vm, &bad) == RTVM_EEXIST &&
               strstr(rtvm_last_error(), "exists already"),
           "a second Test.typed: %s", rtvm_last_error());
    bad.name = "VM.version";
    EXPECT(rtvm_register_diagnostic_command(vm, &bad) == RTVM_EEXIST &&
               strstr(rtvm_last_error(), "one of rtvm's own"),
           "VM.version: %s", rtvm_last_error());
    bad.name = "gc_run";
    EXPECT(rtvm_register_diagnostic_command(vm, &bad) == RTVM_EINVAL &&
               strstr(rtvm_last_error(), "Area.name"),
           "a bad name: %s", rtvm_last_error());
    bad.name = "Test.other";
    bad.version = 0x20000;
    EXPECT(rtvm_register_diagnostic_command(vm, &bad) == RTVM_EVERSION, "an unknown version");
    bad.version = RTVM_VERSION_1;
    bad.fn = NULL;
    EXPECT(rtvm_register_diagnostic_command(vm, &bad) == RTVM_EINVAL, "a NULL fn");
    bad.fn = typed;
    bad.options = NULL;
    EXPECT(rtvm_register_diagnostic_command(vm, &bad) == RTVM_EINVAL &&
               strstr(rtvm_last_error(), "NULL"),
           "options NULL with a count: %s", rtvm_last_error());
    rtvm_dcmd_param wrong = {"n", "", 9, 0, NULL};
    bad.options = &wrong;
    bad.n_options = 1;
    EXPECT(rtvm_register_diagnostic_command(vm, &bad) == RTVM_EINVAL &&
               strstr(rtvm_last_error(), "type 9"),
           "an unknown type: %s", rtvm_last_error());
    wrong.type = RTVM_DCMD_MEMORY_SIZE;
    wrong.default_value = "12x";
    EXPECT(rtvm_register_diagnostic_command(vm, &bad) == RTVM_EINVAL &&
               strstr(rtvm_last_error(), "its default '12x' is not a MEMORY SIZE value"),
           "a bad default: %s", rtvm_last_error());
    EXPECT(rtvm_register_diagnostic_command(vm, NULL) == RTVM_EINVAL, "NULL desc");
    EXPECT(rtvm_register_diagnostic_command(NULL, &t) == RTVM_EINVAL, "NULL vm");
    EXPECT(atomic_load(&released[5]) == 0, "no release for a refused registration");

    /* help */
    char buf[8192];
    OKAY(dcmd(vm, "help", buf, sizeof buf));
    EXPECT(strstr(buf, "The following commands are available:\nGC.class_histogram\nGC.heap_info\n"
                       "GC.run\nSystem.trim_native_heap\n") != NULL &&
               strstr(buf, "\nTest.fail\nTest.typed\nThread.print\n") != NULL,
           "help:\n%s", buf);
    expect_text(vm, "help GC.run", RTVM_OK,
                "GC.run\nCall java.lang.System.gc().\n\nImpact: Medium: Depends on Java heap size "
                "and content.\n\nSyntax: GC.run\n");
    expect_text(vm, "help GC.heap_info", RTVM_OK,
                "GC.heap_info\nProvide generic Java heap information.\n\nImpact: Medium\n\n"
                "Permission: java.lang.management.ManagementPermission(monitor)\n\nSyntax: "
                "GC.heap_info\n");
    expect_text(vm, "help Test.typed", RTVM_OK,
                "Test.typed\nEvery type.\n\nImpact: Low\n\nSyntax : Test.typed [options] "
                "[<file>]\n\nArguments:\n\tfile : [optional] a file (STRING, no default "
                "value)\n\nOptions: (options must be specified using the <key> or <key>=<value> "
                "syntax)\n\ts : [optional] a string (STRING, no default value)\n\tb : [optional] "
                "a boolean (BOOLEAN, no default value)\n\ti : [optional] an int (INT, -3)\n\tm : "
                "[optional] a size (MEMORY SIZE, 1k)\n\tt : [optional] a time (NANOTIME, "
                "10ms)\n");

    /* Runs. */
    expect_text(vm, "GC.run", RTVM_OK, "");
    EXPECT(atomic_load(&gc_runs) == 1, "GC.run ran once (%d)", atomic_load(&gc_runs));
    expect_text(vm, "GC.heap_info", RTVM_OK, " C heap: 42 regions, on \"DCmd GC.heap_in\"\n");
    expect_text(vm, "GC.class_histogram", RTVM_OK, "all=0 parallel=0 set=0\n");
    expect_text(vm, "GC.class_histogram -all -parallel=3", RTVM_OK, "all=1 parallel=3 set=1\n");
    expect_text(vm, "Test.typed", RTVM_OK,
                "file=0:- s=0:- b=0:-1 i=1:-3 m=1:1024 t=1:10000000 set(m)=0\n");
    expect_text(vm, "Test.typed dump.bin s='a b' b=false i=42 m=3M t=2s", RTVM_OK,
                "file=1:dump.bin s=1:a b b=1:0 i=1:42 m=1:3145728 t=1:2000000000 set(m)=1\n");
    /* The size-query idiom runs a command once. */
    size_t n = 0;
    EXPECT(rtvm_diagnostic_command(vm, "GC.run", NULL, 0, &n) == RTVM_EINVAL && n == 1,
           "a size query of GC.run: %zu", n);
    OKAY(rtvm_diagnostic_command(vm, "GC.run", buf, sizeof buf, NULL));
    EXPECT(atomic_load(&gc_runs) == 2, "GC.run ran once for query and fetch (%d)",
           atomic_load(&gc_runs));

    /* Bad input: HotSpot's words, RTVM_EINVAL, the function not called. */
    expect_text(vm, "GC.class_histogram -parallel=abc", RTVM_EINVAL,
                "java.lang.IllegalArgumentException: Integer parsing error in command argument "
                "'-parallel'. Could not parse: abc.");
    expect_text(vm, "GC.class_histogram -all -all", RTVM_EINVAL,
                "java.lang.IllegalArgumentException: Duplicates in diagnostic command arguments");
    expect_text(vm, "GC.run now", RTVM_EINVAL,
                "java.lang.IllegalArgumentException: The argument list of this diagnostic "
                "command should be empty.");
    expect_text(vm, "Test.fail", RTVM_EINVAL,
                "java.lang.IllegalArgumentException: The argument 'how' is mandatory.");
    expect_text(vm, "Test.typed t=5", RTVM_EINVAL,
                "java.lang.IllegalArgumentException: Integer parsing error nanotime value: unit "
                "required");
    expect_text(vm, "Test.typed m=-5", RTVM_EINVAL,
                "java.lang.IllegalArgumentException: Parsing error memory size value: negative "
                "values not allowed");
    /* A failing function: RTVM_ERR, its output, then the exception line. */
    expect_text(vm, "Test.fail message", RTVM_ERR,
                "partial\njava.lang.RuntimeException: heap is not initialized");
    expect_text(vm, "Test.fail code", RTVM_ERR,
                "partial\njava.lang.RuntimeException: diagnostic command Test.fail failed (7)");
    expect_text(vm, "Test.fail fine", RTVM_OK, "partial\n");

    for (int i = 0; i < 5; i++)
        EXPECT(atomic_load(&released[i]) == 0, "release %d before destroy", i);
    OKAY(rtvm_destroy(vm));
    for (int i = 0; i < 5; i++)
        EXPECT(atomic_load(&released[i]) == 1, "release %d ran %d times", i,
               atomic_load(&released[i]));
    EXPECT(atomic_load(&released[5]) == 0, "no release for a refused registration");
    printf("registration, help, every type, HotSpot's messages, failures, release: as expected\n");
}

/* Runs the real jcmd against this process: exit status and stdout. */
static int jcmd(const char *args, char *out, size_t len) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "exec jcmd %d %s", (int)getpid(), args);
    int pipefd[2];
    EXPECT(pipe(pipefd) == 0, "pipe");
    pid_t child = fork();
    if (child == 0) {
        dup2(pipefd[1], 1);
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    size_t used = 0;
    ssize_t r;
    while (used + 1 < len && (r = read(pipefd[0], out + used, len - 1 - used)) != 0) {
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) break;
        used += (size_t)r;
    }
    out[used] = 0;
    close(pipefd[0]);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void mode_jcmd(void) {
    const char *opts[] = {"-Xmx32m"};
    rtvm_vm *vm = create(opts, 1);
    register_gc_commands(vm);
    static const rtvm_dcmd_param fail_args[] = {{"how", NULL, RTVM_DCMD_STRING, 1, NULL}};
    rtvm_dcmd_desc f = {RTVM_VERSION_1, "Test.fail", "Fails.", NULL, NULL, 1, fail_args, 0, NULL,
                        failing, (void *)(intptr_t)4, release_fn};
    OKAY(rtvm_register_diagnostic_command(vm, &f));
    char out[16384], want[512];
    int rc = jcmd("help", out, sizeof out);
    EXPECT(rc == 0 && strstr(out, "\nGC.class_histogram\nGC.heap_info\nGC.run\nSystem.trim_"
                                  "native_heap\n") != NULL,
           "jcmd help: %d\n%s", rc, out);
    rc = jcmd("help GC.heap_info", out, sizeof out);
    snprintf(want, sizeof want,
             "%d:\nGC.heap_info\nProvide generic Java heap information.\n\nImpact: Medium\n\n"
             "Permission: java.lang.management.ManagementPermission(monitor)\n\nSyntax: "
             "GC.heap_info\n",
             (int)getpid());
    EXPECT(rc == 0 && !strcmp(out, want), "jcmd help GC.heap_info: %d\n%s", rc, out);
    rc = jcmd("GC.run", out, sizeof out);
    snprintf(want, sizeof want, "%d:\nCommand executed successfully\n", (int)getpid());
    EXPECT(rc == 0 && !strcmp(out, want) && atomic_load(&gc_runs) == 1, "jcmd GC.run: %d\n%s",
           rc, out);
    rc = jcmd("GC.heap_info", out, sizeof out);
    EXPECT(rc == 0 && strstr(out, " C heap: 42 regions, on \"DCmd GC.heap_in\"\n"),
           "jcmd GC.heap_info: %d\n%s", rc, out);
    rc = jcmd("GC.class_histogram -parallel=2", out, sizeof out);
    EXPECT(rc == 0 && strstr(out, "all=0 parallel=2 set=1\n"), "jcmd GC.class_histogram: %d\n%s",
           rc, out);
    rc = jcmd("GC.class_histogram -parallel=abc", out, sizeof out);
    snprintf(want, sizeof want,
             "%d:\njava.lang.IllegalArgumentException: Integer parsing error in command argument "
             "'-parallel'. Could not parse: abc.\n",
             (int)getpid());
    EXPECT(rc == 1 && !strcmp(out, want), "jcmd with a bad INT: %d\n%s", rc, out);
    rc = jcmd("Test.fail message", out, sizeof out);
    snprintf(want, sizeof want,
             "%d:\npartialjava.lang.RuntimeException: heap is not initialized\n", (int)getpid());
    EXPECT(rc == 1 && !strcmp(out, want), "jcmd of a failing command: %d\n%s", rc, out);
    OKAY(rtvm_destroy(vm));
    printf("jcmd: help, help GC.heap_info, GC.run, GC.heap_info, arguments, errors: as expected\n");
}

static atomic_int hang_entered, hang_release, hang_returned, hang_saw_cancel;

static int cooperative(void *ctx, const rtvm_dcmd_args *args, rtvm_dcmd_output *out) {
    (void)ctx;
    atomic_store(&hang_entered, 1);
    while (!rtvm_dcmd_cancelled(args)) usleep(2000);
    return rtvm_dcmd_print(out, "cancelled\n");
}

static int hanging(void *ctx, const rtvm_dcmd_args *args, rtvm_dcmd_output *out) {
    (void)ctx;
    (void)out;
    atomic_store(&hang_entered, 1);
    while (!atomic_load(&hang_release)) {
        if (rtvm_dcmd_cancelled(args)) atomic_store(&hang_saw_cancel, 1);
        usleep(2000);
    }
    atomic_store(&hang_returned, 1);
    return 0;
}

struct call {
    rtvm_vm *vm;
    const char *line;
    int rc;
    char text[512];
};

static void *caller(void *p) {
    struct call *c = p;
    c->rc = dcmd(c->vm, c->line, c->text, sizeof c->text);
    return NULL;
}

static void mode_hang(void) {
    const char *opts[] = {"-Xmx32m"};
    /* A function that watches rtvm_dcmd_cancelled: destroy is prompt, its reply delivered. */
    rtvm_vm *vm = create(opts, 1);
    rtvm_dcmd_desc c = {RTVM_VERSION_1, "GC.run", "Waits for a collection.", NULL, NULL, 0, NULL, 0,
                        NULL, cooperative, (void *)(intptr_t)6, release_fn};
    OKAY(rtvm_register_diagnostic_command(vm, &c));
    struct call call = {vm, "GC.run", 0, ""};
    pthread_t t;
    EXPECT(pthread_create(&t, NULL, caller, &call) == 0, "pthread_create");
    while (!atomic_load(&hang_entered)) usleep(1000);
    double t0 = now();
    OKAY(rtvm_destroy(vm));
    double took = now() - t0;
    pthread_join(t, NULL);
    EXPECT(took < 3.0, "destroy took %.3f s", took);
    EXPECT(call.rc == RTVM_OK && !strcmp(call.text, "cancelled\n"), "the reply: %d %s", call.rc,
           call.text);
    EXPECT(atomic_load(&released[6]) == 1, "released once (%d)", atomic_load(&released[6]));
    printf("a cooperative function: destroy in %.3f s, its reply delivered\n", took);

    /* A function that never returns (until released after the destroy). */
    atomic_store(&hang_entered, 0);
    vm = create(opts, 1);
    rtvm_dcmd_desc h = {RTVM_VERSION_1, "Test.hang", "Never returns.", NULL, NULL, 0, NULL, 0,
                        NULL, hanging, (void *)(intptr_t)7, release_fn};
    OKAY(rtvm_register_diagnostic_command(vm, &h));
    struct call call2 = {vm, "Test.hang", 0, ""};
    EXPECT(pthread_create(&t, NULL, caller, &call2) == 0, "pthread_create");
    while (!atomic_load(&hang_entered)) usleep(1000);
    t0 = now();
    int rc = rtvm_destroy(vm);
    took = now() - t0;
    EXPECT(rc == RTVM_ERR && strstr(rtvm_last_error(), "diagnostic command Test.hang was still "
                                                       "running 5 s into the VM's destroy"),
           "destroy with a hung function: %d", rc);
    EXPECT(took >= 5.0 && took < 8.0, "destroy took %.3f s", took);
    pthread_join(t, NULL);
    EXPECT(call2.rc == RTVM_ERR && strstr(call2.text, "did not finish before the VM shut down"),
           "its caller: %d %s", call2.rc, call2.text);
    EXPECT(atomic_load(&hang_saw_cancel) == 1, "it saw rtvm_dcmd_cancelled");
    EXPECT(atomic_load(&released[7]) == 0, "not released while it runs");
    /* A new VM meanwhile. */
    vm = create(opts, 1);
    atomic_store(&hang_release, 1);
    for (int i = 0; i < 1000 && !atomic_load(&released[7]); i++) usleep(10000);
    EXPECT(atomic_load(&hang_returned) == 1 && atomic_load(&released[7]) == 1,
           "released once it returned (%d)", atomic_load(&released[7]));
    OKAY(rtvm_destroy(vm));
    printf("a hung function: destroy returned RTVM_ERR after %.3f s; released when it returned\n",
           took);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc != 2) {
        fprintf(stderr, "usage: dcmd_test <mode>\n");
        return 2;
    }
    const char *m = argv[1];
    if (!strcmp(m, "api")) mode_api();
    else if (!strcmp(m, "jcmd")) mode_jcmd();
    else if (!strcmp(m, "hang")) mode_hang();
    else {
        fprintf(stderr, "unknown mode %s\n", m);
        return 2;
    }
    printf("PASS %s\n", m);
    return 0;
}
