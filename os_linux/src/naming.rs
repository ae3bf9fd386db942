//! Naming anonymous mappings (`[anon:rtvm heap]` in `/proc/self/maps`), best effort.

use std::ffi::CString;
use std::sync::OnceLock;

use nix::sys::mman::MapFlags;

use crate::pages::base_page_size;
use crate::sys;

/// Whether the kernel can name anonymous mappings (`PR_SET_VMA_ANON_NAME`, Linux 5.17 with
/// `CONFIG_ANON_VMA_NAME`). Probed once on a page of our own; the answer is logged once.
pub fn naming_supported() -> bool {
    static PROBE: OnceLock<bool> = OnceLock::new();
    *PROBE.get_or_init(|| {
        let page = base_page_size();
        let result = crate::probe::on_scratch_page(MapFlags::empty(), |addr| {
            sys::set_vma_name(addr, page, c"rtvm probe")
        })
        .and_then(|r| r);
        match result {
            Ok(()) => true,
            Err(e) => {
                log::debug!(target: "os", "Naming mappings is not supported by this kernel (PR_SET_VMA_ANON_NAME: {}); skipped", crate::error::strerror(e));
                false
            }
        }
    })
}

/// The kernel accepts printable ASCII except `[ ] \ $ \``; anything else becomes `_`.
fn sanitize(name: &str) -> CString {
    let clean: String = name
        .chars()
        .take(80)
        .map(|c| {
            if (' '..='~').contains(&c) && !"[]\\$`".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    CString::new(clean).expect("sanitized names have no NUL")
}

/// Names `[addr, addr+len)` if the kernel supports it. Returns whether the name was set.
pub(crate) fn name_range(addr: usize, len: usize, name: &str) -> bool {
    if !naming_supported() {
        return false;
    }
    match sys::set_vma_name(addr, len, &sanitize(name)) {
        Ok(()) => true,
        Err(e) => {
            log::debug!(target: "os", "Naming [{addr:#x}, {:#x}) failed: {}", addr + len, crate::error::strerror(e));
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized() {
        assert_eq!(
            sanitize("rtvm stack: worker#1").to_str().unwrap(),
            "rtvm stack: worker#1"
        );
        assert_eq!(
            sanitize("a[b]c\\d$e`f\u{e9}\n").to_str().unwrap(),
            "a_b_c_d_e_f__"
        );
    }
}
