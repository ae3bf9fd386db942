//! The one growth routine of committed memory, for the heap's expansion and an embedder
//! memory's growth alike.

use std::ops::Range;

use rtvm_os_linux::OsError;

use super::{run, PretouchError, PretouchReport, Target};
use crate::workers::WorkerGang;

/// Why a growth failed; the range was given back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GrowError {
    /// The commit (or the publication) failed.
    Commit(OsError),
    /// The pretouch failed.
    Pretouch(PretouchError),
}

/// Makes `range` of `target`'s reservation usable: committed unpublished, pretouched when the
/// plan says so (on the gang if it is free, else on the calling thread), then published —
/// nobody can use the range before that. On any failure what was committed for it is given
/// back (memory and commit charge) and the range stays reserved. Returns the pretouch's
/// report, if one ran.
pub(crate) fn grow(
    target: &Target,
    range: Range<usize>,
    gang: Option<&WorkerGang>,
) -> Result<Option<PretouchReport>, GrowError> {
    let r = &target.reservation;
    let (offset, len) = (range.start, range.len());
    r.commit_unpublished(offset, len)
        .map_err(GrowError::Commit)?;
    let usable = if target.plan.enabled {
        run(target, range, gang)
            .map(Some)
            .map_err(GrowError::Pretouch)
    } else {
        Ok(None)
    }
    .and_then(|report| {
        r.publish(offset, len)
            .map(|()| report)
            .map_err(GrowError::Commit)
    });
    if usable.is_err() {
        if let Err(u) = r.uncommit_unpublished(offset, len) {
            log::error!(
                target: target.label.tag,
                "Giving back the failed growth{} failed: {u}",
                target.label.what
            );
        }
    }
    usable
}
