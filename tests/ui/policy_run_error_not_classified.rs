// `Policy::run` with a closure whose error type cannot be classified: one
// error per use, in words that speak of `Policy::run`, not of the attribute.
use stormproof::Policy;

#[derive(Debug)]
struct Opaque;

async fn fetch() -> Result<u32, Opaque> {
    Err(Opaque)
}

async fn call(policy: &Policy) -> Result<u32, Opaque> {
    policy.run(fetch).await
}

async fn call_with_key(policy: &Policy) -> Result<u32, Opaque> {
    policy.run_with_key("order-1", fetch).await
}

async fn call_or_else(policy: &Policy) -> Result<u32, Opaque> {
    policy.run_or_else(fetch, |_| async { Ok(0) }).await
}

// The same through a key's guards (`Policy::per`).
async fn call_per_key(policy: &Policy) -> Result<u32, Opaque> {
    policy.per("tenant-a").run(fetch).await
}

async fn call_per_key_with_key(policy: &Policy) -> Result<u32, Opaque> {
    policy.per("tenant-a").run_with_key("order-1", fetch).await
}

fn main() {}
