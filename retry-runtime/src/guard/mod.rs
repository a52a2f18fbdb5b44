//! The one shape every guard has: asked before an attempt starts
//! ([`Guard::admit`]), told how it ended ([`Guard::record`]).
//!
//! A breaker, a budget, a bulkhead, a throttle and a rate limit each
//! decide something different, but the retry loop needs the same two
//! things of all of them, as Polly's strategies and failsafe-go's policies
//! do (`PreExecute`, `PostExecute`): may this attempt go, and how did it
//! go. Written once against this trait, the loop asks them through one
//! admission function ([`GuardSet::admit`]) and tells them through one
//! recording function ([`GuardSet::record`]), in the documented order,
//! whatever the entry point (the attribute, `Policy::run`, the HTTP
//! layers, a hedge) and whatever the clock: the simulator runs the same
//! function over the same guards' pure cores on virtual time.
//!
//! # Adding a guard
//!
//! 1. Its folder, in the shape of the others: its config (validated, with
//!    `Default`), its pure core if it keeps state over time, its type.
//! 2. `impl Guard` for it, beside it: what it holds while an attempt runs
//!    (its `Permit`), when it says go, wait or refuse, what it does with an
//!    attempt's end, and the [`Rejection`] it refuses with.
//! 3. A slot in [`GuardSet`], and its place in [`GuardSet::admit`]'s order
//!    (the module docs of `set` say why the order is what it is).
//! 4. Its name in the registry (declare, look up, a default on first use)
//!    and in the policy (the builder, the attribute's argument table).
//! 5. Its table in the configuration file.
//! 6. Its metrics and dashboard card, and its model in the simulator.

mod set;

pub use set::{Admission, AdmissionOf, GuardSet, Pending, PendingOf, Permits, PermitsOf};

use crate::classify::ErrorClass;
use crate::priority::Priority;
use crate::rejection::Rejection;

/// Which attempt a guard is asked about: the first of a call, a retry
/// (already paid for: the retry decision took its budget token), or a
/// hedge beside a running attempt (paid for at admission, and never
/// worth waiting for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptKind {
    /// The call's first attempt.
    First,
    /// A retry after a failed attempt.
    Retry,
    /// A hedge: one more attempt beside a slow one.
    Hedge,
}

/// What a guard says of an attempt about to start.
#[derive(Debug)]
pub enum Admit<P> {
    /// It may start, holding `P` until it ends.
    Go(P),
    /// Not now, but it may wait (for a bulkhead place, a rate-limit turn).
    Wait,
    /// Not at all: the call gets [`Guard::rejection`].
    Refuse,
}

/// How an admitted attempt ended, as the guards hear it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// It succeeded.
    Success,
    /// It failed with an error of this class (an attempt timeout included:
    /// transient).
    Failed(ErrorClass),
    /// The call's deadline cut it short: a failure for a breaker, no
    /// latency sample, not an accept.
    Cut,
}

/// A guard: asked before each attempt, told how each admitted attempt ended.
///
/// What an admitted attempt holds is plain data (its [`Permit`](Self::Permit)),
/// not a borrow of the guard: the call that holds it hands it back to the
/// guard it came from, through [`record`](Self::record),
/// [`abandon`](Self::abandon) or [`give_back`](Self::give_back), exactly
/// once. So an attempt can hold its permits beside the guards of a scoped
/// registry it also holds, and a simulator can hold them in a queue.
pub trait Guard {
    /// What an admitted attempt holds until it ends: a half-open probe
    /// slot, a bulkhead place; `()` for a guard that holds nothing.
    type Permit;

    /// Whether an attempt of `kind` may start now, for a call of
    /// `priority`: a saturated guard refuses sheddable calls first and
    /// critical ones last (see `crate::priority`); one that is not admits
    /// every priority alike.
    fn admit(&self, kind: AttemptKind, priority: Priority) -> Admit<Self::Permit>;

    /// [`admit`](Self::admit)'s go, when it comes at once and changes
    /// nothing but what the permit holds (a closed breaker's ticket, a free
    /// place, a free turn, a first attempt's count): the plain call's
    /// admission, made as the attempt is made. `None` when the guard must be
    /// asked properly (it would wait, refuse, count a refusal or draw),
    /// having changed nothing. `None` by default: such a guard is always
    /// asked properly.
    #[inline(always)]
    fn admit_quietly(&self, _kind: AttemptKind) -> Option<Self::Permit> {
        None
    }

    /// Whether [`admit`](Self::admit) would say go, taking nothing: asked
    /// before another guard spends what it cannot give back (a rate-limit
    /// turn) on an attempt this one would then refuse. Go by default.
    #[inline]
    fn affords(&self, _kind: AttemptKind) -> bool {
        true
    }

    /// The attempt `permit` admitted ended with `answer`.
    fn record(&self, permit: Self::Permit, answer: Answer);

    /// The attempt `permit` admitted ended without an answer (it was
    /// cancelled): what it held is freed, and nothing is counted.
    fn abandon(&self, permit: Self::Permit);

    /// `permit`'s attempt was certainly never sent (its admission goes on
    /// to wait, or another guard refused it): as [`abandon`](Self::abandon),
    /// and a guard that counts what it admits in all (a breaker's probes
    /// for a trip) counts this one back.
    #[inline]
    fn give_back(&self, permit: Self::Permit) {
        self.abandon(permit);
    }

    /// What the call is refused with when this guard refuses.
    fn rejection(&self) -> Rejection;

