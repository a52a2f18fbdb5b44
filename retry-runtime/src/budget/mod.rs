//! Retry budgets: a cap on retries shared by every call to one dependency.
//!
//! Why budgets and not only `max_attempts`: a per-call limit bounds one
//! call, but when a dependency is down *every* call retries, and the
//! dependency sees `max_attempts` times its normal load exactly when it can
//! least take it. A budget shared by all calls to one dependency bounds the
//! extra load in total.
//!
//! Two forms. The default, [`RatioBudget`] (Finagle's, Envoy's, the SRE
//! book's), allows retries of at most a share of the first attempts over a
//! sliding window (10% over 10 s), plus a small floor per second: retries
//! can add at most that share to a dependency's load, whatever happens. The
//! [`TokenBucket`] (one token per retry, one back per success) allows
//! retries up to its capacity at once and then one per success: when half
//! the calls fail, retries can double the load. That is why the ratio is the
//! default.
//!
//! First attempts are free, as in the AWS SDKs and gRPC: a budget never
//! refuses a fresh call, it only stops retries.

mod bucket;
mod config;
mod guard;
mod lease;
mod ratio;
mod throttling;
mod withdrawal;

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

pub use bucket::TokenBucket;
pub use config::BudgetConfig;
pub use ratio::RatioBudget;
pub use ratio::RatioWindow;
pub use throttling::RetryThrottling;
pub(crate) use withdrawal::Withdrawal;

/// What a retry follows, for a budget whose retries cost by it (a
/// [`TokenBucket`] with `timeout_cost` or `throttled_cost`; the other forms
/// take the same for every retry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetryCause {
    /// A transient error or a conflict: a 5xx, a reset connection.
    Transient,
    /// The attempt's own timeout cut it short.
    Timeout,
    /// The dependency throttled ([`ErrorClass::Throttled`](crate::ErrorClass::Throttled)).
    Throttled,
}

impl RetryCause {
    /// The cause of a retry after an error of `class` (an attempt timeout
    /// is told apart by the call, which cut it: see [`Timeout`](Self::Timeout)).
    pub fn of(class: crate::ErrorClass) -> Self {
        match class {
            crate::ErrorClass::Throttled { .. } => RetryCause::Throttled,
            _ => RetryCause::Transient,
        }
    }
}

/// The budget name that means no budget at all: `budget = "none"` in the
/// attribute and in an `[operations]` table, `.budget(NO_BUDGET)` on the
/// builder. Every other operation has a retry budget: the one it names, or
/// else its own (the registry's budget named after the operation, with
/// [`BudgetConfig::default`]'s settings unless one of that name is
/// declared), so that a plain `#[resilient]` cannot turn an outage into a
/// retry storm. A budget cannot be declared under this name.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{Registry, budget::{NO_BUDGET, RatioBudget}};
/// let error = Registry::new().declare_budget(NO_BUDGET, RatioBudget::default()).unwrap_err();
/// assert!(error.to_string().contains("reserved"), "{error}");
/// ```
pub const NO_BUDGET: &str = "none";

use crate::config::ConfigError;
use crate::counter::PerThreadCounter;

/// The state of one form.
// The ratio form's counter holds a slot per thread, each on a cache line of
// its own (about 4 KiB): there is one budget per dependency, and a box would
// cost the success path a pointer hop.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Form {
    Ratio {
        /// First attempts so far: one increment on the success path, no clock.
        first_attempts: PerThreadCounter,
        /// Settings and window under one lock: a retry takes it once.
        state: Mutex<RatioState>,
    },
    Bucket(bucket::Bucket),
    Throttling(throttling::Throttling),
}

/// What the ratio form's retries read and change together.
#[derive(Debug)]
struct RatioState {
    config: RatioBudget,
    window: RatioWindow,
}

/// A retry budget shared by every call to one dependency; see the module docs.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{budget::{RetryBudget, TokenBucket}};
/// let budget = RetryBudget::new("db", TokenBucket { capacity: 2, ..Default::default() }).unwrap();
/// assert!(budget.try_withdraw());
/// assert!(budget.try_withdraw());
/// assert!(!budget.try_withdraw(), "empty: retries stop");
/// budget.deposit();
/// assert_eq!(budget.available(), 1);
/// ```
#[derive(Debug)]
pub struct RetryBudget {
    name: String,
    form: Form,
    origin: Instant,
    lease: lease::Lease,
    /// Retries it allowed (withdrawals that succeeded), off the success path.
    retries: std::sync::atomic::AtomicU64,
}

