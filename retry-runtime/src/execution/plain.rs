//! The plain first attempt: the attribute's success path with nothing
//! around the attempt but what a plain call needs.
//!
//! Most calls are plain (the global registry's guards, at most a closed
//! breaker, a budget and a bulkhead with a place free, no key, no
//! deadline or attempt timeout (of its own or from an override), no
//! enabled span, not nested in another call's attempt) and most first
//! attempts succeed. For those, [`plain_attempt`] admits the attempt as it is made (the breaker's
//! admission, a bulkhead place, the budget's count of a first attempt) and
//! the attribute's loop polls it in a small future of its own,
//! [`PlainRun`], whose output is the attempt's value itself: the attempt
//! runs in its context, and a success gives the place back and is
//! recorded. No [`Execution`] is built (the loop holds `None`), and no
//! step, phase or timer slot is built, moved or dropped. The bulkhead
//! follows the direct path's rule (see `direct`): the place is held
//! exactly while the attempt is, and given back as it ends or is dropped.
//! A function that names no guard has its plain first attempt run as an
//! [`UnguardedRun`](super::UnguardedRun) instead: the attempt alone.
//!
//! A breaker that is not closed, or a bulkhead with no place free, makes
//! the call not plain: nothing is counted or changed, and the general path
//! asks them (it counts a refusal, or waits for a place). So a plain
//! attempt is never refused, and the first failure is handed to
//! [`after_plain_failure`], which builds the execution the call would have
//! started with (the same guards, and the policy's settings or the
//! override now in force for its retries), then records and decides
//! exactly as the direct path does (it calls the same `failed` step,
//! which gives the place back), leaving a retry's wait to the next
//! attempt; every later attempt goes through [`Execution::attempt`]. For a
//! call that is not plain, `plain_attempt` answers `None`, and its
//! attempts go through [`Execution::attempt`] from the first, on an
//! execution from [`started`], built as `Policy::execution` builds it.
//! `Policy::run` drives the same steps for a call without a key, its
//! attempts made on their first poll (see `lazy`).

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::direct::{Next, PlaceBack, failed, give_back_place};
use super::outcome::{first_attempt_began, succeeded};
use super::start::debug_enabled;
use super::{Execution, LastError, Step};
use crate::breaker::{BreakerPermit, CircuitBreaker, ClosedTicket};
use crate::context;
use crate::error::ErrorHandling;
use crate::guards::Guards;
use crate::policy::{PlainShape, Policy};

pin_project! {
    /// A plain call's first attempt (see the module docs): its output is
    /// the attempt's value, or what [`after_plain_failure`] needs to go on.
    #[derive(Debug)]
    pub struct PlainRun<'p, Fut, G: Guarding> {
        guards: &'p Guards,
        // Which guards: with a bulkhead, the attempt holds a place while `attempt` is `Some`.
        guarding: PhantomData<G>,
        // The breaker's admission (`None` without a breaker), made a
        // permit only to record the outcome.
        admission: Admission<'p>,
        // `None` once finished (dropped as soon as it is done, in its context).
        #[pin]
        attempt: Option<Fut>,
    }

    impl<Fut, G: Guarding> PinnedDrop for PlainRun<'_, Fut, G> {
        fn drop(this: Pin<&mut Self>) {
            // A cancelled attempt is dropped in its context and its place
            // given back; its breaker's admission (a closed breaker's, no
            // probe slot) has nothing to free and records nothing.
            let this = this.project();
            if this.attempt.is_some() {
                let _place_back = may_hold_place::<G>().then(|| PlaceBack(this.guards));
                cancelled(this.attempt);
            }
        }
    }
}

/// Drops a plain attempt that did not finish, in its context (no key, no span).
#[cold]
#[inline(never)]
pub(super) fn cancelled<Fut>(attempt: Pin<&mut Option<Fut>>) {
    context::drop_in(&mut None, None, attempt);
}

