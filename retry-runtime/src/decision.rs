//! The retry decision: after a failed attempt, retry after which wait, or
//! stop and why.
//!
//! One pure function, [`decide`], used by the runtime's retry loop and by
//! the simulator (`stormproof-sim`, through this public module) alike, so that what the simulator measures is what the
//! library does by construction. It asks its questions in a fixed order
//! through [`Answers`], and the order is the contract:
//!
//! 1. a permanent error stops at once;
//! 2. no attempts left stops;
//! 3. the wait is drawn (the backoff's jitter; a server's `Retry-After`
//!    lengthens it, the cap never shortens it);
//! 4. a wait that would end at or past the deadline is not slept, nor,
//!    without a deadline, one past tokio's 30-year horizon (a server's
//!    `Retry-After` of "never": slept, it would be cut to 30 years and the
//!    call retried long before the server said it could be);
//! 5. a breaker that will still be open when the wait ends stops the call
//!    now rather than after a wait that can only end in a rejection;
//! 6. only then is a retry token taken from the budget, so tokens pay for
//!    retries that really happen.
//!
//! Randomness is drawn only once the attempts check has passed, and the
//! budget is charged last: both are side effects, kept at the edge.

use std::time::Duration;

use crate::classify::ErrorClass;
use crate::clock::HORIZON;

pub use crate::stop::StopReason;

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Make another attempt after this wait (a budget token is already taken).
    Retry(Duration),
    /// End the call with the last error.
    Stop(StopReason),
}

/// The questions [`decide`] asks about the world, in its order.
pub trait Answers {
    /// The jittered backoff wait for the retry about to be planned; called
    /// at most once per decision, and only when an attempt is left.
    fn backoff(&mut self) -> Duration;
    /// Time left before the call's deadline; `None` without a deadline.
    fn until_deadline(&self) -> Option<Duration>;
    /// How long the breaker stays open from now; `None` when it is not open.
    fn breaker_open_for(&self) -> Option<Duration>;
    /// Takes what a retry after an error of `class` costs from the budget;
    /// `false` when it is empty. Called last.
    fn take_budget(&mut self, class: ErrorClass) -> bool;
}

