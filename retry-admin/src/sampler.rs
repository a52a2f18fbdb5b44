//! The sampler: once a second, each breaker's totals minus what they were a
//! second before, kept for a minute; and the transitions the registry's
//! hook reports. Both feed the snapshot and the event stream.
//!
//! The calls pay nothing for this: the totals are counted anyway (a
//! success is one plain increment of a per-thread slot), and only this
//! task reads them.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use axum::response::sse::Event;
use tokio::time::MissedTickBehavior;

use super::clock::{millis, unix_ms};
use super::keyed_view::KeyedSetView;
use super::snapshot::{
    BreakerView, BudgetView, BulkheadView, Counts, FleetView, KeyedBreakersView, RateLimitView, Snapshot,
    State, TRANSITIONS_KEPT, ThrottleView, TransitionView,
};
use super::{Numbered, Shared, WeakShared};
use stormproof_runtime::Registry;
use stormproof_runtime::breaker::BreakerTransition;

/// How often the sampler reads the totals.
pub(super) const PERIOD: Duration = Duration::from_secs(1);

/// Periods kept per breaker: the last minute.
pub(super) const PERIODS_KEPT: usize = 60;

/// What the sampler and the hook wrote, for the routes to read.
#[derive(Debug, Default)]
pub(super) struct History {
    breakers: HashMap<String, Ring>,
    transitions: VecDeque<TransitionView>,
    /// Transitions seen so far.
    seen: u64,
}

/// One breaker's last minute.
#[derive(Debug, Default)]
struct Ring {
    /// Its totals at the last sample.
    last: Counts,
    /// Per period, oldest first.
    periods: VecDeque<Counts>,
}

impl History {
    /// Starts from the totals every breaker has now, so the first period
    /// counts from here, not from when each breaker was made.
    pub(super) fn new(registry: &Registry) -> Self {
        let breakers = registry
            .breakers()
            .into_iter()
            .map(|(name, breaker)| (name, Ring { last: breaker.totals().into(), periods: VecDeque::new() }))
            .collect();
        History { breakers, ..History::default() }
    }

    /// Records one period: `totals` per breaker now. A breaker seen for the
    /// first time was made since the last sample, so it counts from zero.
    /// Returns each breaker's count for the period.
    fn record(&mut self, totals: &[(String, Counts)]) -> HashMap<String, Counts> {
        totals
            .iter()
            .map(|(name, now)| {
                let ring = self.breakers.entry(name.clone()).or_default();
                let period = now.since(ring.last);
                ring.last = *now;
                if ring.periods.len() == PERIODS_KEPT {
                    ring.periods.pop_front();
                }
                ring.periods.push_back(period);
                (name.clone(), period)
            })
            .collect()
    }

    /// Each breaker's periods, oldest first.
    fn periods(&self) -> HashMap<String, Vec<Counts>> {
        self.breakers
            .iter()
            .map(|(name, ring)| (name.clone(), ring.periods.iter().copied().collect()))
            .collect()
    }

    fn push_transition(&mut self, mut transition: TransitionView) -> TransitionView {
        self.seen += 1;
        transition.seq = self.seen;
        if self.transitions.len() == TRANSITIONS_KEPT {
            self.transitions.pop_front();
        }
        self.transitions.push_back(transition.clone());
        transition
    }
}

/// The sampler task: one sample per period until the router is gone.
pub(super) async fn run(router: WeakShared) {
    let mut ticks = tokio::time::interval(PERIOD);
    // The first tick is at once; the first sample is a period later.
    ticks.tick().await;
    // After a stall (a suspended process), sample once and carry on: the
    // late period holds everything since the last sample.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(shared) = router.upgrade() else { return };
        shared.sample();
    }
}

impl Shared {
    /// One sample: the period's counts into the history, and a `tick` event.
    pub(super) fn sample(&self) {
        self.sample_with(|| {});
    }

