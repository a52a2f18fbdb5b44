#![deny(warnings)]
//! A parameter's lint attributes (`#[allow]`, `#[expect]`, ...) go with its
//! per-attempt copies, as its `#[cfg]` does: an unused parameter the user
//! allowed, or expected to be unused, stays quiet under `#![deny(warnings)]`,
//! and an `#[expect]` under a `#[cfg_attr]` is fulfilled as a bare one is
//! (`all()` stands for a predicate such as `test`, which holds here).

use stormproof::resilient;

#[resilient(jitter = "none", base_ms = 1)]
async fn allowed(
    #[allow(unused_variables)] unused: String,
    #[expect(unused_variables)] expected: String,
    #[allow(non_snake_case)] Loud: u32,
    #[allow(unused_variables)] unused_ref: &mut u32,
    #[cfg_attr(all(), expect(unused_variables))] expected_when: String,
    #[cfg_attr(all(), allow(non_snake_case), expect(unused_variables))] ExpectedRef: &mut u32,
) -> Result<u32, std::io::Error> {
    Ok(Loud)
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let mut n = 0;
    assert_eq!(allowed("a".to_owned(), "b".to_owned(), 3, &mut n, "c".to_owned(), &mut 0).await.unwrap(), 3);
}
