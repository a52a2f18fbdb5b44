//! Admission on virtual time, in the retry loop's order: the throttle, the
//! breaker, the bulkhead (which may queue the attempt), then the first leg.

use super::config::Model;
use super::engine::{Event, Run};
use super::guards::trips;
use stormproof_runtime::Priority;
use stormproof_runtime::breaker::Admission;

impl Run<'_> {
    /// The key `client` calls (see `HerdConfig::keys`).
    pub(super) fn key_of(&self, client: u32) -> u32 {
        client % self.config.keys.max(1)
    }

    /// Admission, in the retry loop's order: the throttle, the breaker,
    /// the bulkhead (which may queue the attempt), then the first leg.
    pub(super) fn start(&mut self, client: u32) {
        let now = self.now;
        let key = self.key_of(client);
        let state = &mut self.clients[client as usize];
        state.attempts += 1;
        if let Some(guards) = &mut self.guards {
            if let Some(throttle) = &mut guards.throttle
                && !throttle.admit_as(now, state.priority).0
            {
                // Refused locally: no load, and the call ends.
                self.throttled += 1;
                return;
            }
            if let Some(breaker) = guards.breaker(key) {
                let (admission, transition) = breaker.admit(now);
                self.breaker_trips += trips(transition);
                match admission {
                    Admission::Allowed(ticket) => state.ticket = Some((ticket, now)),
                    Admission::Rejected => {
                        // Fail fast: no load on the dependency, and the call ends.
                        self.breaker_stopped += 1;
                        return;
                    }
                }
            }
            // A sheddable attempt never waits: refused at once, before the
            // budget counts it (the library's counts only attempts admitted).
            let full = guards.bulkhead(key).is_some_and(|permits| !permits.try_take());
            if full && state.priority == Priority::Sheddable {
                self.bulkhead_stopped += 1;
                return;
            }
            if state.attempts == 1 {
                guards.budget.on_first_attempt();
            }
            if let Some(permits) = guards.bulkhead(key) {
                if full {
                    // Queued: no attempt reaches the dependency while it waits.
                    match state.priority {
                        Priority::Critical => permits.critical.push_back(client),
                        _ => permits.waiting.push_back(client),
                    }
                    state.waiting = true;
                    state.waits += 1;
                    let max_wait = permits.max_wait.map(|wait| now.saturating_add(wait));
                    // When both fall on the same instant, the deadline wins.
                    let over = match (max_wait, self.config.deadline) {
                        (Some(wait), Some(deadline)) if wait < deadline => Some((wait, false)),
                        (_, Some(deadline)) => Some((deadline, true)),
                        (Some(wait), None) => Some((wait, false)),
                        (None, None) => None,
                    };
                    if let Some((at, deadline)) = over {
                        let wait = state.waits;
                        self.queue.push(at.max(now), Event::WaitOver { client, wait, deadline });
                    }
                    return;
                }
                state.permit_since = Some(now);
            }
        }
        self.launch(client);
    }

    /// The attempt's first leg leaves (and in a brownout, its timeout starts).
    pub(super) fn launch(&mut self, client: u32) {
        let state = &mut self.clients[client as usize];
        state.in_flight = true;
        let attempt = state.attempts;
        match self.config.model {
            Model::Contention => self.send(Event::ReadArrives(client)),
            Model::Overload { .. } => self.send(Event::Arrives { client, version: 0, attempt }),
            Model::Brownout { timeout, .. } => {
                self.queue.push(self.now.saturating_add(timeout), Event::TimedOut { client, attempt });
                self.send(Event::Arrives { client, version: 0, attempt });
            }
        }
    }

    /// Whether `attempt` is the client's attempt still waiting for its answer.
    pub(super) fn is_current(&self, client: u32, attempt: u32) -> bool {
        let state = &self.clients[client as usize];
        state.in_flight && state.attempts == attempt
    }

    /// A queued client gives up waiting for a permit, if it still waits.
    pub(super) fn wait_over(&mut self, client: u32, wait: u64, deadline: bool) {
        let state = &mut self.clients[client as usize];
        if !state.waiting || state.waits != wait {
            return;
        }
        state.waiting = false;
        let key = self.key_of(client);
        if let Some(permits) = self.guards.as_mut().and_then(|g| g.bulkhead(key)) {
            permits.waiting.retain(|&queued| queued != client);
            permits.critical.retain(|&queued| queued != client);
        }
        if deadline {
            self.deadline_stopped += 1;
        } else {
            self.bulkhead_stopped += 1;
        }
    }

    /// Hands free permits to the clients queued for them, in order, in
    /// every bulkhead (one, or one per key).
    pub(super) fn admit_waiters(&mut self) {
        let bulkheads = self.guards.as_ref().map_or(0, |g| g.bulkheads.len());
        for bulkhead in 0..bulkheads {
            while let Some(next) = self.guards.as_mut().and_then(|g| g.bulkheads[bulkhead].next_waiter()) {
                let state = &mut self.clients[next as usize];
                state.waiting = false;
                state.permit_since = Some(self.now);
                self.launch(next);
            }
        }
    }
}
