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
//! window_ms = 500
//! max_refusal_percent = 80
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
//! `fleet` (the facade's `redis`), a `[fleet]` table and `fleet = true` on breakers and budgets
//! share them with a fleet (read in `parse/fleet.rs`, checked in
//! `check/fleet.rs`, joined with `FleetConfig::from_file` and
//! `Fleet::join` of the fleet crate).
//!
//! The file is read with the `toml` crate's spanned document API rather than
//! `serde` derive: every key and value keeps its position, so each error
//! says where it is (`stormproof.toml:7:1`) and an unknown key gets the
//! closest known one suggested, which `deny_unknown_fields` cannot do.
//!
//! # Steps
//!
//! A file's text goes one way, a module for each step, each using only
//! the steps before it:
//!
//! 1. `read`: the file from disk, only a regular file of at most 1 MiB in
//!    UTF-8 (a path is an operator's, and a mistake in it must not hang or
//!    fill the service).
//! 2. `parse`: the TOML text into typed tables that keep where each name,
//!    key and value is, each table judged on its own.
//! 3. `check`: the tables against each other, the registry's current
//!    guards and the compiled functions; every problem of the file,
//!    parse's with these, found in one pass and reported together.
//!    Nothing is changed.
//! 4. `apply`: the changes, all or nothing, keeping every guard's state,
//!    and what changed reported.
//!
//! `problems` (a file's problems, placed by line and column) sits below
//! them all, and this module strings them together
//! (`Registry::load_toml` and the rest). They are apart so that each
//! answers one question: what the file says (parse), whether it can be
//! applied here and now (check), and the change itself (apply), which
//! then never meets a problem a check could have found, and a check
//! never changes anything it would have to undo.

mod apply;
mod check;
mod parse;
mod problems;
mod read;

pub use apply::{Change, Refusal, ReloadReport};
pub use problems::{ConfigFileError, Problem};

use std::fmt;
use std::path::Path;

#[cfg(feature = "fleet")]
use crate::fleet::FleetConfig;
use crate::registry::Registry;
pub(crate) use problems::{Problems, Span};

/// Whether a file declares guards (a first load) or changes them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Load,
    Reload,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Load => "load",
            Mode::Reload => "reload",
        })
    }
}

impl Registry {
    /// Declares every guard and operation override of a TOML text (see the
    /// schema in the crate docs), beside those already in force (a second
    /// file adds to the first). A guard already declared, or an operation
    /// that already has an override, is an error: use
    /// [`reload_toml`](Self::reload_toml) to change it. A guard that a call
    /// created with the defaults (it named one never declared) takes the
    /// file's settings and its state is kept, as on a reload. Nothing is applied
    /// from a text with any error; every error says where it is.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::Registry;
    /// let registry = Registry::new();
    /// registry.load_toml("[breakers.payment]\nfailure_threshold = 8\nopen_for_ms = 5_000").unwrap();
    /// assert_eq!(registry.breaker("payment").unwrap().config().failure_threshold, 8);
    ///
    /// let err = Registry::new().load_toml("[breakers.payment]\nfailure_threshold = 0").unwrap_err();
    /// assert_eq!(err.to_string(), "<toml>:2:21: `failure_threshold` must be greater than zero");
    /// ```
    pub fn load_toml(&self, text: &str) -> Result<(), ConfigFileError> {
        self.configure(text, "<toml>", Mode::Load).map(drop)
    }

    /// [`load_toml`](Self::load_toml) from a file.
    ///
    /// Only a regular file is read (links are followed), of at most 1 MiB,
    /// in UTF-8: a FIFO, a device, a directory, a larger file or bytes that
    /// are not UTF-8 are an error naming the path and what it found (the
    /// line and column of a bad byte), and nothing is applied. A FIFO with
    /// no writer is refused at once rather than waited on.
    pub fn load_file(&self, path: impl AsRef<Path>) -> Result<(), ConfigFileError> {
        let (text, name) = read::read(path.as_ref())?;
        self.configure(&text, &name, Mode::Load).map(drop)
    }

