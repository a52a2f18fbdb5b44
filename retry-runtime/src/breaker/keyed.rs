//! A breaker per key: one declaration, one breaker for each tenant, host
//! or shard, so that one tenant's outage does not cut off the others.
//!
//! **Bounded.** A key is whatever the caller passes (a tenant id from a
//! request), so the set cannot grow with it: it holds at most `max_keys`
//! breakers, and one more evicts the least recently used; a key idle for
//! `idle_for` is forgotten too. An evicted key's breaker starts closed when
//! the key comes back, as a new breaker would. Memory is constant in the
//! number of distinct keys ever seen (`tests/alloc.rs` sends a million).
//!
//! **Labels are bounded the same way.** Metrics label each breaker with its
//! key, for the first `max_keys` keys the set labels; every later key is
//! `other`, so a scrape never holds more series than the bound.
//!
//! **One set of settings.** Every key's breaker runs on its template's
//! settings: the breaker of the same name, declared (in code or a
//! configuration file) or made with the defaults. A reload reconfigures
//! the template; each key's breaker takes the new settings at its next
//! call, keeping its state, as a breaker of one name does.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use lru::LruCache;
use tokio::time::Instant;

use super::{BreakerConfig, CircuitBreaker, Hooks};

/// The metrics label of every key past the first `max_keys` labelled.
const OTHER: &str = "other";

/// How many of the least recently used keys an eviction looks at for a
/// closed breaker to evict first.
const EVICTION_SCAN: usize = 8;

/// A circuit breaker per key, bounded (see the module docs): what
/// `#[resilient(breaker = "search", per = tenant)]` and
/// [`PolicyBuilder::breaker_per`](crate::PolicyBuilder::breaker_per) use.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use stormproof::{Registry, breaker::{BreakerConfig, BreakerState, Outcome}};
/// let registry = Registry::new();
/// registry.declare_breaker("search", BreakerConfig { failure_threshold: 1, ..Default::default() }).unwrap();
/// registry.breaker_for("search", "tenant-a").try_acquire().unwrap().record(Outcome::Failure);
/// assert_eq!(registry.breaker_for("search", "tenant-a").state(), BreakerState::Open);
/// assert_eq!(registry.breaker_for("search", "tenant-b").state(), BreakerState::Closed, "its own breaker");
/// assert_eq!(registry.keyed_breakers("search").unwrap().len(), 2);
/// # }
/// ```
pub struct KeyedBreakers {
    /// Whose settings every key's breaker runs on, and whose name.
    template: Arc<CircuitBreaker>,
    hooks: Option<Hooks>,
    keys: Mutex<Keys>,
}

/// The keys held, and what the set last took from its template.
struct Keys {
    /// Most recently used first; bounded by `config.max_keys` here, not by
    /// the cache (whose bound a reload would have to move).
    breakers: LruCache<Box<str>, Held>,
    /// The keys given a metrics label of their own: at most `max_keys`.
    labelled: HashSet<Arc<str>>,
    other: Arc<str>,
    config: BreakerConfig,
    /// The template's generation `config` was read at.
    generation: u64,
}

/// One key's breaker, when it was last used, and the settings' generation
/// it runs on.
struct Held {
    breaker: Arc<CircuitBreaker>,
    used: Instant,
    generation: u64,
}

impl std::fmt::Debug for KeyedBreakers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedBreakers")
            .field("name", &self.name())
            .field("keys", &self.len())
            .finish_non_exhaustive()
    }
}

impl KeyedBreakers {
    /// A set with no keys yet, whose breakers run on `template`'s settings
    /// and tell `hooks` of their transitions.
    pub(crate) fn new(template: Arc<CircuitBreaker>, hooks: Option<Hooks>) -> Self {
        let generation = template.generation();
        let config = template.config();
        KeyedBreakers {
            template,
            hooks,
            keys: Mutex::new(Keys {
                breakers: LruCache::unbounded(),
                labelled: HashSet::new(),
                other: Arc::from(OTHER),
                config,
                generation,
            }),
        }
    }

    /// The set's name (its template's).
    pub fn name(&self) -> &str {
        self.template.name()
    }

    /// The settings every key's breaker runs on (its template's).
    pub fn config(&self) -> BreakerConfig {
        self.template.config()
    }

    /// How many keys it holds now (at most `max_keys`; idle ones forgotten).
    pub fn len(&self) -> usize {
        self.held().breakers.len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The breakers it holds, most recently used first (idle ones forgotten).
    pub fn breakers(&self) -> Vec<Arc<CircuitBreaker>> {
        self.held().breakers.iter().map(|(_, held)| Arc::clone(&held.breaker)).collect()
    }

    /// The breaker of `key`, if the set holds it: read without using it
    /// (no key made, none evicted, its place in the order kept), to look
    /// at a tenant's state. [`get`](Self::get) is what a call does.
    pub fn peek(&self, key: &str) -> Option<Arc<CircuitBreaker>> {
        self.held().breakers.peek(key).map(|held| Arc::clone(&held.breaker))
    }

    /// The keys, on the template's settings now, idle ones forgotten.
    fn held(&self) -> std::sync::MutexGuard<'_, Keys> {
        self.current(Instant::now())
    }

