//! Java programs that tests and benchmarks run on `java` as the reference for a scenario
//! rtvm runs too, so that both sides of a comparison run the same program.

/// `TrimDemo <sleep-ms>`: the C allocator's peak. 16 threads each allocate 32 MiB with
/// `Unsafe.allocateMemory` (malloc) in 16 KiB blocks, touch them and free 15 of every 16 (the
/// holes below the live blocks stay resident until a trim); then it prints `ALLOCATED` and
/// sleeps — while `-XX:TrimNativeHeapInterval` trims. The file is `TrimDemo.java`.
pub const TRIM_DEMO: &str = r#"import java.lang.reflect.Field;
import sun.misc.Unsafe;
public class TrimDemo {
    public static void main(String[] a) throws Exception {
        Field f = Unsafe.class.getDeclaredField("theUnsafe");
        f.setAccessible(true);
        Unsafe u = (Unsafe) f.get(null);
        Thread[] ts = new Thread[16];
        for (int t = 0; t < ts.length; t++) {
            ts[t] = new Thread(() -> {
                int block = 16 << 10, n = (32 << 20) / block;
                long[] p = new long[n];
                for (int i = 0; i < n; i++) { p[i] = u.allocateMemory(block); u.setMemory(p[i], block, (byte) 1); }
                for (int i = 0; i < n; i++) if (i % 16 != 0) u.freeMemory(p[i]);
            });
            ts[t].start();
        }
        for (Thread t : ts) t.join();
        System.out.println("ALLOCATED");
        Thread.sleep(Long.parseLong(a[0]));
    }
}
"#;