    /// [`sample`](Self::sample), running `between` once the guards' states
    /// are read and before the tick is sent (where a test makes a
    /// transition happen).
    pub(super) fn sample_with(&self, between: impl FnOnce()) {
        let breakers = self.registry.breakers();
        let totals: Vec<(String, Counts)> =
            breakers.iter().map(|(name, breaker)| (name.clone(), breaker.totals().into())).collect();
        // Numbered by the transitions seen before the states are read (see
        // `Numbered`): one made while they are read, or before the tick is
        // sent, may not show in them, and is numbered after the tick.
        let (mut period, seen) = {
            let mut history = self.lock_history();
            (history.record(&totals), history.seen)
        };
        let mut tick = self.guards(|name| period.remove(name).into_iter().collect());
        tick.transitions.clear();
        let tick = event("tick", &tick);
        between();
        self.channel.send_tick(seen, tick);
    }

    /// Every guard now, each breaker's periods the last minute's.
    pub(super) fn snapshot(&self) -> Snapshot {
        // The guards' own state is read outside the history's lock.
        let (mut periods, transitions) = {
            let history = self.lock_history();
            (history.periods(), history.transitions.iter().cloned().collect())
        };
        let mut snapshot = self.guards(|name| periods.remove(name).unwrap_or_default());
        snapshot.transitions = transitions;
        snapshot.operations = self.registry.operations().iter().map(crate::OperationView::of).collect();
        snapshot
    }

    /// The snapshot as a `snapshot` event, numbered by the last transition
    /// it lists (0: none), the last seen before its states were read.
    pub(super) fn snapshot_event(&self) -> Numbered {
        let snapshot = self.snapshot();
        let seq = snapshot.transitions.last().map_or(0, |t| t.seq);
        Numbered { seq, event: event("snapshot", &snapshot) }
    }

    /// Every guard now; `per_second` gives each breaker's periods.
    fn guards(&self, mut per_second: impl FnMut(&str) -> Vec<Counts>) -> Snapshot {
        let registry = &self.registry;
        Snapshot {
            at_unix_ms: unix_ms(),
            sample_period_ms: millis(PERIOD),
            control: self.token.is_some(),
            breakers: registry
                .breakers()
                .into_iter()
                .map(|(name, breaker)| {
                    let periods = per_second(&name);
                    let template = registry.keyed_breakers(&name).is_some();
                    BreakerView { per_key_template: template, ..BreakerView::of(name, &breaker, periods) }
                })
                .collect(),
            budgets: registry
                .budgets()
                .into_iter()
                .map(|(name, budget)| BudgetView::of(name, &budget))
                .collect(),
            bulkheads: registry
                .bulkheads()
                .into_iter()
                .map(|(name, bulkhead)| BulkheadView::of(name, &bulkhead))
                .collect(),
            throttles: registry
                .throttles()
                .into_iter()
                .map(|(name, throttle)| ThrottleView::of(name, &throttle))
                .collect(),
            rate_limits: registry
                .rate_limits()
                .into_iter()
                .map(|(name, limit)| RateLimitView::of(name, &limit))
                .collect(),
            keyed_breakers: registry
                .all_keyed_breakers()
                .into_iter()
                .map(|(name, set)| KeyedBreakersView::of(name, &set))
                .collect(),
            keyed_bulkheads: registry
                .all_keyed_bulkheads()
                .into_iter()
                .map(|(name, set)| KeyedSetView::of_bulkheads(name, &set))
                .collect(),
            keyed_rate_limits: registry
                .all_keyed_rate_limits()
                .into_iter()
                .map(|(name, set)| KeyedSetView::of_rate_limits(name, &set))
                .collect(),
            transitions: Vec::new(),
            fleet: FleetView::of(registry),
            operations: Vec::new(),
        }
    }

