//! Admission on virtual time, in the retry loop's order: the throttle, the
//! breaker, the bulkhead (which may queue the attempt), the rate limit
//! (which may let it wait for its turn), then the first leg.

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
    /// the bulkhead (which may queue the attempt), the rate limit (which
    /// may let it wait for its turn), the budget, then the first leg.
    pub(super) fn start(&mut self, client: u32) {
        let now = self.now;
        let key = self.key_of(client);
        let state = &mut self.clients[client as usize];
        state.attempts += 1;
        if let Some(throttle) = self.guards.as_mut().and_then(|guards| guards.throttle.as_mut())
            && !throttle.admit_as(now, state.priority).0
        {
            // Refused locally: no load, and the call ends.
            self.throttled += 1;
            return;
        }
        if !self.breaker_admits(client, key) {
            return;
        }
        let state = &mut self.clients[client as usize];
        if let Some(guards) = &mut self.guards {
            // A sheddable attempt never waits: refused at once. (The budget
            // counts a first attempt once every guard admitted it, as the
            // library's counts only attempts admitted: see `turn_taken`.)
            let full = guards.bulkhead(key).is_some_and(|permits| !permits.try_take());
            if full && state.priority == Priority::Sheddable {
                self.bulkhead_stopped += 1;
                return;
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
        if self.take_turn(client) {
            self.admit_waiters();
        }
    }

    /// The rate limit's turn for an attempt its other guards admitted, as
    /// the library's guard set asks for it after the bulkhead's place: with
    /// a turn free (or no rate limit), the attempt goes; with none, it
    /// waits for the turn, holding its place and giving the breaker's
    /// probe back meanwhile, when the whole wait is within the limit's
    /// `max_wait`, the call is not sheddable and the turn comes before the
    /// deadline; otherwise the call ends, refused, its place and probe
    /// given back. A turn waited for is taken first and the breaker asked
    /// again after it, as the library asks (a refusal then spends the
    /// turn). Returns whether it gave a place back (the caller then hands
    /// free places to the clients queued for them).
    pub(super) fn take_turn(&mut self, client: u32) -> bool {
        let (now, key) = (self.now, self.key_of(client));
        let turn = self.guards.as_mut().and_then(|g| g.rate_limit(key)).map(|limit| limit.take(now));
        let state = &mut self.clients[client as usize];
        let wait = match turn {
            None | Some(Ok(())) => return self.turn_taken(client, key),
            Some(Err(wait)) => wait,
        };
        // `max_wait` bounds the whole wait, not each round of it (another
        // client may take the turn this one waited for), as in the library.
        let since = *state.turn_since.get_or_insert(now);
        let total = now.saturating_sub(since).saturating_add(wait);
        let max_wait = self.config.rate_limit.and_then(|limit| limit.max_wait);
        let may_wait = state.priority != Priority::Sheddable && max_wait.is_some_and(|max| total <= max);
        let late = self.config.deadline.is_some_and(|deadline| deadline.saturating_sub(now) <= wait);
        if may_wait && !late {
            let ticket = state.ticket.take();
            if let (Some(breaker), Some((ticket, _))) =
                (self.guards.as_mut().and_then(|g| g.breaker(key)), ticket)
            {
                breaker.give_back(ticket);
            }
            self.queue.push(now.saturating_add(wait), Event::Turn(client));
            return false;
        }
        state.turn_since = None;
        if may_wait {
            self.deadline_stopped += 1;
        } else {
            self.rate_limited += 1;
        }
        self.release(client, key)
    }

    /// The attempt has its turn (or needs none): after a wait for it, the
    /// breaker is asked again, and the place's latency counts from now
    /// (the wait is not the dependency's); the budget counts a first
    /// attempt only now that every guard admitted it, as the library's
    /// does; then the attempt goes. Returns whether it gave a place back.
    fn turn_taken(&mut self, client: u32, key: u32) -> bool {
        let now = self.now;
        let waited = self.clients[client as usize].turn_since.take().is_some();
        if waited && !self.breaker_admits(client, key) {
            return self.release(client, key);
        }
        let state = &mut self.clients[client as usize];
        if waited && state.permit_since.is_some() {
            state.permit_since = Some(now);
        }
        if let Some(guards) = &mut self.guards
            && state.attempts == 1
        {
            guards.budget.on_first_attempt();
        }
        self.launch(client);
        false
    }

    /// Asks the breaker of `key`, if there is one, to admit `client`'s
    /// attempt: its ticket kept, or the call ended by it (failing fast: no
    /// load on the dependency). Returns whether the attempt may go on.
    fn breaker_admits(&mut self, client: u32, key: u32) -> bool {
        let now = self.now;
        let Some(breaker) = self.guards.as_mut().and_then(|guards| guards.breaker(key)) else {
            return true;
        };
        let (admission, transition) = breaker.admit(now);
        self.breaker_trips += trips(transition);
        match admission {
            Admission::Allowed(ticket) => {
                self.clients[client as usize].ticket = Some((ticket, now));
                true
            }
            Admission::Rejected => {
                self.breaker_stopped += 1;
                false
            }
        }
    }

    /// Gives back what a client's attempt refused before it went holds:
    /// its breaker ticket and its bulkhead place. Returns whether it held a place.
    fn release(&mut self, client: u32, key: u32) -> bool {
        let state = &mut self.clients[client as usize];
        let (ticket, place) = (state.ticket.take(), state.permit_since.take());
        let Some(guards) = &mut self.guards else { return false };
        if let (Some(breaker), Some((ticket, _))) = (guards.breaker(key), ticket) {
            breaker.give_back(ticket);
        }
        match (guards.bulkhead(key), place) {
            (Some(permits), Some(_)) => {
                permits.give_back(None);
                true
            }
            _ => false,
        }
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
                // A refusal frees the place again: the loop hands it on.
                self.take_turn(next);
            }
        }
    }
}
