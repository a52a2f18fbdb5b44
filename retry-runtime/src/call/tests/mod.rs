//! The call's own rules, seen from inside: which calls start plain (their
//! success path builds no `RareState`), and that every guard hears of an
//! attempt exactly once, whatever stops it.

mod plain;

use std::time::Duration;

use super::{Call, Kept, Started};
use crate::error::ByTraits;
use crate::policy::Policy;
use crate::settings::Settings;
use crate::{
    breaker::BreakerConfig, budget::RatioBudget, bulkhead::BulkheadConfig, rate_limit::RateLimitConfig,
    registry, throttle::ThrottleConfig,
};

/// Runs a future that never waits to its end.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(future)
}

/// Makes one successful attempt of a call of `policy`, and says whether the
/// call started plain and kept its success path free of `RareState`.
fn plain(policy: &Policy) -> bool {
    block_on(plain_now(policy))
}

async fn plain_now(policy: &Policy) -> bool {
    let built = super::rare_state::built::so_far();
    let mut call = Call::new(policy, None, Kept::<std::io::Error>::default(), ByTraits);
    let step = call.attempt(async { Ok::<_, std::io::Error>(()) }).await;
    assert!(matches!(step, super::Step::Done(Ok(()))));
    assert!(call.rare.is_none(), "a call's optional state goes as it ends");
    call.started == Started::Plain && super::rare_state::built::so_far() == built
}

#[test]
fn only_a_deadline_a_scope_or_an_enabled_span_build_a_calls_optional_state_a_key_only_with_a_failure() {
    let global = registry();
    global.declare_breaker("call-unit-breaker", BreakerConfig::default()).unwrap();
    global.declare_budget("call-unit-budget", RatioBudget::default()).unwrap();
    global.declare_bulkhead("call-unit-bulkhead", BulkheadConfig::default()).unwrap();
    global.declare_throttle("call-unit-throttle", ThrottleConfig::default()).unwrap();
    global.declare_rate_limit("call-unit-rate-limit", RateLimitConfig::default()).unwrap();
    let guarded = || Policy::builder().breaker("call-unit-breaker").budget("call-unit-budget");
    let second = Duration::from_secs(1);

    assert!(plain(&Policy::builder().build().unwrap()), "no guard at all");
    assert!(plain(&guarded().build().unwrap()), "a breaker and a budget");
    for (also_plain, what) in [
        (guarded().bulkhead("call-unit-bulkhead"), "a bulkhead"),
        (guarded().throttle("call-unit-throttle"), "a throttle"),
        (guarded().rate_limit("call-unit-rate-limit"), "a rate limit"),
        (guarded().attempt_timeout(second), "an attempt timeout (armed from the settings)"),
        (guarded().hedge(second, 1), "hedging"),
    ] {
        assert!(plain(&also_plain.build().unwrap()), "{what} keeps a call plain");
    }
    assert_eq!(global.bulkhead("call-unit-bulkhead").unwrap().in_use(), 0, "every place given back");
    assert!(!plain(&guarded().deadline(second).build().unwrap()), "a deadline is armed as the call starts");

    // A key of the call's own stays in its slot while it is plain: its
    // attempt sees it, and the optional state is built only by a failure,
    // after which the retry sees it too.
    let keyed = guarded().max_attempts(2).base(Duration::ZERO).build().unwrap();
    let (built, seen) = block_on(async {
        let built = super::rare_state::built::so_far();
        let mut call = Call::new(&keyed, Some("k".into()), Kept::<std::io::Error>::default(), ByTraits);
        let step = call.attempt(async { Ok::<_, std::io::Error>(crate::idempotency_key()) }).await;
        let super::Step::Done(Ok(seen)) = step else { panic!("the attempt succeeds") };
        (super::rare_state::built::so_far() - built, seen)
    });
    assert_eq!((built, seen.as_deref()), (0, Some("k")), "a key alone keeps a call plain");
    let (built, seen) = block_on(async {
        let built = super::rare_state::built::so_far();
        let mut call = Call::new(&keyed, Some("k".into()), Kept::<std::io::Error>::default(), ByTraits);
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let first = call.attempt(async { Err::<Option<std::sync::Arc<str>>, _>(reset) }).await;
        assert!(matches!(first, super::Step::Retry), "a reset is retried");
        let second = call.attempt(async { Ok::<_, std::io::Error>(crate::idempotency_key()) }).await;
        let super::Step::Done(Ok(seen)) = second else { panic!("the retry succeeds") };
        (super::rare_state::built::so_far() - built, seen)
    });
    assert_eq!(built, 1, "a failure builds it");
    assert_eq!(seen.as_deref(), Some("k"), "the retry keeps the key");

    let scoped = crate::Registry::new();
    let in_scope = block_on(scoped.scope(async { plain_now(&guarded().build().unwrap()).await }));
    assert!(!in_scope, "a scoped registry's guards are the call's own, not the policy's cache");
}

