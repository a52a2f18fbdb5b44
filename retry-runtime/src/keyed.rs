//! Guards per key: one declaration, one guard (a breaker, a rate limit)
//! for each tenant, host or shard, so that one tenant's outage or burst
//! does not cut off the others.
//!
//! **Bounded.** A key is whatever the caller passes (a tenant id from a
//! request), so a set cannot grow with it: it holds at most `max_keys`
//! guards, and one more evicts one held (the least recently used of those
//! the guard says may go first: a closed breaker before an open one); a
//! key idle for `idle_for` is forgotten too. An evicted key's guard starts
//! afresh when the key comes back. Memory is constant in the number of
//! distinct keys ever seen (`tests/alloc.rs` sends a million).
//!
//! **Labels are bounded the same way.** Metrics label each guard with its
//! key, for the first `max_keys` keys the set labels; every later key is
//! `other`, so a scrape never holds more series than the bound.
//!
//! **One set of settings.** Every key's guard runs on its template's
//! settings: the guard of the same name, declared (in code or a
//! configuration file) or made with the defaults. A reload reconfigures
//! the template; each key's guard takes the new settings at its next
//! call, keeping its state, as a guard of one name does.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use std::time::Duration;

use lru::LruCache;
use tokio::time::Instant;

/// The metrics label of every key past the first `max_keys` labelled.
pub(crate) const OTHER: &str = "other";

/// How many of the least recently used keys an eviction looks at for one
/// whose guard may go first.
const EVICTION_SCAN: usize = 8;

/// A guard a set can hold one of per key (see the module docs).
pub trait PerKey: Sized + Send + Sync + 'static {
    /// Its settings.
    type Config: Copy + Send;
    /// The settings it runs on now.
    fn current_config(&self) -> Self::Config;
    /// Times it was reconfigured: each key's guard follows its template's.
    fn generation(&self) -> u64;
    /// The most keys a set of these settings holds, and how long it keeps
    /// an unused one.
    fn bounds(config: &Self::Config) -> (u32, Duration);
    /// A guard for `key`, labelled `label` in metrics, like `self` (the
    /// template) and on `config`.
    fn for_key(&self, key: &str, label: Arc<str>, config: Self::Config) -> Self;
    /// Takes the template's new settings, keeping its state.
    fn follow(&self, config: Self::Config);
    /// Whether evicting it now loses nothing worth keeping (a closed
    /// breaker), so that it goes before one that does (an open one).
    fn evicts_first(&self) -> bool {
        true
    }
    /// It was evicted or forgotten (its gauges set back to a fresh one's).
    fn forgotten(&self) {}
}

/// Guards per key, bounded (see the module docs): what
/// `#[resilient(breaker = "search", per = tenant)]`,
/// [`PolicyBuilder::breaker_per`](crate::PolicyBuilder::breaker_per) and
/// [`PolicyBuilder::rate_limit_per`](crate::PolicyBuilder::rate_limit_per) use.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use stormproof::{Registry, breaker::{BreakerConfig, BreakerState, Outcome}};
/// let registry = Registry::new();
/// registry.declare_breaker("search", BreakerConfig { failure_threshold: 1, ..Default::default() }).unwrap();
/// registry.breaker_for("search", "tenant-a").try_acquire().unwrap().record(Outcome::Failure);
/// let set = registry.keyed_breakers("search").unwrap();
/// assert_eq!(set.peek("tenant-a").unwrap().state(), BreakerState::Open);
/// assert_eq!(registry.breaker_for("search", "tenant-b").state(), BreakerState::Closed, "its own breaker");
/// assert_eq!(set.len(), 2);
/// # }
/// ```
pub struct Keyed<G: PerKey> {
    /// Whose settings every key's guard runs on, and whose name.
    template: Arc<G>,
    keys: Mutex<Keys<G>>,
}

/// The keys held, and what the set last took from its template.
struct Keys<G: PerKey> {
    /// Most recently used first; bounded by `max_keys` here, not by the
    /// cache (whose bound a reload would have to move).
    guards: LruCache<Box<str>, Held<G>>,
    /// The keys given a metrics label of their own: at most `max_keys`.
    labelled: HashSet<Arc<str>>,
    other: Arc<str>,
    config: G::Config,
    /// The template's generation `config` was read at.
    generation: u64,
    /// No key is idle before this instant (the oldest key's last use plus
    /// `idle_for`): until then a call does not look for idle keys, which
    /// saves it a subtraction of instants. `None`: look at the next call.
    idle_check: Option<Instant>,
}

