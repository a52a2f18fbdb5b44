//! The strategies the storm benchmark compares: each makes one call to the
//! dependency, with its retries, and says whether it succeeded. Every
//! attempt has the same 200 ms timeout, and every strategy that waits
//! between attempts starts from the same 100 ms, as the README's example.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use stormproof::breaker::BreakerConfig;
use stormproof::budget::RatioBudget;
use stormproof::bulkhead::{AdaptiveLimit, BulkheadConfig};
use stormproof::throttle::ThrottleConfig;
use stormproof::{Registry, resilient};

use super::peers;

/// The timeout of one attempt.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(200);
/// Attempts in all, for every strategy that retries.
pub const MAX_ATTEMPTS: u32 = 4;
/// The first wait of every strategy that backs off.
pub const BASE: Duration = Duration::from_millis(100);

type BoxError = Box<dyn StdError + Send + Sync>;

/// One way of calling the dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// One attempt.
    NoRetries,
    /// Four attempts, no wait: the seed's "before" code.
    Immediate,
    /// backon: exponential from 100 ms with jitter, four attempts.
    Backon,
    /// tower's `Retry` with its `TpsBudget`, exponential backoff.
    TowerRetry,
    /// tower-resilience's retry with its budget.
    TowerResilience,
    /// seatbelt's retry (Polly's design, Microsoft's crate).
    Seatbelt,
    /// `#[resilient(max_attempts = 4, base_ms = 100, attempt_timeout_ms = 200)]`: the defaults
    /// (the operation's own breaker and budget).
    OursDefaults,
    /// The same with the README's breaker and budget.
    OursGuarded,
    /// The same with an adaptive throttle and an adaptive concurrency limit
    /// (beside the operation's own breaker and budget).
    OursAdaptive,
}

impl Strategy {
    /// Every strategy, in the table's order.
    pub const ALL: [Strategy; 9] = [
        Strategy::NoRetries,
        Strategy::Immediate,
        Strategy::Backon,
        Strategy::TowerRetry,
        Strategy::TowerResilience,
        Strategy::Seatbelt,
        Strategy::OursDefaults,
        Strategy::OursGuarded,
        Strategy::OursAdaptive,
    ];

    /// Its name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::NoRetries => "no retries",
            Strategy::Immediate => "immediate retries",
            Strategy::Backon => "backon",
            Strategy::TowerRetry => "tower retry + budget",
            Strategy::TowerResilience => "tower-resilience retry + budget",
            Strategy::Seatbelt => "seatbelt retry",
            Strategy::OursDefaults => "stormproof defaults",
            Strategy::OursGuarded => "stormproof breaker + budget",
            Strategy::OursAdaptive => "stormproof adaptive",
        }
    }
}

/// What every call of one run shares: the client, the address, and each
/// strategy's own state (a registry, a budget).
pub struct Caller {
    strategy: Strategy,
    client: reqwest::Client,
    url: Arc<str>,
    registry: Registry,
    peers: Option<peers::Peers>,
}

impl Caller {
    /// A caller of `url` with `strategy`, its state fresh.
    pub fn new(strategy: Strategy, url: &str) -> Result<Arc<Self>, BoxError> {
        let registry = Registry::with_seed(45);
        match strategy {
            Strategy::OursGuarded => {
                // The README's recommended guards.
                registry
                    .declare_breaker("storm", BreakerConfig { failure_threshold: 8, ..Default::default() })?;
                registry.declare_budget("storm", RatioBudget { ratio: 0.1, ..Default::default() })?;
            }
            Strategy::OursAdaptive => {
                registry.declare_throttle("storm", ThrottleConfig::default())?;
                let limit = BulkheadConfig {
                    max_concurrent: 64,
                    adaptive: Some(AdaptiveLimit::aimd(4)),
                    ..Default::default()
                };
                registry.declare_bulkhead("storm", limit)?;
            }
            _ => {}
        }
        let client = reqwest::Client::builder().pool_max_idle_per_host(256).build()?;
        let url: Arc<str> = url.into();
        let peers = match strategy {
            Strategy::TowerRetry | Strategy::TowerResilience | Strategy::Seatbelt => {
                Some(peers::Peers::new(strategy))
            }
            _ => None,
        };
        Ok(Arc::new(Caller { strategy, client, url, registry, peers }))
    }

    /// One call, with the strategy's retries: whether it succeeded.
    pub async fn call(self: Arc<Self>) -> bool {
        let (client, url) = (&self.client, &*self.url);
        match self.strategy {
            Strategy::NoRetries => attempt(client, url).await.is_ok(),
            Strategy::Immediate => {
                for _ in 0..MAX_ATTEMPTS {
                    if attempt(client, url).await.is_ok() {
                        return true;
                    }
                }
                false
            }
            Strategy::Backon => {
                use backon::{ExponentialBuilder, Retryable};
                let backoff = ExponentialBuilder::default()
                    .with_min_delay(BASE)
                    .with_max_delay(Duration::from_secs(20))
                    .with_max_times(MAX_ATTEMPTS as usize - 1)
                    .with_jitter();
                (|| attempt(client, url)).retry(backoff).await.is_ok()
            }
            Strategy::TowerRetry | Strategy::TowerResilience | Strategy::Seatbelt => {
                let peers = self.peers.as_ref().expect("made with the caller");
                let (client, url) = (self.client.clone(), self.url.clone());
                peers.call(move || attempt_owned(client.clone(), url.clone())).await
            }
            Strategy::OursDefaults => self.registry.scope(ours_defaults(client, url)).await.is_ok(),
            Strategy::OursGuarded => self.registry.scope(ours_guarded(client, url)).await.is_ok(),
            Strategy::OursAdaptive => self.registry.scope(ours_adaptive(client, url)).await.is_ok(),
        }
    }
}

/// One attempt within the attempt timeout: a success status, else an error.
async fn attempt(client: &reqwest::Client, url: &str) -> Result<(), BoxError> {
    let response = client.get(url).timeout(ATTEMPT_TIMEOUT).send().await?;
    response.error_for_status()?;
    Ok(())
}

/// The same, owning what it uses (for the peers whose attempts are `'static`).
fn attempt_owned(client: reqwest::Client, url: Arc<str>) -> peers::AttemptFuture {
    Box::pin(async move { attempt(&client, &url).await.map_err(|_| peers::AttemptError) })
}

/// Our attempt: the attempt timeout is the attribute's; the status is read
/// with `stormproof::http::error_for_status`, which keeps `Retry-After`.
async fn our_attempt(client: &reqwest::Client, url: &str) -> Result<(), BoxError> {
    stormproof::http::error_for_status(client.get(url).send().await?)?;
    Ok(())
}

#[resilient(max_attempts = 4, base_ms = 100, attempt_timeout_ms = 200, name = "storm")]
async fn ours_defaults(client: &reqwest::Client, url: &str) -> Result<(), BoxError> {
    our_attempt(client, url).await
}

#[resilient(
    max_attempts = 4,
    base_ms = 100,
    attempt_timeout_ms = 200,
    name = "storm",
    breaker = "storm",
    budget = "storm"
)]
async fn ours_guarded(client: &reqwest::Client, url: &str) -> Result<(), BoxError> {
    our_attempt(client, url).await
}

#[resilient(
    max_attempts = 4,
    base_ms = 100,
    attempt_timeout_ms = 200,
    name = "storm",
    throttle = "storm",
    bulkhead = "storm"
)]
async fn ours_adaptive(client: &reqwest::Client, url: &str) -> Result<(), BoxError> {
    our_attempt(client, url).await
}
