//! Constraint functions named in the flag table.

use crate::{flag, Settings};

/// `NativeMemoryTracking` accepts `off`, `summary` and `detail`; HotSpot's message has no
/// trailing newline, so the launcher's line continues it.
pub(crate) fn native_memory_tracking(settings: &Settings) -> Result<(), String> {
    match settings.get(flag::NativeMemoryTracking) {
        "off" | "summary" | "detail" => Ok(()),
        _ => Err("Syntax error, expecting -XX:NativeMemoryTracking=[off|summary|detail]".into()),
    }
}

/// Background pretouch is a way of running `AlwaysPreTouch`; on its own it would silently do
/// nothing, which a user who asked for it should hear about.
pub(crate) fn background_pretouch(settings: &Settings) -> Result<(), String> {
    if settings.get(flag::BackgroundPreTouch) && !settings.get(flag::AlwaysPreTouch) {
        return Err("-XX:+BackgroundPreTouch requires -XX:+AlwaysPreTouch\n".into());
    }
    Ok(())
}

/// A hold on a pretouch that does not run in the background would hold nothing.
pub(crate) fn hold_background_pretouch(settings: &Settings) -> Result<(), String> {
    if settings.get(flag::HoldBackgroundPreTouch) && !settings.get(flag::BackgroundPreTouch) {
        return Err("-XX:+HoldBackgroundPreTouch requires -XX:+BackgroundPreTouch\n".into());
    }
    Ok(())
}
