//! Two functions of one operation name (`name = "..."` on both, to share
//! the name's guards, metrics and overrides), compiled with different
//! settings: a table of that name changes in each only the keys it gives,
//! in a scoped registry and in the global one, and is checked against
//! each.

use super::*;

#[resilient(
    name = "config::twins",
    max_attempts = 4,
    base_ms = 1,
    jitter = "none",
    breaker = "none",
    budget = "none"
)]
async fn twin_of_four(calls: &AtomicU32) -> Result<(), Fault> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Fault::Down)
}

#[resilient(
    name = "config::twins",
    max_attempts = 2,
    base_ms = 2,
    jitter = "none",
    breaker = "none",
    budget = "none"
)]
async fn twin_of_two(calls: &AtomicU32) -> Result<(), Fault> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Fault::Down)
}

/// The table both twins are given: a cap of 2 ms, below the twin of
/// four's third wait (4 ms), and equal to the twin of two's base.
const CAPPED: &str = "[operations.\"config::twins\"]\ncap_ms = 2\n";

/// Each twin's attempts and how long its call took, run in `registry`'s
/// scope (or outside any, in the global one's).
async fn both(registry: Option<&Registry>) -> [(u32, Duration); 2] {
    let (four, two) = (AtomicU32::new(0), AtomicU32::new(0));
    let start = Instant::now();
    let _ = match registry {
        Some(registry) => registry.scope(twin_of_four(&four)).await,
        None => twin_of_four(&four).await,
    };
    let four_took = start.elapsed();
    let start = Instant::now();
    let _ = match registry {
        Some(registry) => registry.scope(twin_of_two(&two)).await,
        None => twin_of_two(&two).await,
    };
    [(four.load(Ordering::SeqCst), four_took), (two.load(Ordering::SeqCst), start.elapsed())]
}

/// What each twin runs on in `registry`: attempts, base and cap, sorted.
fn in_effect(registry: &Registry) -> Vec<(u32, Duration, Duration)> {
    let mut twins: Vec<_> = registry
        .operations()
        .into_iter()
        .filter(|op| op.name == "config::twins")
        .map(|op| (op.effective.max_attempts, op.effective.backoff.base, op.effective.backoff.cap))
        .collect();
    twins.sort();
    twins
}

/// Each twin keeps its own attempts and base: the twin of four waits 1, 2,
/// then 2 (its 4 ms capped by the table), the twin of two waits its own
/// 2 ms once. (Both took the first-linked twin's settings before: one of
/// them made the other's number of attempts.)
#[tokio::test(start_paused = true)]
async fn a_table_changes_in_each_function_of_its_name_only_the_keys_it_gives() {
    let registry = Registry::new();
    assert_eq!(both(Some(&registry)).await, [(4, ms(1 + 2 + 4)), (2, ms(2))], "compiled");
    registry.load_toml(CAPPED).unwrap();
    assert_eq!(both(Some(&registry)).await, [(4, ms(1 + 2 + 2)), (2, ms(2))], "each its own, capped");
    assert_eq!(in_effect(&registry), [(2, ms(2), ms(2)), (4, ms(1), ms(2))], "what each runs on");

    let _only_this_test = GLOBAL_OVERRIDES.lock().await;
    let global = stormproof::registry();
    global.load_toml(CAPPED).unwrap();
    assert_eq!(both(None).await, [(4, ms(1 + 2 + 2)), (2, ms(2))], "the global registry's, each its own");
    assert_eq!(in_effect(global), [(2, ms(2), ms(2)), (4, ms(1), ms(2))]);
    global.reload_toml("").unwrap();
    assert_eq!(both(None).await, [(4, ms(1 + 2 + 4)), (2, ms(2))], "compiled again");
}

/// A table valid over one twin but not over the other (a cap below the
/// twin of two's base) is refused, naming the key, and nothing is applied.
#[tokio::test(start_paused = true)]
async fn a_table_is_checked_against_every_function_of_its_name() {
    let registry = Registry::new();
    let err = registry.load_toml("[operations.\"config::twins\"]\ncap_ms = 1\n").unwrap_err().to_string();
    assert_eq!(err, "<toml>:2:10: `base_ms` must not exceed `cap_ms` (2 > 1)");
    assert_eq!(both(Some(&registry)).await, [(4, ms(1 + 2 + 4)), (2, ms(2))], "nothing applied");
}
