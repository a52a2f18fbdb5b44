//! Which first attempts run plain (`Call::plain`), and what their guards
//! count when one does or does not: the rules of `execution::plain`'s
//! tests, on the one call path. Two of them changed with it, and say so:
//! a rate limit with a turn free and an adaptive bulkhead no longer keep a
//! call off the plain path (a turn is taken quietly, and an adaptive place
//! carries its start time; nor, since, does a throttle that refuses
//! nothing, unless the call is sheddable); and a function's shape is its
//! policy's by construction (the attribute derives both from the same
//! names), so a shape that disagrees is not a case to decide.

use std::time::Duration;

use crate::call::parts::Unkeyed;
use crate::call::plain::Plain;
use crate::call::{Call, Kept};
use crate::error::ByTraits;
use crate::guards::{AnyShape, Named, Shape, Unnamed};
use crate::policy::Policy;
use crate::{
    breaker::BreakerConfig, budget::RatioBudget, bulkhead::BulkheadConfig, rate_limit::RateLimitConfig,
    registry, throttle::ThrottleConfig,
};

/// No guard named.
type NoGuards = (Unnamed, Unnamed, Unnamed, Unnamed, Unnamed);
/// A breaker and a budget.
type BreakerBudget = (Unnamed, Named, Unnamed, Unnamed, Named);
/// A breaker, a bulkhead and a budget.
type WithBulkhead = (Unnamed, Named, Named, Unnamed, Named);
/// A bulkhead alone.
type BulkheadAlone = (Unnamed, Unnamed, Named, Unnamed, Unnamed);
/// A budget alone.
type BudgetAlone = (Unnamed, Unnamed, Unnamed, Unnamed, Named);
/// A breaker, a budget and a throttle.
type WithThrottle = (Named, Named, Unnamed, Unnamed, Named);
/// A breaker, a budget and a rate limit.
type WithRateLimit = (Unnamed, Named, Unnamed, Named, Named);

/// The first attempt of a call of `policy` made now into an empty slot,
/// seen as shape `W`, if it is plain (its permits held until it is dropped).
fn first<W: Shape>(policy: &Policy) -> Option<Held<'_, W>> {
    let parts = Unkeyed(|| (Kept::<std::io::Error>::default(), ByTraits));
    Call::<Kept<std::io::Error>, ByTraits>::plain_as::<_, W>(&None, policy, &parts).map(Held)
}

/// A plain first attempt's admission, handed back (counting nothing) as
/// it drops: as the attempt would be, dropped unpolled.
struct Held<'p, W: Shape>(Plain<'p, W>);

impl<W: Shape> Held<'_, W> {
    fn release(self) {
        drop(self.0.attempt(std::future::pending::<Result<(), std::io::Error>>()));
    }
}

/// Whether the first attempt of a call of `policy` made now is plain and
/// timed (`Call::plain_timed`, seen slot by slot); what it took is handed back.
fn timed_plain(policy: &Policy) -> bool {
    let parts = Unkeyed(|| (Kept::<std::io::Error>::default(), ByTraits));
    let plain = Call::<Kept<std::io::Error>, ByTraits>::plain_timed_as::<_, AnyShape>(&None, policy, &parts);
    plain.map(|plain| drop(plain.attempt(std::future::pending::<Result<(), std::io::Error>>()))).is_some()
}

/// Whether the first attempt of a call of `policy` made now is plain,
/// seen as shape `W`; what it took is handed back.
fn plain_as<W: Shape>(policy: &Policy) -> bool {
    first::<W>(policy).map(Held::release).is_some()
}

/// Runs a future that never waits to its end.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
}

#[test]
fn guards_that_admit_quietly_and_no_timeout_deadline_or_hedging_make_a_call_plain() {
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
    assert!(plain_as::<BreakerBudget>(&guarded().build().unwrap()), "a breaker and a budget");
    assert!(
        plain_as::<BudgetAlone>(&Policy::builder().budget("plain-unit-budget").build().unwrap()),
        "a budget alone"
    );
    assert!(plain_as::<AnyShape>(&guarded().build().unwrap()), "`Policy::run`'s shape: whatever is named");
    assert!(plain_as::<AnyShape>(&unguarded), "`Policy::run`'s shape: nothing named");

    let with_bulkhead = guarded().bulkhead("plain-unit-bulkhead").build().unwrap();
    let bulkhead = global.bulkhead("plain-unit-bulkhead").unwrap();
    let held = first::<WithBulkhead>(&with_bulkhead).expect("a bulkhead with a place free");
    assert_eq!(bulkhead.in_use(), 1, "the plain attempt holds its place from its making");
    held.release();
    assert_eq!(bulkhead.in_use(), 0, "and gives it back, dropped unpolled");
    assert!(plain_as::<AnyShape>(&with_bulkhead), "`Policy::run`'s shape, with a bulkhead");
    assert_eq!(bulkhead.in_use(), 0);

    let limited = guarded().rate_limit("plain-unit-rate-limit").build().unwrap();
    assert!(plain_as::<WithRateLimit>(&limited), "a rate limit with a turn free");
    let throttled = guarded().throttle("plain-unit-throttle").build().unwrap();
    // A throttle counts a request when it is answered, and draws a refusal
    // only while the dependency is refusing: a healthy one's admits quietly.
    assert!(plain_as::<WithThrottle>(&throttled), "a throttle that refuses nothing");
    assert!(plain_as::<AnyShape>(&throttled), "a throttle, for `Policy::run` too");
    // A sheddable call's refusal is drawn for with its own multiple of `k`:
    // the plain call's admission, which knows no priority, is a default one's.
    let shed = || guarded().throttle("plain-unit-throttle").priority(crate::Priority::Sheddable);
    assert!(!plain_as::<WithThrottle>(&shed().build().unwrap()), "a sheddable call with a throttle");
    assert!(!timed_plain(&shed().attempt_timeout(second).build().unwrap()), "timed, too");
    let critical = guarded().throttle("plain-unit-throttle").priority(crate::Priority::Critical);
    assert!(plain_as::<WithThrottle>(&critical.build().unwrap()), "a critical call is refused last");
    // An `on_stop` hook reports the call's elapsed time: its first attempt
    // is plain as a timed one, its start read if it waits.
    let hooked = guarded().on_stop(|_| {}).build().unwrap();
    assert!(!plain_as::<BreakerBudget>(&hooked), "an `on_stop` hook: not plain untimed");
    assert!(timed_plain(&hooked), "an `on_stop` hook: plain, timed");
    for (not_plain, why) in [
        (guarded().attempt_timeout(second), "an attempt timeout"),
        (guarded().deadline(second), "a deadline"),
        (guarded().hedge(second, 1), "hedging"),
    ] {
        assert!(
            !plain_as::<BreakerBudget>(&not_plain.clone().build().unwrap()),
            "{why} makes a call not plain"
        );
        assert!(
            !plain_as::<AnyShape>(&not_plain.clone().build().unwrap()),
            "{why}: not for `Policy::run` either"
        );
        let with_bulkhead = not_plain.bulkhead("plain-unit-bulkhead").build().unwrap();
        assert!(
            !plain_as::<WithBulkhead>(&with_bulkhead),
            "{why} makes a call not plain, with a bulkhead too"
        );
    }
    assert_eq!(bulkhead.in_use(), 0, "a call that is not plain takes no place here");
}

