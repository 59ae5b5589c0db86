//! The polling schedule of the review watcher: a pure function of the last interval.

use std::time::Duration;

/// The interval between polls: `min` at first, doubling up to `max`; a new item starts it
/// over at `min`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first interval (and the interval after a new item).
    pub min: Duration,
    /// The longest interval.
    pub max: Duration,
}

impl Backoff {
    /// The interval after `previous` (`None`: none yet, or a new item reset it).
    pub fn next(&self, previous: Option<Duration>) -> Duration {
        let max = self.max.max(self.min);
        match previous {
            None => self.min,
            Some(previous) => previous.saturating_mul(2).clamp(self.min, max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_interval_starts_at_the_minimum_and_doubles_up_to_the_maximum() {
        let backoff = Backoff {
            min: ms(50),
            max: ms(400),
        };
        let mut previous = None;
        let mut seen = Vec::new();
        for _ in 0..6 {
            let next = backoff.next(previous);
            seen.push(next.as_millis());
            previous = Some(next);
        }
        assert_eq!(seen, [50, 100, 200, 400, 400, 400]);
        // A new item resets it.
        assert_eq!(backoff.next(None), ms(50));
    }

    #[test]
    fn odd_bounds_and_recorded_intervals_stay_within_them() {
        let backoff = Backoff {
            min: ms(300),
            max: ms(1000),
        };
        assert_eq!(backoff.next(Some(ms(600))), ms(1000));
        // A recorded interval from other settings is brought back within the bounds.
        assert_eq!(backoff.next(Some(ms(10))), ms(300));
        assert_eq!(backoff.next(Some(ms(1 << 40))), ms(1000));
        // A maximum below the minimum means the minimum.
        let inverted = Backoff {
            min: ms(500),
            max: ms(100),
        };
        assert_eq!(inverted.next(Some(ms(500))), ms(500));
        let huge = Backoff {
            min: Duration::MAX,
            max: Duration::MAX,
        };
        assert_eq!(huge.next(Some(Duration::MAX)), Duration::MAX);
    }
}
