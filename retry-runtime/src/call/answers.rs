//! The retry decision's questions, answered by one call's state.

use std::time::Duration;

use tokio::time::Instant;

use super::Call;
use super::rare_state::Withdrawn;
use crate::backoff::Jitter;
use crate::backoff::JitterRng;
use crate::budget::RetryCause;
use crate::classify::ErrorClass;
use crate::decision::Answers;
use crate::guards::Shape;
use crate::policy::Policy;
use crate::registry::{self, Registry};

/// The retry decision's questions, answered by this call.
impl<S: Default, H, V: Shape> Answers for Call<'_, S, H, V> {
    #[inline]
    fn backoff(&mut self) -> Duration {
        let backoff = self.settings().backoff;
        let n = self.attempts.saturating_sub(1);
        let policy = self.policy;
        let rare = self.rare();
        let jittered = if backoff.jitter == Jitter::None {
            backoff.exp(n)
        } else {
            let rng = rare.rng.get_or_insert_with(|| jitter_rng(policy));
            backoff.wait(n, rare.previous_wait, rng)
        };
        rare.previous_wait = Some(jittered);
        jittered
    }

    #[inline]
    fn until_deadline(&self) -> Option<Duration> {
        self.deadline().map(|deadline| deadline.saturating_duration_since(Instant::now()))
    }

    #[inline]
    fn breaker_open_for(&self) -> Option<Duration> {
        self.guards().breaker.as_ref().and_then(|breaker| breaker.remaining_open())
    }

    /// What it took is kept until the retry is admitted, to be given back
    /// exactly if it cannot run or the call is dropped first.
    ///
    /// An operation whose file override says `budget = "none"` keeps its
    /// budget in the guard set (its successes still refill it) but takes
    /// nothing from it.
    #[inline]
    fn take_budget(&mut self, class: ErrorClass) -> bool {
        if !self.settings().budget {
            return true;
        }
        let guards = self.guards();
        let Some(budget) = &guards.budget else {
            return true;
        };
        let timed_out = self.rare.as_ref().is_some_and(|rare| rare.timed_out);
        let cause = if timed_out { RetryCause::Timeout } else { RetryCause::of(class) };
        let Some(taken) = budget.withdraw(cause) else {
            return false;
        };
        let cached = self.cached.and_then(|guards| guards.budget.as_deref());
        self.rare().withdrawn = Some(Withdrawn { taken, cached, spent: false });
        true
    }
}

/// The jitter source of one call: the policy's seed, else the registry's,
/// else the thread's generator. Made only when a call first needs to wait.
#[cold]
#[inline(never)]
fn jitter_rng(policy: &Policy) -> JitterRng {
    match policy.next_seeded_stream().or_else(|| registry::with_current(Registry::next_jitter_seed)) {
        Some(seed) => JitterRng::seeded(seed),
        None => JitterRng::from_thread(),
    }
}
