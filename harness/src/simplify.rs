//! One step simpler: the smaller values a shrinker tries for a number, toward
//! its floor. Shared by every fault kind and by `chaos explore`'s calls,
//! provider and network.

use std::time::Duration;

/// Toward `low`: `low` itself, halfway, one less.
pub(crate) fn lower(value: u64, low: u64) -> Vec<u64> {
    let mut steps = Vec::new();
    for step in [
        low,
        low + (value - low.min(value)) / 2,
        value.saturating_sub(1),
    ] {
        if step >= low && step < value && !steps.contains(&step) {
            steps.push(step);
        }
    }
    steps
}

pub(crate) fn lower_ms(value: Duration, low_ms: u64) -> Vec<Duration> {
    lower(value.as_millis() as u64, low_ms)
        .into_iter()
        .map(Duration::from_millis)
        .collect()
}

pub(crate) fn lower_u32(value: u32, low: u32) -> Vec<u32> {
    lower(u64::from(value), u64::from(low))
        .into_iter()
        .map(|step| step as u32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowering_moves_toward_the_floor() {
        assert_eq!(lower(10, 1), vec![1, 5, 9]);
        assert_eq!(lower(2, 1), vec![1]);
        assert!(lower(1, 1).is_empty());
    }
}
