//! Loading more than one file, a load racing the calls, and the values a
//! file must not slip through: duplicate keys, empty names, a rate mode's
//! key without the rate mode.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use stormproof::{Policy, Registry, budget::BudgetConfig, resilient};

use super::{Fault, error};

#[resilient(name = "config::loaded", max_attempts = 2, base_ms = 1, jitter = "none")]
async fn loaded(calls: &AtomicU32) -> Result<(), Fault> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Fault::Down)
}

#[tokio::test(start_paused = true)]
async fn a_second_load_adds_to_the_first_and_keeps_its_overrides() {
    let registry = Registry::new();
    registry.load_toml("[operations.\"config::loaded\"]\nmax_attempts = 4").unwrap();
    registry.load_toml("[breakers.other]\nfailure_threshold = 3").unwrap();
    let calls = AtomicU32::new(0);
    let _ = registry.scope(loaded(&calls)).await;
    assert_eq!(calls.swap(0, Ordering::SeqCst), 4, "the first load's override still governs the calls");

    // Loading declares: an operation with an override is refused as a
    // guard that exists is, and nothing of that file is applied.
    let err = registry
        .load_toml("[breakers.third]\n[operations.\"config::loaded\"]\nmax_attempts = 3")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "<toml>:2:13: override of operation `config::loaded` already exists: loading declares, use reload to change it"
    );
    assert_eq!(err.problems[0].field.as_deref(), Some("config::loaded"));
    assert!(registry.breaker("third").is_none());
    let _ = registry.scope(loaded(&calls)).await;
    assert_eq!(calls.swap(0, Ordering::SeqCst), 4);

    // A reload's overrides are the file's: this one drops it.
    registry.reload_toml("[breakers.other]\nfailure_threshold = 3").unwrap();
    let _ = registry.scope(loaded(&calls)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2, "compiled again");
}

/// The review's reproduction: calls name the file's breakers while it
/// loads, creating them with the defaults between the load's checks and its
/// declarations. Every load returns `Ok` and leaves every breaker on the
/// file's settings.
#[test]
fn a_call_during_a_load_cannot_leave_a_guard_on_the_defaults() {
    const N: usize = 2000;
    let names: Vec<String> = (0..N).map(|i| format!("b{i:05}")).collect();
    let text: String = names.iter().map(|n| format!("[breakers.{n}]\nfailure_threshold = 3\n")).collect();
    let policies: Arc<Vec<Policy>> =
        Arc::new(names.iter().rev().map(|n| Policy::builder().breaker(n.clone()).build().unwrap()).collect());
    for _ in 0..5 {
        let registry = Registry::new();
        let barrier = Arc::new(Barrier::new(2));
        let (r, b, policies) = (registry.clone(), barrier.clone(), policies.clone());
        let caller = thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            b.wait();
            // Once the load has passed its checks and started declaring,
            // calls name the breakers, last first.
            while r.breaker("b00000").is_none() {
                std::hint::spin_loop();
            }
            runtime.block_on(r.scope(async {
                for policy in policies.iter() {
                    policy.run(|| async { Ok::<_, std::io::Error>(()) }).await.unwrap();
                }
            }));
        });
        barrier.wait();
        let loaded = registry.load_toml(&text);
        caller.join().unwrap();
        loaded.unwrap();
        let lost: Vec<&String> = names
            .iter()
            .filter(|name| registry.breaker(name).unwrap().config().failure_threshold != 3)
            .collect();
        assert!(lost.is_empty(), "load_toml returned Ok but these breakers kept the defaults: {lost:?}");
    }
}

/// A call that names a guard never declared creates it with the defaults;
/// a load afterwards gives it the file's settings (its state kept, the
/// call's guard the same), as a load racing the call does above. Only a
/// guard declared before is refused. One that cannot take the file's
/// settings refuses the file, with nothing applied.
#[tokio::test]
async fn a_load_after_a_call_gives_the_file_settings_to_the_guard_the_call_created() {
    let registry = Registry::new();
    let policy = Policy::builder().breaker("early").budget("early").build().unwrap();
    registry.scope(policy.run(|| async { Ok::<_, std::io::Error>(()) })).await.unwrap();
    let created = registry.breaker("early").expect("the call created it");
    assert_eq!(created.config().failure_threshold, 5, "the defaults");

    let err = registry
        .load_toml(
            "[breakers.early]
[budgets.early]
capacity = 7",
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "<toml>:2:10: budget `early` is a ratio budget (a call created it with the defaults before the file was loaded): a load cannot make it a token_bucket budget, its state would be lost (restart to change it)"
    );
    assert_eq!(err.problems[0].field.as_deref(), Some("early"));

    registry
        .load_toml(
            "[breakers.early]
failure_threshold = 3
[budgets.early]
ratio = 0.5",
        )
        .unwrap();
    assert_eq!(created.config().failure_threshold, 3, "the file's settings, on the guard the call holds");
    assert!(Arc::ptr_eq(&created, &registry.breaker("early").unwrap()));
    let budget = registry.budget("early").unwrap().config();
    assert!(matches!(budget, BudgetConfig::Ratio(r) if r.ratio == 0.5), "{budget:?}");

    let err = registry.load_toml("[breakers.early]").unwrap_err();
    assert_eq!(
        err.to_string(),
        "<toml>:1:11: breaker `early` already exists: loading declares, use reload to change it"
    );
}

#[test]
fn a_duplicate_key_is_named() {
    let err =
        Registry::new().load_toml("[breakers.p]\nfailure_threshold = 1\nfailure_threshold = 2").unwrap_err();
    assert_eq!(err.problems[0].field.as_deref(), Some("failure_threshold"), "{err}");
    assert_eq!(
        err.to_string(),
        "<toml>:3:1: not valid TOML: duplicate key `failure_threshold`: a key is given once"
    );
    let err = error("[operations.\"a::b\"]\nmax_attempts = 2\n[operations.'a::b']\nmax_attempts = 3");
    assert_eq!(err, "<toml>:3:13: not valid TOML: duplicate key `a::b`: a key is given once");
}

#[test]
fn an_empty_name_is_refused_as_the_attribute_refuses_it() {
    for section in ["breakers", "budgets", "bulkheads", "throttles", "rate_limits", "operations"] {
        for name in ["\"\"", "\" \""] {
            let registry = Registry::new();
            let err = registry.load_toml(&format!("[{section}.{name}]")).unwrap_err();
            assert_eq!(err.problems.len(), 1, "{err}");
            let problem = &err.problems[0];
            assert_eq!((problem.line, problem.column), (1, section.len() + 3), "{err}");
            assert_eq!(problem.field.as_deref(), Some(section), "{err}");
            assert!(
                problem.message.starts_with(&format!("`{section}` needs a name here, not an empty string"))
            );
        }
    }
    assert_eq!(
        error("[breakers.\"\"]\nfailure_threshold = 3"),
        "<toml>:1:11: `breakers` needs a name here, not an empty string, like `[breakers.payment]`"
    );
}

#[test]
fn minimum_calls_without_a_failure_rate_is_refused() {
    let err = Registry::new().load_toml("[breakers.p]\nminimum_calls = 20").unwrap_err();
    assert_eq!(err.problems[0].field.as_deref(), Some("minimum_calls"));
    assert_eq!(
        err.to_string(),
        "<toml>:2:17: `minimum_calls` sets the rate mode's floor: give `failure_rate_percent` too"
    );
    let registry = Registry::new();
    registry.load_toml("[breakers.p]\nfailure_rate_percent = 50\nminimum_calls = 20").unwrap();
    assert_eq!(registry.breaker("p").unwrap().config().minimum_calls, 20);
}
