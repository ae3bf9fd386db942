// The Benchmarks Game's binary-trees, as rtvm's built-in `BinaryTrees` main runs it: the
// iterations of each depth are split over <mutator threads> threads, every tree is checked.
// Used by `cargo bench -p rtvm-launcher --bench gc`.
//
// java BinaryTrees <depth> [<mutator threads>]

public final class BinaryTrees {
    static final class Node {
        final Node left;
        final Node right;

        Node(Node left, Node right) {
            this.left = left;
            this.right = right;
        }

        long check() {
            return left == null ? 1 : 1 + left.check() + right.check();
        }
    }

    static Node create(int depth) {
        return depth == 0 ? new Node(null, null) : new Node(create(depth - 1), create(depth - 1));
    }

    public static void main(String[] args) throws InterruptedException {
        int n = Integer.parseInt(args[0]);
        int threads = args.length > 1 ? Integer.parseInt(args[1]) : 1;
        int minDepth = 4;
        int maxDepth = Math.max(minDepth + 2, n);
        int stretchDepth = maxDepth + 1;
        System.out.println("stretch tree of depth " + stretchDepth + "\t check: " + create(stretchDepth).check());
        Node longLived = create(maxDepth);
        for (int depth = minDepth; depth <= maxDepth; depth += 2) {
            final int d = depth;
            int iterations = 1 << (maxDepth - depth + minDepth);
            long[] checks = new long[threads];
            Thread[] workers = new Thread[threads];
            for (int t = 0; t < threads; t++) {
                final int me = t;
                // Thread t builds iterations / threads trees, the first iterations % threads one more.
                final int share = iterations / threads + (t < iterations % threads ? 1 : 0);
                workers[t] = new Thread(() -> {
                    long sum = 0;
                    for (int i = 0; i < share; i++) {
                        sum += create(d).check();
                    }
                    checks[me] = sum;
                }, "Mutator#" + t);
                workers[t].start();
            }
            long check = 0;
            for (int t = 0; t < threads; t++) {
                workers[t].join();
                check += checks[t];
            }
            System.out.println(iterations + "\t trees of depth " + depth + "\t check: " + check);
        }
        System.out.println("long lived tree of depth " + maxDepth + "\t check: " + longLived.check());
    }
}
