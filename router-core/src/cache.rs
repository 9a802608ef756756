//! A bounded map whose entries expire, on tokio's clock.
//!
//! The router's caches (instance owners, queue destinations, spoke credentials) read time from
//! tokio's [`Instant`], never from the system clock, so a test or the organisation simulation
//! that pauses tokio's clock and advances it sees every lifetime run out exactly when it should,
//! without waiting. Each entry carries its own deadline (the caller decides how long an answer is
//! trusted, by what the answer is). The map is bounded: past its capacity, expired entries go
//! first, then the ones closest to expiring.
//!
//! A Lambda execution environment runs one invocation at a time, so the router never has two
//! lookups of one key in flight: the cache does not coalesce concurrent misses.

use std::{collections::HashMap, hash::Hash, sync::Mutex, time::Duration};

use tokio::time::Instant;

pub struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
    capacity: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: Mutex::default(),
            capacity: capacity.max(1),
        }
    }

    /// The value of `key`, if it has not expired.
    pub fn get(&self, key: &K) -> Option<V> {
        let now = Instant::now();
        let entries = self.entries.lock().unwrap();
        entries
            .get(key)
            .filter(|(_, until)| now < *until)
            .map(|(v, _)| v.clone())
    }

    /// Keeps `value` for `ttl` (a zero `ttl` keeps nothing).
    pub fn insert(&self, key: K, value: V, ttl: Duration) {
        if ttl.is_zero() {
            self.remove(&key);
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap();
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            make_room(&mut entries, self.capacity, now);
        }
        entries.insert(key, (value, now + ttl));
    }

    pub fn remove(&self, key: &K) {
        self.entries.lock().unwrap().remove(key);
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Drops the expired entries, then, if the map is still full, the tenth closest to expiring.
fn make_room<K: Eq + Hash + Clone, V>(
    entries: &mut HashMap<K, (V, Instant)>,
    capacity: usize,
    now: Instant,
) {
    entries.retain(|_, (_, until)| now < *until);
    if entries.len() < capacity {
        return;
    }
    let evict = (capacity / 10).max(1);
    let mut deadlines: Vec<(Instant, K)> = entries
        .iter()
        .map(|(k, (_, until))| (*until, k.clone()))
        .collect();
    deadlines.select_nth_unstable_by_key(evict - 1, |(until, _)| *until);
    for (_, key) in deadlines.into_iter().take(evict) {
        entries.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn entries_expire_on_tokios_clock() {
        let cache = TtlCache::new(10);
        cache.insert("a", 1, Duration::from_secs(60));
        cache.insert("b", 2, Duration::from_secs(2));
        cache.insert("c", 3, Duration::ZERO);
        assert_eq!(cache.get(&"a"), Some(1));
        assert_eq!(cache.get(&"b"), Some(2));
        assert_eq!(cache.get(&"c"), None, "a zero lifetime keeps nothing");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(cache.get(&"b"), None, "expired at its deadline");
        assert_eq!(cache.get(&"a"), Some(1));
        cache.remove(&"a");
        assert_eq!(cache.get(&"a"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_cache_drops_the_expired_then_those_closest_to_expiring() {
        let cache = TtlCache::new(10);
        for n in 0..10u64 {
            cache.insert(n, n, Duration::from_secs(10 + n));
        }
        cache.insert(100, 100, Duration::from_secs(100));
        assert_eq!(cache.len(), 10);
        assert_eq!(cache.get(&0), None, "the one closest to expiring went");
        assert_eq!(cache.get(&1), Some(1));
        tokio::time::advance(Duration::from_secs(15)).await;
        cache.insert(101, 101, Duration::from_secs(100));
        // 1..=5 had expired: they went, and nothing live was evicted.
        assert_eq!(cache.len(), 6);
        assert_eq!(cache.get(&6), Some(6));
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_cache_evicts_a_tenth_and_a_key_it_holds_is_replaced_in_place() {
        let cache = TtlCache::new(20);
        assert!(cache.is_empty());
        for n in 0..20u64 {
            cache.insert(n, n, Duration::from_secs(10 + n));
        }
        assert!(!cache.is_empty());
        cache.insert(5, 50, Duration::from_secs(100));
        assert_eq!(cache.len(), 20, "replacing a key it holds evicts nothing");
        assert_eq!(cache.get(&0), Some(0));
        assert_eq!(cache.get(&5), Some(50));
        cache.insert(100, 100, Duration::from_secs(100));
        assert_eq!(cache.len(), 19, "a tenth (2) went, one came");
        assert_eq!(
            (cache.get(&0), cache.get(&1)),
            (None, None),
            "the two closest to expiring"
        );
        assert_eq!(cache.get(&2), Some(2));
    }
}
