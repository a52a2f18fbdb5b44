//! The peers of the storm benchmark (tower, tower-resilience, seatbelt),
//! each behind one shape: one adapter per run (it owns the shared retry
//! state, the budget), shared by every call of the run, `call(attempt)` once
//! per call. Every adapter: at most 4 attempts in all, exponential backoff
//! from 100 ms, capped at 2 s, with jitter, every `Err` retried. Each
//! library's budget as its documentation sets it up:
//!
//! - tower's `TpsBudget` with its defaults (10 s, 10 retries a second, 20 %
//!   of calls), one deposit per call (its docs: a percent of requests);
//! - tower-resilience's token bucket with its builder's defaults (10 tokens
//!   a second, at most 100; a retry takes one, a success gives one back);
//! - seatbelt has no retry budget: only its 3 retries.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// An attempt: one HTTP request, already wrapped in a 200 ms timeout by the caller;
/// `Err` means failed (retryable).
pub type AttemptFuture = Pin<Box<dyn Future<Output = Result<(), AttemptError>> + Send>>;

/// The request every library is given: a cheaply clonable handle to the attempt closure
/// (all three libraries clone the request for each retry). A newtype, not a type alias: with
/// `Arc<dyn Fn..>` directly as the request type, rustc cannot prove the retry futures `Send`
/// ("implementation of `Service`/`FnOnce` is not general enough" - erased `dyn` lifetimes).
#[derive(Clone)]
pub struct Attempt(Arc<dyn Fn() -> AttemptFuture + Send + Sync>);

impl Attempt {
    pub fn new(f: impl Fn() -> AttemptFuture + Send + Sync + 'static) -> Self {
        Attempt(Arc::new(f))
    }

    fn run(&self) -> AttemptFuture {
        (self.0)()
    }
}

impl std::fmt::Debug for Attempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Attempt")
    }
}

#[derive(Debug, Clone)]
pub struct AttemptError;

impl std::fmt::Display for AttemptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("attempt failed")
    }
}

impl std::error::Error for AttemptError {}

/// Attempts in all and the first wait: the benchmark's, as every strategy's.
const MAX_ATTEMPTS: usize = super::strategies::MAX_ATTEMPTS as usize;
const BASE_DELAY: Duration = super::strategies::BASE;
/// Cap on a single backoff delay.
const MAX_DELAY: Duration = Duration::from_secs(2);

/// The inner "service" for all three libraries: run the attempt once.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunAttempt;

impl tower::Service<Attempt> for RunAttempt {
    type Response = ();
    type Error = AttemptError;
    type Future = AttemptFuture;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), AttemptError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, attempt: Attempt) -> AttemptFuture {
        attempt.run()
    }
}

impl layered::Service<Attempt> for RunAttempt {
    type Out = Result<(), AttemptError>;

    fn execute(&self, attempt: Attempt) -> impl Future<Output = Self::Out> + Send {
        attempt.run()
    }
}

// ---------------------------------------------------------------------------------------------
// 1. tower 0.5: tower::retry::Retry + custom Policy + ExponentialBackoff + TpsBudget
// ---------------------------------------------------------------------------------------------

pub mod tower_peer {
    use super::*;
    use tower::ServiceExt;
    use tower::retry::Policy;
    use tower::retry::backoff::{Backoff, ExponentialBackoff, ExponentialBackoffMaker, MakeBackoff};
    use tower::retry::budget::{Budget, TpsBudget};
    use tower::util::rng::{HasherRng, Rng};

    /// tower's jitter: delay = base·2^n + U[0,1)·JITTER·base (additive, capped at MAX_DELAY).
    /// 1.0 → first retry in [100, 200) ms.
    pub const JITTER: f64 = 1.0;
    /// TpsBudget parameters (these are exactly `TpsBudget::default()`).
    pub const BUDGET_TTL: Duration = Duration::from_secs(10);
    pub const BUDGET_MIN_PER_SEC: u32 = 10;
    pub const BUDGET_RETRY_PERCENT: f32 = 0.2;