#[test]
fn an_override_that_tunes_the_retries_leaves_a_call_plain_one_with_a_deadline_or_timeout_does_not() {
    super::overrides_and_plain("plain-unit-overridden", |policy| {
        plain_as::<(Unnamed, Named, Unnamed, Unnamed, Unnamed)>(policy)
    });
}

#[test]
fn a_full_bulkhead_makes_a_call_not_plain_and_takes_nothing_an_adaptive_one_does_not() {
    let global = registry();
    let one_place = BulkheadConfig { max_concurrent: 1, ..BulkheadConfig::default() };
    global.declare_bulkhead("plain-unit-full", one_place).unwrap();
    let policy = Policy::builder().bulkhead("plain-unit-full").build().unwrap();
    let bulkhead = global.bulkhead("plain-unit-full").unwrap();
    let held = bulkhead.try_acquire().expect("the one place");
    assert!(!plain_as::<BulkheadAlone>(&policy), "no place free: the general path waits for one");
    assert_eq!(bulkhead.in_use(), 1, "and no place was taken");
    drop(held);
    assert!(plain_as::<BulkheadAlone>(&policy), "a place free again");
    assert_eq!(bulkhead.in_use(), 0);

    let adaptive = BulkheadConfig {
        adaptive: Some(crate::bulkhead::AdaptiveLimit::aimd(4)),
        ..BulkheadConfig::default()
    };
    global.declare_bulkhead("plain-unit-adaptive", adaptive).unwrap();
    let policy = Policy::builder().bulkhead("plain-unit-adaptive").build().unwrap();
    let held = first::<BulkheadAlone>(&policy).expect("an adaptive bulkhead's place carries its start time");
    assert_eq!(global.bulkhead("plain-unit-adaptive").unwrap().in_use(), 1);
    held.release();
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

    let held = first::<WithBulkhead>(&policy).expect("admitted: a closed breaker and a free place");
    assert_eq!((first_attempts(), bulkhead.in_use()), (1, 1), "counted once, holding the place");
    held.release();

    let place = bulkhead.try_acquire().expect("the one place");
    assert!(!plain_as::<WithBulkhead>(&policy), "no place free");
    assert_eq!(first_attempts(), 1, "a call sent down the general path is counted there, not here");
    drop(place);

    breaker.try_acquire().expect("closed").record(crate::breaker::Outcome::Failure);
    assert_eq!(breaker.state(), crate::breaker::BreakerState::Open);
    assert!(!plain_as::<WithBulkhead>(&policy), "an open breaker");
    assert_eq!(breaker.totals().rejections, 0, "the general path asks it again: one refusal counted there");
    assert_eq!((first_attempts(), bulkhead.in_use()), (1, 0), "nothing counted, no place taken");
}

#[test]
fn a_call_inside_a_scoped_registry_or_already_built_is_not_plain() {
    let scoped = crate::Registry::new();
    scoped.declare_breaker("plain-unit-scoped", BreakerConfig::default()).unwrap();
    let policy = Policy::builder().breaker("plain-unit-scoped").build().unwrap();
    let breaker_only = |policy| plain_as::<(Unnamed, Named, Unnamed, Unnamed, Unnamed)>(policy);
    assert!(
        !block_on(scoped.scope(async { breaker_only(&policy) })),
        "a scoped registry's guards are never cached"
    );
    assert!(!block_on(scoped.scope(async { plain_as::<AnyShape>(&policy) })), "nor for `Policy::run`");
    let unguarded = Policy::builder().build().unwrap();
    assert!(
        block_on(scoped.scope(async { plain_as::<NoGuards>(&unguarded) })),
        "no guard to look up: plain anywhere"
    );

    let built = Some(Call::new(&policy, None, Kept::<std::io::Error>::default(), ByTraits));
    let parts = Unkeyed(|| (Kept::<std::io::Error>::default(), ByTraits));
    assert!(
        Call::plain_as::<_, (Unnamed, Named, Unnamed, Unnamed, Unnamed)>(&built, &policy, &parts).is_none(),
        "only the first attempt, before the call is built"
    );
}