/// A plain first attempt that ran and failed: what the call goes on from.
#[derive(Debug)]
pub struct PlainFailure<'p, E> {
    guards: &'p Guards,
    /// The attempt's breaker permit, which records the outcome.
    permit: Option<BreakerPermit<'p>>,
    error: E,
}

impl<'p, E> PlainFailure<'p, E> {
    /// An attempt that ran under `guards` (its `permit`, if any) and failed with `error`.
    #[inline]
    pub(super) fn failed(guards: &'p Guards, permit: Option<BreakerPermit<'p>>, error: E) -> Self {
        PlainFailure { guards, permit, error }
    }
}

/// The admission of a plain call's first attempt, when the call's
/// execution is not built yet (`None`) and a call of `policy` made now is
/// plain; then the attempt runs as a [`PlainRun`]. `G` says which guards
/// the policy names (see [`Guarding`]; the attribute knows). Admitted as
/// the direct path admits, breaker first, but only where that takes no
/// lock and changes nothing it would have to undo: a breaker that is not
/// closed (open: a refusal to count; half-open: a probe slot), a full or
/// adaptive bulkhead (a place to wait for) send the call down the general
/// path, which asks them again. An admitted attempt holds its breaker's
/// admission and its place from now, and the budget has counted it.
#[inline(always)]
pub fn plain_attempt<'p, G: Guarding, S, H>(
    policy: &'p Policy,
    execution: &Option<Execution<'p, S, H>>,
) -> Option<PlainGuards<'p, G>> {
    if execution.is_some() {
        return None;
    }
    let guards = plain_guards::<G>(policy)?;
    if !G::GUARDS {
        // Nothing to ask, nothing to count.
        return Some(PlainGuards { guards, admission: None, guarding: PhantomData });
    }
    let admission = match &guards.breaker {
        None => None,
        Some(breaker) => Some((&**breaker, breaker.try_acquire_closed()?)),
    };
    // The breaker's admission, left here, frees nothing (a closed breaker's: no probe slot).
    if may_hold_place::<G>() && !guards.bulkhead.as_ref().is_none_or(|bulkhead| bulkhead.try_take_place()) {
        return None;
    }
    first_attempt_began(guards);
    Some(PlainGuards { guards, admission, guarding: PhantomData })
}

/// An admitted plain first attempt's guards (see [`plain_attempt`]): its
/// breaker's admission and the bulkhead place it took, if any; one
/// attempt each.
#[derive(Debug)]
pub struct PlainGuards<'p, G> {
    guards: &'p Guards,
    admission: Admission<'p>,
    guarding: PhantomData<G>,
}

/// A closed breaker's admission of a plain attempt, with the breaker
/// (`None` without one): `Copy` and without a destructor. The breaker is
/// kept beside the ticket so that recording tests one `Option`, not the
/// guards' breaker again.
type Admission<'p> = Option<(&'p CircuitBreaker, ClosedTicket)>;

