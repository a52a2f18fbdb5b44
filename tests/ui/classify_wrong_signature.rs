use stormproof::{ErrorClass, resilient};

fn classify(_: &String) -> ErrorClass {
    ErrorClass::Transient
}

#[resilient(classify = classify)]
async fn read() -> std::io::Result<()> {
    Ok(())
}

fn main() {}
