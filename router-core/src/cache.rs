//! A bounded map whose entries expire, on tokio's clock.
//!
//! The router's caches (instance owners, queue destinations, spoke credentials) read time from
//! tokio's [`Instant`], never from the system clock, so a test or the organisation simulation
//! that pauses tokio's clock and advances it sees every lifetime run out exactly when it should,
//! without waiting. Each entry carries its own deadline (the caller decides how long an answer is
//! trusted, by what the answer is). The map is bounded: past its capacity, expired entries go
//! first, then the ones closest to expiring, the earliest written first among those that expire
//! at the same instant (on a paused clock many do): which entries go never depends on a hash
//! map's order, so a seed replays the same evictions.
//!
//! A Lambda execution environment runs one invocation at a time, so the router never has two
//! lookups of one key in flight: the cache does not coalesce concurrent misses.

use std::{collections::HashMap, hash::Hash, sync::Mutex, time::Duration};

use tokio::time::Instant;

pub struct TtlCache<K, V> {
    entries: Mutex<Entries<K, V>>,
    capacity: usize,
}

/// Each key's value, deadline and write number (what breaks a tie between equal deadlines).
struct Entries<K, V> {
    map: HashMap<K, (V, Instant, u64)>,
    writes: u64,
}

impl<K, V> Default for Entries<K, V> {
    fn default() -> Self {
        Self {
            map: HashMap::new(),
            writes: 0,
        }
    }
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
            .map
            .get(key)
            .filter(|(_, until, _)| now < *until)
            .map(|(v, _, _)| v.clone())
    }

    /// Keeps `value` for `ttl` (a zero `ttl` keeps nothing).
    pub fn insert(&self, key: K, value: V, ttl: Duration) {
        if ttl.is_zero() {
            self.remove(&key);
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap();
        if entries.map.len() >= self.capacity && !entries.map.contains_key(&key) {
            make_room(&mut entries.map, self.capacity, now);
        }
        entries.writes += 1;
        let write = entries.writes;
        entries.map.insert(key, (value, now + ttl, write));
    }

    pub fn remove(&self, key: &K) {
        self.entries.lock().unwrap().map.remove(key);
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Drops the expired entries, then, if the map is still full, the tenth closest to expiring
/// (by deadline, then by write: a total order, so the same tenth whatever the map's order).
fn make_room<K: Eq + Hash + Clone, V>(
    entries: &mut HashMap<K, (V, Instant, u64)>,
    capacity: usize,
    now: Instant,
) {
    entries.retain(|_, (_, until, _)| now < *until);
    if entries.len() < capacity {
        return;
    }
    let evict = (capacity / 10).max(1);
    let mut deadlines: Vec<(Instant, u64, K)> = entries
        .iter()
        .map(|(k, (_, until, write))| (*until, *write, k.clone()))
        .collect();
    deadlines.select_nth_unstable_by_key(evict - 1, |(until, write, _)| (*until, *write));
    for (_, _, key) in deadlines.into_iter().take(evict) {
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

    /// Entries that expire at the same instant (one batch's answers, on a paused clock) go in the
    /// order they were written, never in a hash map's: the same run evicts the same entries.
    #[tokio::test(start_paused = true)]
    async fn entries_expiring_together_are_evicted_oldest_write_first() {
        for _ in 0..20 {
            let cache = TtlCache::new(40);
            let keys: Vec<String> = (0..40).map(|n| format!("i-{:017x}", n * 7919)).collect();
            for key in &keys {
                cache.insert(key.clone(), (), Duration::from_secs(60));
            }
            cache.insert("new".to_owned(), (), Duration::from_secs(60));
            let gone: Vec<&String> = keys.iter().filter(|k| cache.get(k).is_none()).collect();
            assert_eq!(gone, [&keys[0], &keys[1], &keys[2], &keys[3]]);
        }
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
