//! The retry decision's questions, answered by one call's state.

use std::time::Duration;

use tokio::time::Instant;

use super::Execution;
use crate::backoff::Jitter;
use crate::decision::Answers;

/// The retry decision's questions, answered by this call.
impl<S, H> Answers for Execution<'_, S, H> {
    fn backoff(&mut self) -> Duration {
        let backoff = self.settings.backoff;
        let n = self.attempts.saturating_sub(1);
        let jittered = if backoff.jitter == Jitter::None {
            backoff.exp(n)
        } else {
            let policy = self.policy;
            let rng = self.rng.get_or_insert_with(|| policy.jitter_rng());
            backoff.wait(n, self.previous_wait, rng)
        };
        self.previous_wait = Some(jittered);
        jittered
    }

    fn until_deadline(&self) -> Option<Duration> {
        self.deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()))
    }

    fn breaker_open_for(&self) -> Option<Duration> {
        self.guards.breaker.as_ref().and_then(|breaker| breaker.remaining_open())
    }

    fn take_budget(&mut self) -> bool {
        self.guards.budget.as_ref().is_none_or(|budget| budget.try_withdraw())
    }
}
