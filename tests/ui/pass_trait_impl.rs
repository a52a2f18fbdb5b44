#![deny(warnings)]
//! `async fn` in a trait impl (native async fn in traits), including a
//! `Send` bound the trait declares.

use std::future::Future;

use stormproof::{Rejection, resilient};

trait Inventory {
    async fn stock(&self, sku: &str) -> Result<u32, Rejection>;
    fn reserve(&mut self, sku: String) -> impl Future<Output = Result<u32, Rejection>> + Send;
}

struct Warehouse {
    reserved: u32,
}

impl Inventory for Warehouse {
    #[resilient(breaker = "inventory")]
    async fn stock(&self, sku: &str) -> Result<u32, Rejection> {
        Ok(sku.len() as u32)
    }

    #[resilient(max_attempts = 2)]
    async fn reserve(&mut self, sku: String) -> Result<u32, Rejection> {
        self.reserved += sku.len() as u32;
        Ok(self.reserved)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut warehouse = Warehouse { reserved: 0 };
    assert_eq!(warehouse.stock("abc").await.unwrap(), 3);
    assert_eq!(warehouse.reserve("ab".to_owned()).await.unwrap(), 2);
}
