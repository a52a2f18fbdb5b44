use stormproof::resilient;

#[resilient]
struct Client;

fn main() {}
