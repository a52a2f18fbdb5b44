//! One replica's side of a fleet breaker: what it reports, and what it does
//! with the fleet's verdict.
//!
//! The local breaker stays the fast path and keeps judging on its own. The
//! fleet adds: when the fleet's failures cross the threshold every replica
//! opens until the fleet's open-until instant; after it, a replica probes
//! only with the slots the fleet granted it, so the fleet sends at most
//! `half_open_max_calls` probes per round; when enough probes succeeded the
//! fleet closes, and every replica it held open closes with it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::backlog::Backlog;
use super::script::{BreakerReport, BreakerVerdict, FleetState};
use stormproof_runtime::breaker::{BreakerState, BreakerTotals, CircuitBreaker};

/// The fleet's state as this replica last heard it: what the store's state
/// is rebuilt from if it was lost. Kept while the store is gone, so that a
/// store that comes back empty (restarted, flushed) hears it again.
#[derive(Debug, Clone, Copy)]
enum View {
    Closed,
    OpenUntil(Instant),
    HalfOpen,
}

pub(super) struct BreakerSync {
    name: String,
    breaker: Arc<CircuitBreaker>,
    /// Totals the server acknowledged.
    acked: [u64; 4],
    /// Totals sent in the flush in flight.
    sent: [u64; 4],
    /// Calls and failures sent in the flushes not acknowledged since.
    backlog: Backlog<2>,
    /// The fleet epoch last seen.
    seen: u64,
    /// The fleet's state as last heard.
    view: View,
    /// Whether the local breaker is open or probing on the fleet's word
    /// (and so closes when the fleet does).
    held: bool,
    /// The fleet epoch in which this replica was last granted probes.
    probing: Option<u64>,
    /// The sequence number of the next request for probe slots.
    seq: u64,
    /// Whether a request numbered `seq` was sent and no flush has been
    /// answered since: the next flush sends it again under that number (a
    /// flush that timed out may have run, and its slots are this replica's).
    pending: bool,
    rejections: u64,
}

fn totals(t: BreakerTotals) -> [u64; 4] {
    [t.calls, t.failures, t.probe_successes, t.probe_failures]
}

impl BreakerSync {
    pub(super) fn new(name: String, breaker: Arc<CircuitBreaker>) -> Self {
        // Counting starts now: what happened before the registry joined is
        // not the fleet's news, and a joining replica must not swamp it.
        let start = breaker.totals();
        BreakerSync {
            name,
            acked: totals(start),
            sent: totals(start),
            backlog: Backlog::new(),
            seen: 0,
            view: View::Closed,
            held: false,
            probing: None,
            seq: 0,
            pending: false,
            rejections: start.rejections,
            breaker,
        }
    }

    /// What this replica reports; it asks for probe slots when the fleet
    /// holds it back and its callers are refused, if it `asks` at all.
    pub(super) fn report(&mut self, asks: bool) -> BreakerReport {
        let config = self.breaker.config();
        let now = self.breaker.totals();
        self.sent = totals(now);
        let at = Instant::now();
        self.backlog.note(at, [now.calls, now.failures], config.window);
        // Probes are asked for by a replica the fleet holds back whose
        // callers are being refused: a replica without traffic would
        // waste the fleet's slots.
        let demand = now.rejections > self.rejections;
        self.rejections = now.rejections;
        let want = if asks && self.held && demand { config.half_open_max_calls } else { 0 };
        self.pending |= want > 0;
        BreakerReport {
            name: self.name.clone(),
            window: config.window,
            failure_threshold: config.failure_threshold,
            rate_percent: config.failure_rate_percent.unwrap_or(0),
            minimum_calls: config.minimum_calls,
            // The period its breaker is in (or would open for): a replica
            // whose probe failed reports the doubled one, and the store
            // reopens the fleet for that, so the fleet's rounds grow as a
            // local breaker's do.
            open_for: self.breaker.open_period(),
            half_open_max_calls: config.half_open_max_calls,
            success_threshold: config.success_threshold,
            seen: self.seen,
            want,
            seq: self.seq,
            view: self.view(),
            totals: self.sent,
            acked: self.acked,
            backlog: self.backlog.earlier(at),
        }
    }

