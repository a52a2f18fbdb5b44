use stormproof::resilient;

#[resilient(name = "")]
async fn unnamed() -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {}
