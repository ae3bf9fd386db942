//! Making a thread's stack resident on purpose, whatever the build's frame sizes are.

use std::hint::black_box;

/// Uses `bytes` of the calling thread's stack below the caller's frame — recursing in 4 KiB
/// frames, each written, until the stack pointer has moved that far — and returns the lowest
/// frame address reached. The pages stay resident afterwards (what a deep recursion leaves
/// behind). The caller's stack must have room for `bytes` plus a frame.
pub fn use_stack(bytes: usize) -> usize {
    let marker = 0u8;
    dig(black_box(&marker as *const u8 as usize).saturating_sub(bytes))
}

#[inline(never)]
fn dig(until: usize) -> usize {
    let frame = black_box([1u8; 4096]);
    let here = black_box(&frame as *const u8 as usize);
    if here <= until {
        return here;
    }
    let lowest = dig(until);
    // Read after the call: the frame stays live (and written) through the recursion.
    black_box(&frame);
    lowest
}

#[cfg(test)]
mod tests {
    #[test]
    fn it_goes_as_deep_as_asked() {
        let t = std::thread::Builder::new()
            .stack_size(4 << 20)
            .spawn(|| {
                let marker = 0u8;
                let top = std::hint::black_box(&marker as *const u8 as usize);
                top - super::use_stack(1 << 20)
            })
            .unwrap();
        let used = t.join().unwrap();
        assert!(
            (1 << 20..(1 << 20) + (64 << 10)).contains(&used),
            "{used} bytes"
        );
    }
}