    /// The fleet's state as this replica knows it now.
    fn view(&self) -> FleetState {
        let left = match self.view {
            View::Closed => return FleetState::Closed,
            View::OpenUntil(until) => until.saturating_duration_since(Instant::now()),
            View::HalfOpen => Duration::ZERO,
        };
        if !left.is_zero() {
            FleetState::Open { remaining: left }
        } else if self.breaker.state() == BreakerState::Closed {
            // Past the open period, its own breaker has closed since: its
            // probes (the fleet's slots, or its own while the store was
            // gone) found the dependency back. A stale half-open would
            // hold the whole fleet back for a round of probes.
            FleetState::Closed
        } else {
            FleetState::HalfOpen
        }
    }

    /// Follows the fleet's verdict. `hold` is how long past the fleet's
    /// open-until instant the local breaker stays open: long enough for the
    /// next flush to ask for probe slots, short enough that a replica that
    /// lost the store soon probes on its own.
    pub(super) fn apply(&mut self, verdict: BreakerVerdict, hold: Duration) {
        // The request in flight is answered (with its first slots, if an
        // earlier flush of it ran): the next one is a new request.
        if std::mem::take(&mut self.pending) {
            self.seq += 1;
        }
        self.acked = self.sent;
        self.backlog.clear();
        self.seen = verdict.epoch;
        let now = Instant::now();
        match verdict.state {
            FleetState::Closed => {
                if self.held {
                    self.breaker.close();
                }
                (self.held, self.probing, self.view) = (false, None, View::Closed);
            }
            // `remaining` is at most tokio's horizon (see `script::answer`)
            // and so is `hold` (see `Task::flush`): these sums cannot overflow.
            FleetState::Open { remaining } => {
                self.view = View::OpenUntil(now + remaining);
                self.breaker.trip_until(now + remaining + hold, None);
                (self.held, self.probing) = (true, None);
            }
            FleetState::HalfOpen => {
                self.view = View::HalfOpen;
                if verdict.granted > 0 {
                    self.breaker.trip_until(now, Some(verdict.granted));
                    (self.held, self.probing) = (true, Some(verdict.epoch));
                } else if self.probing != Some(verdict.epoch) {
                    self.breaker.trip_until(now + hold, None);
                    self.held = true;
                }
            }
        }
    }

    /// The fleet is left for good: the breaker's settings are its own again.
    pub(super) fn leave(&self) {
        self.breaker.unshare();
    }

