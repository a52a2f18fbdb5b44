use stormproof::resilient;
use stormproof::hooks::StopEvent;

fn log_stop(_: &StopEvent) {}

#[resilient(on_stop = "log_stop")]
async fn read() -> std::io::Result<()> {
    Ok(())
}

fn main() {}
