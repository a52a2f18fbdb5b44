use stormproof::resilient;

#[resilient]
async fn fetch() -> Option<u32> {
    Some(1)
}

#[resilient]
async fn ping() {}

fn main() {}
