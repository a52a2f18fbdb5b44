//! The background task: one per registry, one flush per `sync_every`.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::Notify;
use tokio::time::{Instant, MissedTickBehavior};

use super::breaker::BreakerSync;
use super::budget::BudgetSync;
use super::script::{answer, arguments};
use super::store::{Store, StoreError};
use crate::observe::{self, FleetLink};
use stormproof_runtime::fleet::HORIZON;
use stormproof_runtime::fleet::{FleetMembership, FleetStatus};

/// Whether a flush asks the fleet for probe slots and retry tokens.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Asking {
    /// A replica that stays asks for what its callers need.
    ForWhatIsNeeded,
    /// A replica leaving only reports: slots or tokens granted to it now
    /// would be lost to the fleet (slots until the round's open period
    /// ends, tokens until the window does).
    ForNothing,
}

/// How many times leaving tries its last flush.
const LAST_FLUSH_TRIES: u32 = 3;

/// What the task and the [`Fleet`](super::Fleet) handle share.
#[derive(Debug, Default)]
pub(super) struct Shared {
    /// How the task fares (the registry's admin snapshot reads it too).
    pub(super) status: Arc<FleetStatus>,
    pub(super) stop: Notify,
}

pub(super) struct Task {
    pub(super) prefix: String,
    pub(super) replica: u64,
    pub(super) sync_every: std::time::Duration,
    pub(super) store_timeout: std::time::Duration,
    pub(super) store: Store,
    pub(super) breakers: Vec<BreakerSync>,
    pub(super) budgets: Vec<BudgetSync>,
    pub(super) shared: Arc<Shared>,
    /// The registry's one fleet membership, given back when the task ends
    /// (after `end`: dropped with the task's other fields).
    pub(super) _membership: FleetMembership,
    /// The server's clock (ms) as a flush that got through ran, and when
    /// that flush was sent: the replica's reckoning of the server's clock,
    /// which dates what it counted while later flushes failed. The sending
    /// instant errs late by the trip to the server, as a flush's own counts do.
    pub(super) clock: Option<(u64, Instant)>,
    /// Whether the store's silence since the join has been said (once).
    pub(super) said_unreachable: bool,
    /// Set once the replica is leaving: its last flushes failing is the
    /// leave, not a store lost.
    pub(super) leaving: bool,
}

