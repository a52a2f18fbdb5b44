#![deny(warnings)]
//! The function's own attributes stay on it, and lints about the function
//! as written apply to it as they would without `#[resilient]`: an
//! `#[expect]` of one is fulfilled, bare or under a `#[cfg_attr]` (`all()`
//! stands for a predicate such as `test`, which holds here). The expanded
//! function keeps the span of the user's braces; with the attribute's, the
//! compiler took it for generated code and skipped such lints (`dead_code`
//! here, clippy's `missing_errors_doc` and the like), leaving every
//! `#[expect]` of them unfulfilled.

use stormproof::resilient;

/// Never called.
#[resilient(jitter = "none", base_ms = 1)]
#[expect(dead_code, reason = "kept for a later caller")]
async fn unused(n: u32) -> Result<u32, std::io::Error> {
    Ok(n)
}

#[resilient(jitter = "none", base_ms = 1)]
#[cfg_attr(all(), expect(dead_code))]
async fn unused_in_tests(n: u32) -> Result<u32, std::io::Error> {
    Ok(n)
}

/// Lints in the body keep theirs.
#[resilient(jitter = "none", base_ms = 1)]
#[allow(clippy::cast_possible_truncation)]
#[must_use = "the byte is the point"]
#[expect(non_snake_case)]
async fn truncated(Wide: u64) -> Result<u8, std::io::Error> {
    #[expect(unused_variables)]
    let unused = ();
    Ok(Wide as u8)
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    assert_eq!(truncated(258).await.unwrap(), 2);
}
