/* Collections, pauses and the time to reach the stop of the Boehm collector, measured inside
 * the program from its collection events, for `cargo bench -p rtvm-launcher --bench gc`.
 *
 * A pause is a stop of the world, from GC_EVENT_PRE_STOP_WORLD to GC_EVENT_POST_START_WORLD
 * (the collector marks with every mutator stopped; sweeping is lazy, done by the allocating
 * threads). The time to reach the stop is from GC_EVENT_PRE_STOP_WORLD to
 * GC_EVENT_POST_STOP_WORLD: the suspend signals sent and every thread acknowledged. A
 * collection is a GC_EVENT_START; GC_get_gc_no() cross-checks the count (less the one
 * collection GC_INIT makes before the hook is set).
 *
 * boehm_events_report() prints to stderr
 *     boehm-gc: collections=<n> gc_no_since_init=<n> stops=<n>
 * and one line per stop:
 *     boehm-gc: stop reaching_ns=<n> pause_ns=<n>
 */
#ifndef BOEHM_EVENTS_H
#define BOEHM_EVENTS_H

#define GC_THREADS
#include <gc.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BOEHM_MAX_STOPS 65536

static long long boehm_pre_stop;
static long long boehm_post_stop;
static long boehm_collections;
static GC_word boehm_gc_no_at_init;
static long boehm_stops;
static long long boehm_reaching[BOEHM_MAX_STOPS];
static long long boehm_pause[BOEHM_MAX_STOPS];

static long long boehm_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Runs in the collecting thread with the allocation lock held: one collection at a time. */
static void GC_CALLBACK boehm_on_event(GC_EventType event) {
    switch (event) {
    case GC_EVENT_START:
        boehm_collections++;
        break;
    case GC_EVENT_PRE_STOP_WORLD:
        boehm_pre_stop = boehm_now_ns();
        break;
    case GC_EVENT_POST_STOP_WORLD:
        boehm_post_stop = boehm_now_ns();
        break;
    case GC_EVENT_POST_START_WORLD:
        if (boehm_stops >= BOEHM_MAX_STOPS) {
            fprintf(stderr, "boehm-gc: more than %d stops, cannot record them\n", BOEHM_MAX_STOPS);
            abort();
        }
        boehm_reaching[boehm_stops] = boehm_post_stop - boehm_pre_stop;
        boehm_pause[boehm_stops] = boehm_now_ns() - boehm_pre_stop;
        boehm_stops++;
        break;
    default:
        break;
    }
}

/* GC_INIT and the event hook; call first in main. */
static void boehm_events_init(void) {
    GC_INIT();
    boehm_gc_no_at_init = GC_get_gc_no();
    GC_set_on_collection_event(boehm_on_event);
}

static void boehm_events_report(void) {
    GC_set_on_collection_event(NULL);
    fprintf(stderr, "boehm-gc: collections=%ld gc_no_since_init=%lu stops=%ld\n",
            boehm_collections, (unsigned long)(GC_get_gc_no() - boehm_gc_no_at_init), boehm_stops);
    for (long i = 0; i < boehm_stops; i++) {
        fprintf(stderr, "boehm-gc: stop reaching_ns=%lld pause_ns=%lld\n", boehm_reaching[i],
                boehm_pause[i]);
    }
}

/* GC_MALLOC or, on a full heap, java's words and exit status 1. */
static void *boehm_alloc(size_t size) {
    void *p = GC_MALLOC(size);
    if (p == NULL) {
        fprintf(stderr, "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space\n");
        exit(1);
    }
    return p;
}

#endif
