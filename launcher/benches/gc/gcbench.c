/* GCBench (John Ellis and Pete Kovac, Post Communications; modified by Hans Boehm) on the
 * Boehm collector (GC_MALLOC), as rtvm's built-in `GCBench` main runs it: the trees of each
 * depth are split over <mutator threads> threads (registered with the collector: GC_THREADS
 * makes pthread_create GC_pthread_create); the stretch tree, each thread's last tree and, at
 * the end, the long-lived tree and array are checked. Used by
 * `cargo bench -p rtvm-launcher --bench gc`.
 *
 * gcbench [<mutator threads>]; heap and markers from the collector's environment variables
 * (GC_MAXIMUM_HEAP_SIZE, GC_INITIAL_HEAP_SIZE, GC_MARKERS).
 */
#include "boehm_events.h"

#include <pthread.h>
#include <sys/time.h>

enum {
    STRETCH_TREE_DEPTH = 18,
    LONG_LIVED_TREE_DEPTH = 16,
    ARRAY_SIZE = 500000,
    MIN_TREE_DEPTH = 4,
    MAX_TREE_DEPTH = 16,
};

typedef struct Node {
    struct Node *left;
    struct Node *right;
    int i;
    int j;
} Node;

static Node *new_node(Node *left, Node *right) {
    Node *n = boehm_alloc(sizeof(Node));
    n->left = left;
    n->right = right;
    return n;
}

/* Nodes in a complete binary tree of depth i. */
static int tree_size(int i) {
    return (1 << (i + 1)) - 1;
}

/* Trees of depth i built per phase: as many nodes as two stretch trees. */
static int num_iters(int i) {
    return 2 * tree_size(STRETCH_TREE_DEPTH) / tree_size(i);
}

/* Builds a tree top-down: children are attached before they are filled. */
static void populate(int depth, Node *node) {
    if (depth <= 0) {
        return;
    }
    depth--;
    node->left = new_node(NULL, NULL);
    node->right = new_node(NULL, NULL);
    populate(depth, node->left);
    populate(depth, node->right);
}

/* Builds a tree bottom-up. */
static Node *make_tree(int depth) {
    if (depth <= 0) {
        return new_node(NULL, NULL);
    }
    Node *left = make_tree(depth - 1);
    Node *right = make_tree(depth - 1);
    return new_node(left, right);
}

static int count(const Node *n) {
    return n == NULL ? 0 : 1 + count(n->left) + count(n->right);
}

static long now_ms(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec * 1000L + tv.tv_usec / 1000;
}

typedef struct {
    int depth;
    int share;
    int top_down;
} Work;

/* Keeps the last tree built reachable until the next one, as the original's tempTree; the
 * last one is checked (as rtvm's GCBench main does; every one would double the work). */
static void *worker(void *arg) {
    Work *w = arg;
    Node *temp = NULL;
    for (int i = 0; i < w->share; i++) {
        if (w->top_down) {
            temp = new_node(NULL, NULL);
            populate(w->depth, temp);
        } else {
            temp = make_tree(w->depth);
        }
    }
    if (temp != NULL && count(temp) != tree_size(w->depth)) {
        printf("Failed: a %s tree of depth %d is broken\n", w->top_down ? "top-down" : "bottom-up",
               w->depth);
        exit(1);
    }
    return NULL;
}

static void split(int threads, int depth, int iterations, int top_down) {
    pthread_t ids[threads];
    Work work[threads];
    for (int t = 0; t < threads; t++) {
        work[t].depth = depth;
        work[t].share = iterations / threads + (t < iterations % threads ? 1 : 0);
        work[t].top_down = top_down;
        if (pthread_create(&ids[t], NULL, worker, &work[t]) != 0) {
            perror("gcbench: pthread_create");
            exit(1);
        }
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
    }
}

static void time_construction(int depth, int threads) {
    int iterations = num_iters(depth);
    printf("Creating %d trees of depth %d\n", iterations, depth);
    long start = now_ms();
    split(threads, depth, iterations, 1);
    printf("\tTop down construction took %ld msec\n", now_ms() - start);
    start = now_ms();
    split(threads, depth, iterations, 0);
    printf("\tBottom up construction took %ld msec\n", now_ms() - start);
}

int main(int argc, char **argv) {
    boehm_events_init();
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads < 1) {
        fprintf(stderr, "gcbench: <mutator threads> must be at least 1\n");
        return 2;
    }
    printf("Garbage Collector Test\n");
    printf(" Stretching memory with a binary tree of depth %d\n", STRETCH_TREE_DEPTH);
    long start = now_ms();
    if (count(make_tree(STRETCH_TREE_DEPTH)) != tree_size(STRETCH_TREE_DEPTH)) {
        printf("Failed: the stretch tree is broken\n");
        return 1;
    }
    printf(" Creating a long-lived binary tree of depth %d\n", LONG_LIVED_TREE_DEPTH);
    Node *long_lived = new_node(NULL, NULL);
    populate(LONG_LIVED_TREE_DEPTH, long_lived);
    printf(" Creating a long-lived array of %d doubles\n", ARRAY_SIZE);
    double *array = GC_MALLOC_ATOMIC(sizeof(double) * ARRAY_SIZE);
    if (array == NULL) {
        fprintf(stderr, "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space\n");
        return 1;
    }
    for (int i = 0; i < ARRAY_SIZE / 2; i++) {
        array[i] = 1.0 / i;
    }
    for (int d = MIN_TREE_DEPTH; d <= MAX_TREE_DEPTH; d += 2) {
        time_construction(d, threads);
    }
    if (count(long_lived) != tree_size(LONG_LIVED_TREE_DEPTH) || array[1000] != 1.0 / 1000) {
        printf("Failed\n");
        return 1;
    }
    printf("Completed in %ld ms.\n", now_ms() - start);
    fflush(stdout);
    boehm_events_report();
    return 0;
}
