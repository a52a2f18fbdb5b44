#![deny(warnings)]
//! A parameter's `#[cfg]` goes with its per-attempt copies.

use stormproof::resilient;

#[resilient(jitter = "none", base_ms = 1)]
async fn configured(
    #[cfg(any())] compiled_out: String,
    #[cfg(all())] compiled_in: String,
    #[cfg(all())] counter: &mut u32,
) -> Result<usize, std::io::Error> {
    *counter += 1;
    if *counter < 2 { Err(std::io::ErrorKind::TimedOut.into()) } else { Ok(compiled_in.len()) }
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let mut counter = 0;
    assert_eq!(configured("abc".to_owned(), &mut counter).await.unwrap(), 3);
    assert_eq!(counter, 2);
}