    /// The store is gone: the local breaker runs on its own rules again. A
    /// hold ends when it was due to; a probe allowance becomes the usual
    /// half-open rule, so that no replica waits for a verdict that will not come.
    pub(super) fn release(&mut self) {
        if self.probing.take().is_some() {
            self.breaker.trip_until(Instant::now(), None);
        }
        // `view` is kept: if the store comes back without its state
        // (restarted, flushed), the fleet's state is rebuilt from it.
        self.held = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::BreakerVerdict;
    use stormproof_runtime::breaker::BreakerConfig;

    /// A replica the fleet holds open, whose callers are refused, asks for
    /// probe slots, unless its flush asks for nothing (the last one, as it
    /// leaves: slots granted then would sit unused until the round ends).
    #[tokio::test(start_paused = true)]
    async fn a_held_replica_with_refused_callers_asks_for_slots_only_when_its_flush_asks() {
        let config = BreakerConfig { half_open_max_calls: 3, ..Default::default() };
        let breaker = Arc::new(CircuitBreaker::new("dep", config).unwrap());
        let mut sync = BreakerSync::new("dep".into(), breaker.clone());
        let open = FleetState::Open { remaining: Duration::from_secs(1) };
        sync.apply(BreakerVerdict { epoch: 1, state: open, granted: 0 }, Duration::from_millis(200));
        assert!(breaker.try_acquire().is_none(), "held open");
        assert_eq!(sync.report(false).want, 0, "asking for nothing");
        assert!(breaker.try_acquire().is_none());
        assert_eq!(sync.report(true).want, 3, "asking for what its callers need");
        assert_eq!(sync.report(true).want, 0, "no caller refused since");
    }

    /// A request for probe slots keeps its number until a flush is
    /// answered: the flush after one that timed out sends it again (asking
    /// for nothing, the replica on local state meanwhile), so that the
    /// store answers it with the slots it granted the first.
    #[tokio::test(start_paused = true)]
    async fn a_request_for_slots_keeps_its_number_until_a_flush_is_answered() {
        let breaker = Arc::new(CircuitBreaker::new("dep", BreakerConfig::default()).unwrap());
        let mut sync = BreakerSync::new("dep".into(), breaker.clone());
        let open = FleetState::Open { remaining: Duration::from_secs(1) };
        let hold = Duration::from_millis(200);
        sync.apply(BreakerVerdict { epoch: 1, state: open, granted: 0 }, hold);
        assert!(breaker.try_acquire().is_none(), "held open");
        let asked = sync.report(true);
        assert!(asked.want > 0);
        sync.release();
        let again = sync.report(true);
        assert_eq!((again.want, again.seq), (0, asked.seq), "sent again, asking for nothing");
        sync.apply(BreakerVerdict { epoch: 1, state: FleetState::HalfOpen, granted: 2 }, hold);
        assert!(breaker.try_acquire().is_some(), "probing with the slots granted the first time");
        assert_eq!(sync.report(true).seq, asked.seq + 1, "answered: the next request is a new one");
    }

    /// A replica whose probe failed reports the doubled open period, which
    /// the store reopens the fleet for: the fleet's rounds grow as a local
    /// breaker's do (1, 2, 4 s with the defaults), and start again from
    /// `open_for` once the fleet has closed.
    #[tokio::test(start_paused = true)]
    async fn a_replica_whose_probes_fail_reports_the_growing_open_period() {
        let config = BreakerConfig { half_open_max_calls: 1, success_threshold: 1, ..Default::default() };
        let breaker = Arc::new(CircuitBreaker::new("dep", config).unwrap());
        let mut sync = BreakerSync::new("dep".into(), breaker.clone());
        let hold = Duration::from_millis(200);
        assert_eq!(sync.report(true).open_for, Duration::from_secs(1), "closed: open_for");
        let mut epoch = 1;
        for period in [2, 4, 8] {
            sync.apply(BreakerVerdict { epoch, state: FleetState::HalfOpen, granted: 1 }, hold);
            let probe = breaker.try_acquire().expect("a granted probe");
            probe.record(stormproof_runtime::breaker::Outcome::Failure);
            assert_eq!(sync.report(true).open_for, Duration::from_secs(period), "after a failed probe");
            let open = FleetState::Open { remaining: Duration::from_secs(period) };
            epoch += 1;
            sync.apply(BreakerVerdict { epoch, state: open, granted: 0 }, hold);
            tokio::time::advance(Duration::from_secs(period)).await;
            epoch += 1;
        }
        sync.apply(BreakerVerdict { epoch, state: FleetState::Closed, granted: 0 }, hold);
        assert_eq!(sync.report(true).open_for, Duration::from_secs(1), "closed again: open_for");
    }

    /// What a lost fleet state is rebuilt from: the open period while it
    /// lasts, then half-open, until the replica's own breaker has closed
    /// (here on its own probe, the store being gone).
    #[tokio::test(start_paused = true)]
    async fn a_replica_reports_the_fleet_half_open_until_its_own_breaker_sees_the_dependency_back() {
        let config = BreakerConfig { half_open_max_calls: 1, success_threshold: 1, ..Default::default() };
        let breaker = Arc::new(CircuitBreaker::new("dep", config).unwrap());
        let mut sync = BreakerSync::new("dep".into(), breaker.clone());
        assert_eq!(sync.report(true).view, FleetState::Closed);
        let open = FleetState::Open { remaining: Duration::from_secs(1) };
        sync.apply(BreakerVerdict { epoch: 1, state: open, granted: 0 }, Duration::from_millis(200));
        assert_eq!(sync.report(true).view, open);
        sync.release();
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(sync.report(true).view, FleetState::HalfOpen, "over, and nothing known since");
        tokio::time::advance(Duration::from_millis(200)).await;
        breaker.try_acquire().expect("its own probe").record(stormproof_runtime::breaker::Outcome::Success);
        assert_eq!(sync.report(true).view, FleetState::Closed, "its own probe found the dependency back");
    }
}
