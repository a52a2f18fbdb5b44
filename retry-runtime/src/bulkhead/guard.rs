//! The bulkhead as a [`Guard`]: it admits while a place is free, and
//! otherwise lets the attempt wait for one (at most `max_wait`); it hears
//! every answered attempt as an adaptive limit's latency sample.

use tokio::time::Instant;

use super::{Bulkhead, BulkheadFull};
use crate::guard::{Admit, Answer, AttemptKind, Guard};
use crate::priority::{Priority, Refusals};
use crate::rejection::Rejection;

/// One attempt's place in a bulkhead, as plain data: given back exactly
/// once, by the call that holds it, through the bulkhead it came from.
#[derive(Debug)]
pub struct Place {
    /// When the attempt's request went out, for an adaptive limit's
    /// latency sample (`None` when the limit is not adaptive).
    started: Option<Instant>,
}

impl Place {
    /// Starts the latency sample at `sent` (if later than the admission):
    /// what the attempt did before its request went out (a wait for a
    /// rate-limit turn, the HTTP layers' read of the failed response
    /// before a retry) is the client's time, not the dependency's.
    #[inline]
    pub(crate) fn measure_from(&mut self, sent: Instant) {
        if let Some(started) = &mut self.started {
            *started = (*started).max(sent);
        }
    }
}

impl Bulkhead {
    /// A place once none was free: waits, at most `max_wait` (a wait too
    /// long to arm is no limit), a critical attempt ahead of the others.
    pub(crate) async fn place_waiting(&self, priority: Priority) -> Result<Place, BulkheadFull> {
        self.wait_for_place(priority == Priority::Critical).await?;
        Ok(self.placed())
    }

    /// A place just taken: the gauge, and the start of an adaptive limit's sample.
    #[inline]
    fn placed(&self) -> Place {
        #[cfg(feature = "metrics")]
        crate::observe::bulkhead_level(&self.gauge_key, self.in_use());
        // Only an adaptive limit reads the clock.
        let started = self.adaptive.load(std::sync::atomic::Ordering::Relaxed).then(Instant::now);
        Place { started }
    }
}

impl Guard for Bulkhead {
    type Permit = Place;

    #[inline(always)]
    fn admit(&self, _kind: AttemptKind, _priority: Priority) -> Admit<Place> {
        if self.places.try_take() { Admit::Go(self.placed()) } else { Admit::Wait }
    }

    #[inline(always)]
    fn admit_quietly(&self, _kind: AttemptKind) -> Option<Place> {
        self.places.try_take().then(|| self.placed())
    }

    #[inline(always)]
    fn record(&self, place: Place, answer: Answer) {
        if let Some(started) = place.started {
            self.answered(started, answer);
        }
        self.give_back_place();
    }

    #[inline(always)]
    fn abandon(&self, _place: Place) {
        self.give_back_place();
    }

    #[cold]
    fn rejection(&self) -> Rejection {
        Rejection::BulkheadFull { bulkhead: self.keyed.named(self.name()) }
    }

    #[cold]
    fn refused(&self, priority: Priority) {
        self.refusals.count(priority);
    }
}

impl Bulkhead {
    /// An adaptive limit's sample of an answered attempt: every retryable
    /// error is an overload signal (conflicts too: fewer attempts at once
    /// mean fewer of them); a cut attempt says nothing of latency.
    #[inline(never)]
    fn answered(&self, started: Instant, answer: Answer) {
        match answer {
            Answer::Success => self.sample(started.elapsed(), false),
            Answer::Failed(class) => self.sample(started.elapsed(), class.is_retryable()),
            Answer::Cut => {}
        }
    }
}

impl Bulkhead {
    /// How many attempts it refused, by the priority of their calls.
    pub fn refusals(&self) -> &Refusals {
        &self.refusals
    }
}
