//! The future `Policy::run` returns: one call's retry loop, written out by
//! hand rather than as an `async fn`.
//!
//! Why by hand: the type of an `async fn`'s future carries every bound of
//! the function, so an error type that does not fit was reported three
//! times (at the method, at the call, and at `.await`). [`Run`] is a named
//! type with no bound on the error: `Policy::run` alone asks that `E` fit
//! (and takes `E`'s traits there as functions, `traits_of::TraitsOf`),
//! and a misfit is one compile error, at the call.
//!
//! The loop is the one every entry point runs: a plain call's first
//! attempt, seen as the attribute would see its guards (`plain`, or
//! `timed` for a policy with an attempt timeout or a deadline); if it
//! fails, or the call is not plain, the call is built and every further
//! attempt runs in one [`Running`] state, owned here and started `again`
//! for each attempt, which makes its attempt with `op` once the guards
//! admit it (so `op` is never called for an attempt they refuse).

use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

use super::hedge::Round;
use super::parts::Unkeyed;
use super::phase::Phase;
use super::plain::{PlainAttempt, PlainFailure};
use super::running::Running;
use super::timed::TimedAttempt;
use super::{Call, CallTarget, Kept, Step};
use crate::error::ErrorHandling;
use crate::guards::{AnyShape, Named, Shape, Unnamed};
use crate::policy::LoopGuards;

/// The key of a call of [`Run`]: none ([`NoKey`]), or an idempotency key
/// (`Option<Arc<str>>`, taken as the call is built).
pub trait RunKey {
    /// Whether the call has a key, which leaves `Run`'s own inline first
    /// attempt out: the key is handed to the call, which starts plain with
    /// it in its slot and polls each attempt in it (`Call::poll_in_context`).
    /// (An inline first attempt here with a copy of the key was measured
    /// slower than that: the copy's two atomic counts, and a second entry
    /// into the attempt's context so that the closure is called in the key.)
    const KEYED: bool;
    /// The key, for the call built now.
    fn take(&mut self) -> Option<Arc<str>>;
}

/// No idempotency key: [`Policy::run`](crate::Policy::run)'s calls.
#[derive(Debug, Clone, Copy)]
pub struct NoKey;

impl RunKey for NoKey {
    const KEYED: bool = false;

    #[inline(always)]
    fn take(&mut self) -> Option<Arc<str>> {
        None
    }
}

impl RunKey for Option<Arc<str>> {
    const KEYED: bool = true;

    #[inline]
    fn take(&mut self) -> Option<Arc<str>> {
        Option::take(self)
    }
}

/// A call owned by the attempt state that runs it (see the module docs).
pub struct Owned<T>(T);

impl<T> Deref for Owned<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for Owned<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// The guards of a policy naming nothing, a breaker, a budget, or both, as
/// the attribute sees them (see `guards::Shape`).
type Unguarded = (Unnamed, Unnamed, Unnamed, Unnamed, Unnamed);
type BreakerAlone = (Unnamed, Named, Unnamed, Unnamed, Unnamed);
type BudgetAlone = (Unnamed, Unnamed, Unnamed, Unnamed, Named);
type BreakerBudget = (Unnamed, Named, Unnamed, Unnamed, Named);

/// The call of a `Run`, once built.
type RunCall<'p, H, E> = Owned<Call<'p, Kept<E>, H>>;

/// The attempts' state of a `Run` of a hedging policy.
type HedgingAttempts<'p, H, F, Fut, E> =
    Running<'p, 'p, RunCall<'p, H, E>, Kept<E>, H, Fut, F, AnyShape, Round<'p, Fut>>;

