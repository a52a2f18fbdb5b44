//! The dependency's side of an attempt, per model: who gets through.

use std::time::Duration;

use super::config::Model;
use super::engine::{Event, Run};

impl Run<'_> {
    /// The attempt reaches the dependency, which decides it.
    pub(super) fn arrive(&mut self, client: u32, version: u64, attempt: u32) {
        let now = self.now;
        self.attempts += 1;
        self.arrivals.push(now);
        if attempt >= 2 {
            self.retry_arrivals.push(now);
        }
        if attempt == 2 {
            self.first_retries.push(now);
        }
        let ok = match self.config.model {
            Model::Contention => {
                let fresh = version == self.version;
                if fresh {
                    self.version += 1;
                }
                fresh
            }
            Model::Overload { capacity, tick } => {
                // `validate` rejected a zero tick.
                let index = now.as_nanos() / tick.as_nanos();
                if index != self.tick {
                    self.tick = index;
                    self.served = 0;
                }
                let room = self.served < capacity;
                if room {
                    self.served += 1;
                }
                room
            }
            Model::Brownout { capacity, service_time, .. } => {
                self.busy += 1;
                // `validate` rejected a zero capacity.
                let load = (f64::from(self.busy) / f64::from(capacity)).max(1.0);
                let work =
                    Duration::try_from_secs_f64(service_time.as_secs_f64() * load).unwrap_or(Duration::MAX);
                self.queue.push(now.saturating_add(work), Event::Done { client, attempt });
                return;
            }
        };
        self.send(Event::Reply { client, ok, attempt });
    }
}
