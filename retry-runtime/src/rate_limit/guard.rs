//! The rate limit as a [`Guard`]: it admits while a turn is free, and
//! otherwise lets the attempt wait for one (at most `max_wait`, never past
//! the call's deadline). A turn, once taken, is spent: it cannot be given
//! back (see the guard set's docs).

use super::RateLimit;
use crate::guard::{Admit, Answer, AttemptKind, Guard};
use crate::priority::{Priority, Refusals};
use crate::rejection::Rejection;

impl Guard for RateLimit {
    type Permit = ();

    #[inline(always)]
    fn admit(&self, _kind: AttemptKind, _priority: Priority) -> Admit<()> {
        if self.try_acquire() { Admit::Go(()) } else { Admit::Wait }
    }

    #[inline(always)]
    fn admit_quietly(&self, _kind: AttemptKind) -> Option<()> {
        self.try_acquire().then_some(())
    }

    #[inline(always)]
    fn record(&self, (): (), _answer: Answer) {}

    #[inline(always)]
    fn abandon(&self, (): ()) {}

    #[cold]
    fn rejection(&self) -> Rejection {
        Rejection::RateLimited { limiter: self.keyed.named(self.name()) }
    }

    #[cold]
    fn refused(&self, priority: Priority) {
        self.refusals.count(priority);
    }
}

impl RateLimit {
    /// How many attempts it refused, by the priority of their calls.
    pub fn refusals(&self) -> &Refusals {
        &self.refusals
    }
}
