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
mod read;
mod report;
mod tables;
mod values;

pub use report::{Change, Refusal, ReloadReport};

use std::fmt;
use std::ops::Range;
use std::time::Duration;

use crate::backoff::Jitter;
use crate::breaker::BreakerConfig;
use crate::budget::BudgetConfig;
use crate::bulkhead::BulkheadConfig;
use crate::rate_limit::RateLimitConfig;
use crate::throttle::ThrottleConfig;

pub(crate) use parse::parse;

/// A configuration file that could not be used: every problem in it, with
/// where it is. Nothing was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFileError {
    /// The file's name (`<toml>` for a string).
    pub file: String,
    /// Each problem, in the order of the file.
    pub problems: Vec<Problem>,
}

/// One problem of a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line; 0 when the problem is the whole file's (it could not
    /// be read), which has no position.
    pub line: usize,
    /// 1-based column (in characters); 0 with `line`.
    pub column: usize,
    /// The key it is about, when there is one.
    pub field: Option<String>,
    /// What is wrong, in one sentence.
    pub message: String,
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self
            .problems
            .iter()
            .map(|p| match p.line {
                0 => format!("{}: {}", self.file, p.message),
                line => format!("{}:{}:{}: {}", self.file, line, p.column, p.message),
            })
            .collect();
        f.write_str(&lines.join("\n"))
    }
}

impl std::error::Error for ConfigFileError {}

/// Where in the text a key or value is.
pub(crate) type Span = Range<usize>;

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

/// Collects problems, each placed at a span of `text`.
pub(crate) struct Problems<'t> {
    text: &'t str,
    file: String,
    /// Each problem's byte offset, field and message: placed (line and
    /// column) only once they are sorted, in one pass over the text.
    found: Vec<(usize, Option<String>, String)>,
}

impl<'t> Problems<'t> {
    pub(crate) fn new(text: &'t str, file: &str) -> Self {
        Problems { text, file: file.to_owned(), found: Vec::new() }
    }

    /// A problem about `field` (if any) at `span`.
    pub(crate) fn push(&mut self, span: &Span, field: Option<&str>, message: impl Into<String>) {
        self.found.push((span.start, field.map(str::to_owned), message.into()));
    }

    pub(crate) fn len(&self) -> usize {
        self.found.len()
    }

    /// `Ok(value)` when nothing was found, else every problem in file order.
    pub(crate) fn finish<T>(mut self, value: T) -> Result<T, ConfigFileError> {
        if self.found.is_empty() {
            return Ok(value);
        }
        self.found.sort_by_key(|(at, _, _)| *at);
        // Placed from the start of the text each, the problems of a file
        // with many took time quadratic in its size (40,000 unknown keys,
        // 430 KB: 20 s); in file order, each from the one before.
        let mut cursor = Cursor::new(self.text);
        let problems = self
            .found
            .into_iter()
            .map(|(at, field, message)| {
                let (line, column) = cursor.advance_to(at);
                Problem { line, column, field, message }
            })
            .collect();
        Err(ConfigFileError { file: self.file, problems })
    }
}

/// The 1-based line and column (in characters) of increasing byte offsets
/// of a text, each counted on from the one before.
struct Cursor<'t> {
    text: &'t str,
    at: usize,
    line: usize,
    column: usize,
    /// How many bytes all the calls have read, for the test that they read
    /// the text once.
    #[cfg(test)]
    read: usize,
}

impl<'t> Cursor<'t> {
    fn new(text: &'t str) -> Self {
        Cursor {
            text,
            at: 0,
            line: 1,
            column: 1,
            #[cfg(test)]
            read: 0,
        }
    }

    /// The line and column of byte `at` (not before the last one asked).
    fn advance_to(&mut self, at: usize) -> (usize, usize) {
        let at = at.min(self.text.len());
        // A span from the parser always falls on a character boundary; clamp
        // to one anyway rather than panic on an odd span.
        let at = (self.at..=at).rev().find(|i| self.text.is_char_boundary(*i)).unwrap_or(self.at);
        let passed = &self.text[self.at..at];
        #[cfg(test)]
        {
            self.read += passed.len();
        }
        match passed.rfind('\n') {
            Some(last) => {
                self.line += passed.matches('\n').count();
                self.column = passed[last + 1..].chars().count() + 1;
            }
            None => self.column += passed.chars().count(),
        }
        self.at = at;
        (self.line, self.column)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let text = "a = 1\n[é]\nbé = 2";
        let mut cursor = Cursor::new(text);
        assert_eq!(cursor.advance_to(0), (1, 1));
        assert_eq!(cursor.advance_to(0), (1, 1), "twice the same offset");
        assert_eq!(cursor.advance_to(6), (2, 1));
        assert_eq!(cursor.advance_to(8), (2, 2), "inside é: at its start");
        assert_eq!(cursor.advance_to(9), (2, 3), "é is one character");
        assert_eq!(cursor.advance_to(text.find("= 2").unwrap()), (3, 4));
        assert_eq!(cursor.advance_to(10_000), (3, 7), "past the end: at the end");
    }

    /// The place of `at` in `text`, counted from its start.
    fn place(text: &str, at: usize) -> (usize, usize) {
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        (text[..at].matches('\n').count() + 1, text[line_start..at].chars().count() + 1)
    }

    /// Problems are placed in one pass over the text, whatever their number
    /// and the order they were found in: each counted from the start, a
    /// file of 40,000 unknown keys (430 KB) took 20 s to refuse.
    #[test]
    fn many_problems_are_placed_in_one_pass_over_the_text() {
        let many = 1_000;
        let lines: String = (0..many).map(|i| format!("k{i} = 1\n")).collect();
        let inline: String = (0..many).map(|i| format!("k{i} = 1, ")).collect();
        for text in [lines, format!("x = {{ {inline} }}")] {
            let mut problems = Problems::new(&text, "<toml>");
            let at: Vec<usize> = text.match_indices('k').map(|(at, _)| at).collect();
            for &at in at.iter().rev() {
                problems.push(&(at..at + 1), Some("k"), "unknown");
            }
            let err = problems.finish(()).unwrap_err();
            let placed: Vec<_> = err.problems.iter().map(|p| (p.line, p.column)).collect();
            assert_eq!(placed, at.iter().map(|&at| place(&text, at)).collect::<Vec<_>>(), "in file order");
            let mut cursor = Cursor::new(&text);
            for &at in &at {
                cursor.advance_to(at);
            }
            assert!(cursor.read <= text.len(), "read {} bytes of {}", cursor.read, text.len());
        }
    }
}