    /// This guard refused an attempt of a call of `priority` (its
    /// [`admit`](Self::admit) said refuse, or a wait it asked for did not
    /// come in time): told once per refusal, by the guard set. A guard that
    /// sheds by priority counts it (see [`Refusals`](crate::priority::Refusals)).
    /// Nothing by default.
    #[inline]
    fn refused(&self, _priority: Priority) {}
}

/// A guard that is not there: it admits everything and hears nothing.
impl<G: Guard> Guard for Option<G> {
    type Permit = Option<G::Permit>;

    #[inline(always)]
    fn admit(&self, kind: AttemptKind, priority: Priority) -> Admit<Self::Permit> {
        match self {
            None => Admit::Go(None),
            Some(guard) => match guard.admit(kind, priority) {
                Admit::Go(permit) => Admit::Go(Some(permit)),
                Admit::Wait => Admit::Wait,
                Admit::Refuse => Admit::Refuse,
            },
        }
    }

    #[inline(always)]
    fn admit_quietly(&self, kind: AttemptKind) -> Option<Self::Permit> {
        match self {
            None => Some(None),
            Some(guard) => guard.admit_quietly(kind).map(Some),
        }
    }

    #[inline(always)]
    fn affords(&self, kind: AttemptKind) -> bool {
        self.as_ref().is_none_or(|guard| guard.affords(kind))
    }

    #[inline(always)]
    fn record(&self, permit: Self::Permit, answer: Answer) {
        if let (Some(guard), Some(permit)) = (self, permit) {
            guard.record(permit, answer);
        }
    }

    #[inline(always)]
    fn abandon(&self, permit: Self::Permit) {
        if let (Some(guard), Some(permit)) = (self, permit) {
            guard.abandon(permit);
        }
    }

    #[inline(always)]
    fn give_back(&self, permit: Self::Permit) {
        if let (Some(guard), Some(permit)) = (self, permit) {
            guard.give_back(permit);
        }
    }

    #[inline]
    fn rejection(&self) -> Rejection {
        match self {
            Some(guard) => guard.rejection(),
            None => unreachable!("a guard that is not there refuses nothing"),
        }
    }

    #[inline]
    fn refused(&self, priority: Priority) {
        if let Some(guard) = self {
            guard.refused(priority);
        }
    }
}

/// A shared guard is the guard.
impl<G: Guard> Guard for std::sync::Arc<G> {
    type Permit = G::Permit;

    #[inline(always)]
    fn admit(&self, kind: AttemptKind, priority: Priority) -> Admit<Self::Permit> {
        G::admit(self, kind, priority)
    }

    #[inline(always)]
    fn admit_quietly(&self, kind: AttemptKind) -> Option<Self::Permit> {
        G::admit_quietly(self, kind)
    }

    #[inline(always)]
    fn affords(&self, kind: AttemptKind) -> bool {
        G::affords(self, kind)
    }

    #[inline(always)]
    fn record(&self, permit: Self::Permit, answer: Answer) {
        G::record(self, permit, answer);
    }

    #[inline(always)]
    fn abandon(&self, permit: Self::Permit) {
        G::abandon(self, permit);
    }

    #[inline(always)]
    fn give_back(&self, permit: Self::Permit) {
        G::give_back(self, permit);
    }

    #[inline]
    fn rejection(&self) -> Rejection {
        G::rejection(self)
    }

    #[inline]
    fn refused(&self, priority: Priority) {
        (**self).refused(priority);
    }
}

/// A guard by reference is the guard (a view of a set borrows its slots).
impl<G: Guard> Guard for &G {
    type Permit = G::Permit;

    #[inline(always)]
    fn admit(&self, kind: AttemptKind, priority: Priority) -> Admit<Self::Permit> {
        G::admit(self, kind, priority)
    }

    #[inline(always)]
    fn admit_quietly(&self, kind: AttemptKind) -> Option<Self::Permit> {
        G::admit_quietly(self, kind)
    }

    #[inline(always)]
    fn affords(&self, kind: AttemptKind) -> bool {
        G::affords(self, kind)
    }

    #[inline(always)]
    fn record(&self, permit: Self::Permit, answer: Answer) {
        G::record(self, permit, answer);
    }

    #[inline(always)]
    fn abandon(&self, permit: Self::Permit) {
        G::abandon(self, permit);
    }

    #[inline(always)]
    fn give_back(&self, permit: Self::Permit) {
        G::give_back(self, permit);
    }

    #[inline]
    fn rejection(&self) -> Rejection {
        G::rejection(self)
    }

    #[inline]
    fn refused(&self, priority: Priority) {
        (**self).refused(priority);
    }
}

/// A slot of a set that is known, when the code is compiled, to hold no
/// guard (a function that names no breaker, say): it admits everything,
/// holds nothing and hears nothing, and costs nothing, since the compiler
/// sees that it does nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Absent;

impl Guard for Absent {
    type Permit = ();

    #[inline(always)]
    fn admit(&self, _kind: AttemptKind, _priority: Priority) -> Admit<()> {
        Admit::Go(())
    }

    #[inline(always)]
    fn admit_quietly(&self, _kind: AttemptKind) -> Option<()> {
        Some(())
    }

    #[inline(always)]
    fn record(&self, (): (), _answer: Answer) {}

    #[inline(always)]
    fn abandon(&self, (): ()) {}

    fn rejection(&self) -> Rejection {
        unreachable!("an absent guard refuses nothing")
    }
}