/// One key's guard, when it was last used, and the settings' generation it runs on.
struct Held<G> {
    guard: Arc<G>,
    used: Instant,
    generation: u64,
}

impl<G: PerKey> std::fmt::Debug for Keyed<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyed").field("keys", &self.len()).finish_non_exhaustive()
    }
}

impl<G: PerKey> Keyed<G> {
    /// A set with no keys yet, whose guards run on `template`'s settings.
    pub(crate) fn new(template: Arc<G>) -> Self {
        let generation = template.generation();
        let config = template.current_config();
        Keyed {
            template,
            keys: Mutex::new(Keys {
                guards: LruCache::unbounded(),
                labelled: HashSet::new(),
                other: Arc::from(OTHER),
                config,
                generation,
                idle_check: None,
            }),
        }
    }

    /// The guard whose settings every key's runs on (the one declared
    /// under the set's name).
    pub fn template(&self) -> &Arc<G> {
        &self.template
    }

    /// The settings every key's guard runs on (its template's).
    pub fn config(&self) -> G::Config {
        self.template.current_config()
    }

    /// How many keys it holds now (at most `max_keys`; idle ones forgotten).
    pub fn len(&self) -> usize {
        self.held().guards.len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The guards it holds, most recently used first (idle ones forgotten).
    pub fn guards(&self) -> Vec<Arc<G>> {
        self.held().guards.iter().map(|(_, held)| Arc::clone(&held.guard)).collect()
    }

    /// The guard of `key`, if the set holds it: read without using it (no
    /// key made, none evicted, its place in the order kept), to look at a
    /// tenant's state. [`get`](Self::get) is what a call does.
    pub fn peek(&self, key: &str) -> Option<Arc<G>> {
        self.held().guards.peek(key).map(|held| Arc::clone(&held.guard))
    }

    /// The guard of `key`, made afresh if the set does not hold it (never
    /// did, or evicted it); using it makes it the most recent. One lock and
    /// one hash lookup; a new key may evict another.
    #[inline]
    pub fn get(&self, key: &str) -> Arc<G> {
        self.get_inlined(key)
    }

    /// [`get`](Self::get), inlined into a call's lookup of its key's
    /// guards: out of line, its own frame and that of `current` cost a
    /// keyed call 49 instructions of 560 (`benches/instructions.rs`,
    /// `breaker_per_key_call`).
    #[inline(always)]
    pub(crate) fn get_inlined(&self, key: &str) -> Arc<G> {
        let now = Instant::now();
        let mut keys = self.current(now);
        let Keys { guards, config, generation, .. } = &mut *keys;
        if let Some(held) = guards.get_mut(key) {
            held.used = now;
            if held.generation != *generation {
                follow(held, *config, *generation);
            }
            return Arc::clone(&held.guard);
        }
        self.insert(&mut keys, key, now)
    }

    /// The keys, on the template's settings now, idle ones forgotten.
    fn held(&self) -> MutexGuard<'_, Keys<G>> {
        self.current(Instant::now())
    }

    /// [`held`](Self::held) at `now`.
    #[inline(always)]
    fn current(&self, now: Instant) -> MutexGuard<'_, Keys<G>> {
        let generation = self.template.generation();
        let mut keys = self.keys.lock();
        if keys.generation != generation {
            keys.reconfigured(self.template.current_config(), generation);
        }
        keys.forget_idle(now);
        keys
    }

    /// A key the set does not hold: its guard made, evicting a key over
    /// `max_keys` (see `Keys::evict_one`).
    #[inline(never)]
    fn insert(&self, keys: &mut Keys<G>, key: &str, now: Instant) -> Arc<G> {
        while keys.guards.len() >= keys.max_keys().max(1) {
            keys.evict_one();
        }
        let label = keys.label(key);
        let guard = Arc::new(self.template.for_key(key, label, keys.config));
        let generation = keys.generation;
        keys.guards.put(key.into(), Held { guard: Arc::clone(&guard), used: now, generation });
        guard
    }
}