/// A budget's totals since it was made: first attempts counted (by the
/// ratio form only: the token bucket does not count them) and retries
/// allowed. Read twice and subtract for rates.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{budget::{RatioBudget, RetryBudget}};
/// let budget = RetryBudget::new("db", RatioBudget::default()).unwrap();
/// budget.on_first_attempt();
/// assert!(budget.try_withdraw());
/// let totals = budget.totals();
/// assert_eq!((totals.first_attempts, totals.retries), (1, 1));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BudgetTotals {
    /// First attempts counted (the ratio form; 0 for a token bucket).
    pub first_attempts: u64,
    /// Retries allowed.
    pub retries: u64,
}

impl RetryBudget {
    /// A budget with nothing spent, or an error naming the invalid setting.
    pub fn new(name: impl Into<String>, config: impl Into<BudgetConfig>) -> Result<Self, ConfigError> {
        let budget = Self::unmeasured(name, config)?;
        budget.measure_level();
        Ok(budget)
    }

    /// [`new`](Self::new), its level gauge left as it is: a registry makes
    /// budgets it may set aside, and sets the gauge of those it keeps
    /// (`registry::table::Kept`).
    pub(crate) fn unmeasured(
        name: impl Into<String>,
        config: impl Into<BudgetConfig>,
    ) -> Result<Self, ConfigError> {
        let config = config.into();
        config.validate()?;
        let form = match config {
            BudgetConfig::Ratio(config) => Form::Ratio {
                first_attempts: PerThreadCounter::default(),
                state: Mutex::new(RatioState { config, window: RatioWindow::new(Duration::ZERO, 0) }),
            },
            BudgetConfig::TokenBucket(config) => Form::Bucket(bucket::Bucket::new(config)),
            BudgetConfig::RetryThrottling(config) => Form::Throttling(throttling::Throttling::new(config)),
        };
        let budget = RetryBudget {
            name: name.into(),
            form,
            origin: Instant::now(),
            lease: lease::Lease::default(),
            retries: std::sync::atomic::AtomicU64::new(0),
        };
        Ok(budget)
    }

    /// Sets the level gauge to what it allows now.
    pub(crate) fn measure_level(&self) {
        crate::observe::budget_level(&self.name, || self.available());
    }

    /// The name this budget was declared under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings it runs on.
    pub fn config(&self) -> BudgetConfig {
        match &self.form {
            Form::Ratio { state, .. } => BudgetConfig::Ratio(lock(state).config),
            Form::Bucket(bucket) => BudgetConfig::TokenBucket(bucket.config()),
            Form::Throttling(throttling) => BudgetConfig::RetryThrottling(throttling.config()),
        }
    }

    /// Totals since it was made (see [`BudgetTotals`]).
    pub fn totals(&self) -> BudgetTotals {
        let first_attempts = match &self.form {
            Form::Ratio { first_attempts, .. } => first_attempts.total(),
            Form::Bucket(_) | Form::Throttling(_) => 0,
        };
        BudgetTotals { first_attempts, retries: self.retries.load(std::sync::atomic::Ordering::Relaxed) }
    }

    /// Holds a lease of retry tokens from a fleet (see the `fleet` module,
    /// feature `redis`), adding `tokens` to what it holds: from now on a
    /// retry needs one of them as well as this budget's own leave, so that
    /// every process's retries together stay within the fleet's share.
    /// [`end_lease`](Self::end_lease) makes the budget local again.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::{budget::{RatioBudget, RetryBudget}};
    /// let budget = RetryBudget::new("db", RatioBudget::default()).unwrap();
    /// budget.lease(1);
    /// assert!(budget.try_withdraw());
    /// assert!(!budget.try_withdraw(), "the lease is spent, though the local budget has more");
    /// assert_eq!(budget.leased(), Some(0));
    /// budget.end_lease();
    /// assert!(budget.try_withdraw(), "local again");
    /// ```
    pub fn lease(&self, tokens: u32) {
        self.lease.grant(tokens);
        crate::observe::budget_level(&self.name, || self.available());
    }

    /// Ends the lease: retries need only this budget's leave again. Returns
    /// the leased tokens that were left: no retry can take them any more
    /// (one taken and then given back goes back to the lease it came from,
    /// or nowhere), so they may be handed back to whoever leased them.
    pub fn end_lease(&self) -> u32 {
        let left = self.lease.end();
        crate::observe::budget_level(&self.name, || self.available());
        left
    }

