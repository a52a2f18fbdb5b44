#![deny(warnings)]
//! The runtime found under another name, as tokio's `crate = "..."` allows.

use stormproof as r;

mod vendored {
    pub use stormproof as runtime;
}

#[r::resilient(crate = "r")]
async fn through_rename() -> Result<u32, r::Rejection> {
    Ok(1)
}

#[r::resilient(crate = "crate::vendored::runtime", max_attempts = 2)]
async fn through_reexport(n: u32) -> Result<u32, r::Rejection> {
    Ok(n)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(through_rename().await.unwrap(), 1);
    assert_eq!(through_reexport(2).await.unwrap(), 2);
}