/// A key's guard on the settings its template moved to.
#[cold]
#[inline(never)]
fn follow<G: PerKey>(held: &mut Held<G>, config: G::Config, generation: u64) {
    held.guard.follow(config);
    held.generation = generation;
}

impl<G: PerKey> Keys<G> {
    fn max_keys(&self) -> usize {
        G::bounds(&self.config).0 as usize
    }

    /// The template's settings moved: taken for the keys made from now
    /// on (those held take them at their next call), and a smaller
    /// `max_keys` applied at once.
    #[cold]
    #[inline(never)]
    fn reconfigured(&mut self, config: G::Config, generation: u64) {
        self.config = config;
        self.generation = generation;
        // `idle_for` may have changed.
        self.idle_check = None;
        while self.guards.len() > self.max_keys() {
            self.evict_one();
        }
    }

    /// Makes room for one key: the least recently used of the few oldest
    /// whose guard may go first, else the least recently used. (An open
    /// breaker evicted would come back closed and let its tenant's calls
    /// through until it opened again.) The scan is bounded, so a set of
    /// guards none of which may go first still evicts in constant time.
    fn evict_one(&mut self) {
        let first = self
            .guards
            .iter()
            .rev()
            .take(EVICTION_SCAN)
            .find(|(_, held)| held.guard.evicts_first())
            .map(|(key, _)| key.clone());
        let evicted = match first {
            Some(key) => self.guards.pop(&key),
            None => self.guards.pop_lru().map(|(_, held)| held),
        };
        if let Some(held) = evicted {
            held.guard.forgotten();
        }
    }

    /// Forgets the keys idle for `idle_for` or longer: least recently used
    /// first, so those are the oldest, and the first key used since stops
    /// it. Before `idle_check` none can be idle: a key used again only
    /// moves the oldest's use later, a key made is the newest, and one
    /// evicted leaves an older one or none.
    #[inline]
    fn forget_idle(&mut self, now: Instant) {
        if self.idle_check.is_some_and(|check| now < check) {
            return;
        }
        self.forget_idle_now(now);
    }

    #[inline(never)]
    fn forget_idle_now(&mut self, now: Instant) {
        let idle_for = G::bounds(&self.config).1;
        while let Some((_, held)) = self.guards.peek_lru() {
            if now.saturating_duration_since(held.used) < idle_for {
                // Past the horizon, look again then: nothing is idle before.
                self.idle_check = held.used.checked_add(idle_for.min(crate::clock::HORIZON));
                return;
            }
            if let Some((_, held)) = self.guards.pop_lru() {
                held.guard.forgotten();
            }
        }
        // None held: the next key made is looked at from its next call.
        self.idle_check = None;
    }

    /// The metrics label of `key`: itself while fewer than `max_keys` keys
    /// are labelled (or it is one of them), else `other`.
    fn label(&mut self, key: &str) -> Arc<str> {
        if let Some(label) = self.labelled.get(key) {
            return Arc::clone(label);
        }
        if self.labelled.len() >= self.max_keys() {
            return Arc::clone(&self.other);
        }
        let label: Arc<str> = Arc::from(key);
        self.labelled.insert(Arc::clone(&label));
        label
    }
}

/// What a guard keeps for the sets per key, whatever its kind: its key and
/// the key's metrics label, when it is one key's guard, and how many times
/// it was reconfigured (a set's keys follow their template's count).
#[derive(Debug, Default)]
pub(crate) struct KeyedPart {
    key: Option<(Box<str>, Arc<str>)>,
    generation: std::sync::atomic::AtomicU64,
}

impl KeyedPart {
    /// The part of `key`'s guard, labelled `label` in metrics.
    pub(crate) fn of(key: &str, label: Arc<str>) -> Self {
        KeyedPart { key: Some((key.into(), label)), ..KeyedPart::default() }
    }

    /// The key, for one key's guard.
    pub(crate) fn key(&self) -> Option<&str> {
        self.key.as_ref().map(|(key, _)| &**key)
    }

    /// The key's metrics label, for one key's guard.
    pub(crate) fn label(&self) -> Option<&str> {
        self.key.as_ref().map(|(_, label)| &**label)
    }