    /// The leased tokens left, while a lease is held.
    pub fn leased(&self) -> Option<u32> {
        self.lease.tokens()
    }

    /// Retries it would allow now: the tokens left, or the retries left in
    /// the window (floored); no more than the leased tokens while a lease
    /// is held.
    pub fn available(&self) -> u32 {
        let local = self.local_available();
        self.lease.tokens().map_or(local, |leased| local.min(leased))
    }

    /// Whether [`try_withdraw`](Self::try_withdraw) would take a retry now,
    /// taking nothing: a bucket needs what a retry costs, which may be more
    /// than one token ([`available`](Self::available) counts tokens). For a
    /// caller that must spend something it cannot give back (a rate-limit
    /// turn) before it withdraws.
    pub(crate) fn affords_retry(&self) -> bool {
        if self.lease.tokens() == Some(0) {
            return false;
        }
        match &self.form {
            Form::Bucket(bucket) => bucket.affords_retry(),
            Form::Throttling(throttling) => throttling.allows_retry(),
            Form::Ratio { .. } => self.local_available() > 0,
        }
    }

    fn local_available(&self) -> u32 {
        match &self.form {
            Form::Ratio { first_attempts, state } => {
                let RatioState { config, window } = &mut *lock(state);
                let left = window.available(config, self.now(), first_attempts.total());
                u32::try_from(left).unwrap_or(u32::MAX)
            }
            Form::Bucket(bucket) => bucket.available(),
            // Whole tokens; retries are allowed above half of the maximum.
            Form::Throttling(throttling) => throttling.tokens(),
        }
    }

    /// A call's first attempt is about to run: the ratio form counts it
    /// (one plain increment of a per-thread slot); the bucket ignores it.
    #[inline]
    pub fn on_first_attempt(&self) {
        if let Form::Ratio { first_attempts, .. } = &self.form {
            first_attempts.increment();
        }
    }

    /// An attempt succeeded: the bucket puts `refill_per_success` tokens
    /// back, retry throttling `token_ratio` (a full bucket or count is only
    /// read, never written, so successes from many threads do not fight
    /// over the cache line); the ratio form ignores it.
    #[inline]
    pub fn deposit(&self) {
        match &self.form {
            Form::Bucket(bucket) if bucket.has_room() => self.refill(bucket),
            Form::Throttling(throttling) if throttling.has_room() => self.regain(throttling),
            _ => {}
        }
    }

    /// A retry that took `taken` succeeded (and its success was recorded):
    /// a bucket that refunds gets what the retry took back, in place of
    /// the success's refill (what it took, less the refill the success
    /// put in); any other budget, nothing more.
    #[cold]
    pub(crate) fn retry_succeeded(&self, taken: Withdrawal) {
        if let (Form::Bucket(bucket), Some(cost)) = (&self.form, taken.refundable()) {
            bucket.refund(cost);
            crate::observe::budget_level(&self.name, || bucket.available());
        }
    }

    #[inline(never)]
    fn regain(&self, throttling: &throttling::Throttling) {
        throttling.record_success();
        crate::observe::budget_level(&self.name, || throttling.tokens());
    }

    /// An attempt failed with a retryable error (transient or throttled):
    /// retry throttling takes a token (what gRPC counts as a failure); the
    /// other forms pay only for the retries themselves.
    pub fn record_failure(&self) {
        if let Form::Throttling(throttling) = &self.form {
            throttling.record_failure();
            crate::observe::budget_level(&self.name, || throttling.tokens());
        }
    }

    #[inline(never)]
    fn refill(&self, bucket: &bucket::Bucket) {
        if bucket.refill() {
            // The level this deposit left, as `try_withdraw` reports its own.
            crate::observe::budget_level(&self.name, || bucket.available());
        }
    }