pin_project! {
    /// Where a [`Run`] is.
    #[project = StateProj]
    enum State<'p, H, F, Fut: Future, E> {
        /// Not polled yet: the call has not started.
        Start,
        /// A plain first attempt, for each way its guards are seen.
        Unguarded { #[pin] attempt: PlainAttempt<'p, Fut, Unguarded> },
        Breaker { #[pin] attempt: PlainAttempt<'p, Fut, BreakerAlone> },
        Budget { #[pin] attempt: PlainAttempt<'p, Fut, BudgetAlone> },
        BreakerBudget { #[pin] attempt: PlainAttempt<'p, Fut, BreakerBudget> },
        Other { #[pin] attempt: PlainAttempt<'p, Fut, AnyShape> },
        // Raced with the timer of its attempt timeout and deadline (see
        // `poll_timed`).
        Timed { #[pin] attempt: TimedAttempt<'p, Fut, AnyShape> },
        /// The call, built, and the state of its attempts.
        Calling { #[pin] running: Running<'p, 'p, RunCall<'p, H, E>, Kept<E>, H, Fut, F> },
        /// The same for a call of a hedging policy, whose rounds make the
        /// state larger: boxed, so that no other call's future grows by it.
        Hedging { running: Pin<Box<HedgingAttempts<'p, H, F, Fut, E>>> },
    }
}

pin_project! {
    /// The future [`Policy::run`](crate::Policy::run) and its kin return:
    /// the call's first success, or its last error (see there).
    ///
    /// It holds only its arguments until first polled: the call starts
    /// then.
    #[must_use = "futures do nothing unless `.await`ed or polled"]
    #[project = RunProj]
    pub struct Run<'p, Tg, K, H, F, Fut: Future, E> {
        target: Tg,
        key: K,
        handling: H,
        // Moved into the attempts' state once the call is built.
        op: Option<F>,
        #[pin]
        state: State<'p, H, F, Fut, E>,
    }
}

impl<'p, Tg, K, H, F, Fut: Future, E> Run<'p, Tg, K, H, F, Fut, E> {
    /// A call of `target` with `key`, its errors handled by `handling`,
    /// each attempt made by `op`.
    #[inline(always)]
    pub(super) fn new(target: Tg, key: K, handling: H, op: F) -> Self {
        Run { target, key, handling, op: Some(op), state: State::Start }
    }
}

impl<Tg, K, H, F, Fut: Future, E> std::fmt::Debug for Run<'_, Tg, K, H, F, Fut, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run").finish_non_exhaustive()
    }
}

impl<'p, T, E, Tg, K, H, F, Fut> Future for Run<'p, Tg, K, H, F, Fut, E>
where
    Tg: CallTarget<'p>,
    K: RunKey,
    H: ErrorHandling<E> + Copy,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    type Output = Result<T, E>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, E>> {
        if let State::Start = self.as_ref().get_ref().state {
            start(self.as_mut());
        }
        // A call with a key has no inline first attempt here (see
        // `RunKey::KEYED`): its call polls its attempts, starting plain with
        // the key in its slot, inlined as an `async fn`'s would be.
        if K::KEYED {
            return poll_attempts(self, cx);
        }
        // A plain first attempt, made by `op` as it is first polled: its
        // success ends the call (and drops `op`, so that a poll after the
        // end panics rather than make another attempt), its failure goes
        // on in `poll_call`.
        macro_rules! first {
            ($attempt:ident, $op:ident, $poll:path) => {{
                let Some(maker) = $op.as_mut() else { panic!("`Run` polled after it finished") };
                match ready!($poll($attempt, maker, cx)) {
                    Ok(value) => {
                        *$op = None;
                        return Poll::Ready(Ok(value));
                    }
                    Err(failure) => after_plain(self.as_mut(), failure),
                }
            }};
        }
        let this = self.as_mut().project();
        let op = this.op;
        let step = match this.state.project() {
            StateProj::Unguarded { attempt } => first!(attempt, op, PlainAttempt::poll_made),
            StateProj::Breaker { attempt } => first!(attempt, op, PlainAttempt::poll_made),
            StateProj::Budget { attempt } => first!(attempt, op, PlainAttempt::poll_made),
            StateProj::BreakerBudget { attempt } => first!(attempt, op, PlainAttempt::poll_made),
            StateProj::Other { attempt } => first!(attempt, op, PlainAttempt::poll_made),
            StateProj::Timed { attempt } => first!(attempt, op, poll_timed),
            _ => Step::Retry,
        };
        match step {
            Step::Done(result) => Poll::Ready(result),
            Step::Retry => poll_call(self, cx),
        }
    }
}

/// The call's attempts after a plain first one, or all of them (see the
/// module docs): out of line, so that the plain call's poll stays small
/// enough to be inlined into its caller's.
#[inline(never)]
fn poll_call<'p, T, E, Tg, K, H, F, Fut>(
    run: Pin<&mut Run<'p, Tg, K, H, F, Fut, E>>,
    cx: &mut Context<'_>,
) -> Poll<Result<T, E>>
where
    H: ErrorHandling<E>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    poll_attempts(run, cx)
}

/// The call's attempts in their one state (see [`poll_call`]).
#[inline(always)]
fn poll_attempts<'p, T, E, Tg, K, H, F, Fut>(
    run: Pin<&mut Run<'p, Tg, K, H, F, Fut, E>>,
    cx: &mut Context<'_>,
) -> Poll<Result<T, E>>
where
    H: ErrorHandling<E>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut state = run.project().state;
    loop {
        let step = match state.as_mut().project() {
            StateProj::Calling { mut running } => match ready!(running.as_mut().poll(cx)) {
                Step::Retry => {
                    running.again(Phase::Admitting);
                    continue;
                }
                step => step,
            },
            StateProj::Hedging { running } => match ready!(poll_hedging(running.as_mut(), cx)) {
                Step::Retry => {
                    running.as_mut().again(Phase::Hedged);
                    continue;
                }
                step => step,
            },
            _ => unreachable!("a plain first attempt is polled by `Run::poll`"),
        };
        if let Step::Done(result) = step {
            return Poll::Ready(result);
        }
    }
}

