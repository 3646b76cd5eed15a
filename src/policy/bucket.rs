//! [`Bucket`]: the token bucket a rate limit counts in: `N` calls per minute allow a burst of
//! `N`, refilled at `N` per minute. Pure.

use tokio::time::Instant;

/// A token bucket: `per_minute` tokens at most, refilled at `per_minute` a minute.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bucket {
    /// The most tokens, and the refill per minute.
    pub(super) per_minute: u64,
    /// The tokens left at `at`.
    tokens: f64,
    /// When `tokens` was counted.
    at: Instant,
}

impl Bucket {
    /// A full bucket of `per_minute` tokens.
    pub(super) fn full(per_minute: u64, now: Instant) -> Self {
        Bucket {
            per_minute,
            tokens: per_minute as f64,
            at: now,
        }
    }

    /// Whether the bucket has refilled to the brim by `now` (then it is the same as a new one).
    pub(super) fn is_full(&self, now: Instant) -> bool {
        let cap = self.per_minute as f64;
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens + elapsed * cap / 60.0 >= cap
    }

    /// Takes one token; when there is none, the wait until there is one.
    pub(super) fn take(&mut self, now: Instant) -> Result<(), std::time::Duration> {
        let cap = self.per_minute as f64;
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * cap / 60.0).min(cap);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            let secs = (1.0 - self.tokens) * 60.0 / cap;
            Err(std::time::Duration::from_secs_f64(secs))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refills_at_its_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::full(60, t0);
        for _ in 0..60 {
            assert!(b.take(t0).is_ok());
        }
        let wait = b.take(t0).expect_err("empty");
        assert!(
            wait <= Duration::from_secs(1) && wait > Duration::from_millis(900),
            "{wait:?}"
        );
        assert!(!b.is_full(t0));
        assert!(
            b.take(t0 + Duration::from_secs(1)).is_ok(),
            "one refilled a second later"
        );
        assert!(b.is_full(t0 + Duration::from_secs(61)));
    }
}