#[test]
fn an_override_that_tunes_the_retries_leaves_a_call_plain_one_with_a_deadline_or_timeout_does_not() {
    overrides_and_plain("call-unit-overridden", plain);
}

/// An override that tunes the retries leaves a call of a policy naming a
/// breaker `name` plain as `plain` sees it; one with a deadline or an
/// attempt timeout does not; a registry that goes counts itself out. Both
/// ways of seeing a first attempt plain (the call's, and the plain
/// attempt's own, `plain::plain_as`) are held to it.
fn overrides_and_plain(name: &str, plain: impl Fn(&'static Policy) -> bool) {
    registry().declare_breaker(name, BreakerConfig::default()).unwrap();
    let built = Policy::builder().breaker(name.to_owned()).build().unwrap();
    // The registry counts itself into the policy's 'static counter.
    let policy: &'static Policy = Box::leak(Box::new(built));
    let second = Some(Duration::from_secs(1));
    let compiled = policy.settings();
    let tuned = Settings { max_attempts: 7, ..compiled };
    let holder = crate::Registry::new();
    // The keys a file would give: the ones these overrides change.
    let from_file = crate::settings::SettingSource::File { file: "unit".to_owned(), line: 1 };
    let sources = crate::settings::SettingSources {
        max_attempts: from_file.clone(),
        attempt_timeout: from_file.clone(),
        deadline: from_file,
        ..crate::settings::SettingSources::COMPILED
    };
    let hold = |settings: Option<Settings>| {
        let counted = settings.map(|settings| {
            (name.to_owned(), (settings, sources.clone(), vec![(policy.overrides(), compiled)]))
        });
        holder.replace_overrides(counted.into_iter().collect());
    };

    hold(Some(tuned));
    assert!(policy.may_be_overridden() && plain(policy), "retries tuned: still plain");
    let in_force = holder.operation_override_for(name, policy.overrides(), compiled);
    assert_eq!(in_force.as_deref(), Some(&tuned), "the override reaches the policy");
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
fn a_refused_call_is_counted_once_by_the_guard_that_refused_it_and_by_none_after_it() {
    let global = registry();
    let trips_at_once = BreakerConfig {
        failure_threshold: 1,
        open_for: Duration::from_secs(3_600),
        ..BreakerConfig::default()
    };
    global.declare_breaker("call-unit-trips", trips_at_once).unwrap();
    global.declare_budget("call-unit-counts", RatioBudget::default()).unwrap();
    let one_place =
        BulkheadConfig { max_concurrent: 1, max_wait: Some(Duration::ZERO), ..BulkheadConfig::default() };
    global.declare_bulkhead("call-unit-one-place", one_place).unwrap();
    let policy = Policy::builder()
        .max_attempts(1)
        .breaker("call-unit-trips")
        .budget("call-unit-counts")
        .bulkhead("call-unit-one-place")
        .build()
        .unwrap();
    let breaker = global.breaker("call-unit-trips").unwrap();
    let budget = global.budget("call-unit-counts").unwrap();
    let bulkhead = global.bulkhead("call-unit-one-place").unwrap();
    let first_attempts = || budget.totals().first_attempts;
    let call = || block_on(policy.run(|| async { Ok::<_, std::io::Error>(()) }));

    call().unwrap();
    assert_eq!((first_attempts(), bulkhead.in_use()), (1, 0), "counted once, the place given back");

    let held = bulkhead.try_acquire().expect("the one place");
    assert!(call().is_err(), "no place within max_wait");
    assert_eq!(first_attempts(), 1, "refused by the bulkhead: the budget, after it, counts nothing");
    drop(held);

    breaker.try_acquire().expect("closed").record(crate::breaker::Outcome::Failure);
    assert_eq!(breaker.state(), crate::breaker::BreakerState::Open);
    assert!(call().is_err(), "an open breaker");
    assert_eq!(breaker.totals().rejections, 1, "one refusal, counted once");
    assert_eq!((first_attempts(), bulkhead.in_use()), (1, 0), "nothing counted after it, no place taken");
}
