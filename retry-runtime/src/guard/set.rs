//! The guards of one call, and the one order they are asked in.
//!
//! **Throttle, breaker, bulkhead, rate limit, budget.** The throttle counts
//! every request the application makes (the SRE book's `requests`), so it
//! comes first and refuses without touching anything else; the breaker
//! refuses fast when the dependency is down, before a bulkhead place or a
//! rate-limit turn is spent on an attempt that cannot run; the two that
//! may wait come next; the budget comes last, since only a hedge pays it
//! at admission (a retry paid when it was decided), and a hedge refused by
//! another guard must cost nothing.
//!
//! **Nothing is held that the attempt may never use.** An attempt that
//! goes on to wait holds no half-open probe slot meanwhile (the breaker's
//! permit is given back, and asked for again after the wait): with a
//! saturated bulkhead, a held slot would stall the breaker's recovery. An
//! attempt refused after the breaker admitted it gives the probe back too,
//! so a trip's allowance of probes (a fleet's share of a round) is not
//! spent on a request never sent.
//!
//! **The place before the turn, and the place held through the turn's
//! wait.** A turn is the request's slot in the dependency's quota and
//! cannot be given back (governor's GCRA has no such thing, and a turn
//! handed back after later ones were scheduled would let two requests go
//! closer together than the rate allows), so it is taken only for an
//! attempt the bulkhead has admitted, and the budget is asked first
//! whether it would pay for a hedge (only a race for the last token can
//! still spend a turn on a hedge that does not run). resilience4j, whose
//! rate limiter sits outside its bulkhead, spends the permit.
//!
//! **A hedge never waits, nor does a sheddable call**: a hedge that would
//! have to queue is not worth it, and a sheddable call is the first to
//! give way when a guard is saturated (see `crate::priority`); one the
//! bulkhead or the rate limit cannot admit at once is refused, costing
//! nothing.

use super::{Admit, Answer, AttemptKind, Guard};
use crate::priority::Priority;
use crate::rejection::Rejection;

/// Whether an attempt of `kind` of a call of `priority` may wait for a
/// place or a turn (see the module docs).
#[inline(always)]
fn may_wait(kind: AttemptKind, priority: Priority) -> bool {
    kind != AttemptKind::Hedge && priority != Priority::Sheddable
}

/// The guards of one call, each in its slot (`Option<G>` for a guard the
/// call may or may not have); asked in the order of the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct GuardSet<T, B, K, R, U> {
    /// The adaptive client-side throttle.
    pub throttle: T,
    /// The circuit breaker.
    pub breaker: B,
    /// The bulkhead (concurrency limit).
    pub bulkhead: K,
    /// The rate limit.
    pub rate_limit: R,
    /// The retry budget.
    pub budget: U,
}

/// What every guard of a set gave an admitted attempt (each guard's
/// [`Permit`](Guard::Permit), in the set's order): each recorded,
/// abandoned or given back exactly once, when it ends.
#[derive(Debug)]
pub struct Permits<T, B, K, R, U> {
    /// The throttle's.
    pub throttle: T,
    /// The breaker's: a probe slot when half-open.
    pub breaker: B,
    /// The bulkhead's: a place.
    pub bulkhead: K,
    /// The rate limit's.
    pub rate_limit: R,
    /// The budget's.
    pub budget: U,
}

/// What an attempt waits for, when admission cannot finish at once: the
/// caller waits for it (at most the guard's `max_wait`, never past the
/// call's deadline), then resumes with [`GuardSet::after_place`] or
/// [`GuardSet::after_turn`], or gives it up with [`GuardSet::give_up`].
/// The breaker's permit is not held meanwhile.
#[derive(Debug)]
pub enum Pending<T, K> {
    /// A bulkhead place, then a rate-limit turn if there is a rate limit.
    Place {
        /// The throttle's permit, held through the wait.
        throttle: T,
    },
    /// A rate-limit turn, holding the attempt's place.
    Turn {
        /// The throttle's permit, held through the wait.
        throttle: T,
        /// The bulkhead's place, held through the wait.
        place: K,
    },
}

/// What admission said: go with these permits, wait for something first,
/// or refused, with the rejection of the guard that refused.
#[derive(Debug)]
pub enum Admission<T, B, K, R, U> {
    /// Admitted.
    Go(Permits<T, B, K, R, U>),
    /// Admitted once this comes (see [`Pending`]).
    Wait(Pending<T, K>),
    /// Refused.
    Refuse(Rejection),
}