    /// Runs on `config` from now on, keeping what it holds: a bucket's
    /// tokens (clamped to a smaller capacity), a ratio budget's window. An
    /// invalid `config`, or one of the other form (whose state could not be
    /// carried over), is an error naming the field, and changes nothing.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::{budget::{RetryBudget, TokenBucket}};
    /// let budget = RetryBudget::new("db", TokenBucket { capacity: 10, ..Default::default() }).unwrap();
    /// budget.try_withdraw();
    /// budget.reconfigure(TokenBucket { capacity: 20, ..Default::default() }).unwrap();
    /// assert_eq!(budget.available(), 9, "tokens kept");
    /// budget.reconfigure(TokenBucket { capacity: 5, ..Default::default() }).unwrap();
    /// assert_eq!(budget.available(), 5, "clamped to the new capacity");
    /// ```
    pub fn reconfigure(&self, config: impl Into<BudgetConfig>) -> Result<(), ConfigError> {
        let config = config.into();
        config.validate()?;
        match (&self.form, config) {
            (Form::Ratio { state, .. }, BudgetConfig::Ratio(new)) => lock(state).config = new,
            (Form::Bucket(bucket), BudgetConfig::TokenBucket(new)) => bucket.reconfigure(new),
            (Form::Throttling(throttling), BudgetConfig::RetryThrottling(new)) => throttling.reconfigure(new),
            (_, other) => {
                return Err(ConfigError::new(
                    "form",
                    format!(
                        "a {} budget cannot become a {} budget while it runs: its state would be lost (restart to change it)",
                        self.config().form(),
                        other.form()
                    ),
                ));
            }
        }
        crate::observe::budget_level(&self.name, || self.available());
        Ok(())
    }

    fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.origin)
    }
}

/// The budget's locks guard plain data and never run user code: a poisoned
/// one still holds a consistent value.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successes_refill_up_to_capacity() {
        let b = RetryBudget::new(
            "x",
            TokenBucket { capacity: 10, retry_cost: 4, refill_per_success: 3, ..Default::default() },
        )
        .unwrap();
        assert!(b.try_withdraw());
        assert!(b.try_withdraw());
        assert_eq!(b.available(), 2);
        assert!(!b.try_withdraw());
        assert_eq!(b.available(), 2, "a refused withdrawal takes nothing");
        b.deposit();
        b.deposit();
        assert_eq!(b.available(), 8);
        b.deposit();
        assert_eq!(b.available(), 10, "capped at capacity");
    }

    #[test]
    fn invalid_budgets_name_their_field() {
        let zero = TokenBucket { capacity: 0, ..Default::default() };
        assert_eq!(RetryBudget::new("x", zero).unwrap_err().field, "capacity");
        let dear = TokenBucket { capacity: 3, retry_cost: 4, refill_per_success: 1, ..Default::default() };
        assert_eq!(RetryBudget::new("x", dear).unwrap_err().field, "retry_cost");
        let ratio = RatioBudget { ratio: -1.0, ..Default::default() };
        assert_eq!(RetryBudget::new("x", ratio).unwrap_err().field, "ratio");
    }

    #[tokio::test(start_paused = true)]
    async fn the_ratio_form_allows_its_share_of_first_attempts() {
        let b = RetryBudget::new(
            "x",
            RatioBudget { ratio: 0.5, window: Duration::from_secs(10), min_per_sec: 0 },
        )
        .unwrap();
        for _ in 0..10 {
            b.on_first_attempt();
        }
        assert_eq!(b.available(), 5);
        assert_eq!((0..10).take_while(|_| b.try_withdraw()).count(), 5);
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(
            b.available(),
            4,
            "the retries are forgotten; the first attempts' share is estimated (10 over 11 s)"
        );
    }

    #[test]
    fn a_budget_keeps_its_form_on_reconfigure() {
        let b = RetryBudget::new("x", RatioBudget::default()).unwrap();
        let err = b.reconfigure(TokenBucket::default()).unwrap_err();
        assert_eq!(err.field, "form");
        assert!(err.problem.contains("a ratio budget cannot become a token_bucket budget"), "{err}");
        b.reconfigure(RatioBudget { ratio: 0.3, ..Default::default() }).unwrap();
        assert_eq!(b.config(), BudgetConfig::Ratio(RatioBudget { ratio: 0.3, ..Default::default() }));
    }

    #[test]
    fn a_leased_retry_needs_both_a_token_and_the_local_leave() {
        let b = RetryBudget::new("x", TokenBucket { capacity: 2, ..Default::default() }).unwrap();
        b.lease(5);
        assert_eq!(b.available(), 2, "the smaller of the two");
        assert!(b.try_withdraw() && b.try_withdraw());
        assert!(!b.try_withdraw(), "the bucket is empty");
        assert_eq!(b.leased(), Some(3), "a token taken for a refused retry is given back");
        assert_eq!((b.end_lease(), b.leased()), (3, None));
        assert_eq!(b.totals().retries, 2);
    }
}
