/* check.h — the failure macros of rtvm's C tests. */
#ifndef RTVM_TEST_CHECK_H
#define RTVM_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "rtvm.h"

/* The last error to show with a failure: a program that loads rtvm with dlopen defines it
 * before including this (it has no rtvm_last_error symbol to link with). */
#ifndef CHECK_LAST_ERROR
#define CHECK_LAST_ERROR() rtvm_last_error()
#endif

/* Says where and what failed, with rtvm's last error, and exits 1. */
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                       \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, " (last error: %s)\n", CHECK_LAST_ERROR());                                 \
        exit(1);                                                                                   \
    } while (0)
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) FAIL(__VA_ARGS__);                                                            \
    } while (0)
#define OKAY(call) EXPECT((call) == RTVM_OK, "%s", #call)

#ifndef CHECK_NO_HELPERS
#include <errno.h>
#include <time.h>

/* A VM with these options (and the defaults otherwise); a failure ends the test. */
static inline rtvm_vm *check_create(const char *const *options, size_t n) {
    rtvm_init_args a = {.version = RTVM_VERSION_1};
    OKAY(rtvm_get_default_init_args(&a));
    a.options = options;
    a.n_options = n;
    rtvm_vm *v = NULL;
    OKAY(rtvm_create(&a, &v));
    return v;
}

/* Sleeps `us` microseconds, however many signals interrupt the sleep. */
static inline void check_sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
#endif

#endif
