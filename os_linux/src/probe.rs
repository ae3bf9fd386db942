//! Feature probes on a page of our own: map it, ask the kernel something about it, unmap it.

use nix::errno::Errno;
use nix::sys::mman::MapFlags;

use crate::pages::base_page_size;
use crate::sys::{self, Protection};

/// Maps one fresh read-write anonymous page (with `extra` mapping flags), runs `f` with its
/// address, unmaps it, and returns what `f` returned. `f` may advise, name or query the page;
/// nothing else refers to it.
pub(crate) fn on_scratch_page<T>(extra: MapFlags, f: impl FnOnce(usize) -> T) -> Result<T, Errno> {
    let page = base_page_size();
    let addr = sys::map_anonymous(page, Protection::ReadWrite, extra)?;
    let out = f(addr);
    // SAFETY: the page was mapped above by this function, `f` has returned, and nothing else
    // refers to it; it is unmapped exactly once, here.
    let _ = unsafe { sys::unmap(addr, page) };
    Ok(out)
}
