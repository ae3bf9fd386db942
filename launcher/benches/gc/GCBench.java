// GCBench (John Ellis and Pete Kovac, Post Communications; modified by Hans Boehm), as rtvm's
// built-in `GCBench` main runs it: the trees of each depth are split over <mutator threads>
// threads; the stretch tree, each thread's last tree and, at the end, the long-lived tree and
// array are checked; the output has the original's lines without its memory diagnostics.
// Used by `cargo bench -p rtvm-launcher --bench gc`.
//
// java GCBench [<mutator threads>]

public final class GCBench {
    static final class Node {
        Node left;
        Node right;
        int i;
        int j;

        Node(Node left, Node right) {
            this.left = left;
            this.right = right;
        }

        Node() {
        }
    }

    static final int STRETCH_TREE_DEPTH = 18;
    static final int LONG_LIVED_TREE_DEPTH = 16;
    static final int ARRAY_SIZE = 500000;
    static final int MIN_TREE_DEPTH = 4;
    static final int MAX_TREE_DEPTH = 16;

    /** Nodes in a complete binary tree of depth i. */
    static int treeSize(int i) {
        return (1 << (i + 1)) - 1;
    }

    /** Trees of depth i built per phase: as many nodes as two stretch trees. */
    static int numIters(int i) {
        return 2 * treeSize(STRETCH_TREE_DEPTH) / treeSize(i);
    }

    /** Builds a tree top-down: children are attached before they are filled. */
    static void populate(int depth, Node node) {
        if (depth <= 0) {
            return;
        }
        depth--;
        node.left = new Node();
        node.right = new Node();
        populate(depth, node.left);
        populate(depth, node.right);
    }

    /** Builds a tree bottom-up. */
    static Node makeTree(int depth) {
        return depth <= 0 ? new Node() : new Node(makeTree(depth - 1), makeTree(depth - 1));
    }

    static int count(Node node) {
        return node == null ? 0 : 1 + count(node.left) + count(node.right);
    }

    /** A thread's last tree, checked (as rtvm's GCBench main does; all would double the work). */
    static void checkLast(Node tree, int depth, String how) {
        if (tree != null && count(tree) != treeSize(depth)) {
            System.out.println("Failed: a " + how + " tree of depth " + depth + " is broken");
            System.exit(1);
        }
    }

    /** Runs body(share) on each of the threads, thread t with its share of iterations. */
    static void split(int threads, int iterations, java.util.function.IntConsumer body)
            throws InterruptedException {
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int share = iterations / threads + (t < iterations % threads ? 1 : 0);
            workers[t] = new Thread(() -> body.accept(share), "Mutator#" + t);
            workers[t].start();
        }
        for (Thread w : workers) {
            w.join();
        }
    }

    static void timeConstruction(int depth, int threads) throws InterruptedException {
        int iterations = numIters(depth);
        System.out.println("Creating " + iterations + " trees of depth " + depth);
        long start = System.currentTimeMillis();
        split(threads, iterations, share -> {
            Node temp = null;
            for (int i = 0; i < share; i++) {
                temp = new Node();
                populate(depth, temp);
            }
            checkLast(temp, depth, "top-down");
        });
        System.out.println("\tTop down construction took " + (System.currentTimeMillis() - start) + " msec");
        start = System.currentTimeMillis();
        split(threads, iterations, share -> {
            Node temp = null;
            for (int i = 0; i < share; i++) {
                temp = makeTree(depth);
            }
            checkLast(temp, depth, "bottom-up");
        });
        System.out.println("\tBottom up construction took " + (System.currentTimeMillis() - start) + " msec");
    }

    public static void main(String[] args) throws InterruptedException {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 1;
        System.out.println("Garbage Collector Test");
        System.out.println(" Stretching memory with a binary tree of depth " + STRETCH_TREE_DEPTH);
        long start = System.currentTimeMillis();
        if (count(makeTree(STRETCH_TREE_DEPTH)) != treeSize(STRETCH_TREE_DEPTH)) {
            System.out.println("Failed: the stretch tree is broken");
            System.exit(1);
        }
        System.out.println(" Creating a long-lived binary tree of depth " + LONG_LIVED_TREE_DEPTH);
        Node longLived = new Node();
        populate(LONG_LIVED_TREE_DEPTH, longLived);
        System.out.println(" Creating a long-lived array of " + ARRAY_SIZE + " doubles");
        double[] array = new double[ARRAY_SIZE];
        for (int i = 0; i < ARRAY_SIZE / 2; i++) {
            array[i] = 1.0 / i;
        }
        for (int d = MIN_TREE_DEPTH; d <= MAX_TREE_DEPTH; d += 2) {
            timeConstruction(d, threads);
        }
        if (count(longLived) != treeSize(LONG_LIVED_TREE_DEPTH) || array[1000] != 1.0 / 1000) {
            System.out.println("Failed");
            System.exit(1);
        }
        System.out.println("Completed in " + (System.currentTimeMillis() - start) + " ms.");
    }
}