/// The decision after attempt number `attempts` (1 for the first) failed
/// with an error of `class`; see the module docs for the order.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::ErrorClass;
/// use stormproof::decision::{Answers, Decision, decide};
///
/// /// A world with a 100 ms backoff, no deadline, a closed breaker and an empty budget.
/// struct NoTokens;
/// impl Answers for NoTokens {
///     fn backoff(&mut self) -> Duration { Duration::from_millis(100) }
///     fn until_deadline(&self) -> Option<Duration> { None }
///     fn breaker_open_for(&self) -> Option<Duration> { None }
///     fn take_budget(&mut self, _class: ErrorClass) -> bool { false }
/// }
/// let stop = decide(ErrorClass::Transient, 1, 4, &mut NoTokens);
/// assert_eq!(stop, Decision::Stop(stormproof::StopReason::BudgetExhausted));
/// assert_eq!(decide(ErrorClass::Permanent, 1, 4, &mut NoTokens), Decision::Stop(stormproof::StopReason::Permanent));
/// ```
// Inline: it runs once per failed attempt, inside the caller's own
// out-of-line failure step, where its questions inline in turn.
#[inline]
pub fn decide(class: ErrorClass, attempts: u32, max_attempts: u32, answers: &mut impl Answers) -> Decision {
    if !class.is_retryable() {
        return Decision::Stop(StopReason::Permanent);
    }
    if attempts >= max_attempts {
        return Decision::Stop(StopReason::AttemptsExhausted);
    }
    let jittered = answers.backoff();
    let wait = match class {
        // The cap does not shorten a server's Retry-After.
        ErrorClass::Throttled { retry_after: Some(after) } => after.max(jittered),
        _ => jittered,
    };
    if answers.until_deadline().map_or(wait > HORIZON, |left| wait >= left) {
        return Decision::Stop(StopReason::Deadline);
    }
    if answers.breaker_open_for().is_some_and(|open| open > wait) {
        return Decision::Stop(StopReason::CircuitOpen);
    }
    if !answers.take_budget(class) {
        return Decision::Stop(StopReason::BudgetExhausted);
    }
    Decision::Retry(wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A world with fixed answers that logs which questions were asked.
    #[derive(Default)]
    struct World {
        backoff: Duration,
        until_deadline: Option<Duration>,
        open_for: Option<Duration>,
        budget_empty: bool,
        asked: Vec<&'static str>,
    }

    impl Answers for World {
        fn backoff(&mut self) -> Duration {
            self.asked.push("backoff");
            self.backoff
        }
        fn until_deadline(&self) -> Option<Duration> {
            self.until_deadline
        }
        fn breaker_open_for(&self) -> Option<Duration> {
            self.open_for
        }
        fn take_budget(&mut self, _class: ErrorClass) -> bool {
            self.asked.push("budget");
            !self.budget_empty
        }
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    const T: ErrorClass = ErrorClass::Transient;
    const P: ErrorClass = ErrorClass::Permanent;

    fn throttled(after: u64) -> ErrorClass {
        ErrorClass::Throttled { retry_after: Some(ms(after)) }
    }

    #[test]
    fn the_decision_table() {
        use Decision::{Retry, Stop};
        use StopReason::*;
        type Setting = (u64, Option<u64>, Option<u64>, bool);
        let world = |backoff, until_deadline, open_for, budget_empty| -> Setting {
            (backoff, until_deadline, open_for, budget_empty)
        };
        type Row = (ErrorClass, u32, u32, Setting, Decision, &'static [&'static str]);
        #[rustfmt::skip]
        let table: &[Row] = &[
            // class, attempts, max, world (backoff, deadline left, open for, budget empty) -> decision, questions asked
            (P, 1, 4, world(100, None, None, false), Stop(Permanent), &[]),
            (T, 4, 4, world(100, None, None, false), Stop(AttemptsExhausted), &[]),
            (T, 5, 4, world(100, None, None, false), Stop(AttemptsExhausted), &[]),
            (T, 1, 4, world(100, None, None, false), Retry(ms(100)), &["backoff", "budget"]),
            (T, 1, 4, world(100, Some(101), None, false), Retry(ms(100)), &["backoff", "budget"]),
            (T, 1, 4, world(100, Some(100), None, false), Stop(Deadline), &["backoff"]),
            (T, 1, 4, world(100, Some(0), None, false), Stop(Deadline), &["backoff"]),
            (T, 1, 4, world(100, None, Some(100), false), Retry(ms(100)), &["backoff", "budget"]),
            (T, 1, 4, world(100, None, Some(101), false), Stop(CircuitOpen), &["backoff"]),
            (T, 1, 4, world(100, None, None, true), Stop(BudgetExhausted), &["backoff", "budget"]),
            (throttled(5_000), 1, 4, world(100, None, None, false), Retry(ms(5_000)), &["backoff", "budget"]),
            (throttled(50), 1, 4, world(100, None, None, false), Retry(ms(100)), &["backoff", "budget"]),
            (throttled(5_000), 1, 4, world(100, Some(4_000), None, false), Stop(Deadline), &["backoff"]),
            (ErrorClass::Throttled { retry_after: None }, 3, 4, world(7, None, None, false), Retry(ms(7)), &["backoff", "budget"]),
            // The deadline is asked before the breaker, the breaker before the budget.
            (T, 1, 4, world(100, Some(50), Some(500), true), Stop(Deadline), &["backoff"]),
            (T, 1, 4, world(100, None, Some(500), true), Stop(CircuitOpen), &["backoff"]),
        ];
        for (i, (class, attempts, max, setting, expected, asked)) in table.iter().enumerate() {
            let (backoff, until_deadline, open_for, budget_empty) = *setting;
            let mut world = World {
                backoff: ms(backoff),
                until_deadline: until_deadline.map(ms),
                open_for: open_for.map(ms),
                budget_empty,
                asked: Vec::new(),
            };
            let decision = decide(*class, *attempts, *max, &mut world);
            assert_eq!(decision, *expected, "row {i}");
            assert_eq!(world.asked, *asked, "row {i}: questions asked");
        }
    }

    #[test]
    fn huge_retry_after_and_deadline_values_do_not_panic() {
        let mut world =
            World { backoff: Duration::MAX, until_deadline: Some(Duration::MAX), ..World::default() };
        let huge = ErrorClass::Throttled { retry_after: Some(Duration::MAX) };
        assert_eq!(decide(huge, 1, 2, &mut world), Decision::Stop(StopReason::Deadline));
        // Without a deadline: a wait past the horizon is never slept, one at it is.
        let mut world = World { backoff: Duration::MAX, ..World::default() };
        assert_eq!(decide(huge, 1, 2, &mut world), Decision::Stop(StopReason::Deadline));
        let at_horizon = ErrorClass::Throttled { retry_after: Some(HORIZON) };
        let mut world = World { backoff: HORIZON, ..World::default() };
        assert_eq!(decide(at_horizon, 1, 2, &mut world), Decision::Retry(HORIZON));
    }

    #[test]
    fn every_reason_has_a_distinct_label() {
        let mut labels: Vec<_> = StopReason::ALL.iter().map(|r| r.label()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), StopReason::ALL.len());
    }
}