    /// `HasherRng` whose `Clone` yields a *fresh* rng. `ExponentialBackoffMaker::make_backoff`
    /// clones its rng, and `HasherRng` clones are identical (same keys, counter 0), so with a
    /// plain `HasherRng` every call would get the very same jitter sequence.
    #[derive(Debug)]
    pub struct FreshRng(HasherRng);
    impl Clone for FreshRng {
        fn clone(&self) -> Self {
            FreshRng(HasherRng::default()) // new RandomState keys each time
        }
    }
    impl Rng for FreshRng {
        fn next_u64(&mut self) -> u64 {
            self.0.next_u64()
        }
    }

    /// Policy; tower clones it per request session, so `attempts`/`backoff` are per call and
    /// `budget` (Arc) is shared by all calls of the run.
    #[derive(Clone, Debug)]
    pub struct TowerPolicy {
        budget: Arc<TpsBudget>,
        maker: ExponentialBackoffMaker<FreshRng>,
        backoff: Option<ExponentialBackoff<FreshRng>>,
        attempts: usize,
    }

    impl Policy<Attempt, (), AttemptError> for TowerPolicy {
        type Future = tokio::time::Sleep;

        fn retry(
            &mut self,
            _req: &mut Attempt,
            result: &mut Result<(), AttemptError>,
        ) -> Option<Self::Future> {
            self.attempts += 1;
            if self.attempts == 1 {
                // One deposit per logical call ("retry_percent of requests may be retried").
                self.budget.deposit();
            }
            match result {
                Ok(()) => None,
                Err(_) => {
                    if self.attempts >= MAX_ATTEMPTS || !self.budget.withdraw() {
                        return None;
                    }
                    let maker = &mut self.maker;
                    let backoff = self.backoff.get_or_insert_with(|| maker.make_backoff());
                    Some(backoff.next_backoff())
                }
            }
        }

        fn clone_request(&mut self, req: &Attempt) -> Option<Attempt> {
            Some(req.clone())
        }
    }

    type Svc = tower::retry::Retry<TowerPolicy, RunAttempt>;

    /// Create once per run; `Clone` is cheap (Arc budget), or wrap in `Arc`.
    #[derive(Clone, Debug)]
    pub struct TowerRetry {
        svc: Svc,
    }

    impl TowerRetry {
        pub fn new() -> Self {
            let budget = Arc::new(TpsBudget::new(BUDGET_TTL, BUDGET_MIN_PER_SEC, BUDGET_RETRY_PERCENT));
            let maker =
                ExponentialBackoffMaker::new(BASE_DELAY, MAX_DELAY, JITTER, FreshRng(HasherRng::default()))
                    .expect("valid backoff");
            let policy = TowerPolicy { budget, maker, backoff: None, attempts: 0 };
            let svc = tower::retry::Retry::new(policy, RunAttempt);
            Self { svc }
        }

