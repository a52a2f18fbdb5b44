//! The configuration file: guards and per-operation settings in TOML
//! (feature `config`).
//!
//! ```toml
//! [breakers.payment]
//! failure_threshold = 8
//! open_for_ms = 5_000
//!
//! [budgets.payment]
//! capacity = 50
//!
//! [bulkheads.payment]
//! max_concurrent = 32
//! max_wait_ms = 100
//! adaptive = "aimd"          # or "gradient" (tolerance, smoothing)
//! min_concurrent = 4
//! backoff_ratio = 0.9
//!
//! [throttles.search]
//! k = 2.0
//! window_ms = 120_000
//!
//! [rate_limits.geo-api]
//! per_second = 50
//! burst = 5
//! max_wait_ms = 20
//!
//! [operations."shop::payments::charge"]   # an operation's name
//! max_attempts = 3
//! deadline_ms = 10_000
//! ```
//!
//! Durations are integer milliseconds, named as in the attribute. A guard's
//! table is its whole configuration: keys left out take the defaults. An
//! operation's table overrides only the keys it gives. With feature
//! `redis`, a `[fleet]` table and `fleet = true` on breakers and budgets
//! share them with a fleet (see `fleet.rs` here and
//! `FleetConfig::from_file`).
//!
//! The file is read with the `toml` crate's spanned document API rather than
//! `serde` derive: every key and value keeps its position, so each error
//! says where it is (`stormproof.toml:7:1`) and an unknown key gets the
//! closest known one suggested, which `deny_unknown_fields` cannot do.

mod apply;
mod declare;
mod fleet;
mod overrides;
mod parse;
mod problems;
mod read;
mod report;
mod tables;
mod values;

pub use problems::{ConfigFileError, Problem};
pub use report::{Change, Refusal, ReloadReport};

use std::fmt;
use std::time::Duration;

use crate::backoff::Jitter;
use crate::breaker::BreakerConfig;
use crate::budget::BudgetConfig;
use crate::bulkhead::BulkheadConfig;
use crate::rate_limit::RateLimitConfig;
use crate::throttle::ThrottleConfig;

pub(crate) use parse::parse;
pub(crate) use problems::{Problems, Span};

/// A validated file, with the positions later checks point at.
#[derive(Debug, Default)]
pub(crate) struct ConfigFile {
    pub(crate) breakers: Vec<Named<BreakerConfig>>,
    pub(crate) budgets: Vec<Named<BudgetConfig>>,
    pub(crate) bulkheads: Vec<Named<BulkheadConfig>>,
    pub(crate) throttles: Vec<Named<ThrottleConfig>>,
    pub(crate) rate_limits: Vec<Named<RateLimitConfig>>,
    pub(crate) operations: Vec<Named<OperationOverride>>,
    /// The `[fleet]` table, if any and valid (feature `redis`).
    pub(crate) fleet: Option<fleet::FleetTable>,
    /// Whether the file has a `[fleet]` table, valid or not.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fleet_given: bool,
}

/// A table of the file: its name, where the name is, and what it says.
#[derive(Debug)]
pub(crate) struct Named<T> {
    pub(crate) name: String,
    pub(crate) span: Span,
    pub(crate) value: T,
    /// `fleet = true | false` and where, on the kinds that have the key
    /// (always `None` without feature `redis`: the key is a problem there).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fleet: Option<(bool, Span)>,
    /// Where the value of each key the table gives is, for checks made
    /// once the registry is known.
    pub(crate) keys: Vec<(String, Span)>,
}

impl<T> Named<T> {
    /// Where `key`'s value is, or the table's name when the key is left out.
    pub(crate) fn at(&self, key: &str) -> (Span, &'static str) {
        match self.keys.iter().find(|(k, _)| k == key) {
            Some((_, span)) => (span.clone(), ""),
            None => (self.span.clone(), " (the default)"),
        }
    }

    /// Places a guard's refusal of the table's settings at the key that
    /// set the refused field (or at the table's name, for a default),
    /// after `whose`, which says whose settings they are.
    pub(crate) fn refused(
        &self,
        whose: impl fmt::Display,
        error: crate::ConfigError,
        problems: &mut Problems<'_>,
    ) {
        let key = values::key_of(error.field);
        let (span, note) = self.at(&key);
        problems.push(&span, Some(&key), format!("{whose}`{key}`{note} {}", error.problem));
    }
}

/// The keys an `[operations."..."]` table gives, each with where it is.
#[derive(Debug, Default, Clone)]
pub(crate) struct OperationOverride {
    pub(crate) max_attempts: Option<(u32, Span)>,
    pub(crate) base: Option<(Duration, Span)>,
    pub(crate) cap: Option<(Duration, Span)>,
    pub(crate) jitter: Option<(Jitter, Span)>,
    pub(crate) attempt_timeout: Option<(Duration, Span)>,
    pub(crate) deadline: Option<(Duration, Span)>,
}

/// Runs `body` while a fleet shares the breaker `dep` of `registry`, then
/// leaves the fleet: for the tests of a file's settings that break the
/// fleet's rule. Its store is a port nothing listens on: the fleet shares
/// the breaker from the join on, whatever the store answers.
#[cfg(all(test, feature = "redis"))]
fn while_a_fleet_shares_dep(registry: &crate::Registry, body: impl AsyncFnOnce()) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let config = crate::fleet::FleetConfig {
            url: "redis://127.0.0.1:1/".into(),
            breakers: vec!["dep".into()],
            ..Default::default()
        };
        let fleet = registry.join_fleet(config).unwrap();
        body().await;
        fleet.leave().await;
    });
}
