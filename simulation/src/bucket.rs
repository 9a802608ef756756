//! Token buckets on tokio's clock: how AWS throttles an API per account and region.
//!
//! EC2 documents its API throttling as exactly this ("Request throttling for the Amazon EC2 API"):
//! each account has a bucket per API category with a maximum capacity (the burst) that refills at
//! a fixed rate; a request takes a token, and a request that finds the bucket empty is refused
//! with `RequestLimitExceeded`. [`Bucket::take`] is that. EventBridge does not refuse target
//! invocations over its quota but delays them ("over the quota delivery is delayed"):
//! [`Bucket::reserve`] hands out tokens in arrival order and answers how long each caller waits.

use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct Bucket {
    capacity: f64,
    refill_per_second: f64,
    tokens: f64,
    at: Instant,
    /// The fewest tokens it has held after a take (how close its users came to throttling).
    lowest: f64,
}

impl Bucket {
    /// A full bucket of `capacity` tokens refilling at `refill_per_second`.
    pub fn new(capacity: f64, refill_per_second: f64) -> Self {
        Self {
            capacity,
            refill_per_second,
            tokens: capacity,
            at: Instant::now(),
            lowest: capacity,
        }
    }

    fn refill(&mut self) {
        let now = Instant::now();
        let earned = now.duration_since(self.at).as_secs_f64() * self.refill_per_second;
        self.tokens = (self.tokens + earned).min(self.capacity);
        self.at = now;
    }

    /// Takes a token if there is one (`false`: throttled).
    pub fn take(&mut self) -> bool {
        self.refill();
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        self.lowest = self.lowest.min(self.tokens);
        true
    }

    /// Reserves the next token, in the order callers arrive, and answers how long this caller
    /// waits for it (zero while the bucket holds one).
    pub fn reserve(&mut self) -> Duration {
        self.refill();
        self.tokens -= 1.0;
        self.lowest = self.lowest.min(self.tokens);
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.refill_per_second)
        }
    }

    /// Tokens now.
    pub fn level(&mut self) -> f64 {
        self.refill();
        self.tokens
    }

    /// The fewest tokens it held after a take or a reservation.
    pub fn lowest(&self) -> f64 {
        self.lowest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_bucket_bursts_to_its_capacity_then_refills_at_its_rate() {
        // EC2's filtered DescribeInstances bucket: 100 burst, 20 per second.
        let mut ec2 = Bucket::new(100.0, 20.0);
        assert_eq!((0..150).filter(|_| ec2.take()).count(), 100, "the burst");
        assert!(!ec2.take(), "empty: RequestLimitExceeded");
        tokio::time::advance(Duration::from_millis(500)).await;
        assert_eq!(
            (0..50).filter(|_| ec2.take()).count(),
            10,
            "20/s for half a second"
        );
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(ec2.level(), 100.0, "never above capacity");
        assert_eq!(ec2.lowest(), 0.0);
    }

    #[tokio::test(start_paused = true)]
    async fn reservations_past_the_burst_wait_their_turn_at_the_refill_rate() {
        // 750 target invocations per second, the smallest regions' EventBridge quota.
        let mut targets = Bucket::new(750.0, 750.0);
        let waits: Vec<Duration> = (0..1_500).map(|_| targets.reserve()).collect();
        assert_eq!(waits[749], Duration::ZERO);
        assert_eq!(waits[750], Duration::from_secs_f64(1.0 / 750.0));
        assert_eq!(
            waits[1_499],
            Duration::from_secs(1),
            "delayed, never refused"
        );
    }
}
