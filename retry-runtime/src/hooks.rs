//! What a caller hears of a call's retries: `on_retry`, once per retry,
//! and `on_stop`, once per call that gives up; never on success. Set with
//! [`PolicyBuilder::on_retry`](crate::PolicyBuilder::on_retry) and
//! [`on_stop`](crate::PolicyBuilder::on_stop), or the attribute's
//! `on_retry = path` and `on_stop = path` (a `fn(&RetryEvent)`, a
//! `fn(&StopEvent)`). As backon's `notify`, Polly's `OnRetry` and
//! resilience4j's event publisher give their users.
//!
//! A hook runs on the call's task, between the failed attempt and the
//! wait: keep it short (count, log, record). `on_retry` is told when a
//! retry is decided, before its wait, as backon's `notify` and Polly's
//! `OnRetry` are; a retry that a guard then refuses at its admission (the
//! breaker opened, the bulkhead stayed full) is not made: the call ends,
//! and `on_stop` says why, after as many attempts as were made. One that panics is caught: the
//! call goes on and ends as it would have, and the panic is reported as a
//! `stormproof::call` warning. Unset, a hook costs a call nothing: its
//! success path never reaches one.
//!
//! ```
//! # use stormproof_runtime as stormproof;
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use stormproof::{Policy, StopReason};
//!
//! let heard = Arc::new(Mutex::new(Vec::new()));
//! let (on_retry, on_stop) = (heard.clone(), heard.clone());
//! let policy = Policy::builder()
//!     .name("quote")
//!     .max_attempts(3)
//!     .base(Duration::from_millis(100))
//!     .jitter(stormproof::Jitter::None)
//!     .on_retry(move |retry| {
//!         on_retry.lock().unwrap().push(format!("retry after attempt {}, in {:?}: {}", retry.attempt(), retry.wait(), retry.error().unwrap()))
//!     })
//!     .on_stop(move |stop| on_stop.lock().unwrap().push(format!("{}: {} after {} attempts", stop.operation(), stop.reason(), stop.attempts())))
//!     .build()
//!     .unwrap();
//! let reset = || std::io::Error::from(std::io::ErrorKind::ConnectionReset);
//! let _ = policy.run(|| async { Err::<(), _>(reset()) }).await;
//! assert_eq!(*heard.lock().unwrap(), [
//!     "retry after attempt 1, in 100ms: connection reset",
//!     "retry after attempt 2, in 200ms: connection reset",
//!     "quote: attempts_exhausted after 3 attempts",
//! ]);
//! # }
//! ```

use std::error::Error as StdError;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use crate::classify::ErrorClass;
use crate::observe;
use crate::stop::StopReason;

/// A retry about to be made: what the `on_retry` hook hears.
#[derive(Clone, Copy)]
pub struct RetryEvent<'a> {
    pub(crate) operation: &'a str,
    pub(crate) attempt: u32,
    pub(crate) class: ErrorClass,
    pub(crate) wait: Duration,
    pub(crate) error: Option<&'a (dyn StdError + 'static)>,
}

impl<'a> RetryEvent<'a> {
    /// The operation's name (the function's path, the attribute's `name`,
    /// or the policy's).
    pub fn operation(&self) -> &'a str {
        self.operation
    }

    /// The attempt that just failed, from 1.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The class of its error.
    pub fn class(&self) -> ErrorClass {
        self.class
    }

    /// The wait before the next attempt.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// The attempt's error, where its type allows it: a
    /// `std::error::Error` the library knows (`anyhow::Error`, a boxed
    /// error, `io::Error`, `reqwest::Error`, `tonic::Status`, a
    /// `stormproof::Error<E>` of one), or one whose `Classify`
    /// implementation returns it from [`as_error`](crate::Classify::as_error).
    pub fn error(&self) -> Option<&'a (dyn StdError + 'static)> {
        self.error
    }
}

impl fmt::Debug for RetryEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryEvent")
            .field("operation", &self.operation)
            .field("attempt", &self.attempt)
            .field("class", &self.class)
            .field("wait", &self.wait)
            .field("error", &self.error.map(|error| error.to_string()))
            .finish()
    }
}

/// A call that gave up: what the `on_stop` hook hears.
#[derive(Debug, Clone, Copy)]
pub struct StopEvent<'a> {
    pub(crate) operation: &'a str,
    pub(crate) attempts: u32,
    pub(crate) reason: StopReason,
    pub(crate) elapsed: Duration,
}

impl<'a> StopEvent<'a> {
    /// The operation's name.
    pub fn operation(&self) -> &'a str {
        self.operation
    }

    /// The attempts the call made (0 when a guard refused the first).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Why it gave up.
    pub fn reason(&self) -> StopReason {
        self.reason
    }

    /// The time from the call's start to now, on tokio's clock. A call
    /// whose first attempt ran plain, without a deadline, starts when that
    /// attempt first waited (one that failed at its first poll, then): the
    /// synchronous part of its first poll is not counted.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }
}

/// The `on_retry` hook: a function the attribute names, or a closure the
/// builder was given.
#[derive(Clone)]
pub(crate) enum OnRetry {
    Fn(fn(&RetryEvent<'_>)),
    Shared(Arc<dyn Fn(&RetryEvent<'_>) + Send + Sync>),
}

/// The `on_stop` hook, as [`OnRetry`].
#[derive(Clone)]
pub(crate) enum OnStop {
    Fn(fn(&StopEvent<'_>)),
    Shared(Arc<dyn Fn(&StopEvent<'_>) + Send + Sync>),
}

/// A policy's hooks.
#[derive(Clone, Default)]
pub(crate) struct Hooks {
    pub(crate) on_retry: Option<OnRetry>,
    pub(crate) on_stop: Option<OnStop>,
}

impl Hooks {
    /// None set.
    pub(crate) const NONE: Hooks = Hooks { on_retry: None, on_stop: None };
}

/// Runs `hook`, catching a panic: the call's result is not lost to a hook.
pub(crate) fn call_hook(operation: &str, which: &'static str, hook: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(hook)).is_err() {
        observe::hook_panicked(operation, which);
    }
}

impl OnRetry {
    /// Tells the hook about `event`.
    #[cold]
    #[inline(never)]
    pub(crate) fn tell(&self, event: &RetryEvent<'_>) {
        call_hook(event.operation, "on_retry", || match self {
            OnRetry::Fn(hook) => hook(event),
            OnRetry::Shared(hook) => hook(event),
        });
    }
}

impl OnStop {
    /// Tells the hook about `event`.
    #[cold]
    #[inline(never)]
    pub(crate) fn tell(&self, event: &StopEvent<'_>) {
        call_hook(event.operation, "on_stop", || match self {
            OnStop::Fn(hook) => hook(event),
            OnStop::Shared(hook) => hook(event),
        });
    }
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks")
            .field("on_retry", &self.on_retry.is_some())
            .field("on_stop", &self.on_stop.is_some())
            .finish()
    }
}
