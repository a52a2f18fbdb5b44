use stormproof::resilient;
use stormproof::hooks::StopEvent;

// A stop hook given as the retry hook.
fn log_stop(_: &StopEvent) {}

#[resilient(on_retry = log_stop)]
async fn read() -> std::io::Result<()> {
    Ok(())
}

fn main() {}