/// What a set of guards of these types admits with.
pub type AdmissionOf<T, B, K, R, U> = Admission<
    <T as Guard>::Permit,
    <B as Guard>::Permit,
    <K as Guard>::Permit,
    <R as Guard>::Permit,
    <U as Guard>::Permit,
>;

/// What an attempt admitted by a set of guards of these types holds.
pub type PermitsOf<T, B, K, R, U> = Permits<
    <T as Guard>::Permit,
    <B as Guard>::Permit,
    <K as Guard>::Permit,
    <R as Guard>::Permit,
    <U as Guard>::Permit,
>;

/// What an attempt of a set of guards of these types waits for.
pub type PendingOf<T, K> = Pending<<T as Guard>::Permit, <K as Guard>::Permit>;

impl<T: Guard, B: Guard, K: Guard, R: Guard, U: Guard> GuardSet<T, B, K, R, U> {
    /// The one admission function: asks each guard, in order, whether an
    /// attempt of `kind` of a call of `priority` may start now (see the
    /// module docs).
    #[inline(always)]
    pub fn admit(&self, kind: AttemptKind, priority: Priority) -> AdmissionOf<T, B, K, R, U> {
        let throttle = match self.throttle.admit(kind, priority) {
            Admit::Go(permit) => permit,
            // A throttle never waits.
            Admit::Wait | Admit::Refuse => return Admission::Refuse(refusal(&self.throttle, priority)),
        };
        let breaker = match self.breaker.admit(kind, priority) {
            Admit::Go(permit) => permit,
            Admit::Wait | Admit::Refuse => {
                self.throttle.give_back(throttle);
                return Admission::Refuse(refusal(&self.breaker, priority));
            }
        };
        let bulkhead = match self.bulkhead.admit(kind, priority) {
            Admit::Go(permit) => permit,
            Admit::Wait if may_wait(kind, priority) => {
                self.breaker.give_back(breaker);
                return Admission::Wait(Pending::Place { throttle });
            }
            Admit::Wait | Admit::Refuse => {
                self.breaker.give_back(breaker);
                self.throttle.give_back(throttle);
                return Admission::Refuse(refusal(&self.bulkhead, priority));
            }
        };
        self.after_the_bulkhead(kind, priority, throttle, breaker, bulkhead)
    }

    /// Admission when every guard admits quietly (see
    /// [`Guard::admit_quietly`]), in the same order, or `None` having
    /// changed nothing: then the attempt is to be admitted by
    /// [`admit`](Self::admit). A turn is the last thing taken, since it
    /// cannot be given back; the budget's count after it never fails.
    #[inline(always)]
    pub fn admit_quietly(&self, kind: AttemptKind) -> Option<PermitsOf<T, B, K, R, U>> {
        let throttle = self.throttle.admit_quietly(kind)?;
        let Some(breaker) = self.breaker.admit_quietly(kind) else {
            self.throttle.give_back(throttle);
            return None;
        };
        let Some(bulkhead) = self.bulkhead.admit_quietly(kind) else {
            self.breaker.give_back(breaker);
            self.throttle.give_back(throttle);
            return None;
        };
        let Some(rate_limit) = self.rate_limit.admit_quietly(kind) else {
            self.refused_before_the_turn(throttle, breaker, bulkhead);
            return None;
        };
        let Some(budget) = self.budget.admit_quietly(kind) else {
            unreachable!("a budget admits a first attempt or a retry quietly")
        };
        Some(Permits { throttle, breaker, bulkhead, rate_limit, budget })
    }

    /// Admission resumed once a place came: the breaker asked again (one
    /// that opened meanwhile ends the call with no turn spent), then the
    /// rate limit and the budget.
    #[inline]
    pub fn after_place(
        &self,
        kind: AttemptKind,
        priority: Priority,
        throttle: T::Permit,
        place: K::Permit,
    ) -> AdmissionOf<T, B, K, R, U> {
        let breaker = match self.breaker.admit(kind, priority) {
            Admit::Go(permit) => permit,
            Admit::Wait | Admit::Refuse => {
                self.bulkhead.give_back(place);
                self.throttle.give_back(throttle);
                return Admission::Refuse(refusal(&self.breaker, priority));
            }
        };
        self.after_the_bulkhead(kind, priority, throttle, breaker, place)
    }

    /// Admission resumed once a turn came: the breaker asked again, then
    /// the budget.
    #[inline]
    pub fn after_turn(
        &self,
        kind: AttemptKind,
        priority: Priority,
        throttle: T::Permit,
        place: K::Permit,
        rate_limit: R::Permit,
    ) -> AdmissionOf<T, B, K, R, U> {
        let breaker = match self.breaker.admit(kind, priority) {
            Admit::Go(permit) => permit,
            Admit::Wait | Admit::Refuse => {
                self.rate_limit.give_back(rate_limit);
                self.bulkhead.give_back(place);
                self.throttle.give_back(throttle);
                return Admission::Refuse(refusal(&self.breaker, priority));
            }
        };
        self.the_budget(kind, priority, throttle, breaker, place, rate_limit)
    }

