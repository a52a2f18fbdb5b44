//! A breaker's transitions, announced in the order they were made.
//!
//! Transitions are made under the breaker's lock, but announced (to the
//! log, the `stormproof_breaker_state` gauge and the registry's hooks)
//! outside it, so that a hook may read the breaker it hears about. Two
//! threads could then announce out of order: one opens the breaker and,
//! before it announces, another probes it half-open and closes it,
//! announcing both first; the gauge and the dashboard's log would end on
//! "open" with the breaker closed. So each transition is queued while the
//! lock that made it is held, and the queue is announced by one thread at
//! a time, in order: a thread that finds another announcing leaves its
//! transition to that thread, which announces it after its own.

use std::collections::VecDeque;

#[cfg(stormproof_loom)]
use loom::sync::{Mutex, MutexGuard};
#[cfg(not(stormproof_loom))]
use std::sync::{Mutex, MutexGuard};

use super::Transition;

/// The transitions made and not yet announced, and whether a thread is
/// announcing them.
#[derive(Debug, Default)]
pub(super) struct Announcements {
    queue: Mutex<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    pending: VecDeque<Transition>,
    announcing: bool,
}

impl Announcements {
    /// Queues `transition`. Called with the breaker's lock held, so the
    /// queue's order is the order the transitions were made in.
    pub(super) fn push(&self, transition: Transition) {
        self.lock().pending.push_back(transition);
    }

    /// Announces the queued transitions in order with `announce`, one at a
    /// time and outside every lock, unless another thread is doing so: it
    /// will announce these too, after the ones before them. A transition
    /// made by `announce` itself (a hook that forces the breaker) is
    /// announced after the one being announced.
    pub(super) fn announce(&self, mut announce: impl FnMut(Transition)) {
        let mut queue = self.lock();
        if queue.announcing {
            return;
        }
        queue.announcing = true;
        loop {
            let Some(transition) = queue.pending.pop_front() else {
                // Emptiness and the end of announcing are seen together,
                // under the lock: a transition queued after this finds
                // nobody announcing, and announces itself.
                queue.announcing = false;
                return;
            };
            drop(queue);
            let unwinding = StopOnUnwind(self);
            announce(transition);
            std::mem::forget(unwinding);
            queue = self.lock();
        }
    }

    /// A poisoned queue is still a queue: nothing panics while it is held.
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Lets a later transition announce again when an announcement panics
/// (the hooks' panics are caught one by one; this is for the log and a
/// metrics recorder): the ones still queued then go out with the next
/// transition, first and in order.
struct StopOnUnwind<'a>(&'a Announcements);

impl Drop for StopOnUnwind<'_> {
    fn drop(&mut self) {
        self.0.lock().announcing = false;
    }
}

#[cfg(all(test, not(stormproof_loom)))]
mod tests {
    use super::*;
    use crate::breaker::BreakerState::{Closed, HalfOpen, Open};

    #[test]
    fn a_transition_queued_while_another_is_announced_goes_out_after_it_from_the_same_call() {
        let announcements = Announcements::default();
        let mut heard = Vec::new();
        announcements.push((Closed, Open));
        announcements.announce(|transition| {
            heard.push(transition);
            if transition == (Closed, Open) {
                // As a hook forcing the breaker would: made, queued and
                // announced again from inside the announcement.
                announcements.push((Open, HalfOpen));
                announcements.announce(|_| panic!("announced twice at once"));
            }
        });
        assert_eq!(heard, [(Closed, Open), (Open, HalfOpen)]);
        announcements.announce(|transition| panic!("{transition:?} was already announced"));
        announcements.push((HalfOpen, Closed));
        let mut later = Vec::new();
        announcements.announce(|transition| later.push(transition));
        assert_eq!(later, [(HalfOpen, Closed)], "the next transition finds nobody announcing");
    }

    #[test]
    fn a_panicking_hook_leaves_later_transitions_announced_in_order() {
        let announcements = Announcements::default();
        announcements.push((Closed, Open));
        announcements.push((Open, HalfOpen));
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            announcements.announce(|_| panic!("a hook's bug"));
        }));
        assert!(panicked.is_err());
        announcements.push((HalfOpen, Closed));
        let mut heard = Vec::new();
        announcements.announce(|transition| heard.push(transition));
        assert_eq!(
            heard,
            [(Open, HalfOpen), (HalfOpen, Closed)],
            "the one being announced was lost with the panic"
        );
    }
}
