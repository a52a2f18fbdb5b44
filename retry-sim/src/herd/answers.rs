//! A client's state, and its answers to the retry decision's questions
//! (the library's `decide`), on virtual time.

use std::time::Duration;

use super::config::HerdConfig;
use super::guards::Guards;
use stormproof_runtime::backoff::Backoff;
use stormproof_runtime::backoff::JitterRng;
use stormproof_runtime::breaker::Ticket;
use stormproof_runtime::budget::RetryCause;
use stormproof_runtime::decision::Answers;

/// One client of the herd: a small state machine the event loop drives.
#[derive(Debug)]
pub(super) struct Client {
    pub(super) attempts: u32,
    pub(super) previous_wait: Option<Duration>,
    /// The breaker's ticket of its latest attempt, and when it was admitted.
    pub(super) ticket: Option<(Ticket, Duration)>,
    /// Whether its latest attempt is out, waiting for a reply.
    pub(super) in_flight: bool,
    /// While the client holds a bulkhead permit: when its attempt started.
    pub(super) permit_since: Option<Duration>,
    /// Whether the client is queued for a bulkhead permit.
    pub(super) waiting: bool,
    /// How many times it has queued: tells a current `WaitOver` from a stale one.
    pub(super) waits: u64,
    /// While it waits for a rate-limit turn: when it first found none free.
    pub(super) turn_since: Option<Duration>,
    pub(super) rng: JitterRng,
    /// How much its call matters (see `HerdConfig::priorities`).
    pub(super) priority: stormproof_runtime::Priority,
}

/// One client's answers to the retry decision's questions, at `now`.
pub(super) struct ClientAnswers<'a> {
    pub(super) config: &'a HerdConfig,
    /// `None`: [`Strategy::Immediate`], which never waits.
    pub(super) backoff: Option<&'a Backoff>,
    pub(super) client: &'a mut Client,
    /// The key the client calls (see `HerdConfig::keys`).
    pub(super) key: u32,
    pub(super) guards: Option<&'a mut Guards>,
    pub(super) now: Duration,
    /// Whether the attempt's own timeout cut it: a retry after it is one
    /// after a timeout, for a budget whose retries cost by what they follow.
    pub(super) timed_out: bool,
}

impl Answers for ClientAnswers<'_> {
    fn backoff(&mut self) -> Duration {
        let wait = match self.backoff {
            None => Duration::ZERO,
            Some(backoff) => {
                let n = self.config.first_wait_index.saturating_add(self.client.attempts - 1);
                backoff.wait(n, self.client.previous_wait, &mut self.client.rng)
            }
        };
        self.client.previous_wait = Some(wait);
        wait
    }

    fn until_deadline(&self) -> Option<Duration> {
        self.config.deadline.map(|deadline| deadline.saturating_sub(self.now))
    }

    fn breaker_open_for(&self) -> Option<Duration> {
        let until = self.guards.as_ref()?.breaker_ref(self.key)?.open_until()?;
        Some(until.saturating_sub(self.now)).filter(|open| !open.is_zero())
    }

    fn take_budget(&mut self, class: stormproof_runtime::ErrorClass) -> bool {
        let now = self.now;
        // As the retry loop tells it (see the library's `call::answers`).
        let cause = if self.timed_out { RetryCause::Timeout } else { RetryCause::of(class) };
        self.guards.as_mut().is_none_or(|guards| guards.budget.try_withdraw(now, cause))
    }
}
