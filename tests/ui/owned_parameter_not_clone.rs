use stormproof::{Rejection, resilient};

struct Body(Vec<u8>);

#[resilient(max_attempts = 3)]
async fn upload(name: String, body: Body) -> Result<usize, Rejection> {
    Ok(name.len() + body.0.len())
}

fn main() {}