    /// [`held`](Self::held) at `now`.
    #[inline]
    fn current(&self, now: Instant) -> std::sync::MutexGuard<'_, Keys> {
        let generation = self.template.generation();
        let mut keys = self.lock();
        if keys.generation != generation {
            keys.reconfigured(self.template.config(), generation);
        }
        keys.forget_idle(now);
        keys
    }

    /// The breaker of `key`, made closed if the set does not hold it (never
    /// did, or evicted it); using it makes it the most recent. One lock and
    /// one hash lookup; a new key may evict the least recently used.
    pub fn get(&self, key: &str) -> Arc<CircuitBreaker> {
        let now = Instant::now();
        let mut keys = self.current(now);
        let Keys { breakers, config, generation, .. } = &mut *keys;
        if let Some(held) = breakers.get_mut(key) {
            held.used = now;
            if held.generation != *generation {
                reconfigure(held, config, *generation);
            }
            return Arc::clone(&held.breaker);
        }
        self.insert(&mut keys, key, now)
    }

    /// A key the set does not hold: its breaker made, closed, evicting a
    /// key over `max_keys` (see `Keys::evict_one`).
    #[inline(never)]
    fn insert(&self, keys: &mut Keys, key: &str, now: Instant) -> Arc<CircuitBreaker> {
        while keys.breakers.len() >= keys.config.max_keys.max(1) as usize {
            keys.evict_one();
        }
        let label = keys.label(key);
        let breaker = Arc::new(self.made(key, label, keys.config));
        let generation = keys.generation;
        keys.breakers.put(key.into(), Held { breaker: Arc::clone(&breaker), used: now, generation });
        breaker
    }

    /// A new key's breaker, closed, its state gauge set under its label.
    fn made(&self, key: &str, label: Arc<str>, config: BreakerConfig) -> CircuitBreaker {
        let breaker = CircuitBreaker::unmeasured(self.name(), config)
            .unwrap_or_else(|_| unreachable!("a template's settings are valid"))
            .with_key(key.into(), label);
        let breaker = match &self.hooks {
            Some(hooks) => breaker.with_hooks(Arc::clone(hooks)),
            None => breaker,
        };
        measure_closed(&breaker);
        breaker
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Keys> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A key's breaker evicted or forgotten: its state gauge reads closed, as
/// the key's breaker will when it comes back (a series cannot be removed).
fn forgotten(held: Option<Held>) {
    if let Some(held) = held {
        measure_closed(&held.breaker);
    }
}

/// Sets a key's state gauge to closed, unless the key is one of those
/// labelled `other`: that series is theirs together, and a key coming or
/// going closed says nothing of the others.
fn measure_closed(breaker: &CircuitBreaker) {
    if breaker.id().key.is_none_or(|(_, label)| label != OTHER) {
        breaker.measure_closed();
    }
}

/// A key's breaker on the settings its template moved to.
#[cold]
#[inline(never)]
fn reconfigure(held: &mut Held, config: &BreakerConfig, generation: u64) {
    // The template's settings were valid when it took them.
    let _ = held.breaker.reconfigure(*config);
    held.generation = generation;
}

impl Keys {
    /// The template's settings moved: taken for the keys made from now
    /// on (those held take them at their next call), and a smaller
    /// `max_keys` applied at once, least recently used out.
    #[cold]
    #[inline(never)]
    fn reconfigured(&mut self, config: BreakerConfig, generation: u64) {
        self.config = config;
        self.generation = generation;
        while self.breakers.len() > config.max_keys as usize {
            self.evict_one();
        }
    }

    /// Makes room for one key: the least recently used of the few oldest
    /// whose breaker is closed, else the least recently used. An open
    /// breaker evicted would come back closed and let its tenant's calls
    /// through until it opened again, so a closed one goes first; the scan
    /// is bounded, so a set full of open breakers still evicts in constant time.
    fn evict_one(&mut self) {
        let closed = self
            .breakers
            .iter()
            .rev()
            .take(EVICTION_SCAN)
            .find(|(_, held)| held.breaker.state() == super::BreakerState::Closed)
            .map(|(key, _)| key.clone());
        let evicted = match closed {
            Some(key) => self.breakers.pop(&key),
            None => self.breakers.pop_lru().map(|(_, held)| held),
        };
        forgotten(evicted);
    }

    /// Forgets the keys idle for `idle_for` or longer: least recently used
    /// first, so those are the oldest, and the first key used since stops it.
    fn forget_idle(&mut self, now: Instant) {
        let idle_for = self.config.idle_for;
        while let Some((_, held)) = self.breakers.peek_lru() {
            if now.saturating_duration_since(held.used) < idle_for {
                break;
            }
            forgotten(self.breakers.pop_lru().map(|(_, held)| held));
        }
    }

    /// The metrics label of `key`: itself while fewer than `max_keys` keys
    /// are labelled (or it is one of them), else `other`.
    fn label(&mut self, key: &str) -> Arc<str> {
        if let Some(label) = self.labelled.get(key) {
            return Arc::clone(label);
        }
        if self.labelled.len() >= self.config.max_keys as usize {
            return Arc::clone(&self.other);
        }
        let label: Arc<str> = Arc::from(key);
        self.labelled.insert(Arc::clone(&label));
        label
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::breaker::{BreakerState, Outcome};

    fn set(config: BreakerConfig) -> KeyedBreakers {
        KeyedBreakers::new(Arc::new(CircuitBreaker::new("search", config).unwrap()), None)
    }

    fn trip(set: &KeyedBreakers, key: &str) {
        set.get(key).try_acquire().unwrap().record(Outcome::Failure);
    }

    const ONE_FAILURE: BreakerConfig = BreakerConfig {
        failure_threshold: 1,
        open_for: Duration::from_secs(300),
        max_open_for: Duration::from_secs(300),
        max_keys: 2,
        idle_for: Duration::from_secs(60),
        ..crate::breaker::config::DEFAULT
    };

    #[tokio::test(start_paused = true)]
    async fn each_key_has_its_own_breaker() {
        let set = set(ONE_FAILURE);
        trip(&set, "a");
        assert_eq!(set.get("a").state(), BreakerState::Open);
        assert_eq!(set.get("b").state(), BreakerState::Closed);
        assert!(Arc::ptr_eq(&set.get("a"), &set.get("a")), "the same breaker for the same key");
        assert_eq!(set.get("a").key(), Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_key_is_evicted_before_an_open_one_then_the_least_recently_used() {
        let set = set(ONE_FAILURE);
        let held = |set: &KeyedBreakers| -> Vec<String> {
            set.breakers().iter().map(|b| b.key().unwrap().to_owned()).collect()
        };
        trip(&set, "a");
        set.get("b");
        set.get("c"); // full: "b" goes, closed, though "a" is older
        assert_eq!(held(&set), ["c", "a"]);
        trip(&set, "c");
        set.get("d"); // none closed: the least recently used, "a", goes
        assert_eq!(held(&set), ["d", "c"]);
        assert_eq!(set.get("a").state(), BreakerState::Closed, "an evicted key starts closed");
    }

    #[tokio::test(start_paused = true)]
    async fn peek_reads_a_key_without_using_it() {
        let set = set(ONE_FAILURE);
        trip(&set, "a");
        set.get("b");
        assert!(set.peek("nobody").is_none(), "no key made");
        assert_eq!(set.peek("a").unwrap().state(), BreakerState::Open);
        set.get("c"); // "a" was peeked, not used: still the least recently used, but open
        assert_eq!(set.len(), 2);
        assert!(set.peek("a").is_some() && set.peek("b").is_none(), "the closed one went");
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_key_is_forgotten() {
        let set = set(ONE_FAILURE);
        trip(&set, "a");
        tokio::time::advance(Duration::from_secs(59)).await;
        assert_eq!(set.get("a").state(), BreakerState::Open, "used 59 s ago: kept, and used again now");
        tokio::time::advance(Duration::from_secs(60)).await;
        set.get("b");
        assert_eq!(set.len(), 1, "idle for 60 s: forgotten");
        assert_eq!(set.get("a").state(), BreakerState::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn labels_are_bounded_by_max_keys() {
        let set = set(ONE_FAILURE);
        let labels: Vec<_> =
            ["a", "b", "c", "a"].iter().map(|key| set.get(key).id().key.unwrap().1.to_owned()).collect();
        assert_eq!(labels, ["a", "b", "other", "a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconfigured_template_reaches_every_key_keeping_its_state() {
        let set = set(ONE_FAILURE);
        trip(&set, "a");
        let longer = BreakerConfig { failure_threshold: 3, ..ONE_FAILURE };
        set.template.reconfigure(longer).unwrap();
        let a = set.get("a");
        assert_eq!((a.config().failure_threshold, a.state()), (3, BreakerState::Open));
        let b = set.get("b");
        assert_eq!(b.config().failure_threshold, 3, "a new key takes the new settings");
        drop(b);
        set.template.reconfigure(BreakerConfig { max_keys: 1, ..longer }).unwrap();
        assert_eq!(set.len(), 1, "a smaller max_keys applies at once");
        assert!(Arc::ptr_eq(&set.peek("a").unwrap(), &a), "the closed key went first, though used last");
    }
}
