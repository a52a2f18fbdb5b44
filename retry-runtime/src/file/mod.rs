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

pub use problems::{ConfigFileError, Problem};
pub use report::{Change, Refusal, ReloadReport};

pub(crate) use problems::{Problems, Span};

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