    /// Times the guard was reconfigured.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The guard was reconfigured.
    pub(crate) fn reconfigured(&self) {
        self.generation.fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// The guard's name as a refusal gives it: `name`, or `name[key]` for
    /// one key's guard.
    #[cold]
    pub(crate) fn named(&self, name: &str) -> String {
        match self.key() {
            None => name.to_owned(),
            Some(key) => format!("{name}[{key}]"),
        }
    }
}

/// A guard's `max_keys` and `idle_for`, which a reload may change: read by
/// a set per key as its template moves (for guards whose other settings
/// are kept elsewhere).
#[derive(Debug)]
pub(crate) struct PerKeyBounds {
    max_keys: std::sync::atomic::AtomicU32,
    idle_for_nanos: std::sync::atomic::AtomicU64,
}

impl PerKeyBounds {
    pub(crate) fn new(max_keys: u32, idle_for: Duration) -> Self {
        let bounds = PerKeyBounds {
            max_keys: std::sync::atomic::AtomicU32::new(0),
            idle_for_nanos: std::sync::atomic::AtomicU64::new(0),
        };
        bounds.store(max_keys, idle_for);
        bounds
    }

    pub(crate) fn store(&self, max_keys: u32, idle_for: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        self.max_keys.store(max_keys, Relaxed);
        self.idle_for_nanos.store(u64::try_from(idle_for.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    pub(crate) fn load(&self) -> (u32, Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.max_keys.load(Relaxed), Duration::from_nanos(self.idle_for_nanos.load(Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::breaker::{BreakerConfig, BreakerState, CircuitBreaker, KeyedBreakers, Outcome};

    fn set(config: BreakerConfig) -> KeyedBreakers {
        KeyedBreakers::new(Arc::new(CircuitBreaker::new("search", config).unwrap()))
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
        ..crate::breaker::DEFAULT_CONFIG
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
            set.guards().iter().map(|b| b.key().unwrap().to_owned()).collect()
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

    /// The set looks for idle keys only from the time the oldest could be
    /// idle: that time must follow a key used again, and a reload.
    #[tokio::test(start_paused = true)]
    async fn each_key_is_forgotten_when_it_has_been_idle_for_idle_for_whatever_came_before() {
        let secs = Duration::from_secs;
        let at = |s| format!("at {s} s");
        let set = set(ONE_FAILURE);
        set.get("a");
        tokio::time::advance(secs(10)).await;
        set.get("b"); // "a", the oldest, could be idle at 60 s
        tokio::time::advance(secs(50)).await;
        assert!(set.peek("a").is_none() && set.peek("b").is_some(), "{}: \"a\" idle for 60 s", at(60));
        set.get("a");
        tokio::time::advance(secs(5)).await;
        set.get("b"); // at 65 s: "a", used at 60 s, is the oldest now, idle at 120 s
        tokio::time::advance(secs(5)).await;
        assert_eq!(set.len(), 2, "{}: none idle", at(70));
        tokio::time::advance(secs(49)).await;
        assert_eq!(set.len(), 2, "{}: \"a\" idle for 59 s, kept", at(119));
        tokio::time::advance(secs(1)).await;
        assert!(set.peek("a").is_none() && set.peek("b").is_some(), "{}: \"a\" idle for 60 s", at(120));
        set.template().reconfigure(BreakerConfig { idle_for: secs(10), ..ONE_FAILURE }).unwrap();
        assert_eq!(set.len(), 0, "a shorter idle_for applies at once: \"b\" idle for 55 s");
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
        set.template().reconfigure(longer).unwrap();
        let a = set.get("a");
        assert_eq!((a.config().failure_threshold, a.state()), (3, BreakerState::Open));
        let b = set.get("b");
        assert_eq!(b.config().failure_threshold, 3, "a new key takes the new settings");
        drop(b);
        set.template().reconfigure(BreakerConfig { max_keys: 1, ..longer }).unwrap();
        assert_eq!(set.len(), 1, "a smaller max_keys applies at once");
        assert!(Arc::ptr_eq(&set.peek("a").unwrap(), &a), "the closed key went first, though used last");
    }
}