    /// Gives up what a wait held, when it did not come (the guard's
    /// `max_wait` passed, or the deadline) or the call was dropped.
    #[inline]
    pub fn give_up(&self, pending: PendingOf<T, K>) {
        match pending {
            Pending::Place { throttle } => self.throttle.give_back(throttle),
            Pending::Turn { throttle, place } => {
                self.bulkhead.give_back(place);
                self.throttle.give_back(throttle);
            }
        }
    }

    /// The rate limit, then the budget, for an attempt the bulkhead admitted.
    #[inline(always)]
    fn after_the_bulkhead(
        &self,
        kind: AttemptKind,
        priority: Priority,
        throttle: T::Permit,
        breaker: B::Permit,
        bulkhead: K::Permit,
    ) -> AdmissionOf<T, B, K, R, U> {
        // A turn cannot be given back: not one for a hedge the budget would refuse.
        if !self.budget.affords(kind) {
            self.refused_before_the_turn(throttle, breaker, bulkhead);
            return Admission::Refuse(refusal(&self.budget, priority));
        }
        let rate_limit = match self.rate_limit.admit(kind, priority) {
            Admit::Go(permit) => permit,
            Admit::Wait if may_wait(kind, priority) => {
                self.breaker.give_back(breaker);
                return Admission::Wait(Pending::Turn { throttle, place: bulkhead });
            }
            Admit::Wait | Admit::Refuse => {
                self.refused_before_the_turn(throttle, breaker, bulkhead);
                return Admission::Refuse(refusal(&self.rate_limit, priority));
            }
        };
        self.the_budget(kind, priority, throttle, breaker, bulkhead, rate_limit)
    }

    #[cold]
    fn refused_before_the_turn(&self, throttle: T::Permit, breaker: B::Permit, bulkhead: K::Permit) {
        self.bulkhead.give_back(bulkhead);
        self.breaker.give_back(breaker);
        self.throttle.give_back(throttle);
    }

    /// The budget, last.
    #[inline(always)]
    fn the_budget(
        &self,
        kind: AttemptKind,
        priority: Priority,
        throttle: T::Permit,
        breaker: B::Permit,
        bulkhead: K::Permit,
        rate_limit: R::Permit,
    ) -> AdmissionOf<T, B, K, R, U> {
        match self.budget.admit(kind, priority) {
            Admit::Go(budget) => Admission::Go(Permits { throttle, breaker, bulkhead, rate_limit, budget }),
            Admit::Wait | Admit::Refuse => {
                // The turn is spent (it cannot be given back): only a race
                // for the budget's last token gets here (see `affords`).
                self.rate_limit.give_back(rate_limit);
                self.refused_before_the_turn(throttle, breaker, bulkhead);
                Admission::Refuse(refusal(&self.budget, priority))
            }
        }
    }

    /// The one recording function: tells every guard how the attempt
    /// `permits` admitted ended. The place first, so that it is free
    /// before anything else runs.
    #[inline(always)]
    pub fn record(&self, permits: PermitsOf<T, B, K, R, U>, answer: Answer) {
        let Permits { throttle, breaker, bulkhead, rate_limit, budget } = permits;
        self.bulkhead.record(bulkhead, answer);
        self.throttle.record(throttle, answer);
        self.breaker.record(breaker, answer);
        self.rate_limit.record(rate_limit, answer);
        self.budget.record(budget, answer);
    }

    /// The attempt `permits` admitted was dropped unfinished: every guard
    /// frees what it held, and counts nothing.
    #[inline]
    pub fn abandon(&self, permits: PermitsOf<T, B, K, R, U>) {
        let Permits { throttle, breaker, bulkhead, rate_limit, budget } = permits;
        self.bulkhead.abandon(bulkhead);
        self.throttle.abandon(throttle);
        self.breaker.abandon(breaker);
        self.rate_limit.abandon(rate_limit);
        self.budget.abandon(budget);
    }
}

/// What a call gets when `guard` refuses an attempt of `priority`; the
/// guard hears of the refusal first (see [`Guard::refused`]).
#[cold]
fn refusal<G: Guard>(guard: &G, priority: Priority) -> Rejection {
    guard.refused(priority);
    guard.rejection()
}
