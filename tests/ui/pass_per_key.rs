// A breaker per key: any `Display` parameter, borrowed or owned, in a
// method too, with hedging, and with one attempt (the body moves it).
use std::sync::Arc;

use stormproof::{Rejection, resilient};

struct Client;

impl Client {
    #[resilient(breaker = "search", per = tenant)]
    async fn search(&self, tenant: &str, query: String) -> Result<usize, Rejection> {
        Ok(tenant.len() + query.len())
    }

    #[resilient(breaker = "shard", per = shard, hedge_after_ms = 50)]
    async fn read(self: Arc<Self>, shard: u32) -> Result<u32, Rejection> {
        Ok(shard)
    }
}

#[resilient(max_attempts = 1, breaker = "search", per = tenant)]
async fn once(tenant: String) -> Result<String, Rejection> {
    Ok(tenant)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(Client.search("a", "bc".into()).await.unwrap(), 3);
    assert_eq!(Arc::new(Client).read(4).await.unwrap(), 4);
    assert_eq!(once("t".into()).await.unwrap(), "t");
    assert_eq!(stormproof::registry().keyed_breakers("search").unwrap().len(), 2);
}
