use resilient::resilient;

#[resilient]
struct Client;

fn main() {}
