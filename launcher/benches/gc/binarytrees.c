/* The Benchmarks Game's binary-trees on the Boehm collector (GC_MALLOC), as rtvm's built-in
 * `BinaryTrees` main runs it: the iterations of each depth are split over <mutator threads>
 * threads (registered with the collector: GC_THREADS makes pthread_create GC_pthread_create),
 * every tree is checked. Used by `cargo bench -p rtvm-launcher --bench gc`.
 *
 * binarytrees <depth> [<mutator threads>]; heap and markers from the collector's environment
 * variables (GC_MAXIMUM_HEAP_SIZE, GC_INITIAL_HEAP_SIZE, GC_MARKERS).
 */
#include "boehm_events.h"

#include <pthread.h>

typedef struct Node {
    struct Node *left;
    struct Node *right;
} Node;

static Node *create(int depth) {
    Node *n = boehm_alloc(sizeof(Node));
    if (depth > 0) {
        n->left = create(depth - 1);
        n->right = create(depth - 1);
    }
    return n;
}

static long check(const Node *n) {
    return n->left == NULL ? 1 : 1 + check(n->left) + check(n->right);
}

typedef struct {
    int depth;
    long share;
    long check;
} Work;

static void *worker(void *arg) {
    Work *w = arg;
    long sum = 0;
    for (long i = 0; i < w->share; i++) {
        sum += check(create(w->depth));
    }
    w->check = sum;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: binarytrees <depth> [<mutator threads>]\n");
        return 2;
    }
    boehm_events_init();
    int n = atoi(argv[1]);
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    if (threads < 1) {
        fprintf(stderr, "binarytrees: <mutator threads> must be at least 1\n");
        return 2;
    }
    int min_depth = 4;
    int max_depth = n > min_depth + 2 ? n : min_depth + 2;
    int stretch = max_depth + 1;
    printf("stretch tree of depth %d\t check: %ld\n", stretch, check(create(stretch)));
    Node *long_lived = create(max_depth);
    pthread_t *ids = malloc(sizeof(pthread_t) * threads);
    Work *work = malloc(sizeof(Work) * threads);
    for (int d = min_depth; d <= max_depth; d += 2) {
        long iterations = 1L << (max_depth - d + min_depth);
        for (int t = 0; t < threads; t++) {
            work[t].depth = d;
            work[t].share = iterations / threads + (t < iterations % threads ? 1 : 0);
            if (pthread_create(&ids[t], NULL, worker, &work[t]) != 0) {
                perror("binarytrees: pthread_create");
                return 1;
            }
        }
        long sum = 0;
        for (int t = 0; t < threads; t++) {
            pthread_join(ids[t], NULL);
            sum += work[t].check;
        }
        printf("%ld\t trees of depth %d\t check: %ld\n", iterations, d, sum);
    }
    printf("long lived tree of depth %d\t check: %ld\n", max_depth, check(long_lived));
    fflush(stdout);
    boehm_events_report();
    free(ids);
    free(work);
    return 0;
}