/// The permit of the attempt `admission` admitted, to record its outcome.
#[inline(always)]
fn permit(admission: Admission<'_>) -> Option<BreakerPermit<'_>> {
    admission.map(|(breaker, ticket)| breaker.permit(ticket))
}

/// Which guards a plain call's policy names: none ([`NoGuards`]), a
/// breaker or a budget or both ([`BreakerBudget`]), or a bulkhead too
/// ([`WithBulkhead`]). Chosen by the attribute, which knows, so that a call
/// tests nothing for a guard its function does not name: an unguarded one
/// asks no breaker and records nothing, one without a bulkhead takes and
/// gives back no place. `Policy::run`, which does not know, passes
/// `AnyGuards`: whatever the policy names, found out as the call runs.
pub trait Guarding: sealed::Sealed {
    /// Whether the policy may name a breaker or a budget (or a bulkhead).
    const GUARDS: bool;
    /// Whether it names a bulkhead, whose place the attempt holds (`None`:
    /// as its guards say).
    const BULKHEAD: Option<bool>;
}

/// Whether an attempt under `G` may hold a bulkhead place: then whether
/// it does is whether its guards have a bulkhead.
const fn may_hold_place<G: Guarding>() -> bool {
    !matches!(G::BULKHEAD, Some(false))
}

/// No guard named (see [`Guarding`]).
#[derive(Debug, Clone, Copy)]
pub enum NoGuards {}

/// A breaker, a budget or both, no bulkhead (see [`Guarding`]).
#[derive(Debug, Clone, Copy)]
pub enum BreakerBudget {}

/// A bulkhead, with or without a breaker and a budget (see [`Guarding`]).
#[derive(Debug, Clone, Copy)]
pub enum WithBulkhead {}

/// Whichever guards the policy names (see [`Guarding`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum AnyGuards {}

impl Guarding for NoGuards {
    const GUARDS: bool = false;
    const BULKHEAD: Option<bool> = Some(false);
}

impl Guarding for BreakerBudget {
    const GUARDS: bool = true;
    const BULKHEAD: Option<bool> = Some(false);
}

impl Guarding for WithBulkhead {
    const GUARDS: bool = true;
    const BULKHEAD: Option<bool> = Some(true);
}

impl Guarding for AnyGuards {
    const GUARDS: bool = true;
    const BULKHEAD: Option<bool> = None;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::NoGuards {}
    impl Sealed for super::BreakerBudget {}
    impl Sealed for super::WithBulkhead {}
    impl Sealed for super::AnyGuards {}
}

impl<'p, Fut, G: Guarding> PlainRun<'p, Fut, G> {
    /// The plain first attempt `attempt`, admitted by [`plain_attempt`]
    /// under `plain`: the attribute awaits it at once.
    #[inline(always)]
    pub fn new(plain: PlainGuards<'p, G>, attempt: Fut) -> Self {
        let PlainGuards { guards, admission, guarding } = plain;
        PlainRun { guards, guarding, admission, attempt: Some(attempt) }
    }
}

/// The guards, when a call of `policy` made now is plain: its settings and
/// guard names allow it, and name the guards `G` says (`Policy::plain_shape`:
/// no deadline, attempt timeout or hedging, no throttle or rate limit), no
/// override that sets a deadline or an attempt timeout may be in force (one
/// that tunes the retries is looked up if the attempt fails), DEBUG is off,
/// it is made outside any attempt (no key to inherit, not nested), and its
/// guards are the global registry's. Then it starts as `Execution::start`
/// would start it, which [`after_plain_failure`] does.
#[inline(always)]
fn plain_guards<G: Guarding>(policy: &Policy) -> Option<&Guards> {
    let shape = policy.plain_shape();
    let named = match (G::GUARDS, G::BULKHEAD) {
        (false, _) => shape == PlainShape::NoGuards,
        (true, Some(false)) => shape == PlainShape::BreakerBudget,
        (true, Some(true)) => shape == PlainShape::WithBulkhead,
        (true, None) => shape != PlainShape::Never,
    };
    if named && !policy.override_forbids_plain() && !debug_enabled() && context::outside_attempts() {
        match (G::GUARDS, G::BULKHEAD) {
            // No guard named: none to look up, in any registry.
            (false, _) => Some(Guards::none()),
            // Its shape is the marker's: it names a guard.
            (true, Some(_)) => policy.named_global_guards(),
            (true, None) => policy.global_guards(),
        }
    } else {
        None
    }
}

/// The call's execution, built and started now if it was not (see
/// [`plain_attempt`]): `parts` makes its error slot (which only selects
/// its type) and its error handling. Started in its slot, field by field:
/// built elsewhere and moved there, it would be copied whole.
#[inline(always)]
pub fn started<'e, 'p, S: Default, H>(
    policy: &'p Policy,
    execution: &'e mut Option<Execution<'p, S, H>>,
    parts: impl FnOnce() -> (S, H),
) -> &'e mut Execution<'p, S, H> {
    match execution {
        Some(execution) => execution,
        None => {
            let (_, handling) = parts();
            let execution = execution.insert(Execution::unstarted(policy, handling));
            execution.start();
            execution
        }
    }
}

impl<'p, T, E, Fut, G: Guarding> Future for PlainRun<'p, Fut, G>
where
    Fut: Future<Output = Result<T, E>>,
{
    type Output = Result<T, PlainFailure<'p, E>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let guards = *this.guards;
        match context::poll_keyless(this.attempt, cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(value)) => {
                if may_hold_place::<G>() {
                    give_back_place(guards);
                }
                if G::GUARDS {
                    succeeded(guards, permit(*this.admission));
                }
                Poll::Ready(Ok(value))
            }
            Poll::Ready(Err(error)) => {
                Poll::Ready(Err(PlainFailure::failed(guards, permit(*this.admission), error)))
            }
        }
    }
}

