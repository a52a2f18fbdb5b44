//! The budget as a [`Guard`]: it counts a call's first attempt (a ratio
//! budget's share is of first attempts), pays for a hedge as it is
//! admitted (a retry was paid for when it was decided), refills on a
//! success, and hears of retryable failures (retry throttling counts them).

use super::{RetryBudget, RetryCause, Withdrawal};
use crate::classify::ErrorClass;
use crate::guard::{Admit, Answer, AttemptKind, Guard};
use crate::priority::Priority;
use crate::rejection::Rejection;

impl Guard for RetryBudget {
    /// What a hedge took, given back if it is never sent.
    type Permit = Option<Withdrawal>;

    #[inline(always)]
    fn admit(&self, kind: AttemptKind, _priority: Priority) -> Admit<Option<Withdrawal>> {
        match kind {
            AttemptKind::First => {
                self.on_first_attempt();
                Admit::Go(None)
            }
            AttemptKind::Retry => Admit::Go(None),
            AttemptKind::Hedge => match self.withdraw(RetryCause::Transient) {
                Some(taken) => Admit::Go(Some(taken)),
                None => Admit::Refuse,
            },
        }
    }

    #[inline(always)]
    fn admit_quietly(&self, kind: AttemptKind) -> Option<Option<Withdrawal>> {
        match kind {
            AttemptKind::First => {
                self.on_first_attempt();
                Some(None)
            }
            AttemptKind::Retry => Some(None),
            AttemptKind::Hedge => None,
        }
    }

    /// A hedge is paid for at admission: one the budget cannot pay for is
    /// refused before a rate-limit turn is taken for it.
    #[inline]
    fn affords(&self, kind: AttemptKind) -> bool {
        kind != AttemptKind::Hedge || self.affords_retry()
    }

    #[inline(always)]
    fn record(&self, _taken: Option<Withdrawal>, answer: Answer) {
        match answer {
            Answer::Success => self.deposit(),
            Answer::Failed(ErrorClass::Transient | ErrorClass::Throttled { .. }) => self.record_failure(),
            Answer::Failed(_) | Answer::Cut => {}
        }
    }

    /// A hedge that was sent and dropped unanswered spent its token.
    #[inline(always)]
    fn abandon(&self, _taken: Option<Withdrawal>) {}

    #[inline]
    fn give_back(&self, taken: Option<Withdrawal>) {
        if let Some(taken) = taken {
            self.give_back_retry(taken);
        }
    }

    #[cold]
    fn rejection(&self) -> Rejection {
        Rejection::BudgetExhausted { budget: self.name().to_owned() }
    }
}