/// A hedging call's attempt (or round), polled out of line: inlined beside
/// the other attempts' poll, it made that one too large for LLVM to inline
/// what it calls.
#[inline(never)]
fn poll_hedging<'p, T, E, H, F, Fut>(
    running: Pin<&mut HedgingAttempts<'p, H, F, Fut, E>>,
    cx: &mut Context<'_>,
) -> Poll<Step<T, E>>
where
    H: ErrorHandling<E>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    running.poll(cx)
}

/// A plain first attempt raced with the timer of its attempt timeout and
/// deadline, every slot looked at, polled out of line: inlined, it grew
/// the loop's poll past what LLVM inlines into the caller's, which every
/// call of `run` paid for.
#[inline(never)]
fn poll_timed<'p, T, E, F, Fut>(
    attempt: Pin<&mut TimedAttempt<'p, Fut, AnyShape>>,
    op: &mut F,
    cx: &mut Context<'_>,
) -> Poll<Result<T, PlainFailure<'p, E, AnyShape>>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    attempt.poll_made(op, cx)
}

/// The call's start: its plain first attempt, admitted quietly, if it is
/// plain (see `Call::plain_as`), to be made by `op` as it is first polled;
/// else the call, built, and the state of its attempts.
#[inline(always)]
fn start<'p, T, E, Tg, K, H, F, Fut>(run: Pin<&mut Run<'p, Tg, K, H, F, Fut, E>>)
where
    Tg: CallTarget<'p>,
    K: RunKey,
    H: ErrorHandling<E> + Copy,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut this = run.project();
    let target = *this.target;
    let policy = target.policy();
    if !K::KEYED && policy.compiled_settings().hedge.is_none() {
        let parts = Unkeyed(|| (Kept::<E>::default(), *this.handling));
        let no_call: Option<Call<'p, Kept<E>, H>> = None;
        macro_rules! plain_as {
            ($variant:ident, $shape:ty) => {
                if let Some(plain) = Call::plain_as::<_, $shape>(&no_call, target, &parts) {
                    this.state.set(State::$variant { attempt: plain.attempt_made_on_poll() });
                    return;
                }
            };
        }
        match policy.loop_guards() {
            LoopGuards::Unguarded => plain_as!(Unguarded, Unguarded),
            LoopGuards::Breaker => plain_as!(Breaker, BreakerAlone),
            LoopGuards::Budget => plain_as!(Budget, BudgetAlone),
            LoopGuards::BreakerBudget => plain_as!(BreakerBudget, BreakerBudget),
            LoopGuards::Other => plain_as!(Other, AnyShape),
            LoopGuards::Timed => {
                if let Some(plain) = Call::plain_timed_as::<_, AnyShape>(&no_call, target, &parts) {
                    this.state.set(State::Timed { attempt: plain.attempt_made_on_poll() });
                    return;
                }
            }
        }
    }
    // Built in place: the state is `Start`, which drops nothing, and this
    // is inlined where that is known.
    let call = Call::new(policy, this.key.take(), Kept::default(), *this.handling).with_target(target);
    run_on(this.op, this.state.as_mut(), call);
}

/// The call, built, runs its attempts in one state from now on, which
/// takes `op` to make them.
#[inline(always)]
fn run_on<'p, H, F, Fut: Future, E>(
    op: &mut Option<F>,
    mut state: Pin<&mut State<'p, H, F, Fut, E>>,
    call: Call<'p, Kept<E>, H>,
) {
    let Some(op) = op.take() else { unreachable!("a call is built once") };
    if call.policy.compiled_settings().hedge.is_some() {
        let running = Running::new(Owned(call), Phase::Hedged, None, op, None);
        state.set(State::Hedging { running: Box::pin(running) });
    } else {
        state.set(State::Calling { running: Running::new(Owned(call), Phase::Admitting, None, op, None) });
    }
}

/// A plain first attempt failed: the call is built as the plain call it
/// was (`Call::after_plain`), which ends or goes on with its next attempt.
#[cold]
#[inline(never)]
fn after_plain<'p, T, E, Tg, K, H, F, Fut, V>(
    run: Pin<&mut Run<'p, Tg, K, H, F, Fut, E>>,
    failure: PlainFailure<'p, E, V>,
) -> Step<T, E>
where
    Tg: CallTarget<'p>,
    H: ErrorHandling<E> + Copy,
    Fut: Future<Output = Result<T, E>>,
    V: Shape,
{
    let this = run.project();
    let handling = *this.handling;
    let mut slot: Option<Call<'p, Kept<E>, H>> = None;
    match Call::after_plain(&mut slot, *this.target, Unkeyed(|| (Kept::default(), handling)), failure) {
        Step::Retry => {
            let Some(call) = slot else { unreachable!("a plain call's failure builds its call") };
            run_on(this.op, this.state, call);
            Step::Retry
        }
        done => {
            // Over: `op` goes, as on success (see `Run::poll`).
            *this.op = None;
            done
        }
    }
}
