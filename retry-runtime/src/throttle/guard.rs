//! The throttle as a [`Guard`]: it refuses a request locally with the
//! probability the SRE book's formula gives, and counts every answered
//! request, as an accept when the answer was not overload.

use std::sync::atomic::Ordering;

use super::Throttle;
use crate::guard::{Admit, Answer, AttemptKind, Guard};
use crate::priority::{Priority, Refusals};
use crate::rejection::Rejection;

impl Guard for Throttle {
    type Permit = ();

    #[inline(always)]
    fn admit(&self, _kind: AttemptKind, priority: Priority) -> Admit<()> {
        if Throttle::admit_as(self, priority) { Admit::Go(()) } else { Admit::Refuse }
    }

    /// While a default request's refusal probability is zero (the
    /// dependency accepts enough), a request goes out without a draw and
    /// counts nothing until answered: the plain call's admission (never a
    /// sheddable call's: see `Throttle::admitted_quietly`). Its answer is
    /// counted when it comes, at that time (an overloaded dependency's
    /// answers come late, and must land in the window as they come).
    #[inline(always)]
    fn admit_quietly(&self, _kind: AttemptKind) -> Option<()> {
        self.admitted_quietly().then_some(())
    }

    /// An accept is an answer that is not overload: a success, a conflict,
    /// a permanent error (the breaker's non-failures); a deadline's cut is
    /// a request sent and not answered in time.
    #[inline(always)]
    fn record(&self, (): (), answer: Answer) {
        let accepted = match answer {
            Answer::Success => true,
            Answer::Failed(class) => !class.is_failure(),
            Answer::Cut => false,
        };
        self.answered(accepted);
    }

    /// A request dropped unanswered is not counted.
    #[inline(always)]
    fn abandon(&self, (): ()) {}

    #[cold]
    fn rejection(&self) -> Rejection {
        Rejection::Throttled { throttle: self.name().to_owned() }
    }

    #[cold]
    fn refused(&self, priority: Priority) {
        self.refusals.count(priority);
    }
}

impl Throttle {
    /// A default or critical request admitted now when nothing needs
    /// drawing: the refusal probability of a default one is zero (a
    /// critical one's is no higher), as it is while the dependency accepts
    /// enough. `false`, having changed nothing, when a refusal must be
    /// drawn for ([`admit_as`](Self::admit_as) does that). A sheddable
    /// call with a throttle is never plain (see `Policy::plain_settings`):
    /// its refusal probability is higher than a default one's.
    #[inline]
    pub(super) fn admitted_quietly(&self) -> bool {
        if self.window.probability_at(self.now(), self.tenth(), self.k(), self.cap()) != 0.0 {
            return false;
        }
        if self.above_zero.load(Ordering::Relaxed) {
            self.report_zero();
        }
        true
    }

    /// How many attempts it refused, by the priority of their calls.
    pub fn refusals(&self) -> &Refusals {
        &self.refusals
    }
}