    /// The registry's hook: runs outside the breaker's lock, one transition
    /// of a breaker at a time, in the order they were made (on the thread
    /// that made it, or on one announcing an earlier one). Whether the
    /// breaker is forced is read now, so a transition announced late shows
    /// the forcing in force when it is announced.
    pub(super) fn on_transition(&self, t: &BreakerTransition<'_>) {
        // A key's breaker is read in its set, without using it.
        let breaker = match t.key {
            None => self.registry.breaker(t.breaker),
            Some(key) => self.registry.keyed_breakers(t.breaker).and_then(|set| set.peek(key)),
        };
        let forced = breaker.and_then(|b| b.forced()).map(State::from);
        let transition = TransitionView {
            seq: 0,
            at_unix_ms: unix_ms(),
            breaker: t.breaker.to_owned(),
            key: t.key.map(str::to_owned),
            from: t.from.into(),
            to: t.to.into(),
            forced,
        };
        // Sent under the history's lock, so that the stream carries
        // transitions in the order of their `seq` (a client drops one whose
        // `seq` is not above the last it applied).
        let mut history = self.lock_history();
        let transition = history.push_transition(transition);
        self.channel.send_transition(transition.seq, event("transition", &transition));
    }
}

/// A server-sent event named `name` carrying `data` as JSON.
fn event(name: &str, data: &impl serde::Serialize) -> Event {
    // Serialising these plain structs cannot fail (no maps with non-string
    // keys, no failing `Serialize` impls); an empty event is the fallback.
    Event::default().event(name).json_data(data).unwrap_or_else(|_| Event::default().event(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(calls: u64, failures: u64, rejections: u64) -> Counts {
        Counts { calls, failures, rejections, slow_calls: 0 }
    }

    #[test]
    fn each_period_holds_the_difference_of_the_totals() {
        let mut history = History::default();
        history.breakers.insert("a".into(), Ring { last: counts(10, 2, 0), periods: VecDeque::new() });
        let first = history.record(&[("a".into(), counts(15, 3, 1))]);
        assert_eq!(first["a"], counts(5, 1, 1));
        let second = history.record(&[("a".into(), counts(15, 3, 4))]);
        assert_eq!(second["a"], counts(0, 0, 3));
        assert_eq!(history.periods()["a"], [counts(5, 1, 1), counts(0, 0, 3)]);
    }

    #[test]
    fn a_breaker_made_since_the_last_sample_counts_from_zero() {
        let mut history = History::default();
        let period = history.record(&[("new".into(), counts(7, 1, 0))]);
        assert_eq!(period["new"], counts(7, 1, 0));
    }

    #[test]
    fn a_minute_of_periods_is_kept_oldest_first() {
        let mut history = History::default();
        for second in 1..=(PERIODS_KEPT as u64 + 5) {
            history.record(&[("a".into(), counts(second * (second + 1) / 2, 0, 0))]);
        }
        let periods = &history.periods()["a"];
        assert_eq!(periods.len(), PERIODS_KEPT);
        assert_eq!(periods.first().unwrap().calls, 6, "the first five periods were dropped");
        assert_eq!(periods.last().unwrap().calls, PERIODS_KEPT as u64 + 5);
    }

    #[test]
    fn transitions_are_numbered_and_the_latest_kept() {
        let mut history = History::default();
        let view = |breaker: &str| TransitionView {
            seq: 0,
            at_unix_ms: 0,
            breaker: breaker.into(),
            key: None,
            from: State::Closed,
            to: State::Open,
            forced: None,
        };
        for i in 0..(TRANSITIONS_KEPT + 3) {
            let pushed = history.push_transition(view(&format!("b{i}")));
            assert_eq!(pushed.seq, i as u64 + 1);
        }
        assert_eq!(history.transitions.len(), TRANSITIONS_KEPT);
        assert_eq!(history.transitions.front().unwrap().seq, 4);
        assert_eq!(history.transitions.back().unwrap().breaker, format!("b{}", TRANSITIONS_KEPT + 2));
    }
}
