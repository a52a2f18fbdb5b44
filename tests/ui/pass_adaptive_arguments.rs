#![deny(warnings)]
//! The adaptive arguments: throttle, rate limit, hedging (on a free fn, a
//! `&self` method, with borrowed and owned parameters and a key) and a
//! fallback; the futures stay `Send`.

use stormproof::{Rejection, resilient};

async fn cached_price(_error: Rejection) -> Result<u32, Rejection> {
    Ok(100)
}

#[resilient(
    throttle = "catalog",
    rate_limit = "catalog",
    hedge_after_ms = 20,
    max_hedges = 3,
    fallback = cached_price,
)]
async fn price(product: String, region: &str) -> Result<u32, Rejection> {
    Ok(product.len() as u32 + region.len() as u32)
}

#[resilient(idempotent = false, key = order_id, hedge_after_ms = 50, max_attempts = 1)]
async fn charge(order_id: String, cents: u64) -> Result<u64, Rejection> {
    Ok(order_id.len() as u64 + cents)
}

struct Catalog {
    prefix: String,
}

impl Catalog {
    #[resilient(hedge_after_ms = 10)]
    async fn name(&self, id: u32) -> Result<String, Rejection> {
        Ok(format!("{}-{id}", self.prefix))
    }
}

fn assert_send<T: Send>(value: T) -> T {
    value
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(assert_send(price("tea".to_owned(), "eu")).await.unwrap(), 5);
    assert_eq!(charge("A-1".to_owned(), 250).await.unwrap(), 253);
    let catalog = Catalog { prefix: "sku".to_owned() };
    assert_eq!(assert_send(catalog.name(7)).await.unwrap(), "sku-7");
    tokio::spawn(price("x".to_owned(), "us")).await.unwrap().unwrap();
}