        pub async fn call(&self, attempt: Attempt) -> Result<(), AttemptError> {
            self.svc.clone().oneshot(attempt).await
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 2. tower-resilience 0.13: RetryLayer + ExponentialRandomBackoff + TokenBucketBudget
// ---------------------------------------------------------------------------------------------

pub mod tower_resilience_peer {
    use super::*;
    use tower::{Layer, ServiceExt};
    use tower_resilience::retry::{ExponentialRandomBackoff, RetryBudgetBuilder, RetryLayer};

    /// delay = U[b·(1-f), b·(1+f)] with b = base·2^n capped at MAX_DELAY; 0.5 → first retry 50..150 ms.
    pub const RANDOMIZATION_FACTOR: f64 = 0.5;
    /// Token-bucket budget (these are the builder's defaults): refills 10 tokens/s, holds at most
    /// 100, starts full; each retry takes 1 token, each successful call puts 1 back.
    pub const BUDGET_TOKENS_PER_SEC: f64 = 10.0;
    pub const BUDGET_MAX_TOKENS: usize = 100;

    type Svc = tower_resilience::retry::Retry<RunAttempt, Attempt, (), AttemptError>;

    /// Create once per run; `Clone` is cheap (config + budget live in an `Arc`).
    #[derive(Clone)]
    pub struct TowerResilienceRetry {
        svc: Svc,
    }

    impl TowerResilienceRetry {
        pub fn new() -> Self {
            let budget = RetryBudgetBuilder::new()
                .token_bucket()
                .tokens_per_second(BUDGET_TOKENS_PER_SEC)
                .max_tokens(BUDGET_MAX_TOKENS)
                .build()
                .expect("valid budget");
            let backoff = ExponentialRandomBackoff::new(BASE_DELAY, RANDOMIZATION_FACTOR)
                .expect("valid backoff")
                .max_interval(MAX_DELAY);
            let layer = RetryLayer::<Attempt, (), AttemptError>::builder()
                .name("tower_resilience_retry")
                .max_attempts(MAX_ATTEMPTS) // includes the first attempt
                .backoff(backoff)
                .retry_on(|_: &AttemptError| true) // (also the default)
                .budget(budget)
                .build();
            let svc = layer.layer(RunAttempt);
            Self { svc }
        }

        pub async fn call(&self, attempt: Attempt) -> Result<(), AttemptError> {
            self.svc.clone().oneshot(attempt).await
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 3. seatbelt 0.11: Retry layer (Polly-style), exponential + decorrelated jitter, no budget
// ---------------------------------------------------------------------------------------------

pub mod seatbelt_peer {
    use super::*;
    use layered::{Service, Stack};
    use seatbelt::retry::{Backoff, Retry};
    use seatbelt::{RecoveryInfo, ResilienceContext};
    use tick::Clock;

    type Out = Result<(), AttemptError>;
    type Svc = Retry<Attempt, Out, RunAttempt>;

    /// Create once per run; share via `Arc` (the service is `Send + Sync`; `execute` takes `&self`).
    /// Seatbelt has no retry budget, so nothing else is shared besides the config and clock.
    pub struct SeatbeltRetry {
        svc: Svc,
    }

    impl SeatbeltRetry {
        /// Uses `tick::Clock::new_tokio()`: must be called inside a Tokio runtime (it spawns the
        /// clock's timer-driver task).
        pub fn new() -> Self {
            let context: ResilienceContext<Attempt, Out> =
                ResilienceContext::new(Clock::new_tokio()).name("peers");
            let svc = (
                Retry::layer("seatbelt_retry", &context)
                    .clone_input() // Arc clone per attempt
                    .recovery_with(|out: &Out, _| match out {
                        Ok(()) => RecoveryInfo::never(),
                        Err(_) => RecoveryInfo::retry(),
                    })
                    .max_retry_attempts((MAX_ATTEMPTS - 1) as u32) // retries, not attempts
                    .backoff(Backoff::Exponential)
                    .base_delay(BASE_DELAY)
                    .max_delay(MAX_DELAY)
                    .use_jitter(true),
                RunAttempt,
            )
                .into_service();
            Self { svc }
        }

        pub async fn call(&self, attempt: Attempt) -> Result<(), AttemptError> {
            self.svc.execute(attempt).await
        }
    }
}

pub use seatbelt_peer::SeatbeltRetry;
pub use tower_peer::TowerRetry;
pub use tower_resilience_peer::TowerResilienceRetry;

use super::strategies::Strategy;

/// The peer a run calls through.
pub enum Peers {
    Tower(TowerRetry),
    TowerResilience(TowerResilienceRetry),
    Seatbelt(SeatbeltRetry),
}

impl Peers {
    /// The adapter of `strategy`, fresh (inside the run's runtime: seatbelt's
    /// clock starts a task).
    pub fn new(strategy: Strategy) -> Self {
        match strategy {
            Strategy::TowerRetry => Peers::Tower(TowerRetry::new()),
            Strategy::TowerResilience => Peers::TowerResilience(TowerResilienceRetry::new()),
            _ => Peers::Seatbelt(SeatbeltRetry::new()),
        }
    }

    /// One call through the peer: whether it succeeded.
    pub async fn call(&self, attempt: impl Fn() -> AttemptFuture + Send + Sync + 'static) -> bool {
        let attempt = Attempt::new(attempt);
        match self {
            Peers::Tower(peer) => peer.call(attempt).await.is_ok(),
            Peers::TowerResilience(peer) => peer.call(attempt).await.is_ok(),
            Peers::Seatbelt(peer) => peer.call(attempt).await.is_ok(),
        }
    }
}