/// Goes on from a plain first attempt that failed, as the direct path would
/// have: the failure is recorded in the breaker and decided on. A retry's
/// wait is left to the next attempt, which waits it out before it is
/// admitted (`More::pending_wait`), so that the attribute's loop awaits
/// nothing here: the error type is never held across an `.await` but the
/// attempt's, and the loop's future has one suspension point fewer. The
/// call's execution is built here (`parts`: see [`started`]), started as
/// the plain call it was.
pub fn after_plain_failure<'p, T, E, S, H>(
    policy: &'p Policy,
    execution: &mut Option<Execution<'p, S, H>>,
    parts: impl FnOnce() -> (S, H),
    failure: PlainFailure<'p, E>,
) -> Step<T, E>
where
    H: ErrorHandling<E>,
    S: LastError<E> + Default,
{
    // Started as the plain call it was (not nested: it started outside
    // attempts), on the override now in force, if any.
    let (_, handling) = parts();
    let execution = execution.insert(Execution::unstarted(policy, handling));
    execution.start_after_plain(failure.guards);
    // The attempt ran: it counts, as `begin_attempt` counts it on the other paths.
    execution.attempts = 1;
    match failed(execution, failure.guards, failure.permit, None, failure.error) {
        Next::Done(step) => step,
        Next::BackOff(wait) => {
            execution.more().pending_wait = Some(wait);
            Step::Retry
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::execution::Kept;
    use crate::settings::Settings;
    use crate::{BreakerConfig, BulkheadConfig, RateLimitConfig, RatioBudget, ThrottleConfig, registry};

    /// Whether the first attempt of a call of `policy` made now is plain,
    /// for a function naming the guards `G` says.
    fn plain_as<G: Guarding>(policy: &Policy) -> bool {
        plain_attempt::<G, _, _>(policy, &None::<Execution<'_, Kept<()>, ()>>).is_some()
    }

    /// Plain with a breaker and a budget (the attribute's `BreakerBudget`).
    fn plain(policy: &Policy) -> bool {
        plain_as::<BreakerBudget>(policy)
    }

    /// Plain holding a bulkhead place (the attribute's `WithBulkhead`).
    fn plain_with_place(policy: &Policy) -> bool {
        plain_as::<WithBulkhead>(policy)
    }

    // The attribute awaits a plain first attempt only for functions that
    // may be plain (`Plan::may_be_plain`); the runtime decides on its own
    // all the same, so these hold whatever the expansion does.
    #[test]
    fn only_a_breaker_a_budget_and_a_bulkhead_with_no_timeout_or_deadline_make_a_call_plain() {
        let global = registry();
        global.declare_breaker("plain-unit-breaker", BreakerConfig::default()).unwrap();
        global.declare_budget("plain-unit-budget", RatioBudget::default()).unwrap();
        global.declare_bulkhead("plain-unit-bulkhead", BulkheadConfig::default()).unwrap();
        global.declare_throttle("plain-unit-throttle", ThrottleConfig::default()).unwrap();
        global.declare_rate_limit("plain-unit-rate-limit", RateLimitConfig::default()).unwrap();
        let guarded = || Policy::builder().breaker("plain-unit-breaker").budget("plain-unit-budget");
        let second = Duration::from_secs(1);

        let unguarded = Policy::builder().build().unwrap();
        assert!(plain_as::<NoGuards>(&unguarded), "no guard at all");
        assert!(!plain(&unguarded) && !plain_with_place(&unguarded), "the attribute's choice must agree");
        assert!(plain(&guarded().build().unwrap()), "a breaker and a budget");
        assert!(plain(&Policy::builder().budget("plain-unit-budget").build().unwrap()), "a budget alone");
        assert!(!plain_as::<NoGuards>(&guarded().build().unwrap()), "guards named: not unguarded");
        assert!(
            plain_as::<AnyGuards>(&guarded().build().unwrap()),
            "`Policy::run`'s marker: whatever is named"
        );
        assert!(plain_as::<AnyGuards>(&unguarded), "`Policy::run`'s marker: nothing named");
        let with_bulkhead = guarded().bulkhead("plain-unit-bulkhead").build().unwrap();
        assert!(plain_with_place(&with_bulkhead), "a bulkhead with a place free");
        let bulkhead = global.bulkhead("plain-unit-bulkhead").unwrap();
        assert_eq!(bulkhead.in_use(), 1, "the plain attempt holds its place from its making");
        bulkhead.give_back_place();
        // The attribute's choice and the policy's names must agree.
        assert!(!plain(&with_bulkhead), "a bulkhead's place is not left untaken");
        assert!(!plain_with_place(&guarded().build().unwrap()), "no bulkhead to take a place from");
        for (not_plain, why) in [
            (guarded().throttle("plain-unit-throttle"), "a throttle"),
            (guarded().rate_limit("plain-unit-rate-limit"), "a rate limit"),
            (guarded().attempt_timeout(second), "an attempt timeout"),
            (guarded().deadline(second), "a deadline"),
            (guarded().hedge(second, 1), "hedging"),
        ] {
            assert!(!plain(&not_plain.clone().build().unwrap()), "{why} makes a call not plain");
            let with_bulkhead = not_plain.bulkhead("plain-unit-bulkhead").build().unwrap();
            assert!(!plain_with_place(&with_bulkhead), "{why} makes a call not plain, with a bulkhead too");
        }
        assert_eq!(bulkhead.in_use(), 0, "a call that is not plain takes no place here");
    }

    #[test]
    fn an_override_that_tunes_the_retries_leaves_a_call_plain_one_with_a_deadline_or_timeout_does_not() {
        registry().declare_breaker("plain-unit-overridden", BreakerConfig::default()).unwrap();
        let built = Policy::builder().breaker("plain-unit-overridden").build().unwrap();
        // The registry counts itself into the policy's 'static counter.
        let policy: &'static Policy = Box::leak(Box::new(built));
        let second = Some(Duration::from_secs(1));
        let compiled = policy.settings();
        let tuned = Settings { max_attempts: 7, ..compiled };
        let holder = crate::Registry::new();
        let hold = |settings: Option<Settings>| {
            let counted = settings
                .map(|settings| ("plain-unit-overridden".to_owned(), (settings, vec![policy.overrides()])));
            holder.replace_overrides(counted.into_iter().collect());
        };

        hold(Some(tuned));
        assert!(policy.may_be_overridden() && plain(policy), "retries tuned: still plain");
        hold(Some(Settings { deadline: second, ..tuned }));
        assert!(!plain(policy), "a deadline is armed as the call starts");
        hold(Some(Settings { attempt_timeout: second, ..tuned }));
        assert!(!plain(policy), "so is an attempt timeout (the same weight, replacing the deadline)");
        hold(Some(compiled));
        assert!(policy.may_be_overridden() && plain(policy), "plain again, the override still counted");
        hold(Some(Settings { deadline: second, ..tuned }));
        drop(holder);
        assert!(!policy.may_be_overridden() && plain(policy), "a registry that goes counts itself out whole");
    }

    #[test]
    fn a_full_or_adaptive_bulkhead_makes_a_call_not_plain_and_takes_nothing() {
        let global = registry();
        let one_place = BulkheadConfig { max_concurrent: 1, ..BulkheadConfig::default() };
        global.declare_bulkhead("plain-unit-full", one_place).unwrap();
        let policy = Policy::builder().bulkhead("plain-unit-full").build().unwrap();
        let bulkhead = global.bulkhead("plain-unit-full").unwrap();
        let held = bulkhead.try_acquire().expect("the one place");
        assert!(!plain_with_place(&policy), "no place free: the general path waits for one");
        assert_eq!(bulkhead.in_use(), 1, "and no place was taken");
        drop(held);
        assert!(plain_with_place(&policy), "a place free again");
        bulkhead.give_back_place();

        let adaptive =
            BulkheadConfig { adaptive: Some(crate::AdaptiveLimit::aimd(4)), ..BulkheadConfig::default() };
        global.declare_bulkhead("plain-unit-adaptive", adaptive).unwrap();
        let policy = Policy::builder().bulkhead("plain-unit-adaptive").build().unwrap();
        assert!(!plain_with_place(&policy), "an adaptive bulkhead's places carry a start time");
        assert_eq!(global.bulkhead("plain-unit-adaptive").unwrap().in_use(), 0);
    }

    #[test]
    fn a_breaker_not_closed_or_a_full_bulkhead_makes_a_call_not_plain_having_counted_nothing() {
        let global = registry();
        let trips_at_once = BreakerConfig {
            failure_threshold: 1,
            open_for: Duration::from_secs(3_600),
            ..BreakerConfig::default()
        };
        global.declare_breaker("plain-unit-trips", trips_at_once).unwrap();
        global.declare_budget("plain-unit-counts", RatioBudget::default()).unwrap();
        let one_place = BulkheadConfig { max_concurrent: 1, ..BulkheadConfig::default() };
        global.declare_bulkhead("plain-unit-one-place", one_place).unwrap();
        let policy = Policy::builder()
            .breaker("plain-unit-trips")
            .budget("plain-unit-counts")
            .bulkhead("plain-unit-one-place")
            .build()
            .unwrap();
        let breaker = global.breaker("plain-unit-trips").unwrap();
        let budget = global.budget("plain-unit-counts").unwrap();
        let bulkhead = global.bulkhead("plain-unit-one-place").unwrap();
        let first_attempts = || budget.totals().first_attempts;

        assert!(plain_with_place(&policy), "admitted: a closed breaker and a free place");
        assert_eq!((first_attempts(), bulkhead.in_use()), (1, 1), "counted once, holding the place");
        bulkhead.give_back_place();

        let held = bulkhead.try_acquire().expect("the one place");
        assert!(!plain_with_place(&policy), "no place free");
        assert_eq!(first_attempts(), 1, "a call sent down the general path is counted there, not here");
        drop(held);

        breaker.try_acquire().expect("closed").record(crate::Outcome::Failure);
        assert_eq!(breaker.state(), crate::BreakerState::Open);
        assert!(!plain_with_place(&policy), "an open breaker");
        assert_eq!(
            breaker.totals().rejections,
            0,
            "the general path asks it again: one refusal counted there"
        );
        assert_eq!((first_attempts(), bulkhead.in_use()), (1, 0), "nothing counted, no place taken");
    }

    #[test]
    fn a_call_inside_a_scoped_registry_or_with_its_execution_built_is_not_plain() {
        let scoped = crate::Registry::new();
        scoped.declare_breaker("plain-unit-scoped", BreakerConfig::default()).unwrap();
        let policy = Policy::builder().breaker("plain-unit-scoped").build().unwrap();
        let in_scope = block_on(scoped.scope(async { plain(&policy) }));
        assert!(!in_scope, "a scoped registry's guards are never cached: not plain");
        let unguarded = Policy::builder().build().unwrap();
        assert!(
            block_on(scoped.scope(async { plain_as::<NoGuards>(&unguarded) })),
            "no guard to look up: plain anywhere"
        );
        let built = Some(policy.execution(None, Kept::<()>::default(), ()));
        assert!(
            plain_attempt::<BreakerBudget, _, _>(&policy, &built).is_none(),
            "only the first attempt, before the execution is built"
        );
    }

    /// Runs a future that never waits to its end.
    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
    }
}
