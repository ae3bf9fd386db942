//! The "Did you mean" score: a bigram Dice coefficient as HotSpot computes it.

/// `2 * hits / (len(a) + len(b))`, where `hits` counts the bigrams of `a` that occur
/// anywhere in `b`. HotSpot suggests the best-scoring flag when the score is at least 0.7.
///
/// ```
/// use rtvm_flags::similarity;
/// assert!(similarity("THPStackMitigation", "DisableTHPStackMitigation") >= 0.7);
/// assert!(similarity("Foo", "AlwaysPreTouch") < 0.7);
/// ```
pub fn similarity(a: &str, b: &str) -> f64 {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let total = a.len() + b.len();
    if total == 0 {
        return 0.0;
    }
    let hits = a
        .windows(2)
        .filter(|pair| b.windows(2).any(|other| other == *pair))
        .count();
    2.0 * hits as f64 / total as f64
}

/// The threshold above which a flag is suggested.
pub(crate) const SUGGESTION_THRESHOLD: f64 = 0.7;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores() {
        assert_eq!(similarity("", ""), 0.0);
        assert_eq!(similarity("ab", "ab"), 0.5);
        assert!((similarity("ThreadStackSiz", "ThreadStackSize") - 26.0 / 29.0).abs() < 1e-9);
        assert!(similarity("Foo", "Bar") < SUGGESTION_THRESHOLD);
    }
}