impl Task {
    /// Runs until told to stop; whether the last flush got through.
    pub(super) async fn run(mut self) -> bool {
        observe::fleet_link(&self.prefix, FleetLink::Joined);
        let mut ticks = tokio::time::interval(self.sync_every);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {
                    self.flush(Asking::ForWhatIsNeeded).await;
                }
                () = self.shared.stop.notified() => break,
            }
        }
        // What was counted since the last flush is the fleet's too: a few
        // tries (each within store_timeout), since a busy store may miss one.
        let mut last = false;
        self.leaving = true;
        if self.shared.status.linked.load(Ordering::Acquire) {
            self.budgets.iter_mut().for_each(BudgetSync::leave);
            for _ in 0..LAST_FLUSH_TRIES {
                last = self.flush(Asking::ForNothing).await;
                if last {
                    break;
                }
            }
        }
        last
    }

    /// One flush; whether it got through.
    async fn flush(&mut self, asking: Asking) -> bool {
        let asks = asking == Asking::ForWhatIsNeeded;
        let breakers: Vec<_> = self.breakers.iter_mut().map(|sync| sync.report(asks)).collect();
        let budgets: Vec<_> = self.budgets.iter_mut().map(|sync| sync.report(asks)).collect();
        let sent = Instant::now();
        let sent_at = self.clock.map_or(0, |(server, at)| {
            let since = u64::try_from(sent.saturating_duration_since(at).as_millis()).unwrap_or(u64::MAX);
            server.saturating_add(since)
        });
        let args = arguments(&self.prefix, self.replica, sent_at, &breakers, &budgets);
        let result = self
            .store
            .flush(&args)
            .await
            .and_then(|reply| answer(reply, breakers.len(), budgets.len()).map_err(StoreError::Failed));
        match result {
            Ok(answer) => {
                // Said once each: the flush that found such a key replaced it.
                for key in &answer.replaced {
                    self.shared.status.key_replaced(key);
                    observe::fleet_key_replaced(&self.prefix, key);
                }
                self.shared.status.flushes.fetch_add(1, Ordering::Relaxed);
                self.clock = Some((answer.now, sent));
                // Past the fleet's open-until instant a replica stays open
                // until a flush has asked for probe slots: the flush in
                // progress then (at most store_timeout), the next tick (at
                // most a period after it) and that flush's answer (at most
                // store_timeout again). Two periods when the store answers
                // within half of one (the defaults), which leaves room for
                // one late tick; a hold shorter than a slow store's answer
                // let the replica probe on its own rules while linked,
                // beside the slots it was then granted. At most tokio's
                // horizon: the replica adds it to the time now (a sync
                // period is only bounded below).
                let slow_store = self.sync_every.saturating_add(self.store_timeout.saturating_mul(2));
                let hold = self.sync_every.saturating_mul(2).max(slow_store).min(HORIZON);
                for (sync, verdict) in self.breakers.iter_mut().zip(answer.breakers) {
                    sync.apply(verdict, hold);
                }
                for (sync, granted) in self.budgets.iter_mut().zip(answer.budgets) {
                    sync.apply(granted);
                }
                if !self.shared.status.linked.swap(true, Ordering::AcqRel) {
                    observe::fleet_link(&self.prefix, FleetLink::Linked);
                }
                true
            }
            Err(error) => {
                self.shared.status.failed_flushes.fetch_add(1, Ordering::Relaxed);
                self.fall_back(Some(&error));
                false
            }
        }
    }

    /// Local state again for good; the membership, dropped with the task
    /// right after, leaves the registry free to join again.
    fn end(&mut self) {
        self.leaving = true;
        self.fall_back(None);
        self.breakers.iter().for_each(BreakerSync::leave);
    }

    /// Local state again, said once per change (`error`: the store failed;
    /// `None`: the replica leaves). A store that has not answered once since
    /// the join is said once too: a wrong address would otherwise go
    /// unheard, the guards quietly local.
    fn fall_back(&mut self, error: Option<&StoreError>) {
        if !self.shared.status.linked.swap(false, Ordering::AcqRel) {
            if let Some(error) = error
                && self.clock.is_none()
                && !std::mem::replace(&mut self.said_unreachable, true)
            {
                observe::fleet_link(&self.prefix, FleetLink::Unreachable(error));
            }
            return;
        }
        self.breakers.iter_mut().for_each(BreakerSync::release);
        self.budgets.iter_mut().for_each(BudgetSync::release);
        match error {
            Some(error) if !self.leaving => observe::fleet_link(&self.prefix, FleetLink::Lost(error)),
            _ => observe::fleet_link(&self.prefix, FleetLink::Left),
        }
    }
}

/// The task ends here however it ends: its loop told to stop, a panic in
/// it, or its runtime shutting down with the task still running (tokio
/// drops it at the await it was in). Each way the guards go back to local
/// state and the registry may join again; ended only in `run`, a runtime
/// dropped before a `leave` left the registry claimed (every later join
/// `AlreadyJoined`) and its guards on the fleet's last verdicts. (Whether
/// it panicked is for `heard` to say: a task dropped by a runtime shut down
/// while its thread unwinds from a panic of the application's finds the
/// thread panicking too.)
impl Drop for Task {
    fn drop(&mut self) {
        self.end();
    }
}

/// The task's future `run`, a panic in it logged as the task's (its `Task`,
/// dropped on the way, has ended it) and the task ended with `false`, as a
/// last flush that did not get through.
pub(super) fn heard(fleet: String, run: impl Future<Output = bool>) -> impl Future<Output = bool> {
    let mut run = Box::pin(run);
    std::future::poll_fn(move |cx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(_) => {
                observe::fleet_task_panicked(&fleet);
                std::task::Poll::Ready(false)
            }
        }
    })
}