    /// Applies a changed TOML text, all or nothing, keeping every guard's
    /// state: an open breaker stays open (its remaining time recomputed from
    /// the new `open_for_ms`), its failure history is kept and judged by the
    /// new threshold at the next event, budget tokens are kept (clamped to
    /// a smaller capacity), a bulkhead is resized without touching permits
    /// in use. Guards the text does not mention keep their settings; new
    /// ones are declared. Operation overrides become the text's: one it no
    /// longer has is removed, and the function runs on its compiled
    /// settings again from its next call. Returns what changed.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::Registry;
    /// let registry = Registry::new();
    /// registry.load_toml("[budgets.db]\ncapacity = 50").unwrap();
    /// let report = registry.reload_toml("[budgets.db]\ncapacity = 20").unwrap();
    /// assert_eq!(report.to_string(), "budget `db`: capacity 50 -> 20");
    /// ```
    pub fn reload_toml(&self, text: &str) -> Result<ReloadReport, ConfigFileError> {
        self.configure(text, "<toml>", Mode::Reload)
    }

    /// [`reload_toml`](Self::reload_toml) from a file, read as
    /// [`load_file`](Self::load_file) reads it: a path refused there leaves
    /// the running configuration as it was.
    pub fn reload_file(&self, path: impl AsRef<Path>) -> Result<ReloadReport, ConfigFileError> {
        let (text, name) = read::read(path.as_ref())?;
        self.configure(&text, &name, Mode::Reload)
    }

    /// A file's text, named `name` in its errors, through the steps:
    /// parsed, then checked and applied under `applying()`, one file at a
    /// time, so that the checks and the changes after them see the same
    /// registry.
    fn configure(&self, text: &str, name: &str, mode: Mode) -> Result<ReloadReport, ConfigFileError> {
        let parsed = parse::parse(text, name)?;
        let _applying = self.applying();
        let checked = check::check(self, parsed, mode)?;
        apply::apply(self, checked, mode, Problems::new(text, name))
    }
}

#[cfg(feature = "fleet")]
impl FleetConfig {
    /// The fleet a configuration text declares (its `[fleet]` table and
    /// the guards with `fleet = true`), or `None` when it has no
    /// `[fleet]` table. The whole text is checked, as
    /// [`Registry::load_toml`](crate::Registry::load_toml) checks it.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use std::time::Duration;
    /// use stormproof::fleet::FleetConfig;
    /// let text = "[fleet]\nurl = \"redis://10.0.0.5:6379/\"\nsync_every_ms = 200\n\n[breakers.payment]\nfleet = true\n";
    /// let config = FleetConfig::from_toml(text).unwrap().unwrap();
    /// assert_eq!((config.sync_every, config.breakers), (Duration::from_millis(200), vec!["payment".to_owned()]));
    /// assert_eq!(FleetConfig::from_toml("[breakers.payment]").unwrap(), None);
    /// ```
    pub fn from_toml(text: &str) -> Result<Option<FleetConfig>, ConfigFileError> {
        check::declared_fleet(parse::parse(text, "<toml>")?)
    }

    /// [`from_toml`](Self::from_toml) from a file, read as
    /// [`Registry::load_file`](crate::Registry::load_file) reads it (a regular file of at most 1 MiB, in UTF-8).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Option<FleetConfig>, ConfigFileError> {
        let (text, name) = read::read(path.as_ref())?;
        check::declared_fleet(parse::parse(&text, &name)?)
    }
}

/// Runs `body` while a fleet shares the breaker `dep` of `registry`, then
/// leaves the fleet: for the tests of a file's settings that break the
/// fleet's rule. The registry's membership and the breaker's sharing are
/// what a fleet's join takes (no store is needed for them).
#[cfg(all(test, feature = "fleet"))]
fn while_a_fleet_shares_dep(registry: &crate::Registry, body: impl AsyncFnOnce()) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let config = FleetConfig {
            url: "redis://127.0.0.1:1/".into(),
            breakers: vec!["dep".into()],
            ..Default::default()
        };
        let claim = registry.claim_fleet().expect("in no fleet");
        let breaker = registry.breaker("dep").expect("declared");
        breaker.share().expect("within the fleet's rule");
        let membership = claim.join(config, std::sync::Arc::default());
        body().await;
        breaker.unshare();
        drop(membership);
    });
}
