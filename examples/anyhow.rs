//! The shortest real case: an `async fn` returning `anyhow::Result`, made
//! resilient by one attribute. A loopback server answers 503 twice, then
//! the stock level; the function retries through the 503s.
//!
//! ```sh
//! cargo run --example anyhow --features anyhow,reqwest
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use stormproof::resilient;

#[resilient(max_attempts = 4, base_ms = 50, breaker = "inventory")]
async fn stock(client: &reqwest::Client, base: &str, sku: &str) -> anyhow::Result<u32> {
    let url = format!("{base}/stock/{sku}");
    // Not `.error_for_status()`: that drops a 429's `Retry-After`.
    let response = stormproof::http::error_for_status(client.get(url).send().await?)?;
    Ok(response.json().await?)
}

/// 503 for the first two requests, then the stock level.
async fn flaky_stock(State(hits): State<Arc<AtomicU32>>, Path(sku): Path<String>) -> (StatusCode, String) {
    let hit = hits.fetch_add(1, Ordering::SeqCst) + 1;
    println!("  server: request {hit} for {sku}");
    if hit <= 2 { (StatusCode::SERVICE_UNAVAILABLE, "busy".into()) } else { (StatusCode::OK, "17".into()) }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let hits = Arc::new(AtomicU32::new(0));
    let app =
        axum::Router::new().route("/stock/{sku}", axum::routing::get(flaky_stock)).with_state(hits.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });

    let client = reqwest::Client::new();
    let level = stock(&client, &base, "A-17").await?;
    println!("stock of A-17: {level}, after {} requests", hits.load(Ordering::SeqCst));
    Ok(())
}
