#![deny(warnings)]
//! The error types services already return, as they are: `anyhow::Error`,
//! `Box<dyn Error + Send + Sync>`, `std::io::Error`, `tonic::Status`, a
//! foreign type through `stormproof::Error<E>`, and `classify = path`.

use stormproof::{Error, ErrorClass, Rejection, resilient};

#[resilient(max_attempts = 2, base_ms = 1)]
async fn with_anyhow(n: u32) -> anyhow::Result<u32> {
    anyhow::ensure!(n > 0, "n must be positive");
    Ok(n)
}

#[resilient(max_attempts = 2, base_ms = 1)]
async fn with_box(n: u32) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
    let parsed: u32 = n.to_string().parse()?;
    Ok(parsed)
}

#[resilient(max_attempts = 2, base_ms = 1)]
async fn with_io(n: u32) -> std::io::Result<u32> {
    Ok(n)
}

#[resilient(max_attempts = 2, base_ms = 1)]
async fn with_tonic(n: u32) -> Result<u32, tonic::Status> {
    if n == 0 { Err(tonic::Status::invalid_argument("zero")) } else { Ok(n) }
}

#[resilient(max_attempts = 2, base_ms = 1)]
async fn with_reqwest(url: String) -> Result<String, Error<reqwest::Error>> {
    Ok(reqwest::get(url).await?.text().await?)
}

#[derive(Debug)]
struct NotOurs;

fn by_hand(error: &Error<NotOurs>) -> ErrorClass {
    match error {
        Error::Inner(NotOurs) | Error::Stopped(NotOurs, _) => ErrorClass::Transient,
        Error::Rejected(rejection) => stormproof::Classify::classify(rejection),
    }
}

#[resilient(max_attempts = 2, base_ms = 1, classify = by_hand)]
async fn with_classify(n: u32) -> Result<u32, Error<NotOurs>> {
    if n == 0 { Err(NotOurs)? } else { Ok(n) }
}

fn spawnable<T: Send>(value: T) -> T {
    value
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    assert_eq!(spawnable(with_anyhow(1)).await.unwrap(), 1);
    assert_eq!(spawnable(with_box(2)).await.unwrap(), 2);
    assert_eq!(spawnable(with_io(3)).await.unwrap(), 3);
    assert_eq!(spawnable(with_tonic(4)).await.unwrap(), 4);
    let _ = spawnable(with_reqwest("http://[::1".to_owned()));
    assert_eq!(spawnable(with_classify(5)).await.unwrap(), 5);
    let _: Option<Rejection> = None;
}
